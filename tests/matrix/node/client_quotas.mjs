// AlterClientQuotas (API 49, v1) and DescribeClientQuotas (API 48, v0) through
// @platformatic/kafka's admin API, driven by tests/matrix.
//
// Usage: node client_quotas.mjs BOOTSTRAP USER
// stdout carries JSON lines, each a step's answer:
//   {"step":"...","entries":[...]}  or  {"step":"...","error":[code, message]}
// and the script exits 0; a failure of its own is {"error":"..."} and status 1. It exits by
// itself (status 1) after 30 s.

import { Admin } from '@platformatic/kafka'

const [bootstrap, user] = process.argv.slice(2)
setTimeout(() => { console.log(JSON.stringify({ error: 'lifetime over' })); process.exit(1) }, 30000).unref()
const admin = new Admin({ clientId: 'client-quotas', bootstrapBrokers: [bootstrap], timeout: 10000, retries: 0 })
const EXACT = 0
const DEFAULT = 1
const SPECIFIED = 2
const say = (step, value) => console.log(JSON.stringify({ step, ...value }))

async function step (name, call) {
  try {
    say(name, { entries: await call() })
  } catch (e) {
    // The server's own error code and message, as the client reports them.
    const inner = (e.errors && e.errors[0]) || e
    const response = inner.response || {}
    const failed = response.errorCode ? response : (response.entries || []).find(x => x.errorCode !== 0)
    say(name, { error: failed ? [failed.errorCode, failed.errorMessage] : [null, String(inner.message || inner)] })
  }
}

const describe = (components, strict = false) => admin.describeClientQuotas({ components, strict })

try {
  await step('set', () => admin.alterClientQuotas({
    entries: [
      { entities: [{ entityType: 'user', entityName: user }], ops: [
        { key: 'producer_byte_rate', value: 1048576, remove: false },
        { key: 'consumer_byte_rate', value: 2097152, remove: false }] },
      { entities: [{ entityType: 'user', entityName: null }], ops: [
        { key: 'request_percentage', value: 50.5, remove: false }] },
      { entities: [{ entityType: 'user', entityName: user }, { entityType: 'client-id', entityName: 'app' }], ops: [
        { key: 'producer_byte_rate', value: 4096, remove: false }] }
    ]
  }))
  await step('exact', () => describe([{ entityType: 'user', matchType: EXACT, match: user }]))
  await step('exact strict', () => describe([{ entityType: 'user', matchType: EXACT, match: user }], true))
  await step('default', () => describe([{ entityType: 'user', matchType: DEFAULT }]))
  await step('validate only', () => admin.alterClientQuotas({
    validateOnly: true,
    entries: [{ entities: [{ entityType: 'user', entityName: 'other' }], ops: [
      { key: 'producer_byte_rate', value: 1, remove: false }] }]
  }))
  await step('remove', () => admin.alterClientQuotas({
    entries: [{ entities: [{ entityType: 'user', entityName: user }], ops: [
      { key: 'consumer_byte_rate', remove: true }] }]
  }))
  await step('specified', () => describe([{ entityType: 'user', matchType: SPECIFIED }]))
  await step('bad key', () => admin.alterClientQuotas({
    entries: [{ entities: [{ entityType: 'ip', entityName: '127.0.0.1' }], ops: [
      { key: 'producer_byte_rate', value: 1, remove: false }] }]
  }))
  await step('ip', () => admin.alterClientQuotas({
    entries: [{ entities: [{ entityType: 'ip', entityName: '127.0.0.1' }], ops: [
      { key: 'connection_creation_rate', value: 10, remove: false }] }]
  }))
  await step('bad filter', () => describe([
    { entityType: 'ip', matchType: SPECIFIED }, { entityType: 'user', matchType: SPECIFIED }]))
  await admin.close()
  process.exit(0)
} catch (e) {
  console.log(JSON.stringify({ error: String(e && (e.stack || e.message || e)) }))
  process.exit(1)
}
