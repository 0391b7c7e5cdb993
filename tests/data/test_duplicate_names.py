"""A topic or partition named twice in one request, answered as Kafka answers it: in admin
requests once, INVALID_REQUEST, leaving that topic alone and the rest of the request unharmed;
in Produce and Fetch once, with the last data given for it."""

from __future__ import annotations

from typing import Any

import pytest
from datakit import batch, create_topics, fetch_partition, fetch_request, new_topic
from kafka import KafkaAdminClient
from kafka.protocol.admin import CreatePartitionsRequest, DeleteTopicsRequest
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.producer import ProduceRequest
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.errors import ErrorCode
from minicoord.testing.embedded import running


@pytest.mark.asyncio
async def test_raw_create_topics_and_create_partitions_naming_one_twice() -> None:
    # (librdkafka's admin client cannot take this answer, from Kafka either: it sizes its
    # results by the answer and writes each at its position in the request, past the end.)
    with running(topics=[("kept", 2)]) as server:
        host, port = server.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            made = await client.request(
                create_topics(new_topic("twice", 1), new_topic("twice", 2), new_topic("once", 1)),
                7,
            )
            assert [(t.name, t.error_code, t.error_message) for t in made.topics] == [
                ("once", ErrorCode.NONE, None),
                ("twice", ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
            ]
            grow = CreatePartitionsRequest.CreatePartitionsTopic
            grown = await client.request(
                CreatePartitionsRequest(
                    version=3,
                    topics=[
                        grow(name="kept", count=3, assignments=None),
                        grow(name="kept", count=4, assignments=None),
                        grow(name="once", count=2, assignments=None),
                    ],
                    timeout_ms=5000,
                    validate_only=False,
                ),
                3,
            )
            assert [(r.name, r.error_code) for r in grown.results] == [
                ("once", ErrorCode.NONE),
                ("kept", ErrorCode.INVALID_REQUEST),
            ]
        # A stock client sees the same: the duplicated topic alone is refused, left as it was.
        admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
        try:
            topics = {t["name"]: t for t in admin.describe_topics(["kept", "once", "twice"])}
            assert len(topics["kept"]["partitions"]) == 2
            assert len(topics["once"]["partitions"]) == 2
            assert topics["twice"]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        finally:
            admin.close()


@pytest.mark.asyncio
async def test_raw_delete_topics_and_list_offsets_naming_one_twice() -> None:
    with running(topics=[("a", 1), ("b", 1)]) as server:
        host, port = server.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            deleted = await client.request(
                DeleteTopicsRequest(version=5, topic_names=["a", "a", "nosuch", "nosuch", "b"]),
                5,
            )
            answers = {(r.name, r.error_code) for r in deleted.responses}
            assert len(deleted.responses) == 3
            assert answers == {
                ("a", ErrorCode.INVALID_REQUEST),
                ("nosuch", ErrorCode.INVALID_REQUEST),
                ("b", ErrorCode.NONE),
            }
            # Partition 0 of "a" in two topic entries: INVALID_REQUEST at each, as Kafka's
            # ListOffsetsRequest.duplicatePartitions finds it; "a" itself was left alone above.
            topic = ListOffsetsRequest.ListOffsetsTopic
            part = topic.ListOffsetsPartition
            listed = await client.request(
                ListOffsetsRequest(
                    version=7,
                    replica_id=-1,
                    isolation_level=0,
                    topics=[
                        topic(name="a", partitions=[part(partition_index=0, timestamp=-1)]),
                        topic(name="a", partitions=[part(partition_index=0, timestamp=-2)]),
                        topic(name="nosuch", partitions=[part(partition_index=0, timestamp=-1)]),
                    ],
                ),
                7,
            )
            errors = [(t.name, p.error_code) for t in listed.topics for p in t.partitions]
            assert errors == [
                ("a", ErrorCode.INVALID_REQUEST),
                ("a", ErrorCode.INVALID_REQUEST),
                ("nosuch", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            ]


@pytest.mark.asyncio
async def test_raw_produce_and_fetch_naming_a_partition_twice() -> None:
    # Kafka's handleProduceRequest keeps one entry per partition (the last), and
    # FetchRequest.fetchData one fetch position per partition (the last, in its first place).
    with running(topics=[("d", 2)]) as server:
        host, port = server.bootstrap.rsplit(":", 1)
        async with await ProtocolClient.connect(host, int(port)) as client:
            data = ProduceRequest.TopicProduceData

            def part(index: int, value: bytes) -> Any:
                records = batch([(None, value)], timestamp=-1)
                return data.PartitionProduceData(index=index, records=records)

            async def produce(*entries: list[Any]) -> Any:
                topics = [data(name="d", partition_data=parts) for parts in entries]
                request = ProduceRequest(
                    version=9, transactional_id=None, acks=-1, timeout_ms=5000, topic_data=topics
                )
                return await client.request(request, 9)

            produced = await produce(
                [part(0, b"first"), part(0, b"second"), part(1, b"other")], [part(0, b"third")]
            )
            answers = [
                (t.name, p.index, p.error_code, p.base_offset)
                for t in produced.responses
                for p in t.partition_responses
            ]
            assert answers == [("d", 1, 0, 0), ("d", 0, 0, 0)]
            for value in (b"a", b"b"):  # offsets 1 and 2 of partition 0
                await produce([part(0, value)])

            at = fetch_partition
            fetched = await client.request(
                fetch_request(12, [("d", [at(0, 0), at(1, 0), at(0, 2)]), ("d", [at(0, 1)])]),
                12,
            )
        firsts = []
        for t in fetched.responses:
            for p in t.partitions:
                batches = p.records
                # Each answer's first offset: the batch header's base offset.
                firsts.append((p.partition_index, int.from_bytes(batches[:8], "big")))
        assert firsts == [(0, 1), (1, 0)]
