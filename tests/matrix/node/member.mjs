// One consumer-group member run by a Node.js Kafka client, driven by tests/matrix over stdio.
//
// Usage: node member.mjs CLIENT BOOTSTRAP GROUP TOPIC OPTIONS_JSON
//   CLIENT        kafkajs | platformatic
//   OPTIONS_JSON  {"session_ms": 6000, "heartbeat_ms": 500, "rebalance_ms": 15000,
//                  "assignor": "default" | "range", "client_id": "...", "lifetime_ms": 150000,
//                  "group_protocol": "classic" | "consumer", "remote_assignor": "range"}
//   group_protocol "consumer" (platformatic only) joins with KIP-848's ConsumerGroupHeartbeat:
//   the coordinator assigns (remote_assignor names its assignor) and assignments change
//   incrementally; "assigned" then carries the member's whole assignment after each change.
//
// stdout carries only JSON lines, one per event:
//   {"event":"started","client":"kafkajs","client_id":"..."}  (subscribed and consuming)
//   {"event":"joined","member_id":"..."}   (consumer protocol: in the group, nothing assigned yet)
//   {"event":"assigned","partitions":[0,1],"member_id":"...","generation":3}
//                                    (generation is null for kafkajs, which does not expose it)
//   {"event":"revoked","partitions":[0,1],"member_id":"..."}
//   {"event":"commit","ok":true,"offsets":{"0":"10"}}   (or "ok":false with "error")
//   {"event":"error","message":"..."}                   (a client error; the member goes on)
//   {"event":"closed","reason":"..."}                   (after it left the group, just before exit)
// stdin takes JSON lines: {"cmd":"commit","offsets":{"0":10,"1":11}} commits those offsets for
// TOPIC; {"cmd":"leave"} leaves the group and exits 0. SIGTERM, SIGINT and the end of stdin
// also leave and exit 0. The member exits by itself after lifetime_ms, so an orphan never
// outlives its test for long. Client logs go to stderr.
//
// The "range" assignor is the standard consumer protocol's RangeAssignor (members sorted by
// member id, consecutive partitions per topic; subscription and assignment in the consumer
// protocol encoding, version 0), so that these clients can share a group with any stock client
// that offers "range".

import { createInterface } from 'node:readline'
import { inspect } from 'node:util'

const [client, bootstrap, group, topic, rawOptions] = process.argv.slice(2)
const options = JSON.parse(rawOptions ?? '{}')
const sessionMs = options.session_ms ?? 6000
const heartbeatMs = options.heartbeat_ms ?? 500
const rebalanceMs = options.rebalance_ms ?? 15000
const assignor = options.assignor ?? 'default'
const clientId = options.client_id ?? `matrix-${client}`
const lifetimeMs = options.lifetime_ms ?? 150000
const groupProtocol = options.group_protocol ?? 'classic'
const remoteAssignor = options.remote_assignor ?? null

function emit(event) {
  process.stdout.write(JSON.stringify(event) + '\n')
}

function log(...parts) {
  process.stderr.write(`[${new Date().toISOString()}] ${parts.join(' ')}\n`)
}

/** Report a client error as an event (its message) and on stderr (all of it). */
function clientError(where, error) {
  log(`${where}: ${inspect(error, { depth: 8 })}`)
  emit({ event: 'error', message: `${where}: ${error?.message ?? error}` })
}

/** The standard range assignment of one topic's partitions over its sorted subscribers. */
function rangeSplit(partitions, memberIds) {
  const sorted = [...memberIds].sort()
  const parts = [...partitions].sort((a, b) => a - b)
  const per = Math.floor(parts.length / sorted.length)
  const extra = parts.length % sorted.length
  const result = new Map()
  sorted.forEach((memberId, i) => {
    const start = per * i + Math.min(i, extra)
    result.set(memberId, parts.slice(start, start + per + (i < extra ? 1 : 0)))
  })
  return result
}

let current = [] // partitions of TOPIC this member owns now
let memberId = null

function assigned(partitions, generation) {
  current = [...partitions].sort((a, b) => a - b)
  emit({ event: 'assigned', partitions: current, member_id: memberId, generation })
}

function revoked() {
  // Both clients rebalance eagerly: rejoining gives up the whole assignment.
  emit({ event: 'revoked', partitions: current, member_id: memberId })
  current = []
}

// -- kafkajs ------------------------------------------------------------------------------------

async function startKafkajs() {
  if (groupProtocol !== 'classic') {
    // kafkajs 2.x has no ConsumerGroupHeartbeat: it only speaks the classic protocol.
    throw new Error(`kafkajs does not implement group protocol ${groupProtocol}`)
  }
  const { Kafka, logLevel, AssignerProtocol } = (await import('kafkajs')).default
  const { MemberMetadata, MemberAssignment } = AssignerProtocol

  const rangeAssigner = ({ cluster }) => ({
    name: 'range',
    version: 0,
    async assign({ members, topics }) {
      const subscriptions = members.map(m => ({
        memberId: m.memberId,
        topics: MemberMetadata.decode(m.memberMetadata).topics
      }))
      const plan = new Map(members.map(m => [m.memberId, {}]))
      for (const name of topics) {
        const partitions = cluster.findTopicPartitionMetadata(name).map(p => p.partitionId)
        const subscribers = subscriptions.filter(s => s.topics.includes(name)).map(s => s.memberId)
        for (const [id, parts] of rangeSplit(partitions, subscribers)) {
          if (parts.length) plan.get(id)[name] = parts
        }
      }
      return members.map(m => ({
        memberId: m.memberId,
        memberAssignment: MemberAssignment.encode({ version: 0, assignment: plan.get(m.memberId) })
      }))
    },
    protocol({ topics }) {
      return { name: 'range', metadata: MemberMetadata.encode({ version: 0, topics }) }
    }
  })

  const level = process.env.KAFKAJS_LOG_LEVEL ?? 'INFO'
  const kafka = new Kafka({
    clientId,
    brokers: [bootstrap],
    logLevel: logLevel[level],
    // kafkajs logs to stdout by default; stdout is for events only.
    logCreator: () => ({ namespace, level: lvl, label, log: entry }) => {
      const { message, ...extra } = entry
      log(`kafkajs ${label} [${namespace}] ${message} ${JSON.stringify(extra)}`)
    },
    retry: { retries: 8, initialRetryTime: 100, maxRetryTime: 2000 }
  })
  const consumer = kafka.consumer({
    groupId: group,
    sessionTimeout: sessionMs,
    rebalanceTimeout: rebalanceMs,
    heartbeatInterval: heartbeatMs,
    maxWaitTimeInMs: 500,
    allowAutoTopicCreation: false,
    ...(assignor === 'range' ? { partitionAssigners: [rangeAssigner] } : {})
  })
  const { GROUP_JOIN, REBALANCING, CRASH } = consumer.events
  consumer.on(GROUP_JOIN, ({ payload }) => {
    memberId = payload.memberId
    assigned(payload.memberAssignment[topic] ?? [], null)
  })
  consumer.on(REBALANCING, ({ payload }) => {
    memberId = payload.memberId ?? memberId
    revoked()
  })
  consumer.on(CRASH, ({ payload }) => clientError('crash', payload.error))

  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  await consumer.run({ autoCommit: false, eachMessage: async () => {} })

  return {
    async commit(offsets) {
      await consumer.commitOffsets(
        Object.entries(offsets).map(([partition, offset]) => ({
          topic,
          partition: Number(partition),
          offset: String(offset)
        }))
      )
    },
    async close() {
      await consumer.disconnect()
    }
  }
}

// -- @platformatic/kafka ------------------------------------------------------------------------

async function startPlatformatic() {
  const { Consumer } = await import('@platformatic/kafka')

  // Same signature as the library's own roundRobinAssigner.
  function rangeAssigner(_current, members, topics, metadata) {
    const result = new Map([...members.keys()].map(id => [id, { memberId: id, assignments: new Map() }]))
    for (const name of topics) {
      const count = metadata.topics.get(name).partitionsCount
      const partitions = Array.from({ length: count }, (_, i) => i)
      const subscribers = [...members.values()].filter(m => m.topics?.includes(name)).map(m => m.memberId)
      for (const [id, parts] of rangeSplit(partitions, subscribers)) {
        if (parts.length) result.get(id).assignments.set(name, { topic: name, partitions: parts })
      }
    }
    return [...result.values()]
  }

  const consumerProtocol = groupProtocol === 'consumer'
  const consumer = new Consumer({
    clientId,
    bootstrapBrokers: [bootstrap],
    groupId: group,
    sessionTimeout: sessionMs,
    heartbeatInterval: heartbeatMs,
    rebalanceTimeout: rebalanceMs,
    timeout: 15000,
    retries: 8,
    retryDelay: 250,
    maxWaitTime: 500,
    autocommit: false,
    ...(assignor === 'range' && !consumerProtocol
      ? { protocols: [{ name: 'range', version: 0 }], partitionAssigner: rangeAssigner }
      : {}),
    ...(consumerProtocol ? { groupProtocol: 'consumer' } : {}),
    ...(consumerProtocol && remoteAssignor ? { groupRemoteAssignor: remoteAssignor } : {})
  })
  if (consumerProtocol) {
    // The library reports no event per assignment change in this protocol; it updates
    // `consumer.assignments` after a heartbeat brought a new one (and heartbeats again at
    // once), so every heartbeat's end is a moment to look.
    consumer.on('consumer:group:join', payload => {
      memberId = payload.memberId
      emit({ event: 'joined', member_id: memberId })
    })
    consumer.on('consumer:heartbeat:end', () => {
      const mine = (consumer.assignments ?? []).filter(a => a.topic === topic).flatMap(a => a.partitions)
      const sorted = [...mine].sort((a, b) => a - b)
      if (sorted.join(',') !== current.join(',')) {
        memberId = consumer.memberId ?? memberId
        assigned(sorted, null)
      }
    })
  } else {
    consumer.on('consumer:group:join', payload => {
      memberId = payload.memberId
      const mine = (payload.assignments ?? []).filter(a => a.topic === topic).flatMap(a => a.partitions)
      assigned(mine, payload.generationId ?? null)
    })
    consumer.on('consumer:group:rebalance', () => {
      if (current.length) revoked()
    })
  }
  consumer.on('error', error => clientError('consumer', error))

  // Fetch from the earliest offset (0), not from the committed one: the tests commit offsets
  // past the end of these empty partitions, and a MessagesStream that fetches at such an offset
  // ends with OFFSET_OUT_OF_RANGE (as it would against Kafka) instead of resetting.
  const stream = await consumer.consume({
    topics: [topic],
    mode: 'earliest',
    autocommit: false,
    maxWaitTime: 500
  })
  stream.on('data', () => {})
  stream.on('error', error => clientError('stream', error))

  return {
    async commit(offsets) {
      await consumer.commit({
        offsets: Object.entries(offsets).map(([partition, offset]) => ({
          topic,
          partition: Number(partition),
          offset: BigInt(offset),
          leaderEpoch: -1
        }))
      })
    },
    async close() {
      await stream.close()
      await consumer.close(true)
    }
  }
}

// -- driving ------------------------------------------------------------------------------------

const starters = { kafkajs: startKafkajs, platformatic: startPlatformatic }
if (!starters[client]) {
  log(`unknown client ${client}`)
  process.exit(2)
}

let member = null
let closing = null
const pending = [] // commands that arrived before the client was up

async function close(reason) {
  if (closing) return closing
  closing = (async () => {
    try {
      if (member) await member.close()
      emit({ event: 'closed', reason })
      process.exitCode = 0
    } catch (error) {
      log(`close failed: ${error?.stack ?? error}`)
      emit({ event: 'error', message: `close: ${error?.message ?? error}` })
      process.exitCode = 1
    }
    // Whatever the client library still has scheduled, the member is done.
    setTimeout(() => process.exit(), 50).unref()
  })()
  return closing
}

async function handle(command) {
  if (command.cmd === 'leave') {
    await close('leave')
  } else if (command.cmd === 'commit') {
    try {
      await member.commit(command.offsets)
      emit({ event: 'commit', ok: true, offsets: command.offsets })
    } catch (error) {
      log(`commit failed: ${error?.stack ?? error}`)
      emit({ event: 'commit', ok: false, offsets: command.offsets, error: String(error?.message ?? error) })
    }
  } else {
    emit({ event: 'error', message: `unknown command ${JSON.stringify(command)}` })
  }
}

createInterface({ input: process.stdin })
  .on('line', line => {
    if (!line.trim()) return
    let command
    try {
      command = JSON.parse(line)
    } catch {
      emit({ event: 'error', message: `bad command line ${line}` })
      return
    }
    if (member) handle(command)
    else pending.push(command)
  })
  .on('close', () => close('stdin closed'))

process.on('SIGTERM', () => close('SIGTERM'))
process.on('SIGINT', () => close('SIGINT'))
setTimeout(() => close('lifetime'), lifetimeMs).unref()
// Keep the process alive until it is told to go (the lifetime timer is unref'd).
const keepAlive = setInterval(() => {}, 60000)
process.on('exit', () => clearInterval(keepAlive))

try {
  member = await starters[client]()
  emit({ event: 'started', client, client_id: clientId })
  for (const command of pending.splice(0)) await handle(command)
} catch (error) {
  log(`start failed: ${error?.stack ?? error}`)
  emit({ event: 'error', message: `start: ${error?.message ?? error}` })
  process.exit(1)
}
