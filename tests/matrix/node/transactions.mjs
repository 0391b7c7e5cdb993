// A transactional producer of each Node client, driven by tests/matrix: one transaction
// committed (3 records), one aborted (2 records), on the given topic's partition 0.
//
// Usage: node transactions.mjs kafkajs|platformatic BOOTSTRAP TOPIC TRANSACTIONAL_ID
// stdout: one JSON line {"ok": true} or {"ok": false, "error": "..."}. It exits by itself
// (status 1) after 45 s.

import kafkajs from 'kafkajs'
import { Producer, stringSerializers } from '@platformatic/kafka'

const [client, bootstrap, topic, transactionalId] = process.argv.slice(2)
setTimeout(() => { console.log(JSON.stringify({ ok: false, error: 'lifetime over' })); process.exit(1) }, 45000).unref()
const records = (prefix, n) => Array.from({ length: n }, (_, i) => ({ value: `${prefix}${i}` }))

try {
  if (client === 'kafkajs') {
    const kafka = new kafkajs.Kafka({ clientId: 'txn', brokers: [bootstrap], logLevel: kafkajs.logLevel.NOTHING })
    const producer = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 })
    await producer.connect()
    let txn = await producer.transaction()
    await txn.send({ topic, messages: records('committed-', 3).map(m => ({ ...m, partition: 0 })) })
    await txn.commit()
    txn = await producer.transaction()
    await txn.send({ topic, messages: records('aborted-', 2).map(m => ({ ...m, partition: 0 })) })
    await txn.abort()
    await producer.disconnect()
  } else {
    const producer = new Producer({
      clientId: 'txn', bootstrapBrokers: [bootstrap], serializers: stringSerializers, idempotent: true, transactionalId
    })
    let txn = await producer.beginTransaction()
    await txn.send({ messages: records('committed-', 3).map(m => ({ ...m, topic, partition: 0 })) })
    await txn.commit()
    txn = await producer.beginTransaction()
    await txn.send({ messages: records('aborted-', 2).map(m => ({ ...m, topic, partition: 0 })) })
    await txn.abort()
    await producer.close()
  }
  console.log(JSON.stringify({ ok: true }))
} catch (e) {
  console.log(JSON.stringify({ ok: false, error: `${e.name} ${e.code ?? e.type ?? ''} ${e.message}` }))
}
process.exit(0)
