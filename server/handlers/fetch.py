"""Fetch (key 1), versions 4-18.

Reads whole batches from each partition's log (see data/fetching.py for the limits and
KIP-74's first-batch rule), bounded by the high watermark; with less than `min_bytes` to give
and no error, the reply is parked until the partitions hold enough for it or `max_wait_ms`
passes (not when a fetch offset is in an older segment than the high watermark's). v5 adds
the log start offset; v7 fetch sessions, which are declined (session id 0: clients keep
sending full fetches, as Kafka allows), and an incremental request is answered
FETCH_SESSION_ID_NOT_FOUND; v9 leader epochs (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH);
v11 rack ids (no preferred replica: -1); v12 is flexible; v13 names topics by id; v15+ the
replica state (followers: none here).
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol import fast_fetch
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.fast_fetch import FetchedPartition
from minicoord.server.data.fetching import (
    FetchPartition,
    PartitionData,
    WaitedLog,
    read_partitions,
)
from minicoord.server.handlers.base import EncodedResponse, Handler, RequestContext
from minicoord.server.security import authorize
from minicoord.server.topic_configs import CODECS

API_KEY = 1
TOPIC = authorize.TOPIC
_DENIED = PartitionData(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
ZSTD = CODECS["zstd"]
# Kafka's fetch.max.bytes: the most a broker answers one fetch with, whatever is asked.
FETCH_MAX_BYTES = 57_671_680
# A client asking for a longer wait is still answered within this bound, so a stuck
# consumer never pins a parked reply for minutes.
MAX_WAIT_CAP_MS = 30_000
READ_COMMITTED = 1
# Kafka's FetchMetadata.isFull: the initial epoch (open a session; here none is) and the final
# one (no session).
FULL_FETCH_EPOCHS = (0, -1)


def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.version
    broker = ctx.broker
    registry = broker.topics
    by_id = version >= 13
    if version >= 7 and request.session_epoch not in FULL_FETCH_EPOCHS:
        # An incremental fetch names a session, and none was ever created here: the client
        # starts over with a full fetch. (A full fetch naming a session closes it in Kafka,
        # whatever the id: here there is nothing to close.)
        error = ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        return EncodedResponse(fast_fetch.encode_response(version, error, 0, []), error)
    replica_id = request.replica_id if version <= 14 else _state_replica(request)
    topics: list[tuple[Any, list[FetchPartition]]] = []
    wanted: list[FetchPartition] = []
    # With ACLs (as Kafka): Read on each topic; the others' partitions are refused.
    checked = broker.authorizer is not None and replica_id < 0
    refused_parts: set[int] | None = None
    for t, asked in _deduplicated(request.topics, by_id):
        topic = registry.by_id(t.topic_id) if by_id else registry.get(t.topic)
        parts = [
            FetchPartition(
                topic,
                p.partition,
                p.fetch_offset,
                max(p.partition_max_bytes, 0),
                p.current_leader_epoch if version >= 9 else -1,
            )
            for p in asked
        ]
        topics.append((t, parts))
        if checked:
            name = topic.name if topic is not None else (None if by_id else t.topic)
            if name is not None and not authorize.allowed(ctx, authorize.READ, TOPIC, name):
                refused_parts = refused_parts or set()
                refused_parts.update(id(p) for p in parts)
                continue
        wanted.extend(parts)
    unknown = ErrorCode.UNKNOWN_TOPIC_ID if by_id else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    max_bytes = min(max(request.max_bytes, 0), FETCH_MAX_BYTES)
    committed = request.isolation_level == READ_COMMITTED

    def respond(data: list[PartitionData]) -> Any:
        if refused_parts:
            data = _with_refusals(topics, data, refused_parts)
        if version < 10:
            data = _without_zstd(registry, topics, data)
        answers = iter(data)
        body = fast_fetch.encode_response(
            version,
            ErrorCode.NONE,
            0,
            [
                (t.topic, t.topic_id, [_partition(p, next(answers), committed) for p in parts])
                for t, parts in topics
            ],
        )
        # The partitions' errors ride along only for the errors metric, when it is on.
        errors = tuple(d.error for d in data if d.error) if broker.metrics is not None else ()
        return EncodedResponse(body, ErrorCode.NONE, errors)

    def build(_: Any) -> Any:
        return respond(read_partitions(broker.data, wanted, max_bytes, unknown, committed)[0])

    if replica_id >= 0:
        # A follower's fetch: this single node has no followers.
        return respond([PartitionData(ErrorCode.NOT_LEADER_OR_FOLLOWER) for _ in wanted])
    data, total, errored = read_partitions(broker.data, wanted, max_bytes, unknown, committed)
    wait_ms = min(max(request.max_wait_ms, 0), MAX_WAIT_CAP_MS)
    if errored or wait_ms == 0 or total >= request.min_bytes or not wanted or refused_parts:
        return respond(data)
    logs = {}
    for p, d in zip(wanted, data, strict=True):
        state = broker.data.partition(p.topic, p.index) if p.topic is not None else None
        if state is not None:
            waited = WaitedLog(state.log, p.fetch_offset, max(p.max_bytes, 1), len(d.records))
            if waited.on_older_segment(state.log):
                return respond(data)  # catching up: nothing to wait for
            logs[state.log] = waited
    parked = ctx.park(build)
    broker.data.fetch_waits.park(parked, logs, request.min_bytes, broker.now() + wait_ms)
    broker.rearm()
    return parked


def _without_zstd(
    registry: Any, topics: list[tuple[Any, list[FetchPartition]]], data: list[PartitionData]
) -> list[PartitionData]:
    """Fetch before v10 cannot read zstd: a partition of a topic whose compression.type is
    zstd is answered UNSUPPORTED_COMPRESSION_TYPE, as Kafka's maybeConvertFetchedData does
    (by the topic's config, not by its batches)."""
    zstd = {
        id(p)
        for _, parts in topics
        for p in parts
        if p.topic is not None and registry.config_of(p.topic).compression == ZSTD
    }
    if not zstd:
        return data
    flat = [p for _, parts in topics for p in parts]
    return [
        PartitionData(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE) if id(p) in zstd else d
        for p, d in zip(flat, data, strict=True)
    ]


def _deduplicated(topics: Any, by_id: bool) -> list[tuple[Any, list[Any]]]:
    """Each topic entry with its partitions; a partition named twice is asked once, in its
    first place with its last fetch position, as Kafka's FetchRequest.fetchData (a map by
    partition, in insertion order) reads the request. The usual request pays one count."""
    keys = [t.topic_id if by_id else t.topic for t in topics]
    if len(set(keys)) == len(keys) and all(
        len({p.partition for p in t.partitions}) == len(t.partitions) for t in topics
    ):
        return [(t, t.partitions) for t in topics]
    slots: dict[tuple[Any, int], tuple[list[Any], int]] = {}
    out = []
    for key, t in zip(keys, topics, strict=True):
        kept: list[Any] = []
        for p in t.partitions:
            slot = slots.get((key, p.partition))
            if slot is None:
                slots[key, p.partition] = (kept, len(kept))
                kept.append(p)
            else:
                slot[0][slot[1]] = p
        if kept:
            out.append((t, kept))
    return out


def _with_refusals(
    topics: list[tuple[Any, list[FetchPartition]]],
    data: list[PartitionData],
    refused_parts: set[int],
) -> list[PartitionData]:
    """Every partition's answer in request order: the read ones, and the refused ones."""
    answers = iter(data)
    return [_DENIED if id(p) in refused_parts else next(answers) for _, ps in topics for p in ps]


def _state_replica(request: Any) -> int:
    state = getattr(request, "replica_state", None)
    return state.replica_id if state is not None else -1


def _partition(p: FetchPartition, d: PartitionData, committed: bool) -> FetchedPartition:
    return FetchedPartition(
        p.index,
        d.error,
        d.high_watermark,
        d.last_stable_offset,
        d.log_start_offset,
        # Kafka sends null for read_uncommitted, a list (the aborted transactions among the
        # batches read) for read_committed.
        (d.aborted or ()) if committed and d.error is ErrorCode.NONE else None,
        # Zero-length, not null, for a partition with nothing to return: Kafka sends
        # MemoryRecords.EMPTY, and kafka-python's fetcher fails on None.
        d.records,
    )


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
