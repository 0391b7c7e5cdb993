"""Helpers for the durability tests: raw protocol requests (exact error codes, no client
retries), bounded waits, the on-disk layout of a partition's log, and group ids chosen by
the offsets partition they map to.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    DeleteGroupsRequest,
    DescribeClientQuotasRequest,
)
from kafka.protocol.consumer import (
    JoinGroupRequest,
    ListOffsetsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest
from kafka.record.default_records import DefaultRecordBatchBuilder
from minicoord.clients.connection import ProtocolClient
from minicoord.protocol.records import OffsetCommitKey, decode_key, decode_value
from minicoord.server.coordinator.partitioning import partition_for
from minicoord.server.process import ServerProcess, start_server_process
from minicoord.storage.batch import batch_extent
from minicoord.storage.log import OFFSETS_TOPIC, log_dir
from minicoord.storage.scan import records_of
from minicoord.storage.segment import SUFFIX

OFFSETS_PARTITIONS = 50
REQUEST_TIMEOUT_S = 10.0

T = TypeVar("T")


class WaitTimeout(AssertionError):
    pass


async def wait_for_value(
    probe: Callable[[], Awaitable[T]],
    accept: Callable[[T], bool],
    timeout: float,
    *,
    interval: float = 0.05,
    what: str = "condition",
) -> T:
    """Await `probe()` until `accept` takes its value; bounded by a deadline and a count."""
    deadline = time.monotonic() + timeout
    last: Any = None
    for _ in range(int(timeout / interval) + 100):
        last = await probe()
        if accept(last):
            return last
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(interval)
    raise WaitTimeout(f"timed out after {timeout:.1f}s waiting for {what}; last value {last!r}")


def reading(read: Callable[[], T]) -> Callable[[], Awaitable[T]]:
    """A probe for `wait_for_value` that just reads a value (a counter, a log)."""

    async def probe() -> T:
        return read()

    return probe


# -- group ids by offsets partition -----------------------------------------------------------


def group_in_partition(partition: int, prefix: str) -> str:
    """The first group id `prefix-N` that Kafka's mapping puts in `partition`."""
    for n in range(100_000):
        gid = f"{prefix}-{n}"
        if partition_for(gid, OFFSETS_PARTITIONS) == partition:
            return gid
    raise AssertionError(f"no group id with prefix {prefix!r} maps to partition {partition}")


def groups_in_partition(partition: int, prefix: str, count: int) -> list[str]:
    """`count` distinct group ids that Kafka's mapping puts in `partition`."""
    found: list[str] = []
    for n in range(count * OFFSETS_PARTITIONS * 20):
        gid = f"{prefix}-{n}"
        if partition_for(gid, OFFSETS_PARTITIONS) == partition:
            found.append(gid)
            if len(found) == count:
                return found
    raise AssertionError(f"fewer than {count} group ids with prefix {prefix!r} in {partition}")


def partition_of(group_id: str) -> int:
    return partition_for(group_id, OFFSETS_PARTITIONS)


# -- the files of a partition ---------------------------------------------------------------


def batch(
    value: bytes,
    producer_id: int = -1,
    epoch: int = -1,
    sequence: int = -1,
    timestamp: int | None = None,
) -> bytes:
    """A one-record v2 batch as a producer sends it (idempotent with a producer id)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        batch_size=1 << 20,
    )
    ts = int(time.time() * 1000) if timestamp is None else timestamp
    builder.append(0, timestamp=ts, key=None, value=value, headers=[])
    return bytes(builder.build())


def segments(data_dir: Path, partition: int) -> list[Path]:
    return sorted(log_dir(data_dir, OFFSETS_TOPIC, partition).glob("*" + SUFFIX))


def batch_spans(path: Path) -> list[tuple[int, int]]:
    """(start, size) of each whole batch in a segment file, in order."""
    data = path.read_bytes()
    spans = []
    pos = 0
    for _ in range(len(data)):
        if pos >= len(data):
            break
        extent = batch_extent(data, pos)
        assert extent is not None and pos + extent[1] <= len(data), f"{path}: bad batch at {pos}"
        spans.append((pos, extent[1]))
        pos += extent[1]
    return spans


def flip_bit(path: Path, position: int, bit: int = 0) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 1 << bit
    path.write_bytes(bytes(data))


def cut_tail(path: Path, nbytes: int) -> None:
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size - nbytes)


# A v2 batch: base offset (8), length (4), leader epoch (4), magic (1), CRC (4), then the
# CRC-covered attributes and records. A flip at or after this position is what the CRC
# catches (base offset and leader epoch are outside the CRC in Kafka's format too).
CRC_COVERED_FROM = 21


# -- raw requests ---------------------------------------------------------------------------


async def _request(port: int, request: Any, version: int) -> Any:
    client = await asyncio.wait_for(
        ProtocolClient.connect("127.0.0.1", port, "durability-raw"), REQUEST_TIMEOUT_S
    )
    try:
        return await asyncio.wait_for(client.request(request, version), REQUEST_TIMEOUT_S)
    finally:
        await client.close()


async def set_client_quota(
    port: int, entity: dict[str, str | None], key: str, value: float
) -> list[int]:
    """AlterClientQuotas v1 setting one key of one entity: the entity's error codes."""
    entry = AlterClientQuotasRequest.EntryData
    request = AlterClientQuotasRequest(
        entries=[
            entry(
                entity=[entry.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
                ops=[entry.OpData(key=key, value=value, remove=False)],
            )
        ],
        validate_only=False,
    )
    resp = await _request(port, request, 1)
    return [e.error_code for e in resp.entries]


async def client_quotas(port: int) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    """DescribeClientQuotas v1 of every user entity: {entity's (type, name) pairs: quotas}."""
    component = DescribeClientQuotasRequest.ComponentData(
        entity_type="user", match_type=2, match=None
    )
    request = DescribeClientQuotasRequest(components=[component], strict=False)
    resp = await _request(port, request, 1)
    assert resp.error_code == 0, resp
    return {
        tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)): {
            v.key: v.value for v in entry.values
        }
        for entry in resp.entries
    }


async def offset_fetch(
    port: int, group: str, topic: str, partitions: list[int]
) -> tuple[int, dict[int, int]]:
    """OffsetFetch v7: (group error code, {partition: committed offset or -1})."""
    req = OffsetFetchRequest(
        group_id=group,
        topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=partitions)
        ],
        require_stable=False,
    )
    resp = await _request(port, req, 7)
    offsets = {p.partition_index: p.committed_offset for t in resp.topics for p in t.partitions}
    return resp.error_code, offsets


async def offset_commit(port: int, group: str, topic: str, offsets: dict[int, int]) -> list[int]:
    """OffsetCommit v8 with no generation (a simple, self-assigning consumer): error codes."""
    parts = [
        OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
            partition_index=p,
            committed_offset=o,
            committed_leader_epoch=-1,
            commit_timestamp=-1,
            committed_metadata="",
        )
        for p, o in sorted(offsets.items())
    ]
    req = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        retention_time_ms=-1,
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=parts)],
    )
    resp = await _request(port, req, 8)
    return [p.error_code for t in resp.topics for p in t.partitions]


async def list_offsets(port: int, topic: str, partitions: list[int]) -> list[int]:
    """ListOffsets v7 for the latest offset of each partition: error codes."""
    kind = ListOffsetsRequest.ListOffsetsTopic
    req = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=[
            kind(
                name=topic,
                partitions=[
                    kind.ListOffsetsPartition(partition_index=p, timestamp=-1) for p in partitions
                ],
            )
        ],
    )
    resp = await _request(port, req, 7)
    return [p.error_code for t in resp.topics for p in t.partitions]


async def join_error(port: int, group: str) -> int:
    """JoinGroup v9 with no member id: a served group answers MEMBER_ID_REQUIRED."""
    req = JoinGroupRequest(
        group_id=group,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")],
        reason=None,
    )
    resp = await _request(port, req, 9)
    return resp.error_code


async def find_coordinator_error(port: int, group: str, key_type: int = 0) -> int:
    """FindCoordinator's error for a group (key type 0) or a transactional id (1)."""
    req = FindCoordinatorRequest(key=group, key_type=key_type)
    resp = await _request(port, req, 3)
    return resp.error_code


async def delete_group_error(port: int, group: str) -> int:
    resp = await _request(port, DeleteGroupsRequest(groups_names=[group]), 2)
    return resp.results[0].error_code


async def topic_partition_count(port: int, topic: str) -> int:
    """How many partitions Metadata v9 lists for `topic` (an internal one too)."""
    req = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    resp = await _request(port, req, 9)
    return len(resp.topics[0].partitions)


# -- server processes and the command line ------------------------------------------------


class Node:
    """One broker identity: a data directory and a port, served by one process at a time.

    The first start picks a free port; every restart binds the same one, as a real broker
    restarting under its clients would.
    """

    def __init__(
        self,
        data_dir: Path,
        configs: dict[str, object] | None = None,
        topics: list[tuple[str, int]] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.configs = dict(configs or {})
        self.topics = list(topics or [])
        self.port = 0
        self.processes: list[ServerProcess] = []

    @property
    def proc(self) -> ServerProcess:
        assert self.processes, "the node was never started"
        return self.processes[-1]

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log(self) -> str:
        """stderr of the current (latest) process."""
        return self.proc.log

    def wait_log(self, text: str, timeout: float = 10) -> str:
        """The current process's log once it holds `text` (stderr is read by a thread, so a
        line the server wrote before its ready line may land after it); fails at timeout."""
        deadline = time.monotonic() + timeout
        for _ in range(int(timeout / 0.02) + 1):
            if text in self.log or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        assert text in self.log, self.log
        return self.log

    @property
    def running(self) -> bool:
        return bool(self.processes) and self.proc.proc.poll() is None

    def start(self) -> ServerProcess:
        assert not self.running, "a server process is already running on this node"
        server = start_server_process(
            self.configs, self.topics, timeout=20, data_dir=self.data_dir, port=self.port
        )
        self.processes.append(server)
        if self.port == 0:
            self.port = server.port
        assert server.port == self.port
        return server

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, nothing buffered in the process is written."""
        self.proc.kill()
        assert self.proc.proc.returncode == -9

    def stop(self) -> None:
        """SIGTERM: a clean shutdown, exit status 0."""
        assert self.proc.stop() == 0, self.log

    def all_logs(self) -> str:
        return "\n".join(
            f"---- process {i} (pid {p.proc.pid}, exit {p.proc.poll()}) ----\n{p.log}"
            for i, p in enumerate(self.processes)
        )


def minicoord_log(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run `minicoord log ARGS…` (the real command line) and capture its output."""
    return subprocess.run(
        [sys.executable, "-m", "minicoord.server.cli", "log", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def committed_on_disk(data_dir: Path, group: str, topic: str) -> dict[int, int]:
    """The last offset stored per partition for (group, topic), read from the segment files
    of the server that wrote them (stopped or killed): what a restart must load.

    A tombstone removes the partition. Reads every batch and checks its CRC.
    """
    found: dict[int, int] = {}
    directory = log_dir(data_dir, OFFSETS_TOPIC, partition_of(group))
    for path in sorted(directory.glob("*" + SUFFIX)):
        for record in records_of(path.read_bytes()):
            key = decode_key(record.key)
            if not isinstance(key, OffsetCommitKey) or (key.group, key.topic) != (group, topic):
                continue
            if record.value is None:
                found.pop(key.partition, None)
            else:
                found[key.partition] = decode_value(key, record.value).offset
    return found


def verify_after_kill(data_dir: Path) -> bool:
    """`minicoord log verify` after a SIGKILL: True when it found a torn tail.

    A clean log exits 0. The one damage a SIGKILL may leave is a torn tail: Linux can stop a
    write() to a file between two pages when a fatal signal arrives, so the batch being
    written when the process died (never acknowledged: the reply follows the write) may be
    partly there. That is a damaged last batch in one segment, which the next start truncates;
    anything else (damage before valid data, or more than one problem) fails here.
    """
    verify = minicoord_log("verify", str(data_dir))
    lines = verify.stdout.splitlines()
    problems = [line for line in lines if line.startswith(("damaged tail", "corruption"))]
    if verify.returncode == 0:
        assert problems == [], verify.stdout
        return False
    assert verify.returncode == 1, verify.stdout + verify.stderr
    assert len(problems) == 1, verify.stdout
    assert problems[0].startswith("damaged tail (truncated at next start):"), verify.stdout
    return True
