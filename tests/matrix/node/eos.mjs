// The exactly-once loop of each Node client, driven by tests/matrix: a group member reads
// SOURCE and writes each value upper-cased to SINK (same partition) in a transaction that
// also commits the consumer's next offset, then commits it.
// - kafkajs: per batch, `sendOffsets` (TxnOffsetCommit v1: no member id or generation);
// - @platformatic/kafka: per record, `addConsumer` and `addOffset` (TxnOffsetCommit v3+ with
//   the member id and generation; GROUP_PROTOCOL "consumer" joins by KIP-848).
//
// Usage: node eos.mjs kafkajs|platformatic BOOTSTRAP SOURCE SINK GROUP COUNT [GROUP_PROTOCOL]
// stdout: one JSON line {"moved": N} once COUNT records moved, or {"error": "..."}. It exits
// by itself (status 1) after 45 s.

import kafkajs from 'kafkajs'

const [client, bootstrap, source, sink, groupId, count, groupProtocol] = process.argv.slice(2)
setTimeout(() => { console.log(JSON.stringify({ error: 'lifetime over' })); process.exit(1) }, 45000).unref()
if (client === 'platformatic') await runPlatformatic()
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

async function runPlatformatic () {
  const { Producer, Consumer, stringSerializers, stringDeserializers } = await import('@platformatic/kafka')
  const common = { clientId: 'eos', bootstrapBrokers: [bootstrap], timeout: 15000, retries: 8, retryDelay: 250 }
  const producer = new Producer({ ...common, serializers: stringSerializers, idempotent: true, transactionalId: `${groupId}-tx` })
  const consumer = new Consumer({
    ...common,
    groupId,
    deserializers: stringDeserializers,
    autocommit: false,
    maxWaitTime: 200,
    ...(groupProtocol === 'consumer' ? { groupProtocol: 'consumer' } : {})
  })
  let moved = 0
  try {
    const stream = await consumer.consume({ topics: [source], mode: 'committed', fallbackMode: 'earliest', autocommit: false, maxWaitTime: 200 })
    await new Promise((resolve, reject) => {
      stream.on('error', reject)
      stream.on('data', message => {
        stream.pause()
        ;(async () => {
          const txn = await producer.beginTransaction()
          await txn.send({ messages: [{ topic: sink, partition: message.partition, value: message.value.toUpperCase() }] })
          await txn.addConsumer(consumer)
          await txn.addOffset(message)
          await txn.commit()
          moved += 1
          if (moved >= Number(count)) resolve()
          else stream.resume()
        })().catch(reject)
      })
    })
    await stream.close()
    console.log(JSON.stringify({ moved }))
  } catch (e) {
    console.log(JSON.stringify({ error: `${e.name} ${e.code ?? ''} ${e.message}`, detail: JSON.stringify(e.errors?.[0]?.response ?? e.response ?? null, (k, v) => typeof v === 'bigint' ? String(v) : v) }))
  }
  await consumer.close(true).catch(() => {})
  await producer.close().catch(() => {})
  process.exit(0)
}
