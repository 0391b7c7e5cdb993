// kafkajs' exactly-once loop, driven by tests/matrix: a group member reads SOURCE in
// batches and, per batch, writes each value upper-cased to SINK (same partition) and sends
// the batch's next offset to the same transaction (TxnOffsetCommit v1: no member id or
// generation), then commits.
//
// Usage: node eos.mjs BOOTSTRAP SOURCE SINK GROUP COUNT
// stdout: one JSON line {"moved": N} once COUNT records moved, or {"error": "..."}. It exits
// by itself (status 1) after 45 s.

import kafkajs from 'kafkajs'

const [bootstrap, source, sink, groupId, count] = process.argv.slice(2)
setTimeout(() => { console.log(JSON.stringify({ error: 'lifetime over' })); process.exit(1) }, 45000).unref()
const kafka = new kafkajs.Kafka({ clientId: 'eos', brokers: [bootstrap], logLevel: kafkajs.logLevel.NOTHING })
const producer = kafka.producer({ transactionalId: `${groupId}-tx`, idempotent: true, maxInFlightRequests: 1 })
const consumer = kafka.consumer({ groupId })
try {
  await producer.connect()
  await consumer.connect()
  await consumer.subscribe({ topic: source, fromBeginning: true })
  let moved = 0
  await new Promise((resolve, reject) => {
    consumer.on(consumer.events.CRASH, (e) => reject(e.payload.error))
    consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        const txn = await producer.transaction()
        await txn.send({
          topic: sink,
          messages: batch.messages.map(m => ({ value: m.value.toString().toUpperCase(), partition: batch.partition }))
        })
        const next = (BigInt(batch.lastOffset()) + 1n).toString()
        await txn.sendOffsets({ consumerGroupId: groupId, topics: [{ topic: source, partitions: [{ partition: batch.partition, offset: next }] }] })
        await txn.commit()
        moved += batch.messages.length
        if (moved >= Number(count)) resolve()
      }
    })
  })
  console.log(JSON.stringify({ moved }))
} catch (e) {
  console.log(JSON.stringify({ error: `${e.name} ${e.type ?? ''} ${e.message}` }))
}
await consumer.disconnect().catch(() => {})
await producer.disconnect().catch(() => {})
process.exit(0)
