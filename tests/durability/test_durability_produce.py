"""SIGKILL at random moments under a stream of produced messages: nothing acknowledged is lost,
nothing is written twice, and topics keep their ids, partitions and configs.

A stock idempotent producer (confluent-kafka, acks=all) sends numbered messages to a topic
created with configs of its own, while the server process is SIGKILLed after a random
0.3-1.2 s and restarted on the same port and data directory, four times. librdkafka keeps the
messages it had in flight and resends them to the restarted server; those that were written
before the kill are recognised by their producer id and sequence, since the producer state
is rebuilt from the log. At the end every acknowledged message is read back exactly once, in
the order it was sent to its partition. `write` promises this for a killed process; `fsync`
promises more, so it must keep this promise too.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
import uuid
from collections import defaultdict
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from durakit import Node, verify_after_kill
from kafka.protocol.metadata import MetadataRequest
from minicoord.clients.connection import ProtocolClient

pytestmark = pytest.mark.timeout(180)

TOPIC = "produced"
PARTITIONS = 3
CONFIGS = {"retention.ms": "86400000", "max.message.bytes": "2000000"}
KILLS = 4


class Sender:
    """Numbered messages from a producer thread, with what was acknowledged."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "linger.ms": 2,
                "message.timeout.ms": 60000,
                "retry.backoff.ms": 100,
                "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 500,
            }
        )
        self.sent = 0
        self.acked: dict[int, list[int]] = defaultdict(list)
        self.failures: list[str] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, error: KafkaError | None, message: Any) -> None:
        if error is not None:
            self.failures.append(str(error))
        else:
            self.acked[message.partition()].append(int(message.value()))

    def _run(self) -> None:
        while not self.stopping.is_set():
            for _ in range(20):
                n = self.sent
                self.producer.produce(
                    TOPIC, value=str(n).encode(), key=str(n).encode(), partition=n % PARTITIONS,
                    on_delivery=self._delivered,
                )  # fmt: skip
                self.sent += 1
            self.producer.poll(0.005)

    def finish(self) -> None:
        self.stopping.set()
        self.thread.join(20)
        assert self.producer.flush(60) == 0, "messages still in flight"


def read_back(bootstrap: str, expected: int) -> dict[int, list[int]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4()}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    seen: dict[int, list[int]] = defaultdict(list)
    deadline = time.monotonic() + 60
    while sum(map(len, seen.values())) < expected and time.monotonic() < deadline:
        for message in consumer.consume(1000, 0.5):
            if message.error() is None:
                seen[message.partition()].append(int(message.value()))
    for message in consumer.consume(1000, 1.0):  # anything beyond: a duplicate
        if message.error() is None:
            seen[message.partition()].append(int(message.value()))
    consumer.close()
    return dict(seen)


def topic_id(port: int) -> uuid.UUID:
    async def ask() -> uuid.UUID:
        client = await ProtocolClient.connect("127.0.0.1", port, "durability-raw")
        try:
            request = MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC, topic_id=None)],
                allow_auto_topic_creation=False,
            )
            response = await asyncio.wait_for(client.request(request, 12), 10)
        finally:
            await client.close()
        (topic,) = response.topics
        assert len(topic.partitions) == PARTITIONS
        return topic.topic_id

    return asyncio.run(ask())


def topic_configs(admin: AdminClient) -> dict[str, tuple[str, bool]]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, TOPIC)
    entries = admin.describe_configs([resource])[resource].result(20)
    return {name: (e.value, e.is_default) for name, e in entries.items() if name in CONFIGS}


@pytest.mark.parametrize("policy", ["write", "fsync"])
def test_acknowledged_messages_survive_sigkill(node_factory: Any, policy: str) -> None:
    node: Node = node_factory({"log.flush.policy": policy})
    node.start()
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    created = admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, config=CONFIGS)])
    created[TOPIC].result(20)
    first_id = topic_id(node.port)
    sender = Sender(node.bootstrap)
    sender.thread.start()
    rng = random.Random()
    torn = 0
    for _ in range(KILLS):
        time.sleep(rng.uniform(0.3, 1.2))
        node.kill()
        torn += verify_after_kill(node.data_dir)
        node.start()
        time.sleep(0.3)  # let the producer reach the new process before the next kill
    sender.finish()
    assert sender.failures == []
    acked = sum(map(len, sender.acked.values()))
    assert acked > 1000, f"only {acked} messages acknowledged"

    stored = read_back(node.bootstrap, acked)
    # Every acknowledged message is there, each exactly once, in the order it was sent.
    expected = {
        p: [n for n in range(sender.sent) if n % PARTITIONS == p] for p in range(PARTITIONS)
    }
    assert stored == expected, {p: len(v) for p, v in stored.items()}
    assert {p: sorted(v) for p, v in sender.acked.items()} == expected

    # The topic is the one created: same id, partitions and configs.
    assert topic_id(node.port) == first_id
    assert topic_configs(AdminClient({"bootstrap.servers": node.bootstrap})) == {
        name: (value, False) for name, value in CONFIGS.items()
    }
    node.stop()
    assert verify_after_kill(node.data_dir) is False  # a clean stop leaves a clean log
    print(f"{policy}: {acked} acknowledged over {KILLS} kills; torn tails {torn}")
