"""The topics of this single-node cluster: names, ids, partitions and configs.

This node leads every partition. The registry is sans-IO: each change returns the cluster
metadata records that describe it (KRaft's TopicRecord, PartitionRecord, ConfigRecord,
RemoveTopicRecord; see protocol/metadata_records.py), which the broker appends to the
`__cluster_metadata` log before answering, and `replay` rebuilds the registry from them at
start. So a topic keeps its id, partitions and configs across restarts.

`__consumer_offsets`, `__transaction_state` and `__share_group_state` are the coordinators'
internal topics (their partition counts are `offsets.topic.num.partitions`,
`transaction.state.log.num.partitions` and `share.coordinator.state.topic.num.partitions` when
made, and their metadata records keep the count after). As in Kafka, each is listed only
once it exists: Kafka creates it on the first FindCoordinator for a group, or for a
transactional id (or a Metadata request naming it), so a fresh server lists no topics; here
it exists from then on, or from start once a log of it is on disk.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import field
from typing import TYPE_CHECKING, Any

from minicoord.protocol import metadata_records as mr
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.lean_dataclass import dataclass
from minicoord.server.broker_synonyms import broker_defaults
from minicoord.server.config import Config
from minicoord.server.topic_config_defs import InvalidConfig, validate
from minicoord.server.topic_configs import TopicConfig

if TYPE_CHECKING:
    import uuid


OFFSETS_TOPIC = "__consumer_offsets"
# A stable id derived from the name (the offsets topic is not in the metadata log):
# uuid5(NAMESPACE_URL, "minicoord:__consumer_offsets"), written out because computing it
# loads OpenSSL's libcrypto for its SHA-1, half a megabyte of every server's memory. Text, not
# a uuid.UUID: the uuid module (with platform, which it imports) is 280 KiB of an idle server,
# so it loads with the first topic, not at start.
OFFSETS_TOPIC_ID = "edf628af-25d1-53c4-bc07-61b211103a47"
TRANSACTION_STATE_TOPIC = "__transaction_state"
# uuid5(NAMESPACE_URL, "minicoord:__transaction_state"), as the offsets topic's.
TRANSACTION_STATE_TOPIC_ID = "94b1da01-de5a-5d5c-a5c4-5fef3f83975a"
SHARE_STATE_TOPIC = "__share_group_state"
# uuid5(NAMESPACE_URL, "minicoord:__share_group_state"), as the offsets topic's.
SHARE_STATE_TOPIC_ID = "2b5f0f85-5274-5277-a768-9d2dec017da4"
METADATA_TOPIC = "__cluster_metadata"
# The server's own topics, which no request may create.
RESERVED_TOPICS = frozenset(
    {OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_STATE_TOPIC, METADATA_TOPIC}
)
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")
MAX_NAME_LENGTH = 249
# Kafka's controller refuses a CreateTopics or CreatePartitions that would add more
# (KAFKA-17870, KAFKA-14996): one event-loop turn creating 100,000 partitions would hold
# every other client for seconds, long enough to expire healthy group members.
MAX_PARTITIONS_PER_REQUEST = 10_000
# This node's id leads every partition; the leader epoch never changes.
LEADER_EPOCH = 0


def new_topic_id() -> uuid.UUID:
    """A new topic's (or ACL's) id. The uuid module, with the platform module it imports, is
    280 KiB of a server's memory: it loads here, with the first id made, not at start."""
    import uuid

    return uuid.uuid4()


@dataclass(slots=True)
class Topic:
    name: str
    partitions: int
    topic_id: uuid.UUID = field(default_factory=new_topic_id)
    internal: bool = False
    config: TopicConfig | None = None


def parse_topic_spec(text: str) -> tuple[str, int]:
    """NAME:PARTITIONS, as `--topic` and the pytest plugin take a topic; ValueError says why."""
    name, sep, count = text.rpartition(":")
    if not sep or not name:
        raise ValueError(f"expected NAME:PARTITIONS, got {text!r}")
    try:
        partitions = int(count)
    except ValueError:
        raise ValueError(f"partition count {count!r} is not a number") from None
    reason = initial_topic_error(name, partitions)
    if reason is not None:
        raise ValueError(reason)
    return name, partitions


def initial_topic_error(name: str, partitions: int) -> str | None:
    """Why a topic given at start (`--topic`, `Server(topics=...)`) cannot be made, or None.

    Checked before the server listens: found once it has printed its ready line, it could
    only crash. The internal topics are the server's own (their partitions come from configs),
    and the partition limit is the one CreateTopics has, so that a typo cannot hold the
    starting server for minutes making millions of partitions.
    """
    if partitions < 1:
        return "a topic needs at least one partition"
    if partitions > MAX_PARTITIONS_PER_REQUEST:
        return (
            f"{partitions} partitions is more than CreateTopics allows in one request "
            f"({MAX_PARTITIONS_PER_REQUEST:,})"
        )
    if name in RESERVED_TOPICS:
        return f"{name} is the server's own topic and cannot be created"
    return topic_name_error(name)


def replica_list_error(broker_ids: Iterable[int], node: int, replicas: int | None) -> str | None:
    """Why one partition's manual replica list cannot be taken, in the words of Kafka's
    ReplicationControlManager.validateManualPartitionAssignment (`node` being the only broker
    registered, `replicas` the replica count the other partitions have); None if it can."""
    brokers = sorted(broker_ids)
    if not brokers:
        return "The manual partition assignment includes an empty replica list."
    for previous, broker in zip([None, *brokers], brokers, strict=False):
        if broker != node:
            return (
                f"The manual partition assignment includes broker {broker}, but no such "
                "broker is registered."
            )
        if broker == previous:
            return f"The manual partition assignment includes the broker {broker} more than once."
    if replicas is not None and len(brokers) != replicas:
        return (
            f"The manual partition assignment includes a partition with {len(brokers)} "
            f"replica(s), but this is not consistent with previous partitions, which have "
            f"{replicas} replica(s)."
        )
    return None


def topic_name_error(name: str | None) -> str | None:
    """Why a name is not a legal Kafka topic name, in Kafka's words (Topic.validate's
    InvalidTopicException), or None if it is."""
    if not name:
        reason = "the empty string is not allowed"
    elif name in (".", ".."):
        reason = f"'{name}' is not allowed"
    # Java counts UTF-16 units; only ASCII is legal, but a long non-ASCII name says "length".
    elif len(name.encode("utf-16-le")) // 2 > MAX_NAME_LENGTH:
        reason = f"the length of '{name}' is longer than the max allowed length {MAX_NAME_LENGTH}"
    elif not _LEGAL.fullmatch(name):
        reason = (
            f"'{name}' contains one or more characters other than "
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    else:
        return None
    return f"Topic name is invalid: {reason}"


class TopicRegistry:
    def __init__(self, config: Config) -> None:
        self.config = config
        # Broker configs set at runtime (topic defaults), by resource name: this broker's id,
        # or "" for the cluster default.
        self.dynamic: dict[str, dict[str, str]] = {}
        self.defaults = broker_defaults(config, self.dynamic)
        self._by_name: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        # Moves on every change of a topic's name, id or partition count: answers built from
        # those (Metadata) may be kept while it stands still.
        self.generation = 0
        self.answers: dict[Any, Any] = {}
        self._answers_generation = 0
        self._plain_config: TopicConfig | None = None

    @functools.cached_property
    def offsets(self) -> Topic:
        """The coordinator's, whether or not the topic exists for clients yet: it is in the
        name and id maps (what requests look up) only from `create_offsets_topic` on."""
        # The overrides Kafka creates the topic with (groupMetadataTopicConfigs).
        return self._internal(
            OFFSETS_TOPIC,
            OFFSETS_TOPIC_ID,
            self.config.offsets_topic_num_partitions,
            self.config.offsets_topic_segment_bytes,
            {"cleanup.policy": "compact", "compression.type": "producer"},
        )

    @functools.cached_property
    def transaction_state(self) -> Topic:
        """The transaction coordinator's, as `offsets` is the group coordinator's."""
        # Kafka's creation overrides (TransactionStateManager.transactionTopicConfigs:
        # compacted, uncompressed, no unclean election, transaction.state.log.min.isr).
        return self._internal(
            TRANSACTION_STATE_TOPIC,
            TRANSACTION_STATE_TOPIC_ID,
            self.config.transaction_state_log_num_partitions,
            self.config.transaction_state_log_segment_bytes,
            {
                "unclean.leader.election.enable": "false",
                "compression.type": "uncompressed",
                "cleanup.policy": "compact",
                "min.insync.replicas": str(self.config.transaction_state_log_min_isr),
            },
        )

    @functools.cached_property
    def share_state(self) -> Topic:
        """The share groups' delivery state (server/data/share_state.py): a snapshot record
        per share partition, compacted, so each key's last record is its state."""
        return self._internal(
            SHARE_STATE_TOPIC,
            SHARE_STATE_TOPIC_ID,
            self.config.share_coordinator_state_topic_num_partitions,
            self.config.share_coordinator_state_topic_segment_bytes,
            {"cleanup.policy": "compact", "compression.type": "uncompressed"},
        )

    def _internal(
        self, name: str, topic_id: str, partitions: int, segment: int, overrides: dict[str, str]
    ) -> Topic:
        import uuid

        topic = Topic(name, partitions, uuid.UUID(topic_id), internal=True)
        topic.config = self._internal_config(overrides, segment)
        return topic

    def _internal_config(self, overrides: dict[str, str], segment: int) -> TopicConfig:
        # The overrides are what DescribeConfigs reports as the topic's own; its logs roll at
        # the configured size. Set, not parsed: offsets.topic.segment.bytes may lie below the
        # 1 MiB a topic's segment.bytes may be given (tests make it small to roll segments).
        config = TopicConfig(overrides, self.defaults)
        config.overrides["segment.bytes"] = str(segment)
        config.segment_bytes = segment
        return config

    def _no_overrides(self) -> TopicConfig:
        # One for every topic without overrides read back at start: a TopicConfig is never
        # changed once made (a change makes a new one), and each costs fifteen parses.
        if self._plain_config is None:
            self._plain_config = TopicConfig({}, self.defaults)
        return self._plain_config

    def _add(self, topic: Topic) -> Topic:
        self._by_name[topic.name] = topic
        self._by_id[topic.topic_id] = topic
        self.generation += 1
        return topic

    def cached_answers(self) -> dict[Any, Any]:
        """Encoded answers that depend only on the topics' names, ids and partition counts;
        emptied whenever one of those changed."""
        if self._answers_generation != self.generation:
            self.answers.clear()
            self._answers_generation = self.generation
        return self.answers

    def get(self, name: str) -> Topic | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def colliding(self, name: str) -> str | None:
        """An existing topic whose name is `name`'s once '.' and '_' are one character, as
        Kafka refuses them (a metric name turns '.' into '_'); the least such name, or None."""
        if "." not in name and "_" not in name:
            return None
        unified = name.replace(".", "_")
        return min(
            (t for t in self._by_name if t != name and t.replace(".", "_") == unified),
            default=None,
        )

    def all(self) -> list[Topic]:
        return list(self._by_name.values())

    @property
    def offsets_topic_exists(self) -> bool:
        return OFFSETS_TOPIC in self._by_name

    def create_offsets_topic(self) -> bool:
        """Make `__consumer_offsets` exist for requests; False if it already did."""
        if self.offsets_topic_exists:
            return False
        self._add(self.offsets)
        return True

    def offsets_records(self) -> list[bytes]:
        """The records that make `__consumer_offsets` durable with its partition count, as
        Kafka's controller records the topic: a restart keeps the count it was made with,
        whatever offsets.topic.num.partitions says by then (a group's partition depends on it)."""
        return self._internal_records(self.offsets)

    @property
    def transaction_state_exists(self) -> bool:
        return TRANSACTION_STATE_TOPIC in self._by_name

    def create_transaction_state_topic(self) -> bool:
        """Make `__transaction_state` exist for requests; False if it already did."""
        if self.transaction_state_exists:
            return False
        self._add(self.transaction_state)
        return True

    @property
    def share_state_exists(self) -> bool:
        return SHARE_STATE_TOPIC in self._by_name

    def create_share_state_topic(self) -> bool:
        """Make `__share_group_state` exist; False if it already did."""
        if self.share_state_exists:
            return False
        self._add(self.share_state)
        return True

    def share_state_records(self) -> list[bytes]:
        return self._internal_records(self.share_state)

    def transaction_state_records(self) -> list[bytes]:
        """As `offsets_records`, for `__transaction_state` (a transactional id's partition
        depends on its count)."""
        return self._internal_records(self.transaction_state)

    def _internal_records(self, topic: Topic) -> list[bytes]:
        # Without its configs: those follow the broker's configs at each start, as Kafka's
        # do (its creation overrides cannot be altered here).
        records = [mr.encode(mr.TopicRecord(name=topic.name, topic_id=topic.topic_id))]
        records += [
            _partition_record(topic.topic_id, i, self.config) for i in range(topic.partitions)
        ]
        return records

    def user_topics(self) -> list[Topic]:
        return [t for t in self._by_name.values() if not t.internal]

    def config_of(self, topic: Topic) -> TopicConfig:
        assert topic.config is not None
        return topic.config

    # -- changes (each returns the metadata records that make it durable) -------------------

    def check_new(
        self, name: str, partitions: int, configs: Mapping[str, str | None] | None = None
    ) -> tuple[ErrorCode, str | None]:
        reason = topic_name_error(name)
        if reason is not None:
            return ErrorCode.INVALID_TOPIC_EXCEPTION, reason
        if name in self._by_name or name in RESERVED_TOPICS:
            return ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists."
        existing = self.colliding(name)
        if existing is not None:
            return (
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"Topic '{name}' collides with existing topic: {existing}",
            )
        # The configs before the partition count, as Kafka's controller checks them.
        try:
            validate(configs or {})
        except InvalidConfig as exc:
            return ErrorCode.INVALID_CONFIG, str(exc)
        if partitions < 1:
            return ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."
        return ErrorCode.NONE, None

    def create(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str] | None = None,
    ) -> tuple[Topic, list[bytes]]:
        error, reason = self.check_new(name, partitions, configs)
        if error is not ErrorCode.NONE:
            raise ValueError(reason)
        topic = Topic(name, partitions)
        topic.config = TopicConfig(dict(configs or {}), self.defaults)
        self._add(topic)
        records = [mr.encode(mr.TopicRecord(name=name, topic_id=topic.topic_id))]
        records += [_config_record(name, k, v) for k, v in (configs or {}).items()]
        records += [_partition_record(topic.topic_id, i, self.config) for i in range(partitions)]
        return topic, records

    def delete(self, topic: Topic) -> list[bytes]:
        del self._by_name[topic.name]
        del self._by_id[topic.topic_id]
        self.generation += 1
        return [mr.encode(mr.RemoveTopicRecord(topic_id=topic.topic_id))]

    def add_partitions(self, topic: Topic, count: int) -> list[bytes]:
        old, topic.partitions = topic.partitions, count
        self.generation += 1
        return [_partition_record(topic.topic_id, i, self.config) for i in range(old, count)]

    def alter_configs(self, topic: Topic, overrides: Mapping[str, str]) -> list[bytes]:
        """Replace the topic's overrides (already validated) by `overrides`."""
        current = self.config_of(topic).overrides
        records = [_config_record(topic.name, k, None) for k in current if k not in overrides]
        records += [
            _config_record(topic.name, k, v) for k, v in overrides.items() if current.get(k) != v
        ]
        topic.config = TopicConfig(dict(overrides), self.defaults)
        return records

    def alter_broker_configs(self, resource: str, overrides: Mapping[str, str]) -> list[bytes]:
        """Replace the broker configs set at runtime for `resource` (this broker's id, or ""
        for every broker; already checked) by `overrides`: every topic's defaults follow."""
        current = self.dynamic.get(resource, {})
        records = [_broker_record(resource, k, None) for k in current if k not in overrides]
        records += [
            _broker_record(resource, k, v) for k, v in overrides.items() if current.get(k) != v
        ]
        self._set_dynamic(resource, dict(overrides))
        return records

    def _set_dynamic(self, resource: str, overrides: dict[str, str]) -> None:
        if overrides:
            self.dynamic[resource] = overrides
        else:
            self.dynamic.pop(resource, None)
        self.defaults = broker_defaults(self.config, self.dynamic)
        self._plain_config = None
        # The internal topics once made, in the maps yet or not.
        made = (self.__dict__.get(name) for name in ("offsets", "transaction_state", "share_state"))
        internal = [t for t in made if t is not None and t.name not in self._by_name]
        for topic in [*self._by_name.values(), *internal]:
            own = dict(self.config_of(topic).overrides)
            if topic.internal:
                segment = int(own.pop("segment.bytes"))
                topic.config = self._internal_config(own, segment)
            else:
                topic.config = TopicConfig(own, self.defaults) if own else self._no_overrides()

    def snapshot(self) -> list[bytes]:
        """Records that make the topics as they are now, replayed on an empty registry or on
        this one (each topic's TopicRecord starts it afresh, so they may follow the records
        they summarise)."""
        records = []
        for topic in self.user_topics():
            records.append(mr.encode(mr.TopicRecord(name=topic.name, topic_id=topic.topic_id)))
            overrides = self.config_of(topic).overrides
            records += [_config_record(topic.name, k, v) for k, v in overrides.items()]
            records += [
                _partition_record(topic.topic_id, i, self.config) for i in range(topic.partitions)
            ]
        if self.offsets_topic_exists:
            records += self.offsets_records()
        if self.transaction_state_exists:
            records += self.transaction_state_records()
        if self.share_state_exists:
            records += self.share_state_records()
        records += [
            _broker_record(resource, k, v)
            for resource, own in self.dynamic.items()
            for k, v in own.items()
        ]
        return records

    # -- replay ---------------------------------------------------------------------------

    def replay(self, record: Any) -> None:
        """Apply one metadata record read back from the log at start."""
        self.generation += 1
        if isinstance(record, mr.TopicRecord):
            internal = {
                OFFSETS_TOPIC: "offsets",
                TRANSACTION_STATE_TOPIC: "transaction_state",
                SHARE_STATE_TOPIC: "share_state",
            }.get(record.name)
            if internal is not None:
                # Its count is what its PartitionRecords say, not the broker's config.
                topic = getattr(self, internal)
                topic.partitions = 0
            else:
                topic = Topic(record.name, 0, record.topic_id)
                topic.config = self._no_overrides()
            self._add(topic)
        elif isinstance(record, mr.PartitionRecord):
            topic = self._by_id.get(record.topic_id)
            if topic is not None:
                topic.partitions = max(topic.partitions, record.partition_id + 1)
        elif isinstance(record, mr.ConfigRecord) and record.resource_type == mr.RESOURCE_BROKER:
            own = dict(self.dynamic.get(record.resource_name, {}))
            if record.value is None:
                own.pop(record.name, None)
            else:
                own[record.name] = record.value
            self._set_dynamic(record.resource_name, own)
        elif isinstance(record, mr.ConfigRecord):
            topic = self._by_name.get(record.resource_name)
            if record.resource_type == mr.RESOURCE_TOPIC and topic is not None:
                overrides = dict(self.config_of(topic).overrides)
                if record.value is None:
                    overrides.pop(record.name, None)
                else:
                    overrides[record.name] = record.value
                topic.config = TopicConfig(overrides, self.defaults)
        elif isinstance(record, mr.RemoveTopicRecord):
            topic = self._by_id.pop(record.topic_id, None)
            if topic is not None:
                self._by_name.pop(topic.name, None)


def _config_record(topic: str, name: str, value: str | None) -> bytes:
    return mr.encode(
        mr.ConfigRecord(
            resource_type=mr.RESOURCE_TOPIC, resource_name=topic, name=name, value=value
        )
    )


def _broker_record(resource: str, name: str, value: str | None) -> bytes:
    return mr.encode(
        mr.ConfigRecord(
            resource_type=mr.RESOURCE_BROKER, resource_name=resource, name=name, value=value
        )
    )


def _partition_record(topic_id: uuid.UUID, index: int, config: Config) -> bytes:
    node = config.broker_id
    return mr.encode(
        mr.PartitionRecord(
            partition_id=index,
            topic_id=topic_id,
            replicas=[node],
            isr=[node],
            removing_replicas=[],
            adding_replicas=[],
            leader=node,
            leader_epoch=LEADER_EPOCH,
            partition_epoch=0,
        )
    )
