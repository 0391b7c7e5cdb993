// The four delegation-token APIs through @platformatic/kafka's own implementations of them
// (CreateDelegationToken v3, RenewDelegationToken v2, ExpireDelegationToken v2,
// DescribeDelegationToken v3) on one connection over a given listener.
//
// Usage: node delegation_tokens.mjs NODE_DIR OPTIONS_JSON
//   NODE_DIR      where @platformatic/kafka is installed (tests/matrix/node)
//   OPTIONS_JSON  {"bootstrap": "HOST:PORT",
//                  "ssl": {"ca": FILE, "cert": FILE|null, "key": FILE|null} | null,
//                  "sasl": {"mechanism": "PLAIN" | "SCRAM-SHA-512", "username": ..., "password": ...} | null,
//                  "owner": ["User", "bob"] | null, "renewers": [["User", "carol"], ...]}
// Prints one JSON line: {"create": {...}, "renew": {...}, "expire": {...}, "describe": {...}},
// each the client's parsed answer (its error code taken from the ResponseError it raises),
// bigints as strings; or {"error": "..."} with status 1. Exits by itself after 30 s.

import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'

const [nodeDir, raw] = process.argv.slice(2)
const options = JSON.parse(raw)
const require = createRequire(join(nodeDir, 'package.json'))
const kafka = require('@platformatic/kafka')
setTimeout(() => { console.log(JSON.stringify({ error: 'lifetime over' })); process.exit(1) }, 30000).unref()

const tls = options.ssl
  ? {
      ca: [readFileSync(options.ssl.ca, 'utf8')],
      ...(options.ssl.cert
        ? { cert: readFileSync(options.ssl.cert, 'utf8'), key: readFileSync(options.ssl.key, 'utf8') }
        : {}),
    }
  : undefined
const connection = new kafka.Connection('delegation-tokens', { tls, sasl: options.sasl ?? undefined })

// The answer, refused or not: the client raises a ResponseError holding the parsed response.
async function answer (api, ...args) {
  try {
    return await api.async(connection, ...args)
  } catch (e) {
    if (e && e.response) return e.response
    throw e
  }
}

try {
  const [host, port] = options.bootstrap.split(':')
  await connection.connect(host, Number(port))
  const owner = options.owner ?? [null, null]
  const renewers = (options.renewers ?? []).map(([principalType, principalName]) => ({ principalType, principalName }))
  const result = {
    create: await answer(kafka.createDelegationTokenV3.api, owner[0], owner[1], renewers, -1n),
    renew: await answer(kafka.renewDelegationTokenV2.api, Buffer.from('not-a-token'), 60000n),
    expire: await answer(kafka.expireDelegationTokenV2.api, Buffer.from('not-a-token'), -1n),
    describe: await answer(kafka.describeDelegationTokenV3.api, null),
  }
  console.log(JSON.stringify(result, (_, v) => typeof v === 'bigint' ? v.toString() : (v && v.type === 'Buffer' ? v.data : v)))
  await connection.close()
  process.exit(0)
} catch (e) {
  console.log(JSON.stringify({ error: String(e && (e.stack || e.message || e)) }))
  process.exit(1)
}
