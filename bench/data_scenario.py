"""The data scenario as each Spark task runs it: stock librdkafka clients (confluent-kafka)
producing and consuming records, one producer and one consumer per task.

A step is one barrier stage (the driver plans them, runner.py):

- `fill`: produce `--fill-bytes` into a topic of its own, then sample the server's memory;
- `produce`: `--records` back to back, librdkafka's batching defaults: records/s, MB/s;
- `consume`: the consumers of one group read everything `produce` wrote. They join with
  their partitions paused and start together once the group holds every partition, so the
  window measures fetching, not the join;
- `e2e rate=R`: the group joins an empty topic, then the producers send R records/s in all
  for a warm-up (WARM_UP_S) and --duration-s, each stamped with the wall clock at
  `produce()`; each record of the duration, consumed, gives one latency.

Every step records, per task, its totals (kind `total`), the CPU of this task's process
(every thread: librdkafka's are where most of a client's work is done), and on task 0 the
server's CPU and memory (when it runs on this host) and how many of the machine's cores were
busy: the figures that say whether the load generator or the machine set the pace.

Blocking librdkafka calls (rdkafka_clients.py) run in threads of the task's event loop, so
that the barrier (and in `e2e` a producer and a consumer) go on side by side. Imported inside
the Python workers: confluent-kafka is imported only when a step runs, pyspark not at all.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from minicoord.bench.proc_stats import cpu_seconds, host_busy_seconds, memory_kib
from minicoord.bench.rdkafka_clients import (
    CONSUME_WAIT_S,
    STAMP,
    Delivery,
    Membership,
    flush,
    make_consumer,
    make_producer,
    partitions_short,
    produce_back_to_back,
    produce_paced,
    take,
    watermarks,
)
from minicoord.bench.task_run import TaskRun
from minicoord.clients.timings import EPOCH_OFFSET

KIND_TOTAL = "total"  # a task's totals over a step: value = records, error = failed records

JOIN_POLL_S = 0.25  # polling between two checks of the group's assignment across tasks
ALL_CONSUMED_POLL_S = 0.05  # between two gathers of the consumed counts (Spark's take ~1 s)
SETTLE_S = 2.0  # after a fill, before the memory is sampled again
# e2e: the first records of a step pay for connections and first fetches (up to ~100 ms
# seen, on minicoord and kfake alike): consumed and counted, their latency left out.
WARM_UP_S = 0.5

T = TypeVar("T")


def task_share(total: int, task: int, tasks: int) -> int:
    """Task `task`'s share of `total` records, the shares differing by one at most."""
    return total // tasks + (1 if task < total % tasks else 0)


async def _blocking(fn: Callable[..., T], *args: Any) -> T:
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


# -- what a step costs the machine ----------------------------------------------------------


class Usage:
    """CPU over one step: this task's process (every thread); on task 0 also the server's
    when it runs on this host, and the machine's busy cores."""

    def __init__(self, run: TaskRun) -> None:
        self.run = run
        self.lead = run.plan.task == 0
        self.pid = run.plan.server_pid
        self.t0 = time.perf_counter()
        self.cpu0 = time.process_time()
        self.server0 = cpu_seconds(self.pid) if self.lead and self.pid else None
        self.host0 = host_busy_seconds() if self.lead else None

    def record(self) -> None:
        run, t0, t1 = self.run, self.t0, time.perf_counter()
        run.gauge("client_cpu_s", time.process_time() - self.cpu0, t0, t1)
        if self.server0 is not None and self.pid:
            server1 = cpu_seconds(self.pid)
            if server1 is not None:
                run.gauge("server_cpu_s", server1 - self.server0, t0, t1)
        if self.host0 is not None:
            host1 = host_busy_seconds()
            if host1 is not None:
                run.gauge("host_busy_s", host1 - self.host0, t0, t1)


def server_memory(run: TaskRun, suffix: str = "") -> None:
    """The server's VmRSS, RssAnon and RssFile (task 0, server on this host)."""
    pid = run.plan.server_pid
    if run.plan.task != 0 or not pid:
        return
    memory = memory_kib(pid)
    for name, kib in (memory or {}).items():
        op = {"VmRSS": "server_rss", "RssAnon": "server_rss_anon", "RssFile": "server_rss_file"}
        run.gauge(f"{op[name]}{suffix}_kib", kib)


async def settle_group(
    run: TaskRun, consumer: Any, membership: Membership, partitions: int, timeout: float
) -> int:
    """Poll until every task's consumer holds partitions and together they hold all of
    them: one generation, every member in it. Records polled meanwhile (none, as the
    partitions are paused or the topic is empty) are counted and returned. The last gather
    can serve as the common start (`Barrier.start_after_last_gather`).

    A thread polls all along, gathers included: librdkafka hands an assignment to the
    application only from a poll, and a gather takes Spark most of a second."""
    deadline = time.perf_counter() + timeout
    early = [0]
    settled = threading.Event()

    def poll_until_settled() -> None:
        while not settled.is_set():
            message = consumer.poll(JOIN_POLL_S / 5)
            if message is not None and not message.error():
                early[0] += 1

    polling = asyncio.ensure_future(_blocking(poll_until_settled))
    held: list[int] = []
    try:
        for _ in range(int(timeout / JOIN_POLL_S) + 2):
            await asyncio.sleep(JOIN_POLL_S)
            expired = time.perf_counter() > deadline
            # Every task decides from the same gathered answers: all leave the loop together.
            mine = f"{len(membership.assigned)},{int(expired)}"
            answers = [a.split(",") for a in await run.barrier.gather(mine)]
            held = [int(n) for n, _ in answers]
            if min(held) > 0 and sum(held) == partitions:
                return early[0]
            if any(flag == "1" for _, flag in answers):
                break
    finally:
        settled.set()
        await polling
    raise RuntimeError(
        f"the consumer group did not hold all {partitions} partitions within {timeout:.0f} s "
        f"(partitions per task: {held})"
    )


# -- steps ----------------------------------------------------------------------------------


def _total(run: TaskRun, op: str, t0: float, t1: float, records: int, failed: int) -> None:
    run.recorder.add(
        KIND_TOTAL, op, member=run.plan.task, t0=t0, t1=t1, value=records, error=failed
    )


async def produce_step(run: TaskRun, label: str) -> None:
    topic = str(run.p["data_topic"])
    count = task_share(int(run.p["step_records"]), run.plan.task, run.plan.tasks)
    payload = b"\x00" * int(run.p["record_bytes"])
    delivery = Delivery()
    producer = make_producer(run, delivery)
    # Metadata first, so the timed window holds no bootstrap.
    await _blocking(producer.list_topics, topic, 10)
    if label == "fill":
        server_memory(run, "_before")
    start = await run.barrier.common_start()
    usage = Usage(run)
    sent = await _blocking(produce_back_to_back, producer, topic, count, payload)
    delivered, failed = await _blocking(flush, producer, sent, delivery)
    end = time.perf_counter()
    usage.record()
    run.recorder.requests += delivered
    _total(run, "produce", start, end, delivered, failed)
    for name, n in delivery.failed.items():
        run.recorder.add(KIND_TOTAL, f"produce_failed:{name}", value=n, error=n)
    if label == "fill":
        # The memory is the server's with every task's records in, and once it settled.
        await run.barrier.gather("produced")
        server_memory(run)
        await asyncio.sleep(SETTLE_S)
        server_memory(run, "_settled")
    else:
        server_memory(run)
    run.emit(label)


async def consume_step(run: TaskRun, label: str) -> None:
    topic = str(run.p["data_topic"])
    membership = Membership(pause=True)
    consumer = make_consumer(run, str(run.p["data_group"]), topic, membership)
    timeout = float(run.p.get("timeout_s", 120))
    try:
        early = await settle_group(run, consumer, membership, int(run.p["partitions"]), timeout)
        assigned = membership.assigned
        marks = await _blocking(watermarks, consumer, assigned)
        expected = sum(high - low for low, high in marks.values())
        start = await run.barrier.start_after_last_gather()
        usage = Usage(run)

        def consume_all() -> tuple[int, int, float]:
            membership.pause = False
            consumer.resume(assigned)
            # librdkafka wakes the broker thread of a resumed partition only on its next
            # one-second timer; a request for that broker (ListOffsets) wakes it now.
            consumer.get_watermark_offsets(assigned[0], timeout=10, cached=False)
            got, errors, last = early, 0, time.perf_counter()
            deadline = last + timeout
            while got < expected and time.perf_counter() < deadline:
                messages = take(consumer, CONSUME_WAIT_S)
                if messages:
                    bad = sum(1 for m in messages if m.error())
                    got += len(messages) - bad
                    errors += bad
                    last = time.perf_counter()
                    run.recorder.requests += len(messages)
            return got, errors, last

        got, errors, last = await _blocking(consume_all)
        usage.record()
        _total(run, "consume", start, last, got, errors)
        short = await _blocking(partitions_short, consumer, assigned, marks)
        run.recorder.add(KIND_TOTAL, "consume_expected", value=expected, error=short)
        rebalances = membership.rebalances(start, time.perf_counter())
        run.recorder.add(KIND_TOTAL, "consume_rebalances", value=rebalances, error=rebalances)
        membership.record(run)
        # Every member stays until all are done: one leaving early would rebalance the group
        # under the others' feet.
        await run.barrier.gather("consumed")
        server_memory(run)
    finally:
        await _blocking(consumer.close)
    run.emit(label)


async def all_consumed(
    run: TaskRun, delivered: int, count: Callable[[], int], timeout: float
) -> float:
    """Wait until the consumers of every task together hold as many records as all
    producers had acknowledged (`delivered`: this task's), or `timeout`. The counts travel
    by allGather, so no consumer has to ask the server for its partitions' ends: librdkafka
    would queue that request behind its long-polling Fetch on the same connection, half a
    second each. Returns when this task made the call that found them all: Spark answers
    some tasks most of a second before others, and those may leave the group meanwhile."""
    deadline = time.perf_counter() + timeout
    asked = time.perf_counter()
    # The last records were acknowledged a moment ago: let them arrive before the first
    # gather (each takes Spark most of a second).
    await asyncio.sleep(ALL_CONSUMED_POLL_S)
    for _ in range(int(timeout / ALL_CONSUMED_POLL_S) + 2):
        asked = time.perf_counter()
        expired = asked > deadline
        answers = await run.barrier.gather(f"{delivered},{count()},{int(expired)}")
        parts = [a.split(",") for a in answers]
        produced = sum(int(d) for d, _, _ in parts)
        if sum(int(c) for _, c, _ in parts) >= produced or any(f == "1" for _, _, f in parts):
            return asked
        await asyncio.sleep(ALL_CONSUMED_POLL_S)
    return asked


async def e2e_step(run: TaskRun, label: str) -> None:
    topic = str(run.p["data_topic"])
    rate = float(run.p["step_rate"]) / run.plan.tasks
    duration = float(run.p.get("duration_s", 5))
    timeout = float(run.p.get("timeout_s", 120))
    pad = b"\x00" * max(0, int(run.p["record_bytes"]) - STAMP.size)
    membership = Membership(pause=False)
    consumer = make_consumer(run, str(run.p["data_group"]), topic, membership)
    delivery = Delivery()
    producer = make_producer(run, delivery)
    stamps: list[tuple[int, int]] = []  # (produced, consumed) wall clock ns
    errors = [0]
    last = [0.0]  # perf_counter when the latest record came
    stop = threading.Event()
    consuming: asyncio.Future[None] | None = None
    try:
        await _blocking(producer.list_topics, topic, 10)
        early = await settle_group(run, consumer, membership, int(run.p["partitions"]), timeout)
        start = await run.barrier.start_after_last_gather()
        usage = Usage(run)

        def consume_stamped() -> None:
            unpack = STAMP.unpack_from
            while not stop.is_set():
                messages = take(consumer, CONSUME_WAIT_S)
                if not messages:
                    continue
                now = time.time_ns()
                last[0] = time.perf_counter()
                for m in messages:
                    if m.error():
                        errors[0] += 1
                    else:
                        stamps.append((unpack(m.value())[0], now))
                run.recorder.requests += len(messages)

        consuming = asyncio.ensure_future(_blocking(consume_stamped))
        end, warm = start + WARM_UP_S + duration, start + WARM_UP_S
        sent = await _blocking(produce_paced, producer, topic, rate, start, end, pad, warm)
        delivered, failed = await _blocking(flush, producer, sent, delivery)
        produce_end = time.perf_counter()
        # From then on a member that is done may leave: the rest must not count its leaving.
        consumed_all = await all_consumed(run, delivered, lambda: len(stamps) + early, timeout)
        stop.set()
        await consuming
        usage.record()
        _total(run, "produce", start, produce_end, delivered, failed)
        _total(run, "consume", start, last[0] or start, len(stamps) + early, errors[0])
        rebalances = membership.rebalances(start, consumed_all)
        run.recorder.add(KIND_TOTAL, "consume_rebalances", value=rebalances, error=rebalances)
        membership.record(run)
        run.gauge("offered_rate", float(run.p["step_rate"]), start, end)
        for produced_ns, consumed_ns in stamps:
            if produced_ns < 0:
                continue  # a warm-up record
            run.recorder.phase(
                "e2e",
                "",
                run.plan.task,
                produced_ns / 1e9 - EPOCH_OFFSET,
                consumed_ns / 1e9 - EPOCH_OFFSET,
            )
        server_memory(run)
    finally:
        stop.set()
        if consuming is not None:
            await asyncio.gather(consuming, return_exceptions=True)
        await _blocking(consumer.close)
    run.emit(label)


STEPS = {"fill": produce_step, "produce": produce_step, "consume": consume_step, "e2e": e2e_step}


async def data(run: TaskRun) -> None:
    """One step of the data scenario, as the job's parameters name it."""
    label = run.plan.waves[0][0]
    await STEPS[str(run.p["data_step"])](run, label)
