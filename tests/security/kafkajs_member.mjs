// kafkajs joins a group over a secured listener, reads three records and commits them.
//
// Usage: node kafkajs_member.mjs NODE_DIR OPTIONS_JSON
//   NODE_DIR      where kafkajs is installed (tests/matrix/node)
//   OPTIONS_JSON  {"bootstrap": "...", "topic": "...", "group": "...",
//                  "ssl": {"ca": FILE, "cert": FILE|null, "key": FILE|null} | null,
//                  "sasl": {"mechanism": "plain" | "scram-sha-512", "username": ..., "password": ...} | null}
// Prints one JSON line: {"ok": true, "values": [...]} or {"ok": false, "error": "..."}; exits
// by itself after 40 s at the latest.

import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'

const [nodeDir, raw] = process.argv.slice(2)
const options = JSON.parse(raw)
const require = createRequire(join(nodeDir, 'package.json'))
const { Kafka, logLevel } = require('kafkajs')

const ssl = options.ssl
  ? {
      ca: [readFileSync(options.ssl.ca, 'utf8')],
      ...(options.ssl.cert
        ? { cert: readFileSync(options.ssl.cert, 'utf8'), key: readFileSync(options.ssl.key, 'utf8') }
        : {}),
    }
  : false
const kafka = new Kafka({
  clientId: 'security-kafkajs',
  brokers: [options.bootstrap],
  ssl,
  sasl: options.sasl ?? undefined,
  logLevel: logLevel.WARN,
  retry: { retries: 3 },
})
const consumer = kafka.consumer({ groupId: options.group, sessionTimeout: 6000, heartbeatInterval: 500 })
const values = []
const timer = setTimeout(() => finish({ ok: false, error: 'timed out', values }), 40000)

let finished = false
async function finish(result) {
  if (finished) return
  finished = true
  clearTimeout(timer)
  process.stdout.write(JSON.stringify(result) + '\n')
  try {
    await consumer.disconnect()
  } catch {}
  process.exit(result.ok ? 0 : 1)
}

try {
  await consumer.connect()
  await consumer.subscribe({ topic: options.topic, fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ topic, partition, message }) => {
      values.push(message.value.toString())
      if (values.length === 3) {
        await consumer.commitOffsets([{ topic, partition, offset: String(Number(message.offset) + 1) }])
        // Not awaited here: disconnecting waits for this handler to return.
        setImmediate(() => finish({ ok: true, values }))
      }
    },
  })
} catch (error) {
  await finish({ ok: false, error: String(error?.message ?? error), values })
}
