// AlterConfigs (API 33) through a Node.js client's own admin API, driven by tests/matrix:
// create TOPIC with two overrides, then alter it naming only one other config. AlterConfigs
// replaces a topic's whole set of overrides, so afterwards only that one remains.
//
// Usage: node alter_configs.mjs CLIENT BOOTSTRAP TOPIC
//   CLIENT  kafkajs | platformatic
// stdout carries JSON lines:
//   {"event":"configs","when":"created"|"validated"|"altered","values":{"retention.ms":"..."}}
//   {"event":"error","message":"..."}   (then it exits 1)
// It exits by itself (status 1) after 60 s, so an orphan never outlives its test for long.

const [client, bootstrap, topic] = process.argv.slice(2)
const NAMES = ['retention.ms', 'cleanup.policy', 'segment.bytes']
const CREATED = [{ name: 'retention.ms', value: '3600000' }, { name: 'cleanup.policy', value: 'compact' }]
const ALTERED = [{ name: 'segment.bytes', value: '1048576' }]
const say = event => process.stdout.write(JSON.stringify(event) + '\n')
setTimeout(() => { say({ event: 'error', message: 'lifetime over' }); process.exit(1) }, 60000).unref()

async function kafkajs () {
  const { Kafka, ConfigResourceTypes, logLevel } = (await import('kafkajs')).default
  const admin = new Kafka({ clientId: 'alter-configs', brokers: [bootstrap], logLevel: logLevel.NOTHING }).admin()
  await admin.connect()
  const values = async () => {
    const { resources } = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: NAMES }]
    })
    return Object.fromEntries(resources[0].configEntries.map(e => [e.configName, e.configValue]))
  }
  const alter = validateOnly => admin.alterConfigs({
    validateOnly,
    resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configEntries: ALTERED }]
  })
  await admin.createTopics({ topics: [{ topic, numPartitions: 1, configEntries: CREATED }] })
  say({ event: 'configs', when: 'created', values: await values() })
  await alter(true)
  say({ event: 'configs', when: 'validated', values: await values() })
  await alter(false)
  say({ event: 'configs', when: 'altered', values: await values() })
  await admin.disconnect()
}

async function platformatic () {
  const { Admin } = await import('@platformatic/kafka')
  const admin = new Admin({ clientId: 'alter-configs', bootstrapBrokers: [bootstrap], timeout: 10000 })
  const TOPIC = 2
  const values = async () => {
    const [resource] = await admin.describeConfigs({
      resources: [{ resourceType: TOPIC, resourceName: topic, configurationKeys: NAMES }]
    })
    return Object.fromEntries(resource.configs.map(e => [e.name, e.value]))
  }
  const alter = validateOnly => admin.alterConfigs({
    validateOnly,
    resources: [{ resourceType: TOPIC, resourceName: topic, configs: ALTERED }]
  })
  await admin.createTopics({ topics: [topic], partitions: 1, replicas: 1, configs: CREATED })
  say({ event: 'configs', when: 'created', values: await values() })
  await alter(true)
  say({ event: 'configs', when: 'validated', values: await values() })
  await alter(false)
  say({ event: 'configs', when: 'altered', values: await values() })
  await admin.close()
}

try {
  await (client === 'kafkajs' ? kafkajs() : platformatic())
  process.exit(0)
} catch (e) {
  say({ event: 'error', message: String(e && (e.stack || e.message || e)) })
  process.exit(1)
}
