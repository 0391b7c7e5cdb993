"""A confluent-kafka consumer group reading a topic that is being written, while a member
leaves: at-least-once delivery, in order per partition, with every offset committed.

Three stock `Consumer`s (range assignor) share this thread and are polled in turn, as in
test_confluent.py; an idempotent `Producer` on the same thread writes half the messages before
the group forms and the rest while it consumes. Halfway through the second half one member
closes (its revocation commits what it consumed, then it sends LeaveGroup), and the other two
take its partitions over. Each member commits asynchronously as it goes and synchronously when
its partitions are revoked and at the end, the usual at-least-once pattern.

What the group read is recorded as one timeline per partition, interleaved with the moments it
was assigned to a member. No record may go forward past a gap: each offset is at most one past
the highest the group has read of its partition. Within one assignment a partition's offsets
run on by one; only the first record after a new assignment may go back, a replay of what was
consumed but not yet committed when it moved. The replay may be followed by a jump forward to
where the group had got to. librdkafka can go on fetching a partition it owned in an earlier
generation: in the request log a member whose offset reset for partition 3 was under way when
a rebalance took the partition away asked for its earliest offset again after the rebalance
and fetched it from 0 while another member owned it. When the partition came back to it, it
first handed out records it fetched then and went on from the committed offset: seen about 1
run in 30, records 0-199 again, then 587 onwards.
Every offset of every partition must be read, each record must be the message the producer's
delivery report put there, and the committed offsets must end equal to the end offsets.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from clientkit import (
    ALL,
    HEARTBEAT_MS,
    PARTITIONS,
    SESSION_MS,
    TOPIC,
    generations,
    group_lines,
    is_exact_cover,
    stable_with,
    wait_log,
    wait_until,
)
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec
from deliverykit import Message as Produced
from deliverykit import keyed_messages

pytestmark = pytest.mark.clients

BEFORE = 1500  # produced before the group forms
WHILE = 1500  # produced while it consumes, CHUNK at a time every CHUNK_EVERY_S
CHUNK = 50
CHUNK_EVERY_S = 0.1
LEAVE_AFTER = BEFORE + WHILE // 2  # produced so far when the leaver closes
CALL_TIMEOUT_S = 20


@dataclass
class Timeline:
    """One partition as the group saw it: ("assign", member) and ("record", member, offset)."""

    events: list[tuple[Any, ...]] = field(default_factory=list)

    def check(self, partition: int) -> int:
        """Assert the ordering rules (module docstring); return how many records were replays."""
        high = -1  # the highest offset the group has read
        previous: int | None = None  # the offset read before, in this assignment
        replays = 0
        owner = None
        for event in self.events:
            if event[0] == "assign":
                owner, previous = event[1], None
                continue
            _, member, offset = event
            assert member == owner, f"partition {partition}: {member} read it, {owner} owns it"
            assert offset <= high + 1, f"partition {partition}: skipped to {offset} from {high}"
            if previous is not None and previous < high:
                assert offset > previous, (
                    f"partition {partition}: {member} read {offset} after {previous} while "
                    f"replaying up to {high}, same assignment"
                )
            elif previous is not None:
                assert offset == previous + 1, (
                    f"partition {partition}: {member} read {offset} after {previous}, "
                    "same assignment"
                )
            replays += offset <= high
            previous, high = offset, max(high, offset)
        return replays


class DataMember:
    """One consumer; what it reads goes to the shared timelines, its commits to `failures`."""

    def __init__(self, name: str, bootstrap: str, group: str, timelines: list[Timeline]) -> None:
        self.name = name
        self.timelines = timelines
        self.records: list[Message] = []
        self.next_offsets: dict[int, int] = {}  # partition -> offset after the last one read
        self.failures: list[str] = []
        self.closing_errors: list[str] = []
        self.closed = False
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": name,
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": HEARTBEAT_MS,
                "max.poll.interval.ms": 20000,
                "partition.assignment.strategy": "range",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 100,
                "on_commit": self._on_commit,
            }
        )
        self.consumer.subscribe([TOPIC], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_commit(self, err: KafkaError | None, partitions: list[TopicPartition]) -> None:
        # An asynchronous commit sent just before a rebalance may be refused for its stale
        # generation; the synchronous commit on revocation covers the same records.
        if err is not None and err.code() not in (
            KafkaError.ILLEGAL_GENERATION,
            KafkaError.REBALANCE_IN_PROGRESS,
            KafkaError._NO_OFFSET,
        ):
            self.failures.append(f"commit: {err}")

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.timelines[tp.partition].events.append(("assign", self.name))

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        mine = {tp.partition for tp in partitions}
        self.commit_sync({p: o for p, o in self.next_offsets.items() if p in mine})
        for p in mine:
            self.next_offsets.pop(p, None)

    def commit_sync(self, offsets: dict[int, int]) -> None:
        if not offsets:
            return
        tps = [TopicPartition(TOPIC, p, o) for p, o in sorted(offsets.items())]
        try:
            result = self.consumer.commit(offsets=tps, asynchronous=False) or []
        except KafkaException as exc:
            # Raised out of the rebalance callback, this came out of close() as a bare
            # KafkaError, no exception class, and ended the whole pytest run (seen once).
            if self.closed and exc.args[0].code() == KafkaError._DESTROY:
                # librdkafka tearing down its coordinator handle while it closes: what this
                # member read and did not commit is replayed by the next owner, as allowed.
                self.closing_errors.append(str(exc))
            else:
                self.failures.append(f"commit: {exc}")
            return
        self.failures.extend(f"commit {tp}" for tp in result if tp.error is not None)

    def take(self) -> int:
        if self.closed:
            return 0
        batch = self.consumer.consume(num_messages=200, timeout=0.03)
        for msg in batch:
            if msg.error() is not None:
                self.failures.append(f"consume: {msg.error()}")
                continue
            p, o = msg.partition(), msg.offset()
            self.timelines[p].events.append(("record", self.name, o))
            self.records.append(msg)
            self.next_offsets[p] = o + 1
        if batch and self.next_offsets:
            tps = [TopicPartition(TOPIC, p, o) for p, o in self.next_offsets.items()]
            self.consumer.commit(offsets=tps, asynchronous=True)
        return len(batch)

    @property
    def assignment(self) -> frozenset[int]:
        if self.closed:
            return frozenset()
        return frozenset(tp.partition for tp in self.consumer.assignment())

    def close(self) -> str | None:
        """Consumer.close(): revokes (our callback commits), then LeaveGroup; the member id."""
        if self.closed:
            return None
        member_id = self.consumer.memberid()
        self.closed = True
        self.consumer.close()
        return member_id


@pytest.fixture
def members(server: Any, group_id: str) -> Iterator[list[DataMember]]:
    timelines = [Timeline() for _ in range(PARTITIONS)]
    trio = [DataMember(f"ck-data-{i}", server.bootstrap, group_id, timelines) for i in range(3)]
    yield trio
    for member in trio:
        member.close()


def test_group_reads_everything_in_order_while_a_member_leaves(
    server: Any, group_id: str, members: list[DataMember]
) -> None:
    produced = keyed_messages(BEFORE + WHILE, tag="group")
    reports: dict[int, tuple[int, int]] = {}
    failures: list[str] = []

    def delivered(index: int) -> Callable[[KafkaError | None, Message], None]:
        def report(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                failures.append(f"message {index}: {err}")
            else:
                reports[index] = (msg.partition(), msg.offset())

        return report

    producer = Producer(
        {
            "bootstrap.servers": server.bootstrap,
            "client.id": "ck-data-producer",
            "enable.idempotence": True,
            "linger.ms": 5,
        }
    )
    sent = 0

    def produce(n: int) -> None:
        nonlocal sent
        for message in produced[sent : sent + n]:
            producer.produce(
                TOPIC,
                key=message.key,
                value=message.value,
                headers=list(message.headers),
                on_delivery=delivered(sent),
            )
            sent += 1
        producer.poll(0)

    produce(BEFORE)
    assert producer.flush(CALL_TIMEOUT_S) == 0

    live = list(members)
    leaver = members[1]
    leaver_id: str | None = None
    read_by_leaver = 0
    moved: set[int] = set()  # what the leaver owned when it left
    next_chunk = time.monotonic()

    def tick() -> None:
        nonlocal next_chunk, leaver_id, read_by_leaver, live
        formed = leaver_id is not None or all(m.assignment for m in members)
        if formed and sent < len(produced) and time.monotonic() >= next_chunk:
            produce(CHUNK)
            next_chunk = time.monotonic() + CHUNK_EVERY_S
        producer.poll(0)
        for member in live:
            member.take()
        if leaver_id is None and sent >= LEAVE_AFTER:
            read_by_leaver = len(leaver.records)
            moved.update(leaver.assignment)
            leaver_id = leaver.close()
            live = [m for m in members if m is not leaver]

    def done() -> bool:
        if sent < len(produced) or len(reports) < len(produced) or leaver_id is None:
            return False
        if not is_exact_cover([m.assignment for m in live]):
            return False
        ends = end_offsets(reports)
        read: dict[int, set[int]] = {p: set() for p in ALL}
        for member in members:
            for msg in member.records:
                read[msg.partition()].add(msg.offset())
        return all(read[p] == set(range(ends[p])) for p in ALL)

    def describe() -> str:
        return (
            f"sent {sent}, acked {len(reports)}, leaver {leaver_id}; "
            + "; ".join(
                f"{m.name}{'(closed)' if m.closed else ''} owns {sorted(m.assignment)} "
                f"read {len(m.records)} at {m.next_offsets}"
                for m in members
            )
            + f"; failures {failures[:3]} {[m.failures[:3] for m in members]}"
            + f"; while closing {[m.closing_errors[:3] for m in members]}"
        )

    wait_until(done, 60, tick=tick, interval=0, describe=describe, what="the group to read all")
    assert producer.flush(CALL_TIMEOUT_S) == 0
    assert not failures, failures[:5]
    for member in live:
        member.commit_sync(dict(member.next_offsets))
    for member in members:
        assert not member.failures, (member.name, member.failures[:5])

    # The leaver read part of the stream before it left, and the others went on with its
    # partitions: the last record of each was read by one of them.
    assert read_by_leaver > 0 and moved, (read_by_leaver, moved)
    timelines = leaver.timelines
    for p in moved:
        last_reader = [e[1] for e in timelines[p].events if e[0] == "record"][-1]
        assert last_reader != leaver.name, f"nobody read partition {p} after the leaver"
    ends = end_offsets(reports)
    assert sum(ends.values()) == len(produced)

    # Each record is the message its delivery report put at that partition and offset.
    by_place = {where: produced[i] for i, where in reports.items()}
    for member in members:
        for msg in member.records:
            want = by_place[(msg.partition(), msg.offset())]
            have = Produced(msg.key(), msg.value(), tuple(msg.headers() or ()))
            assert have == want, (msg.partition(), msg.offset(), have, want)
    replays = {p: timelines[p].check(p) for p in ALL}

    # The coordinator saw a leave (not a session timeout) and settled on two members.
    log = wait_log(server, stable_with(group_id, 2), what="generation Stable with 2")
    assert 3 in [n for _, n in generations(log, group_id)], generations(log, group_id)
    assert group_lines(log, group_id, f"member {leaver_id} left")
    assert not group_lines(log, group_id, "session timed out")

    admin = AdminClient({"bootstrap.servers": server.bootstrap, "client.id": "ck-data-admin"})
    tps = [TopicPartition(TOPIC, p) for p in sorted(ALL)]
    listed = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps}, request_timeout=10)
    latest = {tp.partition: f.result(CALL_TIMEOUT_S).offset for tp, f in listed.items()}
    futures = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group_id, tps)], request_timeout=10
    )
    committed = futures[group_id].result(CALL_TIMEOUT_S).topic_partitions
    assert {tp.partition: tp.offset for tp in committed} == latest == ends, replays


def end_offsets(reports: dict[int, tuple[int, int]]) -> dict[int, int]:
    """Each partition's end offset from the delivery reports: one past its last message."""
    ends = dict.fromkeys(ALL, 0)
    for p, o in reports.values():
        ends[p] = max(ends[p], o + 1)
    return ends
