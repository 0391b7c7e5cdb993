"""The storage thread shares the interpreter's lock at a short switch interval while its work
runs, and gives the host's interval back after: when the call ends, fails or is cancelled,
and only when the last of several concurrent calls (of one server or several) ends."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Iterator

import pytest
from minicoord.server.storage_thread import SHARING_SWITCH_INTERVAL_S, StorageThread

HOST_INTERVAL = 0.004


@pytest.fixture(autouse=True)
def host_interval() -> Iterator[None]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(HOST_INTERVAL)
    assert sys.getswitchinterval() == HOST_INTERVAL  # kept exactly, or the tests compare wrong
    yield
    sys.setswitchinterval(before)


def interval_inside() -> float:
    return sys.getswitchinterval()


async def test_interval_short_while_work_runs_and_restored_after() -> None:
    storage = StorageThread()
    try:
        assert await storage.run(interval_inside) == SHARING_SWITCH_INTERVAL_S
        assert sys.getswitchinterval() == HOST_INTERVAL
    finally:
        storage.shutdown()


async def test_restored_when_the_work_raises() -> None:
    def fail() -> None:
        raise OSError("disk gone")

    storage = StorageThread()
    try:
        with pytest.raises(OSError, match="disk gone"):
            await storage.run(fail)
        assert sys.getswitchinterval() == HOST_INTERVAL
    finally:
        storage.shutdown()


async def test_a_shorter_host_interval_is_kept() -> None:
    sys.setswitchinterval(0.0001)
    shorter = sys.getswitchinterval()  # as the interpreter keeps it (whole microseconds)
    assert shorter < SHARING_SWITCH_INTERVAL_S
    storage = StorageThread()
    try:
        assert await storage.run(interval_inside) == shorter
        assert sys.getswitchinterval() == shorter
    finally:
        storage.shutdown()


async def test_the_host_interval_is_given_back_to_the_microsecond() -> None:
    # 0.9 s reads back as 0.8999999999999999, which set as read would lose a microsecond.
    sys.setswitchinterval(0.9)
    host = sys.getswitchinterval()
    storage = StorageThread()
    try:
        for _ in range(3):
            assert await storage.run(interval_inside) == SHARING_SWITCH_INTERVAL_S
            assert sys.getswitchinterval() == host
    finally:
        storage.shutdown()


async def test_overlapping_calls_restore_when_the_last_ends() -> None:
    # Two servers' threads: the first call to end must not give the interval back while
    # the other still works.
    release_a, release_b = threading.Event(), threading.Event()
    a, b = StorageThread(), StorageThread()
    try:
        first = asyncio.ensure_future(a.run(release_a.wait, 10))
        second = asyncio.ensure_future(b.run(release_b.wait, 10))
        await asyncio.sleep(0)
        assert sys.getswitchinterval() == SHARING_SWITCH_INTERVAL_S
        release_a.set()
        assert await first is True
        assert sys.getswitchinterval() == SHARING_SWITCH_INTERVAL_S
        release_b.set()
        assert await second is True
        assert sys.getswitchinterval() == HOST_INTERVAL
    finally:
        release_a.set()
        release_b.set()
        a.shutdown()
        b.shutdown()


async def test_cancelled_wait_restores_and_shutdown_waits_for_the_work() -> None:
    release = threading.Event()
    finished = threading.Event()

    def work() -> None:
        release.wait(10)
        finished.set()

    storage = StorageThread()
    call = asyncio.ensure_future(storage.run(work))
    await asyncio.sleep(0)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert sys.getswitchinterval() == HOST_INTERVAL
    release.set()
    storage.shutdown()
    assert finished.is_set()


def test_servers_on_two_loops_and_threads_count_together() -> None:
    # Two embedded servers, each on its own loop and thread: the interval is the host's
    # again only once both calls have ended.
    both_in = threading.Barrier(3, timeout=10)
    release = threading.Event()

    def work() -> bool:
        both_in.wait()
        return release.wait(10)

    def serve(results: list[bool]) -> None:
        storage = StorageThread()
        try:
            results.append(asyncio.run(storage.run(work)))
        finally:
            storage.shutdown()

    results: list[bool] = []
    threads = [threading.Thread(target=serve, args=(results,)) for _ in range(2)]
    for t in threads:
        t.start()
    both_in.wait()
    assert sys.getswitchinterval() == SHARING_SWITCH_INTERVAL_S
    release.set()
    for t in threads:
        t.join(10)
    assert results == [True, True]
    assert sys.getswitchinterval() == HOST_INTERVAL
