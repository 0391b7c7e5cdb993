"""The transaction APIs' answers, request by request with the raw client: what Kafka's
KafkaApis and TransactionCoordinator answer for partitions that cannot be added, batches
outside their transaction, retried and mismatched EndTxns, fenced epochs (and the older
versions' INVALID_PRODUCER_EPOCH), and offsets committed outside the transaction."""

from __future__ import annotations

import asyncio
from typing import Any

from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ProduceRequest,
    TxnOffsetCommitRequest,
)
from kafka.record.default_records import DefaultRecordBatchBuilder
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.errors import ErrorCode

TOPIC = "topic6"
TID = "raw-txn"
E = ErrorCode


async def call(client: ProtocolClient, request: Any, version: int) -> Any:
    return await asyncio.wait_for(client.request(request, version), 5)


async def init(client: ProtocolClient, pid: int = -1, epoch: int = -1, version: int = 4) -> Any:
    request = InitProducerIdRequest(
        version=version,
        transactional_id=TID,
        transaction_timeout_ms=60_000,
        producer_id=pid,
        producer_epoch=epoch,
    )
    return await call(client, request, version)


async def add(
    client: ProtocolClient, pid: int, epoch: int, parts: list[tuple[str, int]], version: int = 3
) -> dict[tuple[str, int], int]:
    topics: dict[str, list[int]] = {}
    for name, index in parts:
        topics.setdefault(name, []).append(index)
    request = AddPartitionsToTxnRequest(
        version=version,
        v3_and_below_transactional_id=TID,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[
            AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=n, partitions=i)
            for n, i in topics.items()
        ],
    )
    answer = await call(client, request, version)
    return {
        (t.name, p.partition_index): p.partition_error_code
        for t in answer.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }


async def produce(client: ProtocolClient, pid: int, epoch: int, sequence: int, index: int) -> int:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=True,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=sequence,
        batch_size=1 << 20,
    )
    builder.append(0, timestamp=None, key=None, value=b"v", headers=[])
    data = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        transactional_id=TID,
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            data(
                name=TOPIC,
                partition_data=[data.PartitionProduceData(index=index, records=builder.build())],
            )
        ],
    )
    answer = await call(client, request, 9)
    return answer.responses[0].partition_responses[0].error_code


async def end(client: ProtocolClient, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
    request = EndTxnRequest(
        version=version, transactional_id=TID, producer_id=pid, producer_epoch=epoch,
        committed=commit,
    )  # fmt: skip
    return (await call(client, request, version)).error_code


async def test_partitions_that_cannot_be_added_fail_the_whole_request(
    raw_client: ProtocolClient,
) -> None:
    # FindCoordinator makes __consumer_offsets, as in Kafka.
    await call(raw_client, FindCoordinatorRequest(version=3, key="g", key_type=0), 3)
    got = await init(raw_client)
    pid, epoch = got.producer_id, got.producer_epoch
    asked = [(TOPIC, 0), ("missing", 0), ("__consumer_offsets", 0), (TOPIC, 9)]
    assert await add(raw_client, pid, epoch, asked) == {
        (TOPIC, 0): E.OPERATION_NOT_ATTEMPTED,
        ("missing", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
        # Internal topics are never among the authorized ones, authorizer or not.
        ("__consumer_offsets", 0): E.TOPIC_AUTHORIZATION_FAILED,
        (TOPIC, 9): E.UNKNOWN_TOPIC_OR_PARTITION,
    }  # fmt: skip
    # Nothing was added: a batch for the partition is outside the transaction.
    assert await produce(raw_client, pid, epoch, 0, 0) == E.INVALID_TXN_STATE


async def test_a_transaction_request_by_request(raw_client: ProtocolClient) -> None:
    got = await init(raw_client)
    pid, epoch = got.producer_id, got.producer_epoch
    assert (got.error_code, epoch) == (0, 0)
    # Nothing open: EndTxn either way is INVALID_TXN_STATE.
    assert await end(raw_client, pid, epoch, True) == E.INVALID_TXN_STATE
    assert await add(raw_client, pid, epoch, [(TOPIC, 1)]) == {(TOPIC, 1): 0}
    assert await produce(raw_client, pid, epoch, 0, 1) == 0
    # A partition not added, and one from another producer id.
    assert await produce(raw_client, pid, epoch, 1, 2) == E.INVALID_TXN_STATE
    assert await produce(raw_client, pid + 1, epoch, 0, 1) == E.INVALID_TXN_STATE
    # Offsets for a group the transaction did not add (AddOffsetsToTxn) are refused.
    part = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
        partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata=""
    )
    commit = TxnOffsetCommitRequest(
        version=3,
        transactional_id=TID,
        group_id="txn-group",
        producer_id=pid,
        producer_epoch=epoch,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=TOPIC, partitions=[part])],
    )
    answer = await call(raw_client, commit, 3)
    assert answer.topics[0].partitions[0].error_code == E.INVALID_TXN_STATE
    offsets = AddOffsetsToTxnRequest(
        version=3, transactional_id=TID, producer_id=pid, producer_epoch=epoch, group_id="txn-group"
    )
    assert (await call(raw_client, offsets, 3)).error_code == 0
    answer = await call(raw_client, commit, 3)
    assert answer.topics[0].partitions[0].error_code == 0
    assert await end(raw_client, pid, epoch, True) == 0
    # The same EndTxn again (its answer lost): NONE; the other outcome: INVALID_TXN_STATE.
    assert await end(raw_client, pid, epoch, True) == 0
    assert await end(raw_client, pid, epoch, False) == E.INVALID_TXN_STATE


async def test_a_fenced_producer_and_the_older_versions_error(raw_client: ProtocolClient) -> None:
    first = await init(raw_client)
    second = await init(raw_client)
    pid, old, new = first.producer_id, first.producer_epoch, second.producer_epoch
    assert (second.producer_id, new) == (pid, old + 1)
    assert await add(raw_client, pid, old, [(TOPIC, 0)]) == {(TOPIC, 0): E.PRODUCER_FENCED}
    # Before KIP-588 the clients knew only INVALID_PRODUCER_EPOCH: Kafka answers that.
    assert await add(raw_client, pid, old, [(TOPIC, 0)], version=1) == {
        (TOPIC, 0): E.INVALID_PRODUCER_EPOCH
    }
    assert await end(raw_client, pid, old, True, version=1) == E.INVALID_PRODUCER_EPOCH
    assert await end(raw_client, pid, old, True, version=2) == E.PRODUCER_FENCED
    # KIP-360: re-initialising with the previous epoch is a retry (the current one answered
    # again); with an older one, fenced.
    retry = await init(raw_client, pid, old)
    assert (retry.error_code, retry.producer_epoch) == (0, new)
    third = await init(raw_client, pid, new)
    assert (third.error_code, third.producer_epoch) == (0, new + 1)
    assert (await init(raw_client, pid, old)).error_code == E.PRODUCER_FENCED
    assert (await init(raw_client, pid, old, version=3)).error_code == E.INVALID_PRODUCER_EPOCH
    new = third.producer_epoch
    # A batch of the fenced epoch, in a transaction the new epoch opened.
    assert await add(raw_client, pid, new, [(TOPIC, 0)]) == {(TOPIC, 0): 0}
    assert await produce(raw_client, pid, old, 0, 0) == E.INVALID_PRODUCER_EPOCH
