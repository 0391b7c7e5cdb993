"""`minicoord log dump` and `minicoord log compact` on a log the real server wrote.

dump prints every record decoded (offset commits and group metadata, in Kafka's schemas);
compact rewrites a log of N commits over K keys to exactly K records (the latest value of
each key, keeping its offset), and the server restarted on the compacted log serves the same
offsets and group. compact, and a second server, refuse a data directory a running server
holds.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import OffsetAndMetadata, TopicPartition
from durakit import (
    Node,
    minicoord_log,
    offset_commit,
    offset_fetch,
    partition_of,
    reading,
    segments,
    wait_for_value,
)

pytestmark = pytest.mark.timeout(60)

TOPIC = "tools"
PARTITIONS = 10
ROUNDS = 60
GROUP = "durability-tools-offsets"
MEMBER_GROUP = "durability-tools-members"
_LINE = re.compile(
    r"topic=__consumer_offsets partition=(\d+) offset=(\d+) timestamp=(\d+) "
    r"key=(\S+?)\((.*?)\) value=(.*)"
)


def value_of(rnd: int, partition: int) -> int:
    return rnd * 1000 + partition


def parse_dump(text: str) -> list[tuple[int, int, str, str, str]]:
    rows = []
    for line in text.splitlines():
        if not line.startswith("topic=__consumer_offsets "):
            continue  # the topics' own logs (the cluster metadata log here)
        match = _LINE.fullmatch(line)
        assert match, f"not a dump line: {line!r}"
        rows.append((int(match[1]), int(match[2]), match[4], match[5], match[6]))
    return rows


async def member_commits(node: Node) -> None:
    """A subscribed member joins, commits and leaves: group metadata records plus offsets."""
    consumer = AIOKafkaConsumer(
        TOPIC,
        bootstrap_servers=node.bootstrap,
        group_id=MEMBER_GROUP,
        client_id="tools-member",
        enable_auto_commit=False,
        session_timeout_ms=10_000,
        heartbeat_interval_ms=300,
    )
    await asyncio.wait_for(consumer.start(), 20)
    try:
        await wait_for_value(
            reading(lambda: consumer.assignment()),
            lambda a: len(a) == PARTITIONS,
            20,
            what="the member's assignment",
        )
        offsets = {TopicPartition(TOPIC, p): OffsetAndMetadata(5000 + p, "m") for p in (3, 4)}
        await asyncio.wait_for(consumer.commit(offsets), 20)
    finally:
        await asyncio.wait_for(consumer.stop(), 20)


async def test_dump_and_compact(node_factory: Any) -> None:
    node: Node = node_factory({}, [(TOPIC, PARTITIONS)])
    node.start()
    for rnd in range(ROUNDS):
        offsets = {p: value_of(rnd, p) for p in range(PARTITIONS)}
        assert await offset_commit(node.port, GROUP, TOPIC, offsets) == [0] * PARTITIONS
    await member_commits(node)

    # compact will not touch a log a running server holds.
    refused = minicoord_log("compact", str(node.data_dir))
    assert refused.returncode == 2
    assert "is in use by another minicoord process" in refused.stderr
    node.stop()

    part = partition_of(GROUP)
    dump = minicoord_log("dump", str(node.data_dir))
    assert dump.returncode == 0, dump.stderr
    rows = parse_dump(dump.stdout)
    ours = [r for r in rows if r[0] == part and f"group='{GROUP}'" in r[3]]
    assert len(ours) == ROUNDS * PARTITIONS
    assert [r[1] for r in ours] == list(range(ROUNDS * PARTITIONS))  # offsets in order
    assert ours[-1][2] == "OffsetCommitKey"
    assert ours[-1][3] == f"version=1, group='{GROUP}', topic='{TOPIC}', partition=9"
    assert ours[-1][4].startswith(f"OffsetCommitValue(version=3, offset={value_of(59, 9)}, ")
    metadata = [r for r in rows if r[2] == "GroupMetadataKey"]
    assert metadata, dump.stdout
    assert all(r[3] == f"version=2, group='{MEMBER_GROUP}'" for r in metadata)
    assert "protocol_type='consumer'" in metadata[0][4]
    assert "tools-member" in metadata[0][4]  # the member's client id
    member_offsets = [
        r[4]
        for r in rows
        if r[2] == "OffsetCommitKey" and f"group='{MEMBER_GROUP}'" in r[3] and r[3][-1] in "34"
    ]
    assert [v.split(", leader_epoch")[0] for v in member_offsets] == [
        "OffsetCommitValue(version=3, offset=5003",
        "OffsetCommitValue(version=3, offset=5004",
    ]
    assert all("metadata='m'" in v for v in member_offsets)
    # --partition narrows the dump to one partition.
    only = minicoord_log("dump", str(node.data_dir), "--partition", str(part))
    assert {r[0] for r in parse_dump(only.stdout)} == {part}
    # A log that is not there is said so (exit 2), not an empty dump that looks like success.
    none = minicoord_log("dump", str(node.data_dir), "--topic", "nosuch", "--partition", "3")
    assert none.returncode == 2 and none.stdout == ""
    assert (
        none.stderr.strip()
        == f"minicoord: {node.data_dir} holds no log of topic nosuch, partition 3"
    )
    # A reader that stops early (`| head -1`) ends the dump quietly.
    head = subprocess.run(
        f"{sys.executable} -m minicoord.server.cli log dump {node.data_dir} | head -1",
        shell=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert len(head.stdout.splitlines()) == 1 and "Traceback" not in head.stderr, head.stderr
    size_before = sum(f.stat().st_size for f in segments(node.data_dir, part))

    compact = minicoord_log("compact", str(node.data_dir))
    assert compact.returncode == 0, compact.stderr
    records_before = len([r for r in rows if r[0] == part])
    keys = len({(r[2], r[3]) for r in rows if r[0] == part})
    summary = re.search(
        rf"__consumer_offsets-{part}: (\d+) -> (\d+) records, (\d+) -> (\d+) bytes",
        compact.stdout,
    )
    assert summary, compact.stdout
    assert (int(summary[1]), int(summary[2])) == (records_before, keys)
    assert int(summary[4]) < int(summary[3]) == size_before
    assert minicoord_log("verify", str(node.data_dir)).returncode == 0

    after = parse_dump(minicoord_log("dump", str(node.data_dir)).stdout)
    ours_after = [r for r in after if r[0] == part and f"group='{GROUP}'" in r[3]]
    # Exactly the last round: one record per key, at the offset it had.
    last = (ROUNDS - 1) * PARTITIONS
    assert [(r[1], r[3].rsplit("=", 1)[1]) for r in ours_after] == [
        (last + p, str(p)) for p in range(PARTITIONS)
    ]
    for r in ours_after:
        p = int(r[3].rsplit("=", 1)[1])
        assert r[4].startswith(f"OffsetCommitValue(version=3, offset={value_of(ROUNDS - 1, p)}, ")
    assert len([r for r in after if r[0] == part]) == keys
    assert len([r for r in after if r[2] == "GroupMetadataKey"]) == 1  # the latest only
    assert sum(f.stat().st_size for f in segments(node.data_dir, part)) == int(summary[4])

    # The server on the compacted log: the same offsets, the same group, and new commits
    # append after the retained offsets.
    node.start()
    expected = {p: value_of(ROUNDS - 1, p) for p in range(PARTITIONS)}
    error, got = await wait_for_value(
        lambda: offset_fetch(node.port, GROUP, TOPIC, list(range(PARTITIONS))),
        lambda r: r[0] == 0,
        15,
        what="the compacted partition to load",
    )
    assert got == expected
    error, got = await offset_fetch(node.port, MEMBER_GROUP, TOPIC, [3, 4])
    assert (error, got) == (0, {3: 5003, 4: 5004})
    assert await offset_commit(node.port, GROUP, TOPIC, {0: 1}) == [0]
    node.stop()
    final = parse_dump(minicoord_log("dump", str(node.data_dir), "--partition", str(part)).stdout)
    assert final[-1][1] == records_before  # offsets go on from where they were


def test_a_second_server_on_the_same_data_dir_is_refused(node_factory: Any) -> None:
    node: Node = node_factory({}, [(TOPIC, 1)])
    node.start()
    serve = [sys.executable, "-m", "minicoord.server.cli", "serve", "--port", "0"]
    second = subprocess.run(
        [*serve, "--data-dir", str(node.data_dir)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert second.returncode == 2
    assert second.stdout == ""  # never ready
    assert f"{node.data_dir} is in use by another minicoord process" in second.stderr
    assert node.running
    node.stop()
