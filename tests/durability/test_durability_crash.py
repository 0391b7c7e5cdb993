"""SIGKILL at random moments under a stream of commits: nothing acknowledged is lost.

A stock client (aiokafka, manual assignment, a fixed group id, no subscription) commits
strictly increasing offsets to two partitions in one request each, back to back, while the
server process is SIGKILLed after a random 0.2-1.5 s and restarted on the same port and data
directory, five times. `write` promises that an acknowledged commit survives the process
being killed; `fsync` promises more, so it must keep this promise too. A third run has the
background cleaner compacting small segments all the time, so kills also land mid-cleaning.

Commit number n stores offset n*10+p for partition p, both partitions in one request (so in
one record batch): every read must see both partitions at the same n, never a mix.

Checking only through the restarted server would let the client's next commits hide a loss,
so at each kill the committer is held (no new commit starts; the one in flight, if any, is
retried by the client after the restart) and the data directory is read first, offline: the
last commit stored must lie between the last acknowledged and the last attempted one. Then
the restarted server must serve exactly that, or the in-flight commit once the client has
had it acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError
from aiokafka.structs import OffsetAndMetadata, TopicPartition
from durakit import (
    Node,
    committed_on_disk,
    offset_fetch,
    partition_of,
    reading,
    verify_after_kill,
    wait_for_value,
)

pytestmark = pytest.mark.timeout(150)

TOPIC = "crash"
PARTITIONS = (0, 1)
GROUP = "durability-crash-group"
CYCLES = 5
COMMIT_TIMEOUT_S = 20.0
MAX_COMMITS = 1_000_000


def offset_of(n: int, partition: int) -> int:
    return n * 10 + partition


def commit_number(offsets: dict[int, int]) -> int:
    """The commit number n all partitions agree on (0 when nothing is committed)."""
    if not offsets:
        return 0
    assert set(offsets) == set(PARTITIONS), offsets
    numbers = {o // 10 if o >= 0 else 0 for o in offsets.values()}
    assert len(numbers) == 1, f"partitions committed by different requests: {offsets}"
    for p, o in offsets.items():
        assert o < 0 or o % 10 == p, f"partition {p} holds another partition's offset: {o}"
    return numbers.pop()


class Committer:
    """Commits n = 1, 2, … back to back; records what was acknowledged and attempted.

    While `gate` is clear no new commit starts (the one in flight goes on).
    """

    def __init__(self, consumer: AIOKafkaConsumer) -> None:
        self.consumer = consumer
        self.acked = 0
        self.attempted = 0
        self.in_flight = False
        self.errors: list[str] = []
        self.stopping = False
        self.gate = asyncio.Event()
        self.gate.set()

    async def run(self) -> None:
        tps = [TopicPartition(TOPIC, p) for p in PARTITIONS]
        for n in range(1, MAX_COMMITS):
            # Checked right before the commit starts, with no await in between: a wait that
            # returned just before the gate was closed must not let one more commit through.
            for _ in range(1000):
                if self.gate.is_set():
                    break
                await asyncio.wait_for(self.gate.wait(), 60)
            if self.stopping:
                return
            self.attempted = n
            offsets = {tp: OffsetAndMetadata(offset_of(n, tp.partition), "") for tp in tps}
            self.in_flight = True
            try:
                await asyncio.wait_for(self.consumer.commit(offsets), COMMIT_TIMEOUT_S)
            except KafkaError as exc:
                # Not acknowledged: it may or may not have been stored. Say so and go on.
                self.errors.append(f"commit {n}: {exc!r}")
                continue
            finally:
                self.in_flight = False
            self.acked = n


def stock_consumer(node: Node, client_id: str) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        bootstrap_servers=node.bootstrap,
        group_id=GROUP,
        client_id=client_id,
        enable_auto_commit=False,
        retry_backoff_ms=50,
        request_timeout_ms=10_000,
        metadata_max_age_ms=5_000,
    )


async def stock_committed(consumer: AIOKafkaConsumer) -> dict[int, int]:
    out = {}
    for p in PARTITIONS:
        value = await asyncio.wait_for(consumer.committed(TopicPartition(TOPIC, p)), 20)
        out[p] = -1 if value is None else value
    return out


async def raw_committed(node: Node) -> dict[int, int]:
    """Both partitions in one OffsetFetch (one consistent read), retrying while loading."""
    _error, offsets = await wait_for_value(
        lambda: offset_fetch(node.port, GROUP, TOPIC, list(PARTITIONS)),
        lambda r: r[0] == 0,
        15,
        what="OffsetFetch without error",
    )
    return offsets


# The background cleaner at full tilt (small segments, looking for work every 20 ms): the
# kills also land in the middle of cleanings, whose swap must be crash-safe.
CLEANING = {
    "offsets.topic.segment.bytes": 4096,
    "log.cleaner.backoff.ms": 20,
    "log.cleaner.min.cleanable.ratio": 0.01,
}


@pytest.mark.parametrize(
    ("policy", "extra"),
    [("write", {}), ("fsync", {}), ("write", CLEANING)],
    ids=["write", "fsync", "write-while-cleaning"],
)
async def test_acknowledged_commits_survive_sigkill(
    node_factory: Any, policy: str, extra: dict[str, object]
) -> None:
    seed = time.time_ns()
    rng = random.Random(seed)
    where = f"(policy {policy}{', cleaning' if extra else ''}, seed {seed})"
    configs = {"log.flush.policy": policy, **extra}
    node: Node = node_factory(configs, [(TOPIC, len(PARTITIONS))])
    node.start()
    committer_consumer = stock_consumer(node, "committer")
    checker = stock_consumer(node, "checker")
    await asyncio.wait_for(committer_consumer.start(), 20)
    await asyncio.wait_for(checker.start(), 20)
    committer_consumer.assign([TopicPartition(TOPIC, p) for p in PARTITIONS])
    committer = Committer(committer_consumer)
    task = asyncio.create_task(committer.run())
    # (cycle, acknowledged at the kill, attempted at the kill, found on disk)
    history: list[tuple[int, int, int, int]] = []
    try:
        for cycle in range(CYCLES):
            # The client is committing again (after the previous restart) before each kill.
            before = committer.acked
            await wait_for_value(
                reading(lambda: committer.acked),
                lambda acked, b=before: acked > b or task.done(),
                20,
                what=f"a commit acknowledged in cycle {cycle} {where}",
            )
            assert not task.done(), f"committer stopped: {task.exception()!r} {where}"
            await asyncio.sleep(rng.uniform(0.2, 1.5))
            node.kill()
            committer.gate.clear()
            # The dead process sent every acknowledgement the client has seen by now.
            acked, attempted = committer.acked, committer.attempted
            assert attempted - acked in (0, 1), (acked, attempted)

            # What the restart will load, read before any client can add to it.
            torn = verify_after_kill(node.data_dir)
            on_disk = commit_number(committed_on_disk(node.data_dir, GROUP, TOPIC))
            history.append((cycle, acked, attempted, on_disk))
            assert acked <= on_disk <= attempted, (
                f"cycle {cycle}: the log holds commit {on_disk}; acknowledged {acked}, "
                f"attempted {attempted} {where}"
            )

            node.start()
            # A torn (never acknowledged) tail is cut off at start, with a log line.
            await wait_for_value(
                reading(lambda: node.log),
                lambda log: f"loaded offsets partition {partition_of(GROUP)}:" in log,
                15,
                what="the group's partition to load",
            )
            assert ("truncating" in node.log) == torn, node.log
            # Let the commit that was in flight at the kill (if any) finish against the new
            # process; then the server holds exactly what the disk held, or that commit.
            await wait_for_value(
                reading(lambda: committer.in_flight),
                lambda busy: not busy,
                COMMIT_TIMEOUT_S + 5,
                what="the in-flight commit to finish",
            )
            assert committer.attempted == attempted, "a commit started while held"
            expected_n = attempted if committer.acked == attempted else on_disk
            expected = {p: offset_of(expected_n, p) for p in PARTITIONS}
            assert await raw_committed(node) == expected, f"cycle {cycle} {history} {where}"
            assert await stock_committed(checker) == expected, (
                f"cycle {cycle} {where} {history} errors {committer.errors[-3:]} "
                f"acked {committer.acked} attempted {committer.attempted}"
            )
            committer.gate.set()

        # Quiesce: with nothing in flight, the stored commit is exactly the last acknowledged.
        committer.stopping = True
        await asyncio.wait_for(task, COMMIT_TIMEOUT_S + 5)
        final = committer.acked
        assert final > history[-1][1], f"no commit after the last restart {history} {where}"
        expected = {p: offset_of(final, p) for p in PARTITIONS}
        assert await stock_committed(checker) == expected, where
        node.stop()
        assert committed_on_disk(node.data_dir, GROUP, TOPIC) == expected, where
        node.start()
        # The raw read retries through COORDINATOR_LOAD_IN_PROGRESS; only then the stock one:
        # aiokafka reads OffsetFetch's partitions' errors only, and while the partition loads
        # the answer is the group's error alone (as Kafka's), which it takes for "no commit".
        assert await raw_committed(node) == expected, where
        assert await stock_committed(checker) == expected, where
    finally:
        committer.stopping = True
        committer.gate.set()
        if not task.done():
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        await asyncio.wait_for(committer_consumer.stop(), 20)
        await asyncio.wait_for(checker.stop(), 20)
    assert len(history) == CYCLES
    assert committer.errors == [], where
    cleanings = node.all_logs().count("cleaned __consumer_offsets-")
    if extra:
        assert cleanings >= CYCLES, f"the cleaner hardly ran: {cleanings} cleanings"
    print(f"{where} (cycle, acked, attempted, on disk) at each kill: {history}; final {final}")
    print(f"{where} cleanings logged: {cleanings}")
