"""The cluster metadata a node keeps: topics, their configs and partitions, group configs,
ACLs, SCRAM users, client quotas and producer id blocks, each change a KRaft record in
`__cluster_metadata`.

Broker (broker.py) takes these from this mixin: reading the log back at start (and compacting
it, server/metadata_snapshot.py), appending a change's records, and the topic changes the
admin APIs, auto-creation and --topic share. Applying results and the write path stay there.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from minicoord.protocol import metadata_records as mr
from minicoord.protocol.records import Record
from minicoord.server.features import GROUP_VERSION
from minicoord.server.topics import (
    METADATA_TOPIC,
    OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    Topic,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from minicoord.server.client_metrics import ClientMetricsSubscriptions
    from minicoord.server.client_quotas import QuotaStore
    from minicoord.server.config import Config
    from minicoord.server.coordinator.coordinator import GroupCoordinator
    from minicoord.server.coordinator.results import Effects, Result
    from minicoord.server.data.plane import DataPlane
    from minicoord.server.features import Features
    from minicoord.server.security.acls import Acl, AclStore
    from minicoord.server.security.sasl import UserStore
    from minicoord.server.topics import TopicRegistry
    from minicoord.storage.log import LogManager
    from minicoord.storage.partition_log import PartitionLog

log = logging.getLogger("minicoord.broker")

T = TypeVar("T")
# The cluster metadata log is small: topics, configs and producer id blocks.
METADATA_SEGMENT_BYTES = 8 * 1024 * 1024
# In memory nothing ever replays the log (no restart reads it), so only its offsets matter:
# it keeps about this much and drops the rest, where a server on disk compacts it at start.
IN_MEMORY_METADATA_KEPT = 256 * 1024


def replay_metadata(
    plog: PartitionLog,
    registry: TopicRegistry,
    on_producer_ids: Callable[[int], None] | None = None,
    on_acl: Callable[[Any], None] | None = None,
    on_user: Callable[[Any], None] | None = None,
    on_group_config: Callable[[Any], None] | None = None,
    on_quota: Callable[[Any], None] | None = None,
    on_feature: Callable[[Any], None] | None = None,
    on_client_metrics: Callable[[Any], None] | None = None,
) -> tuple[int, int]:
    """Rebuild the topics (producer id blocks, ACLs, SCRAM users, group configs, client
    quotas, feature levels, client-metrics subscriptions) from the metadata log; (records
    read, records skipped as undecodable)."""
    read = skipped = 0
    for stored in plog.records():
        read += 1
        if stored.value is None:
            continue
        try:
            record = mr.decode(stored.value)
        except ValueError as exc:
            log.warning("skipping cluster metadata record %d: %s", stored.offset, exc)
            skipped += 1
            continue
        if isinstance(record, mr.ProducerIdsRecord):
            if on_producer_ids is not None:
                on_producer_ids(record.next_producer_id)
        elif isinstance(record, mr.UserScramCredentialRecord | mr.RemoveUserScramCredentialRecord):
            if on_user is not None:
                on_user(record)
        elif isinstance(record, mr.ConfigRecord) and record.resource_type == mr.RESOURCE_GROUP:
            if on_group_config is not None:
                on_group_config(record)
        elif (
            isinstance(record, mr.ConfigRecord)
            and record.resource_type == mr.RESOURCE_CLIENT_METRICS
        ):
            if on_client_metrics is not None:
                on_client_metrics(record)
        elif isinstance(record, mr.AccessControlEntryRecord | mr.RemoveAccessControlEntryRecord):
            if on_acl is not None:
                on_acl(record)
        elif isinstance(record, mr.ClientQuotaRecord):
            if on_quota is not None:
                on_quota(record)
        elif isinstance(record, mr.FeatureLevelRecord):
            if on_feature is not None:
                on_feature(record)
        else:
            registry.replay(record)
    return read, skipped


class ClusterMetadata:
    # The Broker state these methods read and change (set in its __init__).
    config: Config
    logs: LogManager
    topics: TopicRegistry
    data: DataPlane
    coordinator: GroupCoordinator
    users: UserStore | None
    features: Features
    consumer_protocol: bool
    now: Callable[[], int]
    _metadata_log: PartitionLog | None
    # (records read back, records skipped as undecodable) by `open_metadata`.
    _metadata_replayed: tuple[int, int]

    if TYPE_CHECKING:
        from minicoord.server.data.shares import Shares

        shares: Shares

        def persist_shares(self) -> bool: ...

        def _schedule_flush(self) -> None: ...

        def release(self, fx: Effects) -> None: ...

        def apply(self, result: Result[T], reply: Any = None) -> T: ...

    # -- cluster metadata -------------------------------------------------------------------

    def open_metadata(self) -> None:
        """Replay the cluster metadata log: topics, configs, producer id blocks (blocking)."""
        plog = self.logs.open_log(METADATA_TOPIC, 0, METADATA_SEGMENT_BYTES)
        self.logs.install(METADATA_TOPIC, 0, plog)
        self._metadata_log = plog
        self._metadata_replayed = replay_metadata(
            plog,
            self.topics,
            self.data.producer_ids.restore,
            self._replay_acl,
            self._replay_user,
            self.coordinator.group_configs.replay,
            self._replay_quota,
            self.features.apply,
            self._replay_client_metrics,
        )
        self._follow_features()

    def compact_metadata(self) -> bool:
        """Rewrite the cluster metadata log as the records of what it holds when it holds
        many more (server/metadata_snapshot.py); whether it did. Right after `open_metadata`,
        before anything given at start is added (blocking)."""
        plog = self._metadata_log
        if plog is None or plog.in_memory:
            return False
        from minicoord.server.metadata_snapshot import (
            live_records,
            snapshot_records,
            worth_compacting,
        )

        read, skipped = self._metadata_replayed
        if skipped:
            return False  # records this version cannot read are not for it to drop
        state = (
            self.topics,
            self.data.producer_ids,
            self.coordinator.group_configs,
            self.__dict__.get("acls"),  # made only if an ACL record was replayed
            self.users,
            self.__dict__.get("client_quotas"),  # likewise for a quota record
            self.features,
            self.__dict__.get("client_metrics"),  # and for a subscription's record
        )
        if not worth_compacting(read, live_records(*state)):
            return False
        records = snapshot_records(self.config.broker_id, *state)
        start = plog.next_offset
        plog.roll()
        if records:
            # One batch: a crash tearing it leaves the old records, cut at recovery.
            plog.append([Record(None, v) for v in records], self.now())
        plog.flush()
        plog.commit(plog.mark())
        plog.advance_start(start)
        self.logs.note_start_offset(METADATA_TOPIC, 0, start)
        self.logs.save_start_offsets()
        self._metadata_replayed = (len(records), 0)
        log.info(
            "compacted the cluster metadata log: %d records read back, %d written from %d on",
            read,
            len(records),
            start,
        )
        return True

    def metadata_offsets(self) -> tuple[int, int]:
        """(log end offset, high watermark) of the cluster metadata log; (0, 0) before it is
        opened. As a single voter's, its high watermark is what has been written (durable)."""
        plog = self._metadata_log
        if plog is None:
            return 0, 0
        return plog.next_offset, plog.high_watermark

    @functools.cached_property
    def acls(self) -> AclStore:
        """The ACLs, kept (and replayed) whether or not they are enforced. Made on first use:
        a server that never sees an ACL does without the module (100 KiB)."""
        from minicoord.server.security.acls import AclStore

        config = self.config
        return AclStore(config.super_user_set, config.allow_everyone_if_no_acl_found)

    @functools.cached_property
    def client_quotas(self) -> QuotaStore:
        """The client quotas (stored and described, not enforced). Made on first use, as the
        ACLs are."""
        from minicoord.server.client_quotas import QuotaStore

        return QuotaStore()

    @functools.cached_property
    def client_metrics(self) -> ClientMetricsSubscriptions:
        """The client-metrics subscriptions (stored and described, not served). Made on first
        use, as the ACLs are."""
        from minicoord.server.client_metrics import ClientMetricsSubscriptions

        return ClientMetricsSubscriptions()

    def _replay_client_metrics(self, record: Any) -> None:
        self.client_metrics.replay(record)

    def alter_client_metrics(self, name: str, configs: dict[str, str]) -> None:
        """A subscription's new configs (checked), persisted in the metadata log; none left
        removes it."""
        self.persist_metadata(self.client_metrics.set(name, configs))
        log.info("client-metrics subscription %r set: %s", name, configs or "removed")

    def _replay_quota(self, record: Any) -> None:
        self.client_quotas.apply(record)

    def _replay_acl(self, record: Any) -> None:
        from minicoord.server.security.records import replay

        replay(record, self.acls)

    def add_acls(self, acls: list[Acl]) -> None:
        """ACLs given at start (`acls=`, --acl): persisted once; those already there are kept."""
        if acls:
            from minicoord.server.security.records import create

            self.persist_acls(create(self.acls, acls))

    def persist_acls(self, records: list[bytes]) -> None:
        """ACL changes made (start, CreateAcls, DeleteAcls): durable, and followed by the regex
        subscriptions, which resolve to what their members may describe."""
        if records:
            self.persist_metadata(records)
            self.coordinator.on_acls_changed()

    # -- users (SASL) ----------------------------------------------------------------------

    def user_store(self) -> UserStore:
        """The SASL users, made on first need: a server without SASL never loads hmac."""
        if self.users is None:
            from minicoord.server.security.sasl import UserStore

            self.users = UserStore()
        return self.users

    def add_users(self, extra: Iterable[tuple[str, str]] = ()) -> None:
        """Users of the config's JAAS strings and `extra` (name, password), over replayed ones."""
        from minicoord.server.security.sasl import load_users

        loaded = load_users(self.config, list(extra))
        store = self.user_store()
        store.plain.update(loaded.plain)
        for mechanism, users in loaded.scram.items():
            store.scram[mechanism].update(users)

    def _replay_user(self, record: Any) -> None:
        from minicoord.server.security.users import apply_record

        apply_record(self.user_store(), record)

    def update_features(self, records: list[bytes]) -> None:
        """Apply and append UpdateFeatures' FeatureLevelRecords (features.py)."""
        if self._metadata_log is None:
            self.open_metadata()
        for value in records:
            self.features.apply(mr.decode(value))
        self.persist_metadata(records)
        self._follow_features()

    def features_epoch(self) -> int:
        """The finalized features' epoch, as ApiVersions reports it: as Kafka's (the metadata
        image's latest offset), it moves with every metadata change, a topic made or a config
        set, not only with a feature's. Here the metadata log's end, so that a fresh server's
        first change (at offset 0) moves it from 0 too."""
        plog = self._metadata_log
        return 0 if plog is None else plog.next_offset

    def _follow_features(self) -> None:
        self.consumer_protocol = (
            self.config.consumer_protocol_enabled and self.features.level(GROUP_VERSION) >= 1
        )

    def persist_metadata(self, values: Iterable[bytes]) -> None:
        """Append cluster metadata records; replies applied after this wait for them."""
        # KRaft's metadata records have no key.
        records = [Record(None, v) for v in values]
        if not records:
            return
        if self._metadata_log is None:
            self.open_metadata()
        plog = self._metadata_log
        assert plog is not None
        if plog.in_memory and plog.high_watermark == plog.next_offset:
            _drop_written_past(plog, IN_MEMORY_METADATA_KEPT)
        plog.append(records, self.now())
        self.logs.touched(METADATA_TOPIC, 0, plog)
        self._schedule_flush()

    # -- topics (admin APIs, auto-creation and --topic share these) -------------------------

    def create_topic(
        self, name: str, partitions: int, configs: dict[str, str] | None = None
    ) -> Topic:
        """A new topic: its metadata records, then its empty logs."""
        topic, records = self.topics.create(name, partitions, configs)
        self.persist_metadata(records)
        self.data.create_logs(topic)
        self.coordinator.on_topics_changed({name}, created=True)
        log.info("created topic %s with %d partitions (id %s)", name, partitions, topic.topic_id)
        return topic

    def create_offsets_topic(self, partition: int = 0) -> None:
        """`__consumer_offsets` comes into existence, as Kafka creates it on first use.

        Its records, with its partition count, go to the metadata log as Kafka's controller
        writes them, and its log `partition` (the group's that was looked up) is made at once
        (a data directory from before the records is known to hold the topic by its logs)."""
        if self.topics.create_offsets_topic():
            self.persist_metadata(self.topics.offsets_records())
            self.data.partition(self.topics.offsets, partition)
            self.coordinator.on_topics_changed({OFFSETS_TOPIC}, created=True)
            log.info(
                "created topic %s with %d partitions",
                OFFSETS_TOPIC,
                self.topics.offsets.partitions,
            )

    def create_transaction_state_topic(self, partition: int | None = None) -> None:
        """`__transaction_state` comes into existence, as Kafka creates it on the first
        FindCoordinator for a transactional id: its records, with its partition count, to the
        metadata log, and the log of `partition` (the id's) made at once."""
        topics = self.topics
        if topics.create_transaction_state_topic():
            self.persist_metadata(topics.transaction_state_records())
            if partition is not None:
                self.data.partition(topics.transaction_state, partition)
            log.info(
                "created topic %s with %d partitions",
                TRANSACTION_STATE_TOPIC,
                topics.transaction_state.partitions,
            )

    def create_share_state_topic(self) -> None:
        """`__share_group_state` comes into existence with the first share-group state to
        keep: its records, with its partition count, to the metadata log."""
        topics = self.topics
        if topics.create_share_state_topic():
            self.persist_metadata(topics.share_state_records())
            log.info(
                "created topic %s with %d partitions",
                topics.share_state.name,
                topics.share_state.partitions,
            )

    def delete_topic(self, topic: Topic) -> None:
        """Remove a topic, its logs, the fetches waiting on it and the offsets committed for it."""
        self.persist_metadata(self.topics.delete(topic))
        self.release(self.data.drop_topic(topic))
        if "shares" in self.__dict__:
            self.shares.drop(lambda key: key[1] != topic.topic_id)
            self.persist_shares()
        self.coordinator.on_topics_changed({topic.name}, created=False)
        self.apply(self.coordinator.delete_topic_offsets(self.now(), topic.name))
        log.info("deleted topic %s (id %s)", topic.name, topic.topic_id)

    def add_partitions(self, topic: Topic, count: int) -> None:
        old = topic.partitions
        self.persist_metadata(self.topics.add_partitions(topic, count))
        self.data.create_logs(topic, first=old)
        self.coordinator.on_topics_changed({topic.name}, created=False)
        log.info("topic %s: %d -> %d partitions", topic.name, old, count)

    def alter_group_configs(self, group: str, overrides: dict[str, str]) -> None:
        """A group's new overrides (checked): persisted in the metadata log, in force from
        its members' next heartbeats."""
        self.persist_metadata(self.coordinator.group_configs.set(group, overrides))

    def alter_topic_configs(self, topic: Topic, overrides: dict[str, str]) -> None:
        self.persist_metadata(self.topics.alter_configs(topic, overrides))
        self.data.apply_config(topic)

    def alter_broker_configs(self, resource: str, overrides: dict[str, str]) -> None:
        """Broker configs set at runtime (checked) for `resource` ("" for every broker): every
        topic's defaults move, and its logs roll by the new size and age."""
        self.persist_metadata(self.topics.alter_broker_configs(resource, overrides))
        for topic in self.topics.all():
            self.data.apply_config(topic)
        log.info("broker configs of %r set at runtime: %s", resource or "every broker", overrides)


def _drop_written_past(plog: PartitionLog, kept: int) -> None:
    """An in-memory metadata log whose records are all written: once its active segment
    holds more than `kept` bytes, start a new one and drop the old, keeping the offsets (a
    server that creates and deletes topics all day would otherwise hold every record it
    ever wrote: 368 bytes a topic, sweep35)."""
    if plog.segments[-1].size > kept:
        plog.roll()
        plog.advance_start(plog.next_offset)
