"""confluent-kafka's ShareConsumer (librdkafka's KIP-932 share consumer) against a real
minicoord process: ShareGroupHeartbeat, ShareFetch and ShareAcknowledge, as on Kafka 4.2.

Records of a share group go to one member at a time, each acquired for a lock and then
acknowledged (implicitly by the next poll, or explicitly: accept, release, reject); a member
that goes away gives its records back to the group, which delivers them again with their
delivery count raised. The share partitions start where the group's share.auto.offset.reset
says (latest by default).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from typing import Any

import pytest
from clientkit import RDKAFKA_LOG
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from kafka.protocol.admin import ListGroupsRequest
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.errors import ErrorCode
from minicoord.server.process import ServerProcess, start_server_process

pytestmark = pytest.mark.clients

TOPIC = "topic6"
# Short sessions and heartbeats: a member that vanishes is noticed within seconds.
FAST_SHARES = {"group.share.session.timeout.ms": 2000, "group.share.heartbeat.interval.ms": 200}


@pytest.fixture
def kafka_server(server_factory: Any) -> ServerProcess:
    """The clients' `server` (whose log must stay clean), with quick share sessions."""
    return server_factory(FAST_SHARES, [(TOPIC, 6)])


def produce(bootstrap: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "logger": RDKAFKA_LOG})
    for i, value in enumerate(values):
        producer.produce(TOPIC, value, partition=i % 6)
    assert producer.flush(10) == 0


def from_earliest(bootstrap: str, group: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": RDKAFKA_LOG})
    entry = ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource("group", group, incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(10)


@pytest.fixture
def consumers(server: ServerProcess) -> Iterator[Any]:
    made: list[ShareConsumer] = []

    def make(group: str, **conf: Any) -> ShareConsumer:
        consumer = ShareConsumer(
            {"bootstrap.servers": server.bootstrap, "group.id": group, "logger": RDKAFKA_LOG} | conf
        )
        consumer.subscribe([TOPIC])
        made.append(consumer)
        return consumer

    yield make
    for consumer in made:
        consumer.close()


def poll(consumer: ShareConsumer, seconds: float = 0.2) -> list[Any]:
    messages = consumer.poll(seconds) or []
    assert not [m.error() for m in messages if m.error()]
    return messages


def consume(consumer: ShareConsumer, wanted: int, timeout: float = 20) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < wanted and time.monotonic() < deadline:
        got += poll(consumer)
    return got


def test_a_share_group_reads_every_record_once_from_the_earliest(
    server: ServerProcess, consumers: Any, group_id: str
) -> None:
    values = [b"v%d" % i for i in range(60)]
    produce(server.bootstrap, values)
    from_earliest(server.bootstrap, group_id)
    got = consume(consumers(group_id), 60)
    assert sorted(m.value() for m in got) == sorted(values)
    assert {m.delivery_count() for m in got} == {1}
    assert len({(m.partition(), m.offset()) for m in got}) == 60


def test_the_default_start_is_the_latest_offset(
    server: ServerProcess, consumers: Any, group_id: str
) -> None:
    produce(server.bootstrap, [b"before"] * 6)
    consumer = consumers(group_id)
    # Polled until its share partitions exist (at its first fetch): they start at the end.
    assert consume(consumer, 1, timeout=3) == []
    produce(server.bootstrap, [b"after"] * 6)
    got = consume(consumer, 6)
    assert [m.value() for m in got] == [b"after"] * 6


def test_two_members_split_the_records_without_duplicates(
    server: ServerProcess, consumers: Any, group_id: str
) -> None:
    values = [b"v%d" % i for i in range(120)]
    from_earliest(server.bootstrap, group_id)
    a, b = consumers(group_id), consumers(group_id)
    # Both polled for several heartbeats: each holds its half of the partitions by now.
    settle = time.monotonic() + 1.5
    while time.monotonic() < settle:
        assert poll(a, 0.1) == poll(b, 0.1) == []
    produce(server.bootstrap, values)
    got: dict[str, list[Any]] = {"a": [], "b": []}
    deadline = time.monotonic() + 20
    while len(got["a"]) + len(got["b"]) < 120 and time.monotonic() < deadline:
        got["a"] += poll(a, 0.1)
        got["b"] += poll(b, 0.1)
    every = got["a"] + got["b"]
    assert sorted(m.value() for m in every) == sorted(values)
    assert got["a"] and got["b"]


def test_released_records_come_back_and_rejected_ones_do_not(
    server: ServerProcess, consumers: Any, group_id: str
) -> None:
    produce(server.bootstrap, [b"keep", b"again", b"drop"] * 2)
    from_earliest(server.bootstrap, group_id)
    consumer = consumers(group_id, **{"share.acknowledgement.mode": "explicit"})
    deliveries: list[tuple[bytes, int]] = []
    deadline = time.monotonic() + 20
    while len(deliveries) < 8 and time.monotonic() < deadline:
        messages = poll(consumer)
        for m in messages:
            deliveries.append((m.value(), m.delivery_count()))
            if m.value() == b"again" and m.delivery_count() == 1:
                consumer.acknowledge(m, AcknowledgeType.RELEASE)
            elif m.value() == b"drop":
                consumer.acknowledge(m, AcknowledgeType.REJECT)
            else:
                consumer.acknowledge(m)
        if messages:
            consumer.commit_sync(10)
    # A little longer: nothing else may come.
    end = time.monotonic() + 1
    while time.monotonic() < end:
        assert poll(consumer) == []
    assert sorted(deliveries) == sorted(
        [(b"keep", 1)] * 2 + [(b"again", 1)] * 2 + [(b"again", 2)] * 2 + [(b"drop", 1)] * 2
    )


HOLDER = """
import sys, time
from confluent_kafka import ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                   "share.acknowledgement.mode": "explicit"})
c.subscribe([sys.argv[3]])
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    messages = c.poll(0.2) or []
    if messages:
        print(len(messages), flush=True)
        time.sleep(60)  # holding them, unacknowledged, until killed
"""


def test_a_killed_members_records_go_to_another_member(
    server: ServerProcess, consumers: Any, group_id: str
) -> None:
    produce(server.bootstrap, [b"v%d" % i for i in range(12)])
    from_earliest(server.bootstrap, group_id)
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(HOLDER), server.bootstrap, group_id, TOPIC],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        held = int(holder.stdout.readline() or 0)
        assert held > 0
    finally:
        holder.kill()
        holder.wait(10)
    # Its connection closed: its records are back, and once its session expires its
    # partitions are the survivor's.
    got = consume(consumers(group_id), 12)
    assert sorted(m.value() for m in got) == sorted(b"v%d" % i for i in range(12))
    counts = sorted(m.delivery_count() for m in got)
    assert counts.count(2) == held and counts.count(1) == 12 - held


async def share_groups(port: int) -> list[tuple[str, str]]:
    """(id, state) of every share group, by ListGroups v5, asked again (for at most 10 s)
    while a restarted server is still loading its offsets partitions, as a client retries
    COORDINATOR_LOAD_IN_PROGRESS."""
    client = await ProtocolClient.connect("127.0.0.1", port, "share-test")
    try:
        for _ in range(100):
            response = await client.request(
                ListGroupsRequest(version=5, states_filter=[], types_filter=["share"])
            )
            if response.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                break
            await asyncio.sleep(0.1)
    finally:
        await client.close()
    assert response.error_code == ErrorCode.NONE
    return [(g.group_id, g.group_state) for g in response.groups]


async def test_share_groups_are_listed_with_their_type(
    server: ServerProcess, consumers: Any, group_id: str
) -> None:
    consumer = consumers(group_id)

    async def listed() -> list[Any]:
        client = await ProtocolClient.connect("127.0.0.1", server.port, "share-test")
        try:
            response = await client.request(
                ListGroupsRequest(version=5, states_filter=[], types_filter=["share"])
            )
        finally:
            await client.close()
        return [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in response.groups]

    deadline = time.monotonic() + 10
    found: list[Any] = []
    while time.monotonic() < deadline and not found:
        poll(consumer, 0.1)
        found = await listed()
    assert found == [(group_id, "share", "Stable", "share")]


def test_members_carry_on_through_a_server_restart(tmp_path: Any, group_id: str) -> None:
    # The group and its delivery state live in memory (README): after the restart the member
    # is unknown and rejoins (UNKNOWN_MEMBER_ID, where Kafka's GROUP_ID_NOT_FOUND would stop
    # librdkafka for good), and the group reads again from where share.auto.offset.reset says.
    server = start_server_process(FAST_SHARES, [(TOPIC, 6)], data_dir=tmp_path)
    consumer = None
    try:
        from_earliest(server.bootstrap, group_id)
        produce(server.bootstrap, [b"before"] * 6)
        consumer = ShareConsumer(
            {"bootstrap.servers": server.bootstrap, "group.id": group_id, "logger": RDKAFKA_LOG}
        )
        consumer.subscribe([TOPIC])
        assert [m.value() for m in consume(consumer, 6)] == [b"before"] * 6
        port = server.port
        server.stop()
        server = start_server_process(FAST_SHARES, [], data_dir=tmp_path, port=port)
        produce(server.bootstrap, [b"after"] * 6)
        got = [m.value() for m in consume(consumer, 12)]
        assert got.count(b"after") == 6, got
    finally:
        if consumer is not None:
            consumer.close()
        server.stop()


@pytest.mark.parametrize("stop", ["stop", "kill"])
def test_acknowledged_records_stay_acknowledged_across_a_restart(
    tmp_path: Any, group_id: str, stop: str
) -> None:
    # On a data dir the delivery state is kept in __share_group_state: after a clean stop or
    # a SIGKILL the group goes on from the records not yet acknowledged.
    server = start_server_process(FAST_SHARES, [(TOPIC, 1)], data_dir=tmp_path)
    consumer = None
    try:
        from_earliest(server.bootstrap, group_id)
        produce_to_one = Producer({"bootstrap.servers": server.bootstrap, "logger": RDKAFKA_LOG})
        for i in range(10):
            produce_to_one.produce(TOPIC, b"v%d" % i, partition=0)
        assert produce_to_one.flush(10) == 0
        conf = {"bootstrap.servers": server.bootstrap, "group.id": group_id, "logger": RDKAFKA_LOG}
        consumer = ShareConsumer({**conf, "share.acknowledgement.mode": "explicit"})
        consumer.subscribe([TOPIC])
        got = consume(consumer, 10)
        assert len(got) == 10
        for m in got:
            if m.offset() < 5:
                consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        consumer.commit_sync(10)  # answered once kept
        port = server.port
        if stop == "kill":
            server.kill()
        else:
            server.stop()
        server = start_server_process(FAST_SHARES, [], data_dir=tmp_path, port=port)
        consumer.close()
        # The group is back (Empty): listed as Kafka lists a share group after a restart.
        assert (group_id, "Empty") in asyncio.run(share_groups(server.port))
        consumer = ShareConsumer(conf)
        consumer.subscribe([TOPIC])
        again = consume(consumer, 5)
        end = time.monotonic() + 1
        while time.monotonic() < end:
            again += poll(consumer)
        assert sorted(m.offset() for m in again) == [5, 6, 7, 8, 9]
    finally:
        if consumer is not None:
            consumer.close()
        server.stop()
