"""Benchmarks of the durable offsets log.

- commits: acknowledged OffsetCommits per second against a real server process, for each
  log.flush.policy, driven by raw protocol clients in separate processes (many requests in
  flight, so group commit batches them);
- recovery: time to verify and replay one partition log of N records (default 1,000,000);
- requests while loading: a server started on that log answers ApiVersions round trips on
  one connection, back to back with a 10 ms pause, while the partition loads in its storage
  thread, and after (the round trip's median, 99th percentile and worst, in ms);
- compaction: cleaner throughput on that log, and the worst event-loop stall it causes while
  the loop keeps a 1 ms ticker running.

Run: python -m minicoord.bench.log_bench [--records 1000000] [--seconds 5]
     [--policies write ...] [--measures recovery loading compaction]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import struct
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from minicoord.bench.pump import SPAWN, gather
from minicoord.protocol.records import Record, offset_commit_key, offset_commit_value
from minicoord.server.process import start_server_process
from minicoord.server.storage_thread import StorageThread

TOPIC = "bench"
PARTITIONS = 16


def _commit_worker(port: int, worker: int, clients: int, seconds: float, out: Any) -> None:
    import uvloop
    from kafka.protocol.consumer import OffsetCommitRequest
    from minicoord.clients.connection import ProtocolClient

    Topic = OffsetCommitRequest.OffsetCommitRequestTopic
    Partition = Topic.OffsetCommitRequestPartition

    async def client(index: int, stop_at: float) -> int:
        conn = await ProtocolClient.connect("127.0.0.1", port, f"bench-{worker}-{index}")
        group = f"commit-bench-{worker}-{index}"
        acked = 0
        offset = 0
        try:
            while time.perf_counter() < stop_at:
                offset += 1
                request = OffsetCommitRequest(
                    version=8,
                    group_id=group,
                    generation_id_or_member_epoch=-1,
                    member_id="",
                    group_instance_id=None,
                    topics=[
                        Topic(
                            name=TOPIC,
                            partitions=[
                                Partition(
                                    partition_index=offset % PARTITIONS,
                                    committed_offset=offset,
                                    committed_leader_epoch=-1,
                                    committed_metadata="",
                                )
                            ],
                        )
                    ],
                )
                response = await conn.request(request)
                if response.topics[0].partitions[0].error_code == 0:
                    acked += 1
        finally:
            await conn.close()
        return acked

    async def main() -> tuple[int, float]:
        # Measure from a common start a second out, once every worker has connected.
        start_at = time.time() + 1.0
        await asyncio.sleep(start_at - time.time())
        stop_at = time.perf_counter() + seconds
        began = time.perf_counter()
        acked = sum(await asyncio.gather(*(client(i, stop_at) for i in range(clients))))
        return acked, time.perf_counter() - began

    out.put(uvloop.run(main()))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def commits_per_second(policy: str, seconds: float, workers: int, clients: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server_process(
            {"log.flush.policy": policy},
            topics=[(TOPIC, PARTITIONS)],
            data_dir=tmp,
            extra_args=["--log-level", "WARNING"],
        )
        try:
            queue: Any = SPAWN.Queue()
            procs = [
                SPAWN.Process(target=_commit_worker, args=(server.port, w, clients, seconds, queue))
                for w in range(workers)
            ]
            for p in procs:
                p.start()
            time.sleep(1.0)
            cpu_before = cpu_seconds(server.proc.pid)
            results = gather(queue, procs, seconds + 60)
            cpu = cpu_seconds(server.proc.pid) - cpu_before
            for p in procs:
                p.join(30)
        finally:
            server.stop()
    acked = sum(a for a, _ in results)
    elapsed = max(e for _, e in results)
    return {
        "measure": f"acknowledged OffsetCommits/s, log.flush.policy={policy}",
        "commits": acked,
        "per_second": round(acked / elapsed),
        "server_cpu_cores": round(cpu / elapsed, 2),
        "per_server_cpu_second": round(acked / cpu) if cpu else None,
        "clients": workers * clients,
    }


def write_log(directory: Path, records: int, keys: int) -> None:
    from minicoord.storage.partition_log import PartitionLog

    plog = PartitionLog(directory, 0, 8 * 1024 * 1024)
    plog.open()
    batch: list[Record] = []
    for i in range(records):
        key = offset_commit_key(f"group-{i % keys}", TOPIC, i % PARTITIONS)
        batch.append(Record(key, offset_commit_value(i, -1, "", 1_700_000_000_000 + i)))
        if len(batch) == 100:
            plog.append(batch, 1_700_000_000_000 + i)
            batch = []
    if batch:
        plog.append(batch, 1_700_000_000_000)
    plog.close()


def recovery(records: int, keys: int) -> dict[str, Any]:
    from minicoord.server.loading import read_offsets_partition
    from minicoord.storage.log import LogManager

    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp)
        write_log(data_dir / "__consumer_offsets-0", records, keys)
        size = sum(p.stat().st_size for p in data_dir.rglob("*.log"))
        logs = LogManager(data_dir)
        started = time.perf_counter()
        plog, replay, _producers, _txns = read_offsets_partition(logs, 0, 8 * 1024 * 1024)
        elapsed = time.perf_counter() - started
        plog.close()
    assert replay.records == records
    return {
        "measure": "recovery: verify and replay one partition",
        "records": records,
        "bytes": size,
        "seconds": round(elapsed, 2),
        "records_per_second": round(records / elapsed),
    }


def _round_trips(port: int, until: Callable[[], bool], bound_s: float) -> list[float]:
    """ApiVersions v0 round trips in ms, 10 ms apart, until `until()` or `bound_s`."""
    body = struct.pack(">hhih", 18, 0, 1, 5) + b"bench"
    frame = struct.pack(">i", len(body)) + body
    times = []
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        reader = sock.makefile("rb")
        deadline = time.monotonic() + bound_s
        while not until() and time.monotonic() < deadline:
            started = time.perf_counter()
            sock.sendall(frame)
            (size,) = struct.unpack(">i", reader.read(4))
            reader.read(size)
            times.append((time.perf_counter() - started) * 1000)
            time.sleep(0.01)
    return times


def _latency(times: list[float]) -> dict[str, Any]:
    ordered = sorted(times)
    return {
        "round_trips": len(ordered),
        "median_ms": round(statistics.median(ordered), 2) if ordered else None,
        "p99_ms": round(ordered[int(len(ordered) * 0.99)], 2) if ordered else None,
        "worst_ms": round(ordered[-1], 2) if ordered else None,
    }


def requests_while_loading(records: int, keys: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        write_log(Path(tmp) / "__consumer_offsets-0", records, keys)
        server = start_server_process(data_dir=tmp)
        try:

            def loaded() -> bool:
                return "loaded offsets partition 0:" in server.log

            during = _round_trips(server.port, loaded, 600)
            after = _round_trips(server.port, lambda: False, 2)
            line = next(x for x in server.stderr_lines if "loaded offsets partition 0:" in x)
        finally:
            server.stop()
    return {
        "measure": "ApiVersions round trips while one partition loads, and after",
        "records": records,
        "load": line.rsplit(" in ", 1)[1].strip(),
        "while_loading": _latency(during),
        "after": _latency(after),
    }


async def _compaction_with_stall_probe(records: int, keys: int) -> dict[str, Any]:
    from minicoord.storage.cleaner import clean
    from minicoord.storage.partition_log import PartitionLog

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "__consumer_offsets-0"
        write_log(directory, records, keys)
        plog = PartitionLog(directory, 0, 8 * 1024 * 1024)
        plog.open()
        plog.roll()
        worst = 0.0
        done = False

        async def ticker() -> None:
            nonlocal worst
            while not done:
                before = time.perf_counter()
                await asyncio.sleep(0.001)
                worst = max(worst, time.perf_counter() - before - 0.001)

        probe = asyncio.get_running_loop().create_task(ticker())
        started = time.perf_counter()
        # The server's own thread, sharing the interpreter's lock as the server's does.
        storage = StorageThread()
        try:
            result = await storage.run(clean, plog, int(time.time() * 1000), 86_400_000)
        finally:
            storage.shutdown()
        elapsed = time.perf_counter() - started
        done = True
        await probe
        plog.close()
    assert result is not None
    return {
        "measure": "compaction of one partition (cleaner thread)",
        "records_before": result.records_before,
        "records_after": result.records_after,
        "bytes_before": result.bytes_before,
        "seconds": round(elapsed, 2),
        "records_per_second": round(result.records_before / elapsed),
        "worst_loop_stall_ms": round(worst * 1000, 1),
    }


MEASURES = ("recovery", "loading", "compaction")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=2, help="client processes")
    parser.add_argument("--clients", type=int, default=50, help="connections per process")
    parser.add_argument("--policies", nargs="*", default=["write", "fsync", "none"])
    parser.add_argument(
        "--measures",
        nargs="+",
        choices=MEASURES,
        default=list(MEASURES),
        help="which of the measures after the commit rates to run (default: all)",
    )
    args = parser.parse_args(argv)
    results = [
        commits_per_second(policy, args.seconds, args.workers, args.clients)
        for policy in args.policies
    ]
    if "recovery" in args.measures:
        results.append(recovery(args.records, args.keys))
    if "loading" in args.measures:
        results.append(requests_while_loading(args.records, args.keys))
    if "compaction" in args.measures:
        import uvloop

        results.append(uvloop.run(_compaction_with_stall_probe(args.records, args.keys)))
    for r in results:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
