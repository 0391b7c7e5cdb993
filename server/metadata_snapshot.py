"""The cluster metadata log kept short: at start, its records replaced by a snapshot.

A KRaft controller bounds its metadata log with snapshots: it writes one every
`metadata.log.max.record.bytes.between.snapshots`, and a restart reads the newest snapshot and
the records after it. minicoord reads its metadata log whole at every start, so a data
directory whose topics came and went by the thousand (a CI job making and deleting its topics
on each run) started slower with each run: 5,000 create-and-delete cycles took 1.3 s to read
back. At start, once the log holds many more records than the state they leave needs, the
records that make that state (the snapshot) are appended to a new segment and the log start
moves to them, dropping the segments before.

Crash safety without a second file: each snapshot record is an upsert that replays to the same
state on top of the state it summarises (a topic's TopicRecord starts that topic afresh, and
its configs and partitions follow in the same batch), so a log holding both the old records
and the snapshot (a crash before the log start moved) reads back the same. The snapshot is a
single batch, fsync'd before the start moves: a torn one is cut at recovery, leaving the old
records whole.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from minicoord.protocol import metadata_records as mr

if TYPE_CHECKING:
    from minicoord.server.client_metrics import ClientMetricsSubscriptions
    from minicoord.server.client_quotas import QuotaStore
    from minicoord.server.data.producers import ProducerIds
    from minicoord.server.features import Features
    from minicoord.server.group_configs import GroupConfigs
    from minicoord.server.security.acls import AclStore
    from minicoord.server.security.sasl import UserStore
    from minicoord.server.topics import TopicRegistry

# Dead records read at every start cost about 70 µs each; a rewrite costs a segment and an
# fsync. Below this many, or fewer dead records than live ones, the log is left as it is.
MIN_DEAD_RECORDS = 256


def worth_compacting(records: int, live: int) -> bool:
    """Whether a log of `records` records, whose state `live` records make, is to be rewritten."""
    dead = records - live
    return dead >= MIN_DEAD_RECORDS and dead >= live


def live_records(
    topics: TopicRegistry,
    producer_ids: ProducerIds,
    group_configs: GroupConfigs,
    acls: AclStore | None,
    users: UserStore | None,
    quotas: QuotaStore | None,
    features: Features,
    client_metrics: ClientMetricsSubscriptions | None = None,
) -> int:
    """How many records `snapshot_records` would make, without encoding them: a start with
    much live state and little dead (the usual one) decides at the cost of a count."""
    count = sum(1 + len(topics.config_of(t).overrides) + t.partitions for t in topics.user_topics())
    count += 1 + topics.offsets.partitions if topics.offsets_topic_exists else 0
    count += 1 + topics.transaction_state.partitions if topics.transaction_state_exists else 0
    count += 1 + topics.share_state.partitions if topics.share_state_exists else 0
    count += sum(len(own) for own in topics.dynamic.values())
    count += 1 if producer_ids.next_block_start else 0
    count += len(group_configs)
    count += len(acls) if acls is not None else 0
    if users is not None:
        count += sum(len(credentials) for credentials in users.scram.values())
    count += len(quotas) if quotas is not None else 0
    count += len(features.snapshot())
    count += len(client_metrics) if client_metrics is not None else 0
    return count


def snapshot_records(
    broker_id: int,
    topics: TopicRegistry,
    producer_ids: ProducerIds,
    group_configs: GroupConfigs,
    acls: AclStore | None,
    users: UserStore | None,
    quotas: QuotaStore | None,
    features: Features,
    client_metrics: ClientMetricsSubscriptions | None = None,
) -> list[bytes]:
    """The records that rebuild the replayed state: topics with their configs and partitions
    (and the broker configs set at runtime), the producer id block claimed last, group
    configs, ACLs, SCRAM credentials, client quotas, the client-metrics subscriptions and
    the feature levels changed.

    Only the state the log made: call it before anything given at start (--topic, --acl,
    --user) is added, or those would be written as if created through the admin APIs.
    """
    records = topics.snapshot()
    if producer_ids.next_block_start:
        records.append(producer_ids.block_record(broker_id))
    records += group_configs.snapshot()
    if acls is not None:
        from minicoord.server.security.records import to_record

        records += [to_record(acl_id, acl) for acl_id, acl in acls.items()]
    if users is not None:
        from minicoord.server.security.scram import MECHANISMS
        from minicoord.server.security.users import credential_record

        for mechanism, credentials in users.scram.items():
            type_id = MECHANISMS[mechanism]
            records += [mr.encode(credential_record(n, type_id, c)) for n, c in credentials.items()]
    if quotas is not None:
        records += quotas.snapshot()
    if client_metrics is not None:
        records += client_metrics.snapshot()
    return records + features.snapshot()
