"""Live progress of the load generator: tasks' counters over UDP to the driver's board, the
stall watch that brings Spark's warnings back, and the progress line (no Spark here)."""

from __future__ import annotations

import socket
import uuid

from minicoord.bench.progress import (
    Counters,
    ProgressBoard,
    ProgressSender,
    StallWatch,
    encode,
)
from minicoord.bench.runner import describe
from minicoord.bench.tasks import ROW_FIELDS, TaskPlan, run_plan
from minicoord.server.process import ServerProcess

WAIT_S = 10.0


def test_counters_add_up() -> None:
    a = Counters(tasks=1, finished=0, members=3, started=2, settled=1, failed=0, requests=10)
    b = Counters(tasks=1, finished=1, members=4, started=4, settled=4, failed=1, requests=7)
    assert a + b == Counters(2, 1, 7, 6, 5, 1, 17)


def test_board_sums_the_latest_counters_of_each_task() -> None:
    with ProgressBoard("127.0.0.1") as board:
        first, second = (ProgressSender(board.address, "job", t) for t in (0, 1))
        first.send(Counters(tasks=1, members=5, started=1, requests=3))
        first.send(Counters(tasks=1, members=5, started=5, settled=5, requests=40))
        second.send(Counters(tasks=1, finished=1, members=2, started=2, settled=2, requests=9))
        totals = board.wait_until("job", lambda c: c.requests == 49, WAIT_S)
        assert totals == Counters(2, 1, 7, 7, 7, 0, 49)
        # Another job's counters, a stale (reordered) datagram and garbage change nothing.
        ProgressSender(board.address, "other-job", 0).send(Counters(tasks=1, requests=1000))
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as raw:
            raw.sendto(encode("job", 0, 1, Counters(tasks=1, requests=1)), board.address)
            raw.sendto(b"not json", board.address)
            raw.sendto(b'{"job": "job"}', board.address)
        assert board.wait_until("other-job", lambda c: c.requests == 1000, WAIT_S).tasks == 1
        assert board.totals("job") == totals
        first.close()
        second.close()


def test_a_sender_without_a_listener_never_fails() -> None:
    ProgressSender(None, "job", 0).send(Counters(tasks=1))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sender = ProgressSender(("127.0.0.1", port), "job", 0)  # nobody listens there now
    for _ in range(3):  # the refused datagram's ICMP error surfaces on a later send
        sender.send(Counters(tasks=1))
    sender.close()


def test_stall_watch_turns_on_after_a_quiet_spell_and_off_on_the_next_move() -> None:
    watch = StallWatch(20.0, now=0.0)
    assert watch.observe((0, 1), 0.5) is None
    assert watch.observe((0, 1), 20.0) is None  # 19.5 s without a change
    assert watch.observe((0, 1), 20.6) is True and watch.stalled
    assert watch.observe((0, 1), 60.0) is None  # reported once
    assert watch.observe((1, 1), 61.0) is False and not watch.stalled
    assert watch.observe((1, 1), 80.0) is None
    assert watch.observe((1, 1), 81.0) is True


def test_progress_line_counts_tasks_members_and_requests() -> None:
    running = Counters(tasks=2, members=12, started=7, settled=3, requests=1234)
    assert describe("minicoord cold-join", 0, 2, 12, running) == (
        "minicoord cold-join: tasks 2 running, 0/2 done, 7/12 members started, 3 settled, "
        "1,234 requests"
    )
    ended = Counters(tasks=2, finished=1, members=12, started=12, settled=11, failed=1)
    assert describe("x", 2, 2, 12, ended) == (
        "x: tasks 0 running, 2/2 done, 12/12 members started, 11 settled, 1 failed, 0 requests"
    )
    # The echo target's members never join: no member counts, requests only.
    assert describe("echo heartbeat", 0, 1, 0, Counters(tasks=1, requests=5)) == (
        "echo heartbeat: tasks 1 running, 0/1 done, 5 requests"
    )


async def test_a_task_reports_its_final_counters(kafka_server: ServerProcess) -> None:
    group = f"progress-{uuid.uuid4().hex[:8]}"
    with ProgressBoard("127.0.0.1") as board:
        plan = TaskPlan(
            "cold-join",
            "minicoord",
            kafka_server.bootstrap,
            0,
            1,
            [("cold-join", [(group, i, 3) for i in range(3)])],
            {"topic": "topic6", "timeout_s": 30},
            progress=board.address,
            job="j",
        )
        rows = await run_plan(plan)
        final = board.wait_until("j", lambda c: c.finished == 1, WAIT_S)
    kind = ROW_FIELDS.index("kind")
    requests = sum(1 for r in rows if r[kind] == "request")
    assert final == Counters(1, 1, 3, 3, 3, 0, requests)
    assert requests >= 3 * 4  # FindCoordinator, two JoinGroups, SyncGroup, ... per member
    # Outside a Spark barrier stage no executor is named.
    assert {r[ROW_FIELDS.index("executor")] for r in rows} == {""}


def test_a_board_that_cannot_bind_stays_empty() -> None:
    # 192.0.2.1 (TEST-NET-1) is no address of this machine: bind fails locally, no packet.
    with ProgressBoard("192.0.2.1") as board:
        assert board.address is None and isinstance(board.error, OSError)
        assert board.totals("job") == Counters()
