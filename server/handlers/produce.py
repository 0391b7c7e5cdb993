"""Produce (key 0), versions 3-13 (Kafka 4 dropped 0-2).

Each partition's batch is validated and accepted into its log as the request is handled (so
a pipelined batch behind it is checked against it); the answer waits until the turn's
writes are as durable as `log.flush.policy` promises, for acks 1 and -1 alike (one node: the
leader is the whole ISR). v5 adds the log start offset; v7 allows zstd; v8 record errors and
an error message; v9 is flexible; v10 leader hints (only with NOT_LEADER_OR_FOLLOWER, which
a single node never needs to redirect); v13 names topics by id.

With acks=0 nothing is answered; a request with any failed partition closes the connection
with a log line, as Kafka does, so the producer notices and refreshes its metadata.
A transactional batch must belong to its producer's open transaction, which holds the
partition (verified as Kafka 3.6+ verifies it, KIP-890): else INVALID_TXN_STATE, or
INVALID_PRODUCER_EPOCH for a fenced producer.
"""

from __future__ import annotations

import logging
from typing import Any

from kafka.protocol.producer import ProduceResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.results import Result
from minicoord.server.data.plane import AppendOutcome
from minicoord.server.handlers.base import NO_RESPONSE, Handler, Parked, RequestContext
from minicoord.server.request_log import refused
from minicoord.server.security import authorize
from minicoord.storage.batch import ATTRIBUTES_AT, TRANSACTIONAL

API_KEY = 0
TOPIC = authorize.TOPIC
TXN_ID = authorize.TRANSACTIONAL_ID
TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = TopicResponse.PartitionProduceResponse
RecordError = PartitionResponse.BatchIndexAndErrorMessage

log = logging.getLogger("minicoord.produce")


def _transactional(records: Any) -> bool:
    return (
        records is not None
        and len(records) > ATTRIBUTES_AT + 1
        and bool(records[ATTRIBUTES_AT + 1] & TRANSACTIONAL)
    )


def handle(ctx: RequestContext, request: Any) -> Any:
    gate = ctx.broker.data.produce_gate  # None but while partitions load at start
    if gate is not None and gate.holds(request, ctx.version >= 13):
        return gate.hold(ctx, request, _handle)
    return _handle(ctx, request, None)


def _handle(ctx: RequestContext, request: Any, parked: Parked | None) -> Any:
    """The request, answered through `parked` when it was held (a reply parked already)."""
    version = ctx.version
    broker = ctx.broker
    registry = broker.topics
    by_id = version >= 13
    acks = request.acks
    now = broker.now()
    transactional = any(
        _transactional(p.records) for t in request.topic_data for p in t.partition_data
    )
    # With ACLs (as Kafka): Write on the transactional id of transactional records, for the
    # whole request; Write on each topic, checked before whether the topic exists.
    checked = broker.authorizer is not None
    refuse_all: AppendOutcome | None = None
    if transactional and (
        request.transactional_id is None
        or (
            checked
            and not authorize.allowed(ctx, authorize.WRITE, TXN_ID, request.transactional_id)
        )
    ):
        # Kafka's error response for the whole request: every partition, no message.
        refuse_all = AppendOutcome(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        why = "no transactional id" if request.transactional_id is None else "no Write on it"
        refused(ctx, refuse_all.error, f"transactional records with {why}")
    bad_acks = acks not in (-1, 0, 1)
    if bad_acks:
        refused(ctx, ErrorCode.INVALID_REQUIRED_ACKS, f"acks={acks}")
    # A partition named twice is appended and answered once, with its last data, as Kafka's
    # handleProduceRequest keeps one entry per partition (and answers one per topic).
    latest = _last_occurrences(request.topic_data, by_id)
    results: list[tuple[Any, list[tuple[int, AppendOutcome]]]] = []
    answered: dict[Any, list[tuple[int, AppendOutcome]]] = {}
    failed = False
    for t in request.topic_data:
        key = t.topic_id if by_id else t.name
        partitions = answered.get(key)
        if partitions is None:
            partitions = answered[key] = []
            results.append((t, partitions))
        topic = registry.by_id(t.topic_id) if by_id else registry.get(t.name)
        denied = False
        if checked:
            name = topic.name if topic is not None else (None if by_id else t.name)
            denied = name is not None and not authorize.allowed(ctx, authorize.WRITE, TOPIC, name)
        for p in t.partition_data:
            if latest is not None and latest[key, p.index] is not p:
                continue
            if refuse_all is not None:
                outcome = refuse_all
            elif denied:
                outcome = AppendOutcome(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            elif topic is None:
                missing = (
                    ErrorCode.UNKNOWN_TOPIC_ID if by_id else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
                outcome = AppendOutcome(missing)
            elif not 0 <= p.index < topic.partitions:
                outcome = AppendOutcome(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif bad_acks:
                outcome = AppendOutcome(ErrorCode.INVALID_REQUIRED_ACKS)
            elif acks == -1 and registry.config_of(topic).min_insync_replicas > 1:
                outcome = _not_enough_replicas(ctx, topic, p.index)
            else:
                outcome = broker.data.append(
                    topic, p.index, p.records, now, version, ctx.client_id,
                    request.transactional_id,
                )  # fmt: skip
            failed = failed or outcome.error is not ErrorCode.NONE
            if outcome.message is not None and _sent_message(outcome) is None:
                refused(ctx, outcome.error, outcome.message)
            partitions.append((p.index, outcome))

    if acks == 0:
        broker.apply(Result(None, [], []))  # the accepted batches still get written
        if failed:
            first = next(o for _, ps in results for _, o in ps if o.error is not ErrorCode.NONE)
            ctx.channel.abort(
                f"acks=0 Produce failed ({first.error.name}: {first.message or 'no detail'}); "
                "closing the connection so the producer notices"
            )
        return NO_RESPONSE

    def build(_: Any) -> Any:
        return ProduceResponse(
            version=version,
            throttle_time_ms=0,
            responses=[
                TopicResponse(
                    name=t.name if not by_id else None,
                    topic_id=t.topic_id if by_id else None,
                    partition_responses=[_partition(i, o) for i, o in partitions],
                )
                for t, partitions in results
            ],
        )

    if parked is None:
        parked = ctx.park(build)
    else:
        parked.set_build(build)
    broker.apply(Result(None, [], []), parked)
    return parked


def _not_enough_replicas(ctx: RequestContext, topic: Any, index: int) -> AppendOutcome:
    # This node is every partition's only in-sync replica: acks=all under a
    # min.insync.replicas above 1 is refused before the append, as Kafka's
    # Partition.appendRecordsToLeader refuses it.
    need = ctx.broker.topics.config_of(topic).min_insync_replicas
    return AppendOutcome(
        ErrorCode.NOT_ENOUGH_REPLICAS,
        message=f"The size of the current ISR Set({ctx.broker.config.broker_id}) is "
        f"insufficient to satisfy the min.isr requirement of {need} for partition "
        f"{topic.name}-{index}",
    )


def _last_occurrences(topic_data: Any, by_id: bool) -> dict[tuple[Any, int], Any] | None:
    """Each partition's last entry, or None when no partition (or topic) is named twice: the
    usual request pays one count."""
    names = [t.topic_id if by_id else t.name for t in topic_data]
    if len(set(names)) == len(names) and all(
        len({p.index for p in t.partition_data}) == len(t.partition_data) for t in topic_data
    ):
        return None
    return {
        (key, p.index): p
        for key, t in zip(names, topic_data, strict=True)
        for p in t.partition_data
    }


def _sent_message(o: AppendOutcome) -> str | None:
    """The message Kafka answers with: only where its ReplicaManager marks one custom, for a
    batch refused for its records' errors (RecordValidationException) and a transactional
    batch for a partition its transaction does not hold. For every other error the client
    shows the error's own text (the detail goes to this server's log, from _handle)."""
    return o.message if o.record_errors or o.error is ErrorCode.INVALID_TXN_STATE else None


def _partition(index: int, o: AppendOutcome) -> Any:
    return PartitionResponse(
        index=index,
        error_code=o.error,
        base_offset=o.base_offset,
        log_append_time_ms=o.log_append_time,
        log_start_offset=o.log_start_offset,
        record_errors=[
            RecordError(batch_index=i, batch_index_error_message=m) for i, m in o.record_errors
        ],
        error_message=_sent_message(o),
    )


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
