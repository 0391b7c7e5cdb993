"""A Spark standalone cluster on loopback for tests: one master and N workers, started with
the installed pyspark's own `spark-class`, every port picked by the JVM (0) and read back from
its log, every directory under the test's folder, each daemon stopped by its PID.

Each daemon runs in a session of its own, so the executors and Python workers a worker
starts share its process group: when the daemon has been asked to stop (SIGTERM, which a
worker answers by killing its executors), whatever is left of that group is killed too, so
nothing outlives the test even if a worker died first.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
SPARK_SUBMIT = SPARK_HOME / "bin" / "spark-submit"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
LOOPBACK = "127.0.0.1"
STOP_TIMEOUT_S = 15.0
MAX_WAKEUPS = 100_000
GROUP_POLL_S = 0.05


class Daemon:
    """One spark-class process; its log lines are kept (and written to a file) as they come."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], log: Path) -> None:
        self.name = name
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._log = log
        self.proc = subprocess.Popen(
            [str(SPARK_CLASS), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, name=f"log-{name}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with self._log.open("w") as log:
            for line in self.proc.stdout:
                log.write(line)
                log.flush()
                with self._changed:
                    self.lines.append(line)
                    self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()  # end of output: waiters stop waiting

    def wait_for(self, pattern: str, timeout: float, count: int = 1) -> list[re.Match[str]]:
        """The first `count` log lines matching `pattern`; AssertionError after `timeout`."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self._changed:
            for _ in range(MAX_WAKEUPS):  # one per log line at most
                found = [m for m in map(regex.search, self.lines) if m]
                if len(found) >= count:
                    return found[:count]
                left = deadline - time.monotonic()
                if left <= 0 or not self._reader.is_alive():
                    break
                self._changed.wait(left)
        raise AssertionError(
            f"{self.name}: {count} line(s) matching {pattern!r} not seen within "
            f"{timeout:.0f} s (exit status {self.proc.poll()}); last lines:\n"
            + "".join(self.lines[-30:])
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(STOP_TIMEOUT_S)
        # Executors and their Python workers left in the daemon's group (it is the leader).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self._reader.join(STOP_TIMEOUT_S)

    def group_alive(self, timeout: float = STOP_TIMEOUT_S) -> bool:
        """Whether any process of the daemon's group is still there after `timeout` (one
        that was just killed takes a moment to go; no event announces a group's end)."""
        deadline = time.monotonic() + timeout
        for _ in range(int(timeout / GROUP_POLL_S) + 1):
            try:
                os.killpg(self.proc.pid, 0)
            except ProcessLookupError:
                return False
            if time.monotonic() >= deadline:
                break
            time.sleep(GROUP_POLL_S)
        return True


def spark_env(root: Path, python: str = sys.executable) -> dict[str, str]:
    """The environment of every Spark process of a test: loopback, folders under `root`,
    no configuration from the machine, executors on `python`."""
    conf = root / "conf"
    for d in (conf, root / "logs", root / "local"):
        d.mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_CONF_DIR": str(conf),  # empty: no spark-defaults.conf, no log4j2.properties
        "SPARK_LOCAL_IP": LOOPBACK,
        "SPARK_LOG_DIR": str(root / "logs"),
        "SPARK_LOCAL_DIRS": str(root / "local"),
        "SPARK_DAEMON_MEMORY": "256m",
        # The master's REST submission server would bind the fixed port 6066.
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
        "PYSPARK_PYTHON": python,
    }


class StandaloneCluster:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = spark_env(root)
        self.daemons: list[Daemon] = []
        self.url = ""

    def start(self, workers: int, cores: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        logs = Path(self.env["SPARK_LOG_DIR"])
        master = Daemon(
            "master",
            [MASTER_CLASS, "--host", LOOPBACK, "--port", "0", "--webui-port", "0"],
            self.env,
            logs / "master.log",
        )
        self.daemons.append(master)
        (m,) = master.wait_for(r"Starting Spark master at (spark://\S+)", timeout)
        self.url = m.group(1)
        for i in range(workers):
            work = self.root / f"worker-{i}"
            work.mkdir(parents=True, exist_ok=True)
            args = [WORKER_CLASS, "--host", LOOPBACK, "--cores", str(cores), "--memory", "1g"]
            args += ["--webui-port", "0", "--work-dir", str(work), self.url]
            env = {**self.env, "SPARK_WORKER_DIR": str(work)}
            self.daemons.append(Daemon(f"worker-{i}", args, env, logs / f"worker-{i}.log"))
        master.wait_for(
            r"Registering worker \S+ with \d+ cores",
            max(1.0, deadline - time.monotonic()),
            count=workers,
        )

    def stop(self) -> None:
        # Workers first: told to stop, they kill their executors; then the master.
        for daemon in reversed(self.daemons):
            daemon.stop()

    def leftovers(self) -> list[str]:
        return [d.name for d in self.daemons if d.group_alive()]
