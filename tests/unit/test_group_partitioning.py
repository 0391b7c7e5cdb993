"""Group -> `__consumer_offsets` partition: Kafka's `Utils.abs(groupId.hashCode) % n`.

Expected hashes were checked against a JVM (`String.hashCode`), and are derived by hand below
where the input is unusual.
"""

from __future__ import annotations

import pytest
from helpers_coordinator import Harness
from minicoord.server.coordinator.offset_requests import OffsetCommitEntry
from minicoord.server.coordinator.partitioning import java_string_hash, partition_for

INT_MIN = -(2**31)


@pytest.mark.parametrize(
    ("group_id", "java_hash", "partition"),
    [
        ("test-group", 627841412, 12),
        ("my-group", -1906497762, 12),
        ("foo", 101574, 24),
        ("", 0, 0),
        ("a", 97, 47),
    ],
)
def test_known_vectors(group_id: str, java_hash: int, partition: int) -> None:
    assert java_string_hash(group_id) == java_hash
    assert partition_for(group_id, 50) == partition


def test_foo_by_hand() -> None:
    # 'f' = 102, 'o' = 111: 102*31^2 + 111*31 + 111.
    assert 102 * 31 * 31 + 111 * 31 + 111 == 101574
    assert java_string_hash("foo") == 101574
    assert 101574 % 50 == 24


def test_hash_wraps_at_32_bits_and_goes_negative() -> None:
    # "my-group" overflows: the exact polynomial exceeds 2^31 and Java keeps the low 32 bits.
    exact = sum(ord(c) * 31 ** (len("my-group") - 1 - i) for i, c in enumerate("my-group"))
    assert exact > 2**31
    low = exact % 2**32
    assert low - 2**32 == -1906497762 == java_string_hash("my-group")
    # abs(-1906497762) = 1906497762, and 1906497762 % 50 = 12.
    assert partition_for("my-group", 50) == 12


def test_non_ascii_hashes_utf16_code_units_including_a_surrogate_pair() -> None:
    # "grüße-😀": ü = U+00FC and ß = U+00DF are single code units; 😀 = U+1F600 is the
    # surrogate pair D83D DE00, so Java sees 8 code units, not 7 code points.
    units = [0x67, 0x72, 0xFC, 0xDF, 0x65, 0x2D, 0xD83D, 0xDE00]
    assert "grüße-😀".encode("utf-16-be") == b"".join(u.to_bytes(2, "big") for u in units)
    exact = sum(u * 31 ** (len(units) - 1 - i) for i, u in enumerate(units))
    assert exact % 2**32 == 347391577  # below 2^31, so the int is positive
    assert java_string_hash("grüße-😀") == 347391577
    assert partition_for("grüße-😀", 50) == 27


def test_lone_emoji_is_two_code_units() -> None:
    # 0xD83D * 31 + 0xDE00 = 55357 * 31 + 56832 = 1772899 (a code-point hash would be 128512).
    assert java_string_hash("😀") == 55357 * 31 + 56832 == 1772899
    assert partition_for("😀", 50) == 49
    assert java_string_hash("é") == 233
    assert partition_for("é", 50) == 33


@pytest.mark.parametrize("group_id", ["polygenelubricants", "GydZG_", "DESIGNING WORKHOUSES"])
def test_integer_min_value_maps_to_partition_zero(group_id: str) -> None:
    # These strings hash to Integer.MIN_VALUE. Java's Math.abs would leave it negative (and
    # % 50 would give -48); Kafka's Utils.abs maps it to 0.
    assert java_string_hash(group_id) == INT_MIN
    assert abs(INT_MIN) % 50 == 48  # what a naive Python abs would give
    assert partition_for(group_id, 50) == 0
    assert partition_for(group_id, 7) == 0


def test_partition_count_is_respected() -> None:
    assert partition_for("test-group", 1) == 0
    assert partition_for("test-group", 10) == 627841412 % 10 == 2
    assert partition_for("my-group", 7) == 1906497762 % 7
    for n in (1, 3, 50, 1000):
        assert 0 <= partition_for("anything", n) < n


def test_coordinator_uses_the_configured_partition_count() -> None:
    h = Harness(offsets_topic_num_partitions=10)
    assert h.coordinator.partition_for("test-group") == 2
    errors = h.commit(0, [OffsetCommitEntry("t", 0, 5)], group_id="test-group")
    assert errors == [0]
    # The record goes to the group's offsets partition.
    assert [p for p, _ in h.records] == [2]


def test_group_records_land_on_the_groups_partition() -> None:
    h = Harness()
    h.form_group(0, 1, group_id="my-group")
    assert h.records
    assert {p for p, _ in h.records} == {12}
    assert h.group("my-group").partition == 12
