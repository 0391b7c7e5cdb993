"""The servers a run measures: minicoord (started by the bench unless --bootstrap), the
echo ceiling (--compare), another Kafka-protocol server (--compare-bootstrap); and the topics
each job needs on them."""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minicoord.server.process import ServerProcess

TARGET_MINICOORD = "minicoord"
TARGET_ECHO = "echo"
TARGET_OTHER = "other"

# Scenarios whose server writes a real log unless told otherwise: commits and records are
# about durability, and the flush policy applies only to a log.
LOGGED_SCENARIOS = ("commit", "data")


@dataclass
class Target:
    label: str
    bootstrap: str
    echo: bool = False
    process: ServerProcess | None = None  # set when the bench started it (then it stops it)
    other_pid: int | None = None  # --compare-pid: a server the bench did not start
    scratch_dir: Path | None = None  # a data dir the bench made for it, removed at the end

    @property
    def pid(self) -> int | None:
        return self.process.proc.pid if self.process is not None else self.other_pid

    def stop(self, out: Path | None = None) -> str:
        """Stop what the bench started; the server's log (it runs at WARNING: whatever it
        says is worth reading), also written to `out`/LABEL-server.log when there is any."""
        text = ""
        if self.process is not None:
            self.process.stop()
            text = self.process.log
            if text and out is not None:
                (out / f"{self.label}-server.log").write_text(text)
        if self.scratch_dir is not None:
            shutil.rmtree(self.scratch_dir, ignore_errors=True)
        return text


def raise_nofile_limit() -> None:
    # Servers started from here inherit it: 10,000 members need 10,000 sockets there too.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def pin(pid: int, cpus: list[int] | None) -> None:
    if cpus:
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setaffinity(pid, set(cpus))


def server_data_dir(o: dict[str, Any]) -> tuple[str | None, Path | None]:
    """(data dir of the server the bench starts, or None: in memory; the part of it the
    bench made and removes afterwards)."""
    if o.get("server_data_dir"):
        return str(o["server_data_dir"]), None
    storage = o.get("server_storage") or ("log" if o["scenario"] in LOGGED_SCENARIOS else "memory")
    if storage == "memory":
        return None, None
    scratch = Path(o["out"]) / "server-data"
    return str(scratch), scratch


def start_targets(o: dict[str, Any], log: Callable[[str], None]) -> list[Target]:
    """The targets, minicoord (and the echo server) started here; a server that does not
    come up is a ClusterNotReady naming its own error line, and whatever had started by then
    is stopped (the caller gets no list to stop)."""
    from minicoord.bench.arg_checks import server_error
    from minicoord.bench.cluster_checks import ClusterNotReady

    targets: list[Target] = []
    try:
        _start_targets(o, log, targets)
    except RuntimeError as exc:
        for t in targets:
            t.stop()
        message = f"a server the bench started did not come up: {server_error(exc)}"
        raise ClusterNotReady(message) from None
    except BaseException:
        for t in targets:
            t.stop()
        raise
    return targets


def _start_targets(o: dict[str, Any], log: Callable[[str], None], targets: list[Target]) -> None:
    from minicoord.server.process import start_server_process

    if o["bootstrap"]:
        targets.append(Target(TARGET_MINICOORD, o["bootstrap"], process=None))
    else:
        data_dir, scratch = server_data_dir(o)
        server = start_server_process(
            o["server_config"], data_dir=data_dir, extra_args=["--log-level", "WARNING"]
        )
        pin(server.proc.pid, o["server_cpus"])
        where = f"its log in {data_dir}" if data_dir else "in memory"
        log(f"started minicoord at {server.bootstrap} (pid {server.proc.pid}, {where})")
        targets.append(
            Target(TARGET_MINICOORD, server.bootstrap, process=server, scratch_dir=scratch)
        )
    if o["compare"]:
        if o["scenario"] == "heartbeat":
            from minicoord.bench.echo_server import start_echo_process

            echo = start_echo_process()
            pin(echo.proc.pid, o["server_cpus"])
            log(f"started the echo server at {echo.bootstrap} (pid {echo.proc.pid})")
            targets.append(Target(TARGET_ECHO, echo.bootstrap, echo=True, process=echo))
        else:
            log("the echo ceiling answers only Heartbeats: it is compared in `heartbeat` only")
    if o["compare_bootstrap"]:
        targets.append(Target(TARGET_OTHER, o["compare_bootstrap"], other_pid=o.get("compare_pid")))


# How long creating a job's topic and reading it back may take on a target.
ADMIN_TIMEOUT_S = 30.0


def prepare_topic(target: Target, topic: str, partitions: int) -> int:
    """Create `topic` on the target unless it exists; the partitions it has. A topic of that
    name made earlier (a previous run, a peer started with `--topic bench:64`) keeps its own
    count, and the members are assigned those partitions, not the ones asked for here."""
    if target.echo:
        return partitions
    from minicoord.clients.connection import ProtocolClient
    from minicoord.clients.member_base import create_topic

    async def create() -> tuple[int, int | None]:
        host, _, port = target.bootstrap.rpartition(":")
        async with await ProtocolClient.connect(host.strip("[]"), int(port), "bench-admin") as c:
            error = await create_topic(c, topic, partitions)
            return error, None if error else await topic_partitions(c, topic)

    from minicoord.bench.cluster_checks import ClusterNotReady

    try:
        error, found = asyncio.run(asyncio.wait_for(create(), ADMIN_TIMEOUT_S))
    except Exception as exc:
        # Something listens there, but does not answer as a Kafka server (a control API's
        # port, an HTTP server) or not in time: one line, not a traceback from the client.
        raise ClusterNotReady(
            f"{target.label} at {target.bootstrap} did not answer CreateTopics and Metadata "
            f"as a Kafka server does: {exc!r}"
        ) from None
    if error:
        raise RuntimeError(f"cannot create topic {topic} on {target.bootstrap}: error {error}")
    return partitions if found is None else found


async def topic_partitions(conn: Any, topic: str) -> int | None:
    """Partitions of `topic` from the server's Metadata (None: not there)."""
    from kafka.protocol.metadata import MetadataRequest
    from minicoord.clients.member_base import VERSIONS, ZERO_UUID

    request = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=topic, topic_id=ZERO_UUID)],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    response = await conn.request(request, VERSIONS["Metadata"])
    for t in response.topics:
        if t.name == topic and t.error_code == 0:
            return len(t.partitions)
    return None
