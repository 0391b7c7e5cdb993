"""ShareFetch (key 78), versions 1-2: KIP-932's fetch for share groups.

The request runs in its member's share session (server/data/shares.py): epoch 0 opens one
(acknowledgements are refused there), each later request carries the next epoch, -1 closes
it. It adds partitions to the session and forgets others, acknowledges records it was given
(server/data/share_partitions.py), then acquires records for the member over every partition
of the session: up to MaxRecords in all (whole batches, so a little more), at most MaxBytes,
the partitions taking turns at going first (v2's record-limit mode: exactly MaxRecords at
most, ending mid-batch). With nothing to acquire it waits up to MaxWaitMs
(at most 30 s) for new data. Each partition answered carries whole batches and the ranges of
them acquired, with their delivery counts; the first answer of a session lists every
partition asked for, later ones those with records, errors or acknowledgements. Records are
never null (librdkafka drops a response whose records are). v2 adds the acquire mode and
renewing locks.
"""

from __future__ import annotations

from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.share_group_apis import ShareFetchResponse
from minicoord.server.data.fetching import WaitedLog
from minicoord.server.data.share_requests import (
    OK,
    Outcome,
    Tp,
    acknowledgements,
    apply_acknowledgements,
    kept_first,
    locate,
    refusal,
    refused,
)
from minicoord.server.data.shares import FINAL_EPOCH, INITIAL_EPOCH, SessionError
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.handlers.fetch import FETCH_MAX_BYTES, MAX_WAIT_CAP_MS

API_KEY = 78
Topic = ShareFetchResponse.ShareFetchableTopicResponse
Partition = Topic.PartitionData
# ShareFetch v2's ShareAcquireMode (KIP-1206): 0 batch-optimized, 1 record-limit.
RECORD_LIMIT = 1


def _top(ctx: RequestContext, error: ErrorCode, message: str | None = None) -> Any:
    return refusal(ShareFetchResponse, ctx, error, message)


def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    refusal = refused(ctx, request)
    if refusal is not None:
        return _top(ctx, *refusal)
    group, member = request.group_id, request.member_id
    epoch = request.share_session_epoch
    acks = acknowledgements(request.topics)
    if epoch == INITIAL_EPOCH and acks:
        return _top(
            ctx, ErrorCode.INVALID_REQUEST, "Acknowledge data present on initial fetch request"
        )
    renew = ctx.version >= 2 and request.is_renew_ack
    if renew and any(
        (request.max_bytes, request.min_bytes, request.max_records, request.max_wait_ms)
    ):
        return _top(
            ctx,
            ErrorCode.INVALID_REQUEST,
            "Renew acknowledgements need MaxBytes, MinBytes, MaxRecords and MaxWaitMs 0",
        )
    shares = broker.shares
    try:
        session = shares.session(group, member, epoch, ctx.channel)
    except SessionError as exc:
        return _top(ctx, exc.error, exc.message)
    now = broker.now()
    asked: list[Tp] = []
    for t in request.topics:
        for p in t.partitions:
            tp = (t.topic_id, p.partition_index)
            asked.append(tp)
            session.partitions[tp] = None
    for t in request.forgotten_topics_data:
        for index in t.partitions:
            session.partitions.pop((t.topic_id, index), None)
    acked = apply_acknowledgements(broker, ctx, group, member, acks, renew, now)
    lock_ms = shares.lock_ms_of(group)
    if epoch == FINAL_EPOCH:
        shares.close(group, member)
        broker.rearm()
        return kept_first(
            ctx, _response(ctx, lock_ms, {tp: (OK, b"", []) for tp in acks}, acked, [])
        )
    listed = list(dict.fromkeys(asked)) if epoch == INITIAL_EPOCH else []
    fetching = request.max_records > 0 and request.max_bytes > 0 and not renew

    def fetch() -> dict[Tp, tuple[Outcome, bytes, list[Any]]]:
        return _acquire(ctx, session, group, member, request, now_ms=broker.now())

    if not fetching:
        broker.rearm()
        return kept_first(ctx, _response(ctx, lock_ms, {}, acked, listed))
    fetched = fetch()
    wait_ms = min(max(request.max_wait_ms, 0), MAX_WAIT_CAP_MS)
    if any(ranges or outcome[0] for outcome, _, ranges in fetched.values()) or wait_ms == 0:
        broker.rearm()
        return kept_first(ctx, _response(ctx, lock_ms, fetched, acked, listed))
    # Kept before the wait: the answer, whenever it comes, follows what it acknowledged.
    broker.persist_shares()
    # Nothing to give yet: wait for data on the session's partitions, then try again.
    logs = {}
    for topic_id, index in session.partitions:
        _, plog, _ = locate(broker, ctx, topic_id, index)
        sp = shares.partitions.get((group, topic_id, index))
        if plog is not None and sp is not None:
            logs[plog] = WaitedLog(plog, sp.end, 1, 0)

    def build(_: Any) -> Any:
        if shares.sessions.get((group, member)) is not session:
            # Closed (its connection went) or replaced while this waited: acquiring now would
            # lock records for a reader that will never see them.
            return _response(ctx, lock_ms, {}, acked, listed)
        return _response(ctx, lock_ms, fetch(), acked, listed)

    parked = ctx.park(build)
    broker.data.fetch_waits.park(parked, logs, 1, now + wait_ms)
    broker.rearm()
    return parked


def _acquire(
    ctx: RequestContext, session: Any, group: str, member: str, request: Any, now_ms: int
) -> dict[Tp, tuple[Outcome, bytes, list[Any]]]:
    """Records acquired for the member over the session's partitions, each partition's
    (outcome, batches, acquired ranges)."""
    broker = ctx.broker
    shares = broker.shares
    config = broker.config
    lock_ms = shares.lock_ms_of(group)
    budget = request.max_records
    record_limit = ctx.version >= 2 and request.share_acquire_mode == RECORD_LIMIT
    remaining = min(request.max_bytes, FETCH_MAX_BYTES)
    order = list(session.partitions)
    if order:
        turn = session.turn % len(order)
        order = order[turn:] + order[:turn]
        session.turn += 1
    out: dict[Tp, tuple[Outcome, bytes, list[Any]]] = {}
    first = True
    for tp in order:
        topic, plog, outcome = locate(broker, ctx, *tp)
        if topic is None:
            out[tp] = (outcome, b"", [])
            continue
        if budget <= 0 or remaining <= 0:
            continue
        sp = shares.partition(group, topic, tp[1], plog, now_ms)

        def read(
            offset: int, plog: Any = plog, limit: int = remaining, min_one: bool = first
        ) -> bytes:
            return plog.read(offset, limit, min_one)

        data, ranges = sp.acquire(
            member,
            budget,
            config.group_share_partition_max_record_locks,
            lock_ms,
            now_ms,
            plog.log_start_offset,
            read,
            record_limit,
        )
        if ranges:
            first = False
            budget -= sum(last - first_offset + 1 for first_offset, last, _ in ranges)
            remaining -= len(data)
            out[tp] = (OK, data, ranges)
    return out


def _response(
    ctx: RequestContext,
    lock_ms: int,
    fetched: dict[Tp, tuple[Outcome, bytes, list[Any]]],
    acked: dict[Tp, Outcome],
    listed: list[Tp],
) -> Any:
    broker_id = ctx.broker.config.broker_id
    by_topic: dict[Any, list[Any]] = {}
    for tp in dict.fromkeys([*listed, *fetched, *acked]):
        (error, message), data, ranges = fetched.get(tp, (OK, b"", []))
        ack_error, ack_message = acked.get(tp, OK)
        leader = (broker_id, 0) if error is ErrorCode.NONE else (-1, -1)
        by_topic.setdefault(tp[0], []).append(
            Partition(
                partition_index=tp[1],
                error_code=error,
                error_message=message,
                acknowledge_error_code=ack_error,
                acknowledge_error_message=ack_message,
                current_leader=Partition.LeaderIdAndEpoch(
                    leader_id=leader[0], leader_epoch=leader[1]
                ),
                records=data,
                acquired_records=[
                    Partition.AcquiredRecords(
                        first_offset=first, last_offset=last, delivery_count=count
                    )
                    for first, last, count in ranges
                ],
            )
        )
    return ShareFetchResponse(
        version=ctx.version,
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        acquisition_lock_timeout_ms=lock_ms,
        responses=[Topic(topic_id=t, partitions=parts) for t, parts in by_topic.items()],
        node_endpoints=[],
    )


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
