"""What thousands of members and connections share instead of holding a copy each.

Memory itself is measured by benchmarks; these check the layout that keeps it small: a timer
that was superseded or cancelled lets go of its key and arguments at once, connections from
one host share their address strings and hold no frame buffer until a read needs one, members
share their client id, protocols and timeouts.
"""

from __future__ import annotations

import gc
import socket
import struct
import weakref
from typing import Any

import pytest
from minicoord.protocol.framing import FrameReader, frame
from minicoord.server.app import arrival_address
from minicoord.server.broker import Broker
from minicoord.server.config import Config
from minicoord.server.connection import KafkaConnection
from minicoord.server.coordinator.member import Member
from minicoord.server.coordinator.timers import TimerQueue


class Token:
    """Something a timer holds, whose release a weak reference can see."""


def test_superseded_and_cancelled_timers_release_what_they_held() -> None:
    q = TimerQueue()
    held = [Token(), Token(), Token()]
    refs = [weakref.ref(t) for t in held]
    q.schedule(("k", 1), 100, lambda now, t: t, (held[0],))
    q.schedule(("k", 1), 200, lambda now, t: t, (held[1],))  # supersedes the first
    q.schedule(("k", 2), 300, lambda now, t: t, (held[2],))
    q.cancel(("k", 2))
    del held
    gc.collect()
    # Both stale entries are still in the heap, as husks.
    assert [r() is None for r in refs] == [True, False, True]
    assert [cb(250) for cb in q.pop_due(250)] == [refs[1]()]
    assert q.next_deadline() is None


def test_frame_reader_joins_frames_spread_over_many_reads() -> None:
    reader = FrameReader(1 << 20)
    payload = bytes(range(256)) * 40
    data = frame(payload) + frame(b"tail")
    frames: list[Any] = []
    for i in range(0, len(data), 7):
        frames += reader.feed(data[i : i + 7])
    assert [bytes(f) for f in frames] == [payload, b"tail"]
    assert reader.buffered == 0


class FakeTransport:
    def __init__(self, peer: tuple[str, int], local: tuple[str, int]) -> None:
        self._extra = {"peername": peer, "sockname": local}
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def get_extra_info(self, name: str) -> Any:
        return self._extra.get(name)

    def close(self) -> None:
        pass


def test_connections_from_one_host_share_their_address_strings() -> None:
    broker = Broker(Config())
    a, b = KafkaConnection(broker), KafkaConnection(broker)
    # Equal strings made separately, as the event loop hands them out.
    host = "".join(["10.1.2", ".3"])
    a.connection_made(FakeTransport((host, 40001), ("127.0.0.1", 9092)))  # type: ignore[arg-type]
    host = "".join(["10.1", ".2.3"])
    b.connection_made(FakeTransport((host, 40002), ("127.0.0.1", 9092)))  # type: ignore[arg-type]
    assert a.client_host == b.client_host == "/10.1.2.3"
    assert a.client_host is b.client_host
    assert a.address is b.address
    assert a.address == ("127.0.0.1", 9092)
    assert (a.peer, b.peer) == ("10.1.2.3:40001", "10.1.2.3:40002")
    assert KafkaConnection(broker).peer == "unknown"


def test_a_listener_on_one_address_names_it_for_all_its_connections() -> None:
    # Its connections then never ask their transport (which would keep the answer for each).
    with (
        socket.create_server(("127.0.0.1", 0)) as one,
        socket.create_server(("0.0.0.0", 0)) as every,
        socket.create_server(("127.0.0.1", 0)) as other,
    ):
        assert arrival_address([one]) == ("127.0.0.1", one.getsockname()[1])
        # A wildcard bind: a connection arrives at whichever address the client used.
        assert arrival_address([every]) is None
        assert arrival_address([one, other]) is None


def member(client_id: str) -> Member:
    return Member(
        member_id="m",
        group_instance_id=None,
        client_id=client_id,
        client_host="/127.0.0.1",
        # Equal ints made separately, as each request's decoding makes them.
        rebalance_timeout_ms=int("60000"),
        session_timeout_ms=int("30000"),
        protocols=(("range", b"\x00\x01"),),
    )


def test_members_share_their_client_id_protocols_and_timeouts() -> None:
    one = member("".join(["billing-", "consumer"]))
    two = member("".join(["billing", "-consumer"]))
    assert one.client_id is two.client_id
    assert one.protocols is two.protocols
    assert one.session_timeout_ms is two.session_timeout_ms
    assert one.rebalance_timeout_ms is two.rebalance_timeout_ms
    # A rejoin's timeouts are shared too.
    one.set_timeouts(int("90000"), int("45000"))
    two.set_timeouts(int("90000"), int("45000"))
    assert (one.rebalance_timeout_ms, one.session_timeout_ms) == (90_000, 45_000)
    assert one.session_timeout_ms is two.session_timeout_ms


def test_a_connection_buffers_only_once_a_read_is_not_one_whole_frame() -> None:
    broker = Broker(Config())
    conn = KafkaConnection(broker)
    transport = FakeTransport(("127.0.0.1", 40001), ("127.0.0.1", 9092))
    conn.connection_made(transport)  # type: ignore[arg-type]
    api_versions = frame(struct.pack(">hhih", 18, 0, 7, 1) + b"c")
    for _ in range(3):
        conn.data_received(api_versions)
    assert conn._reader is None
    assert len(transport.written) == 3
    conn.data_received(api_versions[:5])
    assert conn.buffered == 5
    conn.data_received(api_versions[5:])
    assert conn.buffered == 0
    assert len(transport.written) == 4


def test_the_shared_protocols_table_holds_a_bounded_amount_of_metadata(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Members of a group share one copy of their protocols; the table that finds it must not
    # keep what members have dropped without bound, however large and varied the metadata.
    from minicoord.server.coordinator import member as members

    monkeypatch.setattr(members, "_INTERNED_BYTES_LIMIT", 1 << 20)
    members._INTERNED.clear()
    monkeypatch.setattr(members, "_interned_bytes", 0)
    quarter = b"m" * (1 << 18)
    for i in range(20):  # 5 MiB of distinct subscriptions, against a 1 MiB bound
        members.intern_protocols([("range", quarter + str(i).encode())])
        kept = sum(len(m) for protocols in members._INTERNED for _, m in protocols)
        assert kept <= 1 << 20
    # What is shared is still shared: the same protocols give back the very same copy.
    first, names = members.intern_protocols([("range", b"sub")])
    again, _ = members.intern_protocols([("range", b"sub")])
    assert again is first and names == frozenset({"range"})


def test_caches_keyed_by_group_keep_a_few_mb_for_groups_long_gone() -> None:
    # A CI broker sees new groups and topics all day, and each test's are deleted after it.
    # What the hot paths remember per name must stop at a few MB, not at many times the
    # server's own size (sweep35 measured 55-75 MB with the earlier bounds).
    from minicoord.protocol import records
    from minicoord.server.config import Config
    from minicoord.server.coordinator import member as members
    from minicoord.server.coordinator.coordinator import GroupCoordinator

    coordinator = GroupCoordinator(Config())
    name = "tests.suite.module.TestClass.test_a_long_descriptive_name-{}-" + "x" * 40
    for i in range(20_000):
        group = name.format(i)
        records.offset_commit_key(group, "topic-" + group, i % 3)
        coordinator.partition_for(group)
        members.intern_protocols([("range", group.encode())])
    assert len(records._KEYS) <= 8192
    assert len(coordinator._partitions) <= 8192
    assert len(members._INTERNED) <= 4096
    kept = sum(len(g) * 2 for g, _, _ in records._KEYS) + sum(map(len, records._KEYS.values()))
    assert kept < 4 << 20
