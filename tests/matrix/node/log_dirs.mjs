// DescribeLogDirs (API 35) through @platformatic/kafka's admin API, driven by tests/matrix.
//
// Usage: node log_dirs.mjs BOOTSTRAP TOPIC PARTITIONS_JSON
// stdout: one JSON line, the client's answer (bigints as strings), or {"error": "..."} and
// status 1. It exits by itself (status 1) after 30 s.

import { Admin } from '@platformatic/kafka'

const [bootstrap, topic, partitions] = process.argv.slice(2)
setTimeout(() => { console.log(JSON.stringify({ error: 'lifetime over' })); process.exit(1) }, 30000).unref()
const admin = new Admin({ clientId: 'log-dirs', bootstrapBrokers: [bootstrap], timeout: 10000 })
try {
  const answer = await admin.describeLogDirs({ topics: [{ name: topic, partitions: JSON.parse(partitions) }] })
  console.log(JSON.stringify(answer, (_, v) => typeof v === 'bigint' ? v.toString() : v))
  await admin.close()
  process.exit(0)
} catch (e) {
  console.log(JSON.stringify({ error: String(e && (e.stack || e.message || e)) }))
  process.exit(1)
}
