// UnregisterBroker (API 64) through @platformatic/kafka's own implementation of it
// (unregisterBrokerV0), driven by tests/matrix.
//
// Usage: node unregister_broker.mjs BOOTSTRAP BROKER_ID...
// stdout: one JSON line, the client's parsed answer for each id in order (a refusal's taken
// from the ResponseError it raises), or {"error": "..."} and status 1. Exits by itself
// (status 1) after 30 s.

import { Connection, unregisterBrokerV0 } from '@platformatic/kafka'

const [bootstrap, ...ids] = process.argv.slice(2)
setTimeout(() => { console.log(JSON.stringify({ error: 'lifetime over' })); process.exit(1) }, 30000).unref()
const connection = new Connection('unregister-broker')
try {
  const [host, port] = bootstrap.split(':')
  await connection.connect(host, Number(port))
  const answers = []
  for (const id of ids) {
    try {
      answers.push(await unregisterBrokerV0.api.async(connection, Number(id)))
    } catch (e) {
      if (!(e && e.response)) throw e
      answers.push(e.response)
    }
  }
  console.log(JSON.stringify(answers))
  await connection.close()
  process.exit(0)
} catch (e) {
  console.log(JSON.stringify({ error: String(e && (e.stack || e.message || e)) }))
  process.exit(1)
}
