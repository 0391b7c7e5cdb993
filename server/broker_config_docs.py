"""What each broker config does, for DescribeConfigs with `include_documentation` (as Kafka
answers it from its ConfigDef). The broker configs that are topic defaults are documented by
their topic config (broker_synonyms.py); the rest here, as they act on this node."""

from __future__ import annotations

from minicoord.server.broker_synonyms import topic_config_of

_DOCS = {
    "group.min.session.timeout.ms": "The minimum allowed session timeout for registered "
    "consumers (classic groups).",
    "group.max.session.timeout.ms": "The maximum allowed session timeout for registered "
    "consumers (classic groups).",
    "group.initial.rebalance.delay.ms": "How long the coordinator waits for more consumers to "
    "join a new group before the first rebalance.",
    "group.max.size": "The maximum number of consumers a classic group can hold.",
    "offsets.topic.num.partitions": "The number of partitions of the offsets topic.",
    "offset.metadata.max.bytes": "The maximum size of the metadata of an offset commit.",
    "num.partitions": "The default number of partitions of a topic.",
    "auto.create.topics.enable": "Whether a Metadata request may create the topics it names.",
    "socket.request.max.bytes": "The largest request this node accepts.",
    "connections.max.idle.ms": "Idle connections are closed after this many milliseconds.",
    "max.connections": "The most connections this node keeps open at once.",
    "queued.max.requests": "The requests of a connection awaiting their answer beyond which "
    "it is not read.",
    "max.request.partition.size.limit": "The most partitions a DescribeTopicPartitions "
    "answer carries.",
    "broker.id": "This node's id (the same as node.id).",
    "node.id": "This node's id in the cluster (the same as broker.id).",
    "process.roles": "The roles this node plays: broker and controller, both.",
    "advertised.listeners": "The listeners to advertise to clients, where they differ from "
    "the addresses they connected to.",
    "log.flush.policy": "What a write waits for before it is acknowledged: write, fsync or none.",
    "offsets.topic.segment.bytes": "The segment size of the offsets topic.",
    "log.cleaner.backoff.ms": "How long the log cleaner sleeps when there is nothing to clean.",
    "offsets.retention.minutes": "How long the offsets of a group without members are kept.",
    "offsets.retention.check.interval.ms": "How often expired offsets are looked for.",
    "group.consumer.heartbeat.interval.ms": "The heartbeat interval given to the members of "
    "consumer groups.",
    "group.consumer.min.heartbeat.interval.ms": "The smallest heartbeat interval a consumer "
    "group may be configured with.",
    "group.consumer.max.heartbeat.interval.ms": "The largest heartbeat interval a consumer "
    "group may be configured with.",
    "group.consumer.session.timeout.ms": "How long a member of a consumer group may be silent "
    "before it is fenced.",
    "group.consumer.min.session.timeout.ms": "The smallest session timeout a consumer group "
    "may be configured with.",
    "group.consumer.max.session.timeout.ms": "The largest session timeout a consumer group "
    "may be configured with.",
    "group.consumer.max.size": "The maximum number of members a consumer group can hold.",
    "group.consumer.assignment.interval.ms": "The least time between two computations of a "
    "consumer group's target assignment.",
    "group.consumer.min.assignment.interval.ms": "The smallest assignment interval a consumer "
    "group may be configured with.",
    "group.consumer.max.assignment.interval.ms": "The largest assignment interval a consumer "
    "group may be configured with.",
    "group.consumer.assignors": "The server-side assignors of consumer groups, the first the "
    "default.",
    "group.consumer.migration.policy": "Which conversions between classic and consumer groups "
    "are allowed: bidirectional, upgrade, downgrade or disabled.",
    "group.share.heartbeat.interval.ms": "The heartbeat interval given to the members of share "
    "groups.",
    "group.share.session.timeout.ms": "How long a member of a share group may be silent before "
    "it is removed.",
    "group.share.min.heartbeat.interval.ms": "The smallest heartbeat interval a share group "
    "may be configured with.",
    "group.share.max.heartbeat.interval.ms": "The largest heartbeat interval a share group "
    "may be configured with.",
    "group.share.min.session.timeout.ms": "The smallest session timeout a share group may be "
    "configured with.",
    "group.share.max.session.timeout.ms": "The largest session timeout a share group may be "
    "configured with.",
    "group.share.min.record.lock.duration.ms": "The shortest record lock a share group may be "
    "configured with.",
    "group.share.max.record.lock.duration.ms": "The longest record lock a share group may be "
    "configured with.",
    "group.share.max.size": "The maximum number of members a share group can hold.",
    "group.share.record.lock.duration.ms": "How long a record delivered to a member of a share "
    "group stays locked to it before it can be delivered again.",
    "group.share.delivery.count.limit": "How many times a record is delivered to a share group "
    "before it is archived.",
    "group.share.partition.max.record.locks": "The most records of a partition a share group "
    "may have in flight.",
    "log.retention.check.interval.ms": "How often the logs are checked for segments to delete.",
    "producer.id.expiration.ms": "How long a producer id may be silent before it is forgotten.",
    "producer.id.expiration.check.interval.ms": "How often expired producer ids are looked for.",
    "transaction.max.timeout.ms": "The longest transaction timeout a producer may ask for.",
    "transactional.id.expiration.ms": "How long a transactional id may go unused before it is "
    "forgotten.",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "How often transactions "
    "open past their timeout are aborted.",
    "transaction.state.log.num.partitions": "The number of partitions of the transaction topic.",
    "transaction.state.log.segment.bytes": "The segment size of the transaction topic.",
    "share.coordinator.state.topic.num.partitions": "The number of partitions of the share "
    "group state topic.",
    "share.coordinator.state.topic.segment.bytes": "The segment size of the share group state "
    "topic.",
    "offsets.topic.replication.factor": "The replication factor of the offsets topic.",
    "transaction.state.log.replication.factor": "The replication factor of the transaction topic.",
    "transaction.state.log.min.isr": "The min.insync.replicas of the transaction topic.",
    "default.replication.factor": "The default replication factor of a topic.",
    "group.coordinator.rebalance.protocols": "The group protocols served.",
    "delete.topic.enable": "Whether topics may be deleted.",
    "authorizer.class.name": "The authorizer of requests; empty for none.",
    "super.users": "The principals allowed everything, separated by semicolons.",
    "allow.everyone.if.no.acl.found": "Whether a resource no ACL names is open to everyone.",
    "listeners": "The listeners, each a name and an address.",
    "listener.security.protocol.map": "The security protocol of each listener name.",
    "ssl.keystore.type": "The format of the key store.",
    "ssl.keystore.location": "The location of the key store file.",
    "ssl.keystore.password": "The password of the key store file.",
    "ssl.key.password": "The password of the private key in the key store.",
    "ssl.keystore.key": "The private key, in PEM.",
    "ssl.keystore.certificate.chain": "The certificate chain, in PEM.",
    "ssl.truststore.type": "The format of the trust store.",
    "ssl.truststore.location": "The location of the trust store file.",
    "ssl.truststore.certificates": "The trusted certificates, in PEM.",
    "ssl.client.auth": "Whether clients must show a certificate: required, requested or none.",
    "ssl.enabled.protocols": "The TLS versions accepted.",
    "sasl.enabled.mechanisms": "The SASL mechanisms accepted.",
    "sasl.jaas.config": "The JAAS login configuration of the SASL mechanisms.",
    "sasl.server.max.receive.size": "The largest SASL token accepted before authentication.",
    "connections.max.reauth.ms": "How long an authenticated session lasts before the client "
    "must authenticate again; 0 for ever.",
}


def broker_doc(name: str) -> str | None:
    """A broker config's documentation (None for a name minicoord has none for)."""
    definition = topic_config_of(name)
    if definition is not None:
        return f"The default of every topic's {definition.name}: {definition.doc}"
    return _DOCS.get(name)
