"""The share-partition state machine (server/data/share_partitions.py), fed batches and time
by hand: acquisition, acknowledgement, release, lock expiry and the delivery limit, with the
transitions Kafka's SharePartition makes."""

from __future__ import annotations

import struct

import pytest
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.records import Record
from minicoord.server.coordinator.timers import TimerQueue
from minicoord.server.data.share_partitions import (
    ACCEPT,
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    GAP,
    REJECT,
    RELEASE,
    RENEW,
    AckError,
    SharePartition,
    check_ack_batches,
)
from minicoord.storage.batch import CONTROL, TRANSACTIONAL, encode_batch

LOCK_MS = 30_000
ATTRIBUTES = 21  # the attributes' place in a batch header


class Log:
    """Batches at their offsets; `read` returns whole batches from the one holding `offset`."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, int, bytes]] = []
        self.next = 0

    def append(self, count: int, control: bool = False, gap: int = 0) -> None:
        self.next += gap
        data = encode_batch(self.next, [Record(b"k", b"v%d" % i) for i in range(count)], 0)
        if control:
            struct.pack_into(">h", data, ATTRIBUTES, CONTROL | TRANSACTIONAL)
        self.batches.append((self.next, self.next + count - 1, bytes(data)))
        self.next += count

    def read(self, offset: int) -> bytes:
        return b"".join(data for _, last, data in self.batches if last >= offset)


def partition(start: int = 0, limit: int = 5) -> tuple[SharePartition, TimerQueue]:
    timers = TimerQueue()
    return SharePartition(("g", "t", 0), start, timers, limit), timers


def acquire(sp: SharePartition, log: Log, member: str, now: int = 0, most: int = 500) -> list:
    _, ranges = sp.acquire(member, most, 2000, LOCK_MS, now, 0, log.read)
    return ranges


def fire(timers: TimerQueue, now: int) -> None:
    for callback in timers.pop_due(now):
        callback(now)


def states(sp: SharePartition) -> dict[int, int]:
    return {offset: entry.state for offset, entry in sp.records.items()}


def test_whole_batches_are_acquired_past_max_records_and_the_next_fetch_goes_on() -> None:
    log = Log()
    log.append(3)
    log.append(3)
    sp, _ = partition()
    # Batch-optimized: the batch that reaches the budget is acquired whole.
    assert acquire(sp, log, "a", most=2) == [(0, 2, 1)]
    assert acquire(sp, log, "b", most=10) == [(3, 5, 1)]
    assert acquire(sp, log, "c") == []
    assert (sp.start, sp.end) == (0, 6)


def test_record_limit_mode_acquires_no_more_than_asked() -> None:
    log = Log()
    log.append(5)
    sp, _ = partition()
    assert sp.acquire("a", 2, 2000, LOCK_MS, 0, 0, log.read, record_limit=True)[1] == [(0, 1, 1)]
    # The rest of the batch waits in the window for the next fetch.
    assert states(sp) == {0: ACQUIRED, 1: ACQUIRED, 2: AVAILABLE, 3: AVAILABLE, 4: AVAILABLE}
    assert sp.acquire("b", 2, 2000, LOCK_MS, 0, 0, log.read, record_limit=True)[1] == [(2, 3, 1)]


def test_accepted_records_move_the_start_offset_past_them() -> None:
    log = Log()
    log.append(4)
    sp, _ = partition()
    acquire(sp, log, "a")
    sp.acknowledge("a", [(0, 1, [ACCEPT])], LOCK_MS, 10)
    assert sp.start == 2 and states(sp) == {2: ACQUIRED, 3: ACQUIRED}
    sp.acknowledge("a", [(2, 3, [ACCEPT, REJECT])], LOCK_MS, 10)
    assert (sp.start, sp.end, sp.records) == (4, 4, {})


def test_a_released_record_is_delivered_again_with_its_count_raised() -> None:
    log = Log()
    log.append(3)
    sp, _ = partition()
    acquire(sp, log, "a")
    sp.acknowledge("a", [(0, 0, [ACCEPT]), (1, 1, [RELEASE]), (2, 2, [ACCEPT])], LOCK_MS, 0)
    assert states(sp) == {1: AVAILABLE, 2: ACKNOWLEDGED}
    assert acquire(sp, log, "b") == [(1, 1, 2)]


def test_a_lock_that_times_out_gives_the_records_back() -> None:
    log = Log()
    log.append(2)
    sp, timers = partition()
    acquire(sp, log, "a", now=1000)
    fire(timers, 1000 + LOCK_MS - 1)
    assert states(sp) == {0: ACQUIRED, 1: ACQUIRED}
    fire(timers, 1000 + LOCK_MS)
    assert states(sp) == {0: AVAILABLE, 1: AVAILABLE}
    # The member whose lock expired can no longer acknowledge them.
    with pytest.raises(AckError) as refused:
        sp.acknowledge("a", [(0, 1, [ACCEPT])], LOCK_MS, 0)
    assert refused.value.error == ErrorCode.INVALID_RECORD_STATE


def test_renewing_a_lock_moves_its_expiry() -> None:
    log = Log()
    log.append(1)
    sp, timers = partition()
    acquire(sp, log, "a", now=0)
    sp.acknowledge("a", [(0, 0, [RENEW])], LOCK_MS, 20_000)
    fire(timers, LOCK_MS)
    assert states(sp) == {0: ACQUIRED}
    fire(timers, 20_000 + LOCK_MS)
    assert states(sp) == {0: AVAILABLE}


def test_after_the_delivery_limit_a_returned_record_is_archived() -> None:
    log = Log()
    log.append(1)
    sp, _ = partition(limit=2)
    assert acquire(sp, log, "a") == [(0, 0, 1)]
    sp.release("a")
    assert acquire(sp, log, "a") == [(0, 0, 2)]
    sp.release("a")
    assert (sp.start, sp.records) == (1, {})
    assert acquire(sp, log, "a") == []


def test_acknowledgements_apply_all_or_none() -> None:
    log = Log()
    log.append(4)
    sp, _ = partition()
    acquire(sp, log, "a", most=2)  # 0-3, one batch
    sp.release("a")
    acquire(sp, log, "b")
    # Offsets 0-3 are b's now: a's acknowledgement of 0-1 fails on the first record and
    # nothing of b's changes.
    with pytest.raises(AckError) as refused:
        sp.acknowledge("a", [(0, 1, [ACCEPT])], LOCK_MS, 0)
    assert refused.value.error == ErrorCode.INVALID_RECORD_STATE
    assert "owner" in refused.value.message
    with pytest.raises(AckError):
        sp.acknowledge("b", [(0, 1, [ACCEPT]), (7, 7, [ACCEPT])], LOCK_MS, 0)
    assert states(sp) == {0: ACQUIRED, 1: ACQUIRED, 2: ACQUIRED, 3: ACQUIRED}


def test_gaps_and_control_batches_are_archived_not_delivered() -> None:
    log = Log()
    log.append(2)
    log.append(1, control=True)
    log.append(2, gap=3)  # offsets 3-5 are missing (compacted away)
    sp, _ = partition()
    assert acquire(sp, log, "a") == [(0, 1, 1), (6, 7, 1)]
    assert states(sp) == {0: ACQUIRED, 1: ACQUIRED, 2: ARCHIVED, 3: ARCHIVED, 4: ARCHIVED,
                          5: ARCHIVED, 6: ACQUIRED, 7: ACQUIRED}  # fmt: skip
    sp.acknowledge("a", [(0, 1, [ACCEPT]), (6, 7, [ACCEPT])], LOCK_MS, 0)
    assert (sp.start, sp.records) == (8, {})


def test_the_in_flight_limit_stops_new_acquisition_until_records_are_done() -> None:
    log = Log()
    for _ in range(3):
        log.append(2)
    sp, _ = partition()
    assert sp.acquire("a", 500, 2, LOCK_MS, 0, 0, log.read)[1] == [(0, 1, 1)]
    assert sp.acquire("a", 500, 2, LOCK_MS, 0, 0, log.read)[1] == []
    sp.acknowledge("a", [(0, 1, [GAP])], LOCK_MS, 0)
    assert sp.acquire("a", 500, 2, LOCK_MS, 0, 0, log.read)[1] == [(2, 3, 1)]


def test_records_below_the_log_start_are_done() -> None:
    log = Log()
    log.append(4)
    sp, _ = partition()
    acquire(sp, log, "a", most=1)
    sp.release("a")
    sp.move_start_to(3)
    assert (sp.start, sorted(sp.records)) == (3, [3])


def test_malformed_acknowledgement_batches_are_named() -> None:
    assert check_ack_batches([(0, 1, [ACCEPT])], REJECT) is None
    assert "greater" in check_ack_batches([(2, 1, [ACCEPT])], REJECT)
    assert "sorted" in check_ack_batches([(5, 6, [ACCEPT]), (0, 1, [ACCEPT])], REJECT)
    assert "empty" in check_ack_batches([(0, 1, [])], REJECT)
    assert "match" in check_ack_batches([(0, 2, [ACCEPT, REJECT])], REJECT)
    assert "type" in check_ack_batches([(0, 0, [RENEW])], REJECT)
    assert check_ack_batches([(0, 0, [RENEW])], RENEW) is None


def test_records_that_keep_coming_back_are_given_in_smaller_pieces() -> None:
    # Kafka 4.2, delivery limit 5: from the third delivery on (max(2, ceil(5/2)) = 3) a piece
    # is the batch halved once more per delivery; the last delivery of a record is alone.
    log = Log()
    log.append(8)
    sp, _ = partition(limit=5)
    pieces = []
    for _ in range(20):
        ranges = acquire(sp, log, "a")
        if not ranges:
            break
        pieces.append([(first, last, count) for first, last, count in ranges])
        sp.release("a")
    sizes = [(sum(last - first + 1 for first, last, _ in p), p[0][2]) for p in pieces]
    # (records in the piece, delivery count): 8, 8, 8 whole; then 4 at the fourth delivery;
    # then each record alone on its fifth.
    assert sizes[:4] == [(8, 1), (8, 2), (8, 3), (4, 4)]
    assert (1, 5) in sizes
    assert all(size == 1 for size, count in sizes if count == 5)
    # In the end every record was delivered five times and then archived.
    assert (sp.start, sp.records) == (8, {})


def test_what_a_restart_keeps_makes_the_window_again() -> None:
    log = Log()
    log.append(6)
    sp, _ = partition()
    acquire(sp, log, "a")  # 0-5, delivered once
    sp.acknowledge("a", [(1, 1, [ACCEPT]), (2, 2, [RELEASE]), (3, 3, [REJECT])], LOCK_MS, 0)
    kept = sp.state_batches()
    # 0 and 4-5 are still held (kept as available, delivered once), 1 done, 2 back, 3 done.
    assert kept == [(0, 0, AVAILABLE, 1), (1, 1, ACKNOWLEDGED, 1), (2, 2, AVAILABLE, 1),
                    (3, 3, ARCHIVED, 1), (4, 5, AVAILABLE, 1)]  # fmt: skip
    again, _ = partition(start=sp.start)
    again.restore(kept)
    assert (again.start, again.end) == (0, 6)
    assert states(again) == {0: AVAILABLE, 1: ACKNOWLEDGED, 2: AVAILABLE, 3: ARCHIVED,
                             4: AVAILABLE, 5: AVAILABLE}  # fmt: skip
    # Delivered again with the count raised, the done ones not at all.
    assert acquire(again, log, "b") == [(0, 0, 2), (2, 2, 2), (4, 5, 2)]


def test_the_share_state_partition_is_kafkas() -> None:
    import uuid

    from minicoord.server.data.share_state import state_partition

    # Java's "key".hashCode() of SharePartitionKey.asCoordinatorKey, abs, mod 50 (computed
    # with a JVM: "grp:AAECAwQFBgcICQoLDA0ODw:3" -> 26, "share-test:...:0" -> 4).
    topic_id = uuid.UUID(bytes=bytes(range(16)))
    assert state_partition("grp", topic_id, 3, 50) == 26
    assert state_partition("share-test", topic_id, 0, 50) == 4


def test_share_snapshot_records_read_back_as_written() -> None:
    import uuid

    from minicoord.protocol import share_state_records as ssr

    topic_id = uuid.uuid4()
    key = ssr.encode_key("g", topic_id, 7)
    assert key[:2] == b"\x00\x00"  # record type 0: a snapshot
    assert ssr.decode_key(key) == ("g", topic_id, 7)
    value = ssr.encode_value(5, [(5, 6, ACKNOWLEDGED, 1), (8, 8, AVAILABLE, 3)], 2, 1, 2)
    assert ssr.decode_value(value) == (5, [(5, 6, ACKNOWLEDGED, 1), (8, 8, AVAILABLE, 3)])
