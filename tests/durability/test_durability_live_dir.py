"""`minicoord log dump` and `log verify` against the data directory of a running server do
what the README says: they refuse (exit 2), naming the server process holding it and how to
read a live directory (a copy), as `log compact` and a second `serve` refuse; once the
server has stopped they read it; a copy taken while it runs reads too.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from durakit import Node, minicoord_log, offset_commit

pytestmark = pytest.mark.timeout(60)

TOPIC = "live"
GROUP = "durability-live-dir"


async def test_dump_and_verify_refuse_a_live_directory_and_read_it_once_stopped(
    node_factory: Any, tmp_path: Path
) -> None:
    node: Node = node_factory({}, [(TOPIC, 2)])
    node.start()
    assert await offset_commit(node.port, GROUP, TOPIC, {0: 41, 1: 42}) == [0, 0]
    pid = node.proc.proc.pid
    refusal = (
        f"minicoord: {node.data_dir} is in use by another minicoord process (pid {pid}) "
        "(stop it first): log dump and log verify read a stopped server's data directory; "
        "to look at a live one, copy the directory and read the copy\n"
    )
    for command in (["dump"], ["dump", "--topic", "__consumer_offsets"], ["verify"]):
        done = minicoord_log(*command, str(node.data_dir))
        assert (done.returncode, done.stdout, done.stderr) == (2, "", refusal), command
    # compact refuses alike, naming the process.
    compact = minicoord_log("compact", str(node.data_dir))
    assert compact.returncode == 2
    assert f"is in use by another minicoord process (pid {pid})" in compact.stderr

    # A copy of the live directory is read (its own lock file is free).
    copy = tmp_path / "copy"
    shutil.copytree(node.data_dir, copy)
    dumped = minicoord_log("dump", str(copy), "--topic", "__consumer_offsets")
    assert dumped.returncode == 0, dumped.stderr
    assert f"group='{GROUP}', topic='{TOPIC}', partition=1" in dumped.stdout
    assert "offset=42" in dumped.stdout
    assert minicoord_log("verify", str(copy)).returncode == 0

    node.stop()
    assert (node.data_dir / ".lock").read_text().strip() == str(pid)  # left as it was
    done = minicoord_log("dump", str(node.data_dir), "--topic", "__consumer_offsets")
    assert done.returncode == 0, done.stderr
    assert "offset=41" in done.stdout and "offset=42" in done.stdout
    verified = minicoord_log("verify", str(node.data_dir))
    assert verified.returncode == 0, verified.stderr
    assert "problem" not in verified.stdout + verified.stderr
    # The tool took the lock for its run and wrote its own pid, now gone.
    holder = int((node.data_dir / ".lock").read_text())
    assert holder != pid and not os.path.exists(f"/proc/{holder}")
