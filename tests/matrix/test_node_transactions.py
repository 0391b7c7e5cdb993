"""Transactions through the Node.js clients' own transactional producers (node/transactions.mjs)
and kafkajs' exactly-once loop (node/eos.mjs); what they wrote is read back with a
read_committed and a read_uncommitted confluent-kafka consumer."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from deliverykit import values_to_end
from matrixkit import NODE_DIR

pytestmark = [pytest.mark.clients, pytest.mark.usefixtures("node_clients")]

RUN_TIMEOUT_S = 60
ISOLATIONS = ("read_committed", "read_uncommitted")


def topic_for(group_id: str, prefix: str) -> str:
    return prefix + "".join(c if c.isalnum() else "-" for c in group_id)[-60:]


def create(bootstrap: str, *topics: tuple[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, n, 1) for t, n in topics]).values():
        future.result(20)


def run_node(script: str, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        ["node", str(NODE_DIR / script), *args],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        cwd=NODE_DIR,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize("client", ["kafkajs", "platformatic"])
def test_a_transactional_producer_commits_and_aborts(
    server: Any, group_id: str, client: str
) -> None:
    # The client's own transactional producer (FindCoordinator for its id, InitProducerId,
    # AddPartitionsToTxn, Produce, EndTxn) commits one transaction and aborts another; a
    # read_committed reader (confluent-kafka) then sees the committed records only.
    topic = topic_for(group_id, "tx-")
    create(server.bootstrap, (topic, 1))
    assert run_node("transactions.mjs", client, server.bootstrap, topic, topic) == {"ok": True}
    read = {i: values_to_end(server.bootstrap, topic, 1, i) for i in ISOLATIONS}
    assert read["read_committed"] == ["committed-0", "committed-1", "committed-2"]
    assert read["read_uncommitted"] == read["read_committed"] + ["aborted-0", "aborted-1"]


# Not @platformatic/kafka with group.protocol=consumer: its messages carry the classic
# generation (0 there), not the member epoch, so TxnOffsetCommit is ILLEGAL_GENERATION, as
# Kafka answers it (validateMemberEpoch).
@pytest.mark.parametrize(
    ("client", "protocol"), [("kafkajs", "classic"), ("platformatic", "classic")]
)
def test_consume_transform_produce_exactly_once(
    server: Any, group_id: str, client: str, protocol: str
) -> None:
    # kafkajs sends TxnOffsetCommit v1, which names no member or generation: Kafka takes it
    # for a group with members (ClassicGroup.validateOffsetCommit, transactional).
    # @platformatic/kafka names its member and generation.
    source, sink = topic_for(group_id, "src-"), topic_for(group_id, "dst-")
    create(server.bootstrap, (source, 2), (sink, 2))
    producer = Producer({"bootstrap.servers": server.bootstrap})
    for i in range(20):
        producer.produce(source, value=f"m{i}".encode(), partition=i % 2)
    producer.flush(20)
    moved = run_node("eos.mjs", client, server.bootstrap, source, sink, group_id, "20", protocol)
    assert moved == {"moved": 20}
    expected = sorted(f"M{i}" for i in range(20))
    assert sorted(values_to_end(server.bootstrap, sink, 2, "read_committed")) == expected
    group = Consumer({"bootstrap.servers": server.bootstrap, "group.id": group_id})
    committed = group.committed([TopicPartition(source, p) for p in range(2)], 20)
    group.close()
    assert [tp.offset for tp in committed] == [10, 10]
