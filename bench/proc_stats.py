"""Process and machine statistics from Linux /proc: what a load test must report beside its
rates to show who was the bottleneck (the server, the load generator, or the machine).

Every reader returns None where /proc cannot answer (another host, another OS), so a run on
a cluster reports what it can instead of failing.

Imported inside the Spark workers: standard library only.
"""

from __future__ import annotations

import os
from pathlib import Path

MEMORY_FIELDS = ("VmRSS", "RssAnon", "RssFile")


def memory_kib(pid: int) -> dict[str, int] | None:
    """VmRSS and its anonymous and file-backed parts, in KiB: a server that maps its log
    files shows their pages under RssFile, which the kernel can drop, unlike RssAnon."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return None
    out = {}
    for line in lines:
        name, _, rest = line.partition(":")
        if name in MEMORY_FIELDS:
            out[name] = int(rest.split()[0])
    return out or None


def rss_kib(pid: int) -> int | None:
    """VmRSS of a process in KiB, or None when it cannot be read (not on this host)."""
    memory = memory_kib(pid)
    return memory.get("VmRSS") if memory else None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds a process has used (every thread), or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def host_busy_seconds() -> float | None:
    """CPU seconds the whole machine spent not idle, summed over its cores: read twice, the
    difference over the wall time is how many cores were busy (2.0 of 2: saturated)."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    ticks = [int(x) for x in fields[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    # guest time is already counted in user and nice.
    busy = sum(ticks[:8]) - idle
    return busy / os.sysconf("SC_CLK_TCK")
