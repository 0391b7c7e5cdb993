// A transactional producer against a server that serves no transactions, driven by
// tests/matrix: how long the client takes to give up, and what it says.
//
// Usage: node transactions.mjs kafkajs|platformatic BOOTSTRAP
// stdout: one JSON line {"failed": bool, "ms": N, "message": "..."}. It exits by itself
// (status 1) after 30 s.

import kafkajs from 'kafkajs'
import { Producer, stringSerializers } from '@platformatic/kafka'

const [client, bootstrap] = process.argv.slice(2)
setTimeout(() => { console.log(JSON.stringify({ error: 'lifetime over' })); process.exit(1) }, 30000).unref()
const started = Date.now()
const report = (failed, message) => {
  console.log(JSON.stringify({ failed, ms: Date.now() - started, message: String(message) }))
}
if (client === 'kafkajs') {
  const kafka = new kafkajs.Kafka({ clientId: 'txn', brokers: [bootstrap], logLevel: kafkajs.logLevel.NOTHING })
  const producer = kafka.producer({ transactionalId: 'tx-1', idempotent: true, maxInFlightRequests: 1 })
  try {
    await producer.connect()
    await producer.transaction()
    report(false, 'a transaction began')
  } catch (e) {
    report(true, `${e.name} ${e.type ?? ''} ${e.message}`)
  }
  await producer.disconnect().catch(() => {})
} else {
  const producer = new Producer({
    clientId: 'txn', bootstrapBrokers: [bootstrap], serializers: stringSerializers, idempotent: true, transactionalId: 'tx-2'
  })
  try {
    await producer.beginTransaction()
    report(false, 'a transaction began')
  } catch (e) {
    const coordinator = e.response?.coordinators?.[0]
    report(true, `${e.code ?? ''} ${e.message}: ${coordinator?.errorCode} ${coordinator?.errorMessage}`)
  }
  await producer.close().catch(() => {})
}
process.exit(0)
