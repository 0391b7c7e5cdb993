"""The data plane on in-memory logs and a manual clock: offsets, reads, long polls, ListOffsets,
OffsetForLeaderEpoch, DeleteRecords, retention and compaction of a topic."""

from __future__ import annotations

import pytest
from datakit import NOW, Plane, batch, records
from kafka.record.default_records import DefaultRecordBatch
from minicoord.protocol.errors import ErrorCode
from minicoord.server.data.fetching import FetchPartition, WaitedLog, read_partitions
from minicoord.server.topic_config_defs import ConfigSource
from minicoord.storage.batch import iter_batches
from minicoord.storage.cleaner import clean

UNKNOWN = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def offsets_of(data: bytes) -> list[int]:
    return [r.offset for b in iter_batches(data) for r in DefaultRecordBatch(bytes(b))]


def test_offsets_are_assigned_by_record_count_per_partition() -> None:
    plane = Plane()
    topic = plane.topic("t", partitions=2)
    bases = [plane.produce(topic, batch(records(n))).base_offset for n in (3, 1, 4)]
    assert bases == [0, 3, 4]
    assert plane.produce(topic, batch(records(2)), index=1).base_offset == 0
    state = plane.data.partitions[("t", 0)]
    assert (state.log.next_offset, state.log.high_watermark) == (8, 8)
    assert offsets_of(state.log.read(0, 1 << 20)) == list(range(8))


def test_an_accepted_batch_is_invisible_until_the_turn_commits_it() -> None:
    plane = Plane()
    topic = plane.topic("t")
    outcome = plane.data.append(topic, 0, batch(records(2)), plane.now, 9, "test")
    log = plane.data.partitions[("t", 0)].log
    assert (outcome.base_offset, log.next_offset, log.high_watermark) == (0, 2, 0)
    assert log.read(0, 1 << 20) == b""
    plane.end_turn()
    assert offsets_of(log.read(0, 1 << 20)) == [0, 1]


def fetch(plane: Plane, wanted: list[FetchPartition], max_bytes: int = 1 << 20):  # type: ignore[no-untyped-def]
    return read_partitions(plane.data, wanted, max_bytes, UNKNOWN)


def test_a_fetch_starts_at_the_batch_holding_the_offset() -> None:
    plane = Plane()
    topic = plane.topic("t")
    plane.produce(topic, batch(records(5)))
    plane.produce(topic, batch(records(5)))
    data, total, errored = fetch(plane, [FetchPartition(topic, 0, 7, 1 << 20)])
    assert not errored and total == len(data[0].records)
    assert offsets_of(data[0].records) == list(range(5, 10))  # the client skips 5 and 6
    assert (data[0].high_watermark, data[0].log_start_offset) == (10, 0)


def test_at_the_high_watermark_nothing_and_beyond_it_out_of_range() -> None:
    plane = Plane()
    topic = plane.topic("t")
    plane.produce(topic, batch(records(3)))
    data, _, errored = fetch(plane, [FetchPartition(topic, 0, 3, 1024)])
    assert (data[0].error, data[0].records, errored) == (ErrorCode.NONE, b"", False)
    data, _, errored = fetch(plane, [FetchPartition(topic, 0, 4, 1024)])
    assert data[0].error is ErrorCode.OFFSET_OUT_OF_RANGE and errored


def test_the_first_batch_is_returned_whole_past_the_limits_then_nothing_that_does_not_fit() -> None:
    plane = Plane()
    topic = plane.topic("t", partitions=2)
    big = batch([(b"k", b"x" * 5000)])
    plane.produce(topic, big, index=0)
    plane.produce(topic, big, index=1)
    wanted = [FetchPartition(topic, 0, 0, 100), FetchPartition(topic, 1, 0, 100)]
    data, total, _ = fetch(plane, wanted, max_bytes=100)
    assert len(data[0].records) == len(big) == total  # KIP-74: progress is always possible
    assert data[1].records == b""  # a later partition gets nothing that does not fit


def test_partition_and_request_limits_cut_at_whole_batches() -> None:
    plane = Plane()
    topic = plane.topic("t")
    one = batch(records(1))
    for _ in range(10):
        plane.produce(topic, one)
    data, total, _ = fetch(plane, [FetchPartition(topic, 0, 0, 3 * len(one) + 5)])
    assert offsets_of(data[0].records) == [0, 1, 2] and total == 3 * len(one)


def test_unknown_topics_and_fenced_epochs_are_per_partition_errors() -> None:
    plane = Plane()
    topic = plane.topic("t")
    wanted = [
        FetchPartition(None, 0, 0, 10),
        FetchPartition(topic, 5, 0, 10),
        FetchPartition(topic, 0, 0, 10, current_leader_epoch=1),
    ]
    data, _, errored = fetch(plane, wanted)
    assert [d.error for d in data] == [
        UNKNOWN,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
    ]
    assert errored


def test_a_waiting_fetch_wakes_when_enough_bytes_commit() -> None:
    plane = Plane()
    topic = plane.topic("t", partitions=2)
    log0 = plane.data.partitions[("t", 0)].log
    log1 = plane.data.partitions[("t", 1)].log
    small = batch(records(1))
    ticket = object()
    plane.data.fetch_waits.park(
        ticket,
        {log0: WaitedLog(log0, 0, 1 << 20, 0), log1: WaitedLog(log1, 0, 1 << 20, 0)},
        len(small) * 2,
        plane.now + 500,
    )
    assert plane.produce(topic, small).error is ErrorCode.NONE
    assert plane.advance(0) == []  # one batch: not min_bytes yet
    plane.data.append(topic, 1, small, plane.now, 9, "test")
    assert plane.end_turn() == [(ticket, None)]  # woken by the commit, not by a timer
    assert len(plane.data.fetch_waits) == 0
    assert plane.advance(1000) == []  # its timer went with it


def test_a_waiting_fetch_is_answered_at_its_deadline() -> None:
    plane = Plane()
    topic = plane.topic("t")
    log = plane.data.partitions[("t", 0)].log
    ticket = object()
    plane.data.fetch_waits.park(ticket, {log: WaitedLog(log, 0, 1 << 20, 0)}, 1, plane.now + 500)
    assert plane.advance(499) == []
    assert plane.advance(1) == [(ticket, None)]
    # Data after the deadline wakes nothing: the fetch is gone.
    plane.data.append(topic, 0, batch(), plane.now, 9, "test")
    assert plane.end_turn() == []


def test_deleting_a_topic_answers_the_fetches_waiting_on_it() -> None:
    plane = Plane()
    topic = plane.topic("t")
    log = plane.data.partitions[("t", 0)].log
    ticket = object()
    plane.data.fetch_waits.park(ticket, {log: WaitedLog(log, 0, 1 << 20, 0)}, 1, plane.now + 10_000)
    assert plane.data.drop_topic(topic).replies == [(ticket, None)]


def test_list_offsets_answers_as_kafka_without_tiered_storage() -> None:
    plane = Plane()
    topic = plane.topic("t")
    for i, ts in enumerate([NOW - 300, NOW - 100, NOW - 200]):
        plane.produce(topic, batch(records(2, f"b{i}"), timestamp=ts))

    def lookup(ts: int, version: int = 9) -> tuple[int, int, int, int]:
        a = plane.data.list_offset(topic, 0, ts, -1, version)
        return int(a.error), a.timestamp, a.offset, a.leader_epoch

    assert lookup(-1) == (0, -1, 6, 0)  # latest: the high watermark
    assert lookup(-2) == (0, -1, 0, 0)  # earliest
    assert lookup(-4) == (0, -1, 0, 0)  # earliest local: the same, no tiering
    assert lookup(-3) == (0, NOW - 100, 2, 0)  # max timestamp: its first record
    assert lookup(NOW - 250) == (0, NOW - 100, 2, 0)  # first record at or after
    assert lookup(NOW - 300) == (0, NOW - 300, 0, 0)
    assert lookup(NOW) == (0, -1, -1, -1)  # nothing that late
    assert lookup(-5) == (0, -1, -1, -1)  # latest tiered
    assert lookup(-6, version=11) == (0, -1, -1, -1)
    assert lookup(-6, version=10)[0] == ErrorCode.UNSUPPORTED_VERSION
    assert lookup(-3, version=6)[0] == ErrorCode.UNSUPPORTED_VERSION
    assert lookup(-7)[0] == ErrorCode.UNSUPPORTED_VERSION
    # After DeleteRecords past it, the max-timestamp record is still the answer while its
    # segment stays, as Kafka answers from the segments' cached maximum (UnifiedLog).
    assert plane.data.delete_records(topic, 0, 4)[:2] == (ErrorCode.NONE, 4)
    assert lookup(-3) == (0, NOW - 100, 2, 0)
    assert lookup(-2) == (0, -1, 4, 0)
    # Even up to the high watermark: the active segment stays (UnifiedLog deletes a segment
    # only once the next one starts at or below the log start), and the answer with it.
    assert plane.data.delete_records(topic, 0, -1)[:2] == (ErrorCode.NONE, 6)
    assert lookup(-3) == (0, NOW - 100, 2, 0)
    assert lookup(-2) == (0, -1, 6, 0)


def test_offset_for_leader_epoch_on_a_one_epoch_log() -> None:
    plane = Plane()
    topic = plane.topic("t")
    plane.produce(topic, batch(records(4)))
    answer = plane.data.end_offset_for_epoch(topic, 0, 0, -1)
    assert (answer.error, answer.leader_epoch, answer.offset) == (ErrorCode.NONE, 0, 4)
    later = plane.data.end_offset_for_epoch(topic, 0, 3, -1)
    assert (later.leader_epoch, later.offset) == (-1, -1)
    assert plane.data.end_offset_for_epoch(topic, 0, 0, 1).error is ErrorCode.UNKNOWN_LEADER_EPOCH


def test_delete_records_moves_the_log_start() -> None:
    plane = Plane()
    topic = plane.topic("t")
    plane.produce(topic, batch(records(5)))
    plane.produce(topic, batch(records(5)))
    assert plane.data.delete_records(topic, 0, 11)[0] is ErrorCode.OFFSET_OUT_OF_RANGE
    error, low, _ = plane.data.delete_records(topic, 0, 7)
    assert (error, low) == (ErrorCode.NONE, 7)
    data, _, _ = fetch(plane, [FetchPartition(topic, 0, 6, 1 << 20)])
    assert data[0].error is ErrorCode.OFFSET_OUT_OF_RANGE
    data, _, _ = fetch(plane, [FetchPartition(topic, 0, 7, 1 << 20)])
    assert data[0].log_start_offset == 7 and offsets_of(data[0].records)[-1] == 9
    assert plane.data.list_offset(topic, 0, -2, -1, 9).offset == 7
    assert plane.data.delete_records(topic, 0, -1)[1] == 10  # -1: the high watermark
    compacted = plane.topic("c", configs={"cleanup.policy": "compact"})
    assert plane.data.delete_records(compacted, 0, 0)[0] is ErrorCode.POLICY_VIOLATION


def test_retention_by_time_and_size_deletes_whole_segments_oldest_first() -> None:
    plane = Plane()
    day = 86_400_000
    topic = plane.topic("t", configs={"segment.bytes": str(1 << 20), "retention.ms": str(day)})
    value = b"x" * 200_000
    for i in range(12):  # about two segments of five 200 kB batches each, and a bit
        plane.produce(topic, batch([(b"k", value)], timestamp=NOW + i))
    log = plane.data.partitions[("t", 0)].log
    assert len(log.segments) == 3
    assert plane.data.apply_retention(NOW + day) == 0  # nothing is older than a day yet
    assert plane.data.apply_retention(NOW + day + 6) == 1  # the first segment (0-4) expired
    assert log.log_start_offset == 5
    assert plane.data.list_offset(topic, 0, -2, -1, 9).offset == 5
    # By size: whole oldest segments go while the rest still holds retention.bytes.
    sized = plane.topic("s", configs={"segment.bytes": str(1 << 20), "retention.bytes": "1100000"})
    for i in range(12):
        plane.produce(sized, batch([(b"k", value)], timestamp=NOW + i))
    assert plane.data.apply_retention(NOW) == 1  # 2.4 MB - 1 MB >= 1.1 MB; minus 2 MB is not
    assert plane.data.partitions[("s", 0)].log.log_start_offset == 5


def test_retention_deletes_the_segments_of_a_cleaned_compact_delete_topic() -> None:
    # The cleaner groups segments by segment.bytes (Kafka's groupSegmentsBySize), one output
    # each: retention can still delete old cleaned segments one by one, by size and by age.
    value = b"x" * 200_000
    mib = str(1 << 20)
    for configs, at in [
        ({"retention.bytes": "1100000"}, NOW),
        ({"retention.ms": "86400000"}, NOW + 86_400_000 + 5),
    ]:
        plane = Plane()
        topic = plane.topic(
            "t", configs={"cleanup.policy": "compact,delete", "segment.bytes": mib, **configs}
        )
        for i in range(12):  # distinct keys: nothing is superseded
            plane.produce(topic, batch([(b"k%d" % i, value)], timestamp=NOW + i))
        log = plane.data.partitions[("t", 0)].log
        assert [s.base_offset for s in log.segments] == [0, 5, 10]
        result = clean(log, NOW + 20, delete_retention_ms=0)
        assert result is not None and result.records_after == 10
        assert [s.base_offset for s in log.segments] == [0, 5, 10]
        assert plane.data.apply_retention(at) == 1, configs  # the first cleaned segment
        assert log.log_start_offset == 5


def test_retention_waits_while_a_cleaning_is_in_flight() -> None:
    plane = Plane()
    topic = plane.topic("t", configs={"cleanup.policy": "compact,delete", "retention.ms": "1000"})
    plane.produce(topic, batch(records(3)))
    log = plane.data.partitions[("t", 0)].log
    log.cleaning = True  # the cleaner holds the segment list it is rewriting
    assert plane.data.apply_retention(NOW + 2000) == 0
    assert plane.data.delete_records(topic, 0, 2)[:2] == (ErrorCode.NONE, 2)  # start moves
    log.cleaning = False
    assert plane.data.apply_retention(NOW + 2000) == 1


def test_retention_empties_a_quiet_topic_whose_every_record_expired() -> None:
    plane = Plane()
    topic = plane.topic("t", configs={"retention.ms": "1000"})
    plane.produce(topic, batch(records(3)))
    assert plane.data.apply_retention(NOW + 2000) == 1
    log = plane.data.partitions[("t", 0)].log
    assert (log.log_start_offset, log.next_offset, log.read(0, 1 << 20)) == (3, 3, b"")
    assert plane.produce(topic, batch(records(1))).base_offset == 3


def test_compaction_of_a_topic_keeps_the_latest_per_key_with_headers_and_codecs() -> None:
    plane = Plane()
    topic = plane.topic("t", configs={"cleanup.policy": "compact"})
    headers = [("trace", b"abc")]
    for round_ in range(3):
        for codec in (0, 1, 3):
            plane.produce(
                topic,
                batch(
                    [(f"key{i}".encode(), f"{round_}-{i}-".encode() * 50) for i in range(4)],
                    compression=codec,
                    headers=headers,
                    producer_id=77,
                    epoch=0,
                    sequence=(round_ * 3 + [0, 1, 3].index(codec)) * 4,
                ),
            )
    log = plane.data.partitions[("t", 0)].log
    log.roll()
    result = clean(log, NOW, 86_400_000)
    assert result is not None and result.records_before == 36 and result.records_after == 4
    kept = [r for b in log.batches() for r in DefaultRecordBatch(bytes(b))]
    assert {(bytes(r.key), bytes(r.value)) for r in kept} == {
        (f"key{i}".encode(), f"2-{i}-".encode() * 50) for i in range(4)
    }
    assert all(r.headers == headers for r in kept)
    (survivor,) = [DefaultRecordBatch(bytes(b)) for b in log.batches()]
    assert survivor.validate_crc()
    # The batch keeps its identity: producer, sequence range and codec.
    assert (survivor.producer_id, survivor.base_sequence, survivor.compression_type) == (77, 32, 3)
    assert survivor.last_offset_delta == 3


def test_a_partly_superseded_batch_is_rebuilt_with_its_identity() -> None:
    plane = Plane()
    topic = plane.topic("t", configs={"cleanup.policy": "compact"})
    value = b"v" * 300  # compressible: the codec stays
    plane.produce(
        topic,
        batch([(b"a", value), (b"b", value), (b"c", value)], compression=3, producer_id=78,
              epoch=2, sequence=0),
    )  # fmt: skip
    plane.produce(topic, batch([(b"a", b"new")], producer_id=78, epoch=2, sequence=3))
    log = plane.data.partitions[("t", 0)].log
    log.roll()
    assert clean(log, NOW, 86_400_000) is not None
    first = DefaultRecordBatch(bytes(next(log.batches())))
    assert first.validate_crc()
    assert [(r.offset, bytes(r.key)) for r in first] == [(1, b"b"), (2, b"c")]
    assert (first.base_offset, first.last_offset_delta, first.base_sequence) == (0, 2, 0)
    assert (first.producer_id, first.producer_epoch, first.compression_type) == (78, 2, 3)
    # The rewritten log still reads from the start, and a restart would rebuild the producer.
    data, _, _ = fetch(plane, [FetchPartition(topic, 0, 0, 1 << 20)])
    assert offsets_of(data[0].records) == [1, 2, 3]


def test_broker_synonyms_set_every_topics_defaults() -> None:
    # As Kafka's ServerTopicConfigSynonyms: log.roll.ms, log.cleaner.min/max.compaction.lag.ms
    # and compression.type at the broker are the defaults of segment.ms, min/max.compaction.lag.ms
    # and compression.type, and DescribeConfigs names them as the source.
    from minicoord.server.config import Config
    from minicoord.server.topic_config_defs import ConfigSource

    settings = {
        "log.roll.ms": "100",
        "log.cleaner.min.compaction.lag.ms": "5",
        "log.cleaner.max.compaction.lag.ms": "50",
        "compression.type": "gzip",
        "log.cleanup.policy": "compact",
    }
    plane = Plane(Config.from_pairs(settings))
    topic = plane.topic("t")
    cfg = plane.topics.config_of(topic)
    assert (cfg.segment_ms, cfg.min_compaction_lag_ms, cfg.max_compaction_lag_ms) == (100, 5, 50)
    assert cfg.compression == 1 and cfg.roll_ms == 50  # compacted: max lag rolls it sooner
    assert plane.data.partitions[("t", 0)].log.segment_ms == 50
    described = {e.name: e for e in cfg.describe()}
    for name, synonym in [
        ("segment.ms", "log.roll.ms"),
        ("min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms"),
        ("max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms"),
        ("compression.type", "compression.type"),
    ]:
        entry = described[name]
        assert entry.source is ConfigSource.STATIC_BROKER_CONFIG, name
        assert (synonym, settings[synonym], ConfigSource.STATIC_BROKER_CONFIG) in entry.synonyms


def test_default_synonyms_are_the_ones_kafka_lists() -> None:
    # ConfigHelper.configSynonyms lists the broker synonym's own value and default, and a
    # broker config whose default is null (log.retention.ms, log.roll.ms: the hours configs
    # hold the default) only when it is set.
    from minicoord.server.config import Config
    from minicoord.server.topic_config_defs import ConfigSource

    default = ConfigSource.DEFAULT_CONFIG
    plane = Plane(Config.from_pairs({"log.roll.ms": "100"}))
    described = {e.name: e for e in plane.topics.config_of(plane.topic("t")).describe()}
    assert described["retention.ms"].synonyms == ()
    assert described["flush.ms"].synonyms == ()
    assert described["segment.jitter.ms"].synonyms == ()
    # Every synonym set at start, then every default: log.roll.hours' 168 after log.roll.ms.
    assert described["segment.ms"].synonyms == (
        ("log.roll.ms", "100", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.roll.hours", "168", default),
    )
    for name, synonym, value in [
        ("min.insync.replicas", "min.insync.replicas", "1"),
        ("file.delete.delay.ms", "log.segment.delete.delay.ms", "60000"),
        ("segment.index.bytes", "log.index.size.max.bytes", "10485760"),
        ("preallocate", "log.preallocate", "false"),
        ("compression.zstd.level", "compression.zstd.level", "3"),
        ("retention.bytes", "log.retention.bytes", "-1"),
    ]:
        entry = described[name]
        assert (entry.source, entry.synonyms) == (default, ((synonym, value, default),)), name


STATIC, DEFAULT = ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.DEFAULT_CONFIG


@pytest.mark.parametrize(
    ("settings", "retention_ms", "synonyms"),
    [
        # Kafka's defaults: log.retention.hours=168, and nothing listed (log.retention.ms,
        # the first synonym, has no value: ConfigHelper drops everything before it).
        ({}, 604_800_000, ()),
        ({"log.retention.hours": "1"}, 3_600_000, ()),
        ({"log.retention.hours": "1", "log.retention.minutes": "5"}, 300_000, ()),
        ({"log.retention.hours": "-1"}, -1, ()),
        (
            {"log.retention.minutes": "5", "log.retention.ms": "7"},
            7,
            (
                ("log.retention.ms", "7", STATIC),
                ("log.retention.minutes", "5", STATIC),
                ("log.retention.hours", "168", DEFAULT),
            ),
        ),
    ],
)
def test_retention_time_is_read_as_kafka_reads_it(
    settings: dict[str, str], retention_ms: int, synonyms: tuple[object, ...]
) -> None:
    # KafkaConfig.logRetentionTimeMillis: ms if set, else minutes, else hours; any negative
    # time is -1. Every topic's retention.ms follows, and DescribeConfigs reports it as Kafka.
    from minicoord.server.config import Config

    plane = Plane(Config.from_pairs(settings))
    cfg = plane.topics.config_of(plane.topic("t"))
    assert cfg.retention_ms == retention_ms
    entry = {e.name: e for e in cfg.describe()}["retention.ms"]
    assert (entry.value, entry.synonyms) == (str(retention_ms), synonyms)
    assert entry.source is (synonyms[0][2] if synonyms else DEFAULT)


def test_roll_time_in_hours_is_every_topics_segment_ms() -> None:
    from minicoord.server.config import Config

    plane = Plane(Config.from_pairs({"log.roll.hours": "2"}))
    topic = plane.topic("t")
    assert plane.topics.config_of(topic).segment_ms == 7_200_000
    assert plane.data.partitions[("t", 0)].log.segment_ms == 7_200_000


def test_broker_min_insync_replicas_is_every_topics_default() -> None:
    # Above 1 on one broker, an acks=all produce is refused (NOT_ENOUGH_REPLICAS, produce.py).
    from minicoord.server.config import Config

    plane = Plane(Config.from_pairs({"min.insync.replicas": "2"}))
    cfg = plane.topics.config_of(plane.topic("t"))
    assert cfg.min_insync_replicas == 2
    entry = {e.name: e for e in cfg.describe()}["min.insync.replicas"]
    assert (entry.value, entry.source) == ("2", STATIC)
    assert entry.synonyms == (
        ("min.insync.replicas", "2", STATIC),
        ("min.insync.replicas", "1", DEFAULT),
    )
