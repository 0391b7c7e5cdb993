// The data path through a Node.js Kafka client, driven by tests/matrix: produce keyed messages
// with headers, read them back through a consumer group, commit, and report the offsets.
//
// Usage: node produce_consume.mjs CLIENT BOOTSTRAP GROUP TOPIC OPTIONS_JSON
//   CLIENT        kafkajs | platformatic
//   OPTIONS_JSON  {"messages_file": "...", "chunk": 50, "compression": "none" | "gzip" | ...,
//                  "session_ms": 6000, "heartbeat_ms": 500, "client_id": "...",
//                  "lifetime_ms": 60000}
// messages_file holds a JSON array of {"key": b64, "value": b64 | null, "headers": [[k, b64]]}
// (tests/deliverykit.py, Message.to_json). They are sent `chunk` at a time, each send awaited, by
// the client's idempotent producer; then a consumer of GROUP reads TOPIC from the start until
// it has as many records as were sent, commits the offset after each partition's last record,
// and reads back the partitions' end offsets (ListOffsets) and the group's offsets
// (OffsetFetch) through the client's own API.
//
// stdout carries only JSON lines, one per event (bytes in base64, offsets as strings):
//   {"event":"produced","first":0,"count":50,"offsets":[{"partition":0,"offset":"0"}]}
//                                    (the base offset of each partition the send wrote to)
//   {"event":"producer","producer_id":"0"}    (null when the client does not expose it)
//   {"event":"message","partition":0,"offset":"0","key":b64,"value":b64|null,"headers":[[k,b64]]}
//   {"event":"committed","offsets":{"0":"12"}}
//   {"event":"offsets","end":{"0":"12"},"committed":{"0":"12"}}
//   {"event":"error","message":"..."}     (then it exits 1)
//   {"event":"closed"}                    (everything done and closed; it exits 0)
// It exits by itself (status 1) after lifetime_ms, so an orphan never outlives its test for
// long. Client logs go to stderr.

import { readFileSync } from 'node:fs'
import { inspect } from 'node:util'

const [client, bootstrap, group, topic, rawOptions] = process.argv.slice(2)
const options = JSON.parse(rawOptions ?? '{}')
const sessionMs = options.session_ms ?? 6000
const heartbeatMs = options.heartbeat_ms ?? 500
const chunk = options.chunk ?? 50
const compression = options.compression ?? 'none'
const clientId = options.client_id ?? `matrix-data-${client}`
const lifetimeMs = options.lifetime_ms ?? 60000

const messages = JSON.parse(readFileSync(options.messages_file, 'utf8')).map(m => ({
  key: Buffer.from(m.key, 'base64'),
  value: m.value === null ? null : Buffer.from(m.value, 'base64'),
  headers: m.headers.map(([k, v]) => [k, Buffer.from(v, 'base64')])
}))

function emit(event) {
  process.stdout.write(JSON.stringify(event) + '\n')
}

function log(...parts) {
  process.stderr.write(`[${new Date().toISOString()}] ${parts.join(' ')}\n`)
}

const b64 = buffer => (buffer === null || buffer === undefined ? null : Buffer.from(buffer).toString('base64'))

function emitMessage(partition, offset, key, value, headers) {
  emit({
    event: 'message',
    partition,
    offset: String(offset),
    key: b64(key),
    value: b64(value),
    headers: headers.map(([k, v]) => [String(k), b64(v)])
  })
}

/** Resolves once `count` records have been read; what `onRecord` is told of each. */
function counter(count) {
  let seen = 0
  let done
  const finished = new Promise(resolve => {
    done = resolve
  })
  const next = {} // partition -> offset after the last record read
  return {
    finished,
    next,
    onRecord(partition, offset) {
      next[partition] = BigInt(offset) + 1n
      seen += 1
      if (seen === count) done()
    }
  }
}

const asStrings = object => Object.fromEntries(Object.entries(object).map(([k, v]) => [k, String(v)]))

// -- kafkajs ------------------------------------------------------------------------------------

async function runKafkajs() {
  const { Kafka, logLevel, CompressionTypes, Partitioners } = (await import('kafkajs')).default
  const codecs = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }
  if (!(compression in codecs)) throw new Error(`kafkajs has no built-in ${compression} codec`)
  const kafka = new Kafka({
    clientId,
    brokers: [bootstrap],
    logLevel: logLevel[process.env.KAFKAJS_LOG_LEVEL ?? 'WARN'],
    // kafkajs logs to stdout by default; stdout is for events only.
    logCreator: () => ({ namespace, label, log: entry }) => {
      const { message, ...extra } = entry
      log(`kafkajs ${label} [${namespace}] ${message} ${JSON.stringify(extra)}`)
    },
    retry: { retries: 8, initialRetryTime: 100, maxRetryTime: 2000 }
  })

  // kafkajs' idempotent producer needs one request in flight and unlimited retries (the
  // lifetime bounds them). Its default partitioner, named to silence its v2 migration notice.
  const producer = kafka.producer({
    idempotent: true,
    maxInFlightRequests: 1,
    retry: { retries: Number.MAX_SAFE_INTEGER, initialRetryTime: 100, maxRetryTime: 2000 },
    createPartitioner: Partitioners.DefaultPartitioner,
    allowAutoTopicCreation: false
  })
  await producer.connect()
  for (let first = 0; first < messages.length; first += chunk) {
    const batch = messages.slice(first, first + chunk).map(m => {
      // kafkajs takes headers as an object; a repeated key becomes an array of its values.
      const headers = {}
      for (const [k, v] of m.headers) {
        headers[k] = k in headers ? [].concat(headers[k], v) : v
      }
      return { key: m.key, value: m.value, headers }
    })
    const results = await producer.send({ topic, acks: -1, compression: codecs[compression], messages: batch })
    emit({
      event: 'produced',
      first,
      count: batch.length,
      offsets: results.map(r => ({ partition: r.partition, offset: String(r.baseOffset) }))
    })
  }
  // kafkajs keeps its producer id inside; it does not expose it.
  emit({ event: 'producer', producer_id: null })
  await producer.disconnect()

  const consumer = kafka.consumer({
    groupId: group,
    sessionTimeout: sessionMs,
    heartbeatInterval: heartbeatMs,
    maxWaitTimeInMs: 200,
    allowAutoTopicCreation: false
  })
  consumer.on(consumer.events.CRASH, ({ payload }) => fail('crash', payload.error))
  const reading = counter(messages.length)
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      // kafkajs gives headers as an object; a repeated key's values come as an array.
      const headers = Object.entries(message.headers ?? {}).flatMap(([k, v]) =>
        Array.isArray(v) ? v.map(one => [k, one]) : [[k, v]]
      )
      emitMessage(partition, message.offset, message.key, message.value, headers)
      reading.onRecord(partition, message.offset)
    }
  })
  await reading.finished
  const commit = Object.entries(reading.next).map(([partition, offset]) => ({
    topic,
    partition: Number(partition),
    offset: String(offset)
  }))
  await consumer.commitOffsets(commit)
  emit({ event: 'committed', offsets: asStrings(reading.next) })

  const admin = kafka.admin()
  await admin.connect()
  const end = {}
  for (const { partition, high } of await admin.fetchTopicOffsets(topic)) end[partition] = high
  const committed = {}
  for (const t of await admin.fetchOffsets({ groupId: group, topics: [topic] })) {
    for (const { partition, offset } of t.partitions) committed[partition] = offset
  }
  emit({ event: 'offsets', end: asStrings(end), committed: asStrings(committed) })
  await admin.disconnect()
  await consumer.disconnect()
}

// -- @platformatic/kafka ------------------------------------------------------------------------

async function runPlatformatic() {
  const { Producer, Consumer } = await import('@platformatic/kafka')
  const common = { clientId, bootstrapBrokers: [bootstrap], timeout: 15000, retries: 8, retryDelay: 250 }

  const producer = new Producer({ ...common, idempotent: true, compression, autocreateTopics: false })
  for (let first = 0; first < messages.length; first += chunk) {
    const batch = messages.slice(first, first + chunk).map(m => ({
      topic,
      key: m.key,
      value: m.value ?? undefined,
      // A Map keyed by Buffers: distinct Buffer objects keep a repeated key's every value.
      headers: new Map(m.headers.map(([k, v]) => [Buffer.from(k), v]))
    }))
    const result = await producer.send({ messages: batch })
    emit({
      event: 'produced',
      first,
      count: batch.length,
      offsets: (result.offsets ?? []).map(o => ({ partition: o.partition, offset: String(o.offset) }))
    })
  }
  emit({ event: 'producer', producer_id: String(producer.producerId) })
  await producer.close()

  const consumer = new Consumer({
    ...common,
    groupId: group,
    sessionTimeout: sessionMs,
    heartbeatInterval: heartbeatMs,
    rebalanceTimeout: 15000,
    maxWaitTime: 200,
    autocommit: false
  })
  consumer.on('error', error => fail('consumer', error))
  const reading = counter(messages.length)
  // Start from the group's committed offsets; it has none, so from the earliest.
  const stream = await consumer.consume({
    topics: [topic],
    mode: 'committed',
    fallbackMode: 'earliest',
    autocommit: false,
    maxWaitTime: 200
  })
  stream.on('error', error => fail('stream', error))
  stream.on('data', message => {
    emitMessage(message.partition, message.offset, message.key, message.value, [...message.headers])
    reading.onRecord(message.partition, message.offset)
  })
  await reading.finished
  await consumer.commit({
    offsets: Object.entries(reading.next).map(([partition, offset]) => ({
      topic,
      partition: Number(partition),
      offset,
      leaderEpoch: -1
    }))
  })
  emit({ event: 'committed', offsets: asStrings(reading.next) })

  const ends = (await consumer.listOffsets({ topics: [topic] })).get(topic)
  const partitions = ends.map((_, i) => i)
  const committed = (await consumer.listCommittedOffsets({ topics: [{ topic, partitions }] })).get(topic)
  emit({ event: 'offsets', end: asStrings({ ...ends }), committed: asStrings({ ...committed }) })
  await stream.close()
  await consumer.close(true)
}

// -- driving ------------------------------------------------------------------------------------

function fail(where, error) {
  log(`${where}: ${inspect(error, { depth: 8 })}`)
  emit({ event: 'error', message: `${where}: ${error?.message ?? error}` })
  process.exit(1)
}

const runners = { kafkajs: runKafkajs, platformatic: runPlatformatic }
if (!runners[client]) {
  log(`unknown client ${client}`)
  process.exit(2)
}
setTimeout(() => fail('lifetime', new Error(`not done after ${lifetimeMs} ms`)), lifetimeMs).unref()
// Keep the process alive while the clients work (the lifetime timer is unref'd).
const keepAlive = setInterval(() => {}, 60000)

try {
  await runners[client]()
  emit({ event: 'closed' })
  clearInterval(keepAlive)
  // Whatever the client library still has scheduled, the run is done.
  setTimeout(() => process.exit(0), 50).unref()
} catch (error) {
  fail('run', error)
}
