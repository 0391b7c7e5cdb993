"""What the test suite needs on the machine, checked once before any test runs.

Most of the suite needs only what `pip install -e '.[test]'` installs. Some tests drive
programs that pip cannot install: Java 17+ (the Spark tests), Node.js 20.19.4+ and npm (the
Node.js clients), kcat. tests/conftest.py asks `check` which of the selected tests need which,
and when something is missing the run stops before the first test with one message naming
what is missing, what needs it and how to install it (README.md, "What the tests need"),
rather than failing those tests one by one. Nothing is skipped: a run either has what it
needs or does not start.

Two things are installed here rather than asked of the user, as they were before this check:
the Node.js clients (`npm ci` from tests/matrix/node's lock file, into that folder) and, on a
Debian or Ubuntu machine where the run is root (or has password-less sudo), kcat with apt-get,
which is how CI gets it. A failure of either is reported the same way, in the one message.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NODE_DIR = Path(__file__).resolve().parent / "matrix" / "node"
MIN_PYTHON = (3, 11)
MIN_JAVA = 17
# @platformatic/kafka 1.x declares node >= 20.19.4 (or 22.18+ / 24.6+).
MIN_NODE = (20, 19, 4)
PROBE_TIMEOUT_S = 30
INSTALL_TIMEOUT_S = 600


@dataclass(frozen=True)
class Tool:
    title: str
    used_by: str
    debian: str
    macos: str


TOOLS = {
    "python": Tool(
        "Python 3.11+",
        "every test",
        "sudo apt-get install -y python3 python3-venv (Debian 12+, Ubuntu 24.04+)",
        "brew install python@3.12",
    ),
    "java": Tool(
        "Java 17+",
        "the Spark tests (tests/bench/test_spark_*.py)",
        "sudo apt-get install -y openjdk-17-jre-headless",
        "brew install openjdk@17, then put its bin on PATH (or set JAVA_HOME)",
    ),
    "node": Tool(
        "Node.js 20.19.4+ and npm",
        "the Node.js clients, kafkajs and @platformatic/kafka (tests/matrix)",
        "curl -fsSL https://deb.nodesource.com/setup_22.x | sudo -E bash - "
        "&& sudo apt-get install -y nodejs (Debian's own nodejs is too old)",
        "brew install node@22",
    ),
    "kcat": Tool(
        "kcat",
        "the kcat members and round trips (tests/matrix)",
        "sudo apt-get install -y kcat",
        "brew install kcat",
    ),
}


def needs_of(path: Path, fixturenames: Iterable[str]) -> set[str]:
    """The tools one test needs, by what it uses."""
    names = set(fixturenames)
    needs = {"python"}
    if "spark" in names or (path.parent.name == "bench" and path.name.startswith("test_spark_")):
        needs.add("java")
    if "node_clients" in names:
        needs.add("node")
    if "kcat" in names:
        needs.add("kcat")
    return needs


def _run(
    cmd: list[str], env: Mapping[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd, env=dict(env), capture_output=True, text=True, timeout=timeout, check=False
    )


def _numbers(text: str, count: int) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:count])


def problem(tool: str, env: Mapping[str, str]) -> str | None:
    """Why `tool` is not usable with this environment (PATH, JAVA_HOME), or None."""
    path = env.get("PATH", "")
    if tool == "python":
        if sys.version_info < MIN_PYTHON:
            return f"this is Python {sys.version.split()[0]}"
        return None
    if tool == "java":
        # What PySpark runs: $JAVA_HOME/bin/java when JAVA_HOME is set, else java on PATH.
        home = env.get("JAVA_HOME")
        java = str(Path(home) / "bin" / "java") if home else shutil.which("java", path=path)
        if java is None or not os.access(java, os.X_OK):
            return f"no java at {java}" if home else "java is not on PATH"
        try:
            out = _run([java, "-version"], env, PROBE_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{java} -version failed: {exc}"
        found = re.search(r'version "([^"]+)"', out.stderr + out.stdout)
        if found is None:
            return f"{java} -version printed no version"
        parts = _numbers(found.group(1), 2)
        major = parts[1] if parts[:1] == (1,) else parts[0]  # "1.8.0" is Java 8
        if major < MIN_JAVA:
            return f"{java} is Java {found.group(1)}"
        return None
    if tool == "node":
        node, npm = shutil.which("node", path=path), shutil.which("npm", path=path)
        if node is None:
            return "node is not on PATH"
        try:
            version = _run([node, "--version"], env, PROBE_TIMEOUT_S).stdout.strip()
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{node} --version failed: {exc}"
        if _numbers(version, 3) < MIN_NODE:
            return f"{node} is {version or 'of no version'}"
        if npm is None:
            return "npm is not on PATH"
        return None
    if tool == "kcat":
        return None if shutil.which("kcat", path=path) else "kcat is not on PATH"
    raise ValueError(tool)


def can_apt_install(env: Mapping[str, str]) -> list[str] | None:
    """The command prefix to run apt-get as root here (root, or password-less sudo), or None."""
    path = env.get("PATH", "")
    if shutil.which("apt-get", path=path) is None:
        return None
    if os.geteuid() == 0:
        return []
    sudo = shutil.which("sudo", path=path)
    if sudo is None or _run([sudo, "-n", "true"], env, PROBE_TIMEOUT_S).returncode != 0:
        return None
    return [sudo, "-n"]


def apt_install_kcat(prefix: list[str], env: Mapping[str, str]) -> str | None:
    """apt-get install kcat; None on success, else what went wrong."""
    env = {**env, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (
        ["apt-get", "update"],
        ["apt-get", "install", "-y", "--no-install-recommends", "kcat"],
    ):
        try:
            done = _run([*prefix, *cmd], env, INSTALL_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{' '.join(cmd)} could not run: {exc}"
        if done.returncode != 0:
            return f"{' '.join(cmd)} failed (exit {done.returncode}): {_tail(done)}"
    return None


def node_modules_ready() -> bool:
    """tests/matrix/node/node_modules holds exactly the versions package.json pins."""
    wanted = json.loads((NODE_DIR / "package.json").read_text())["dependencies"]
    for name, version in wanted.items():
        manifest = NODE_DIR / "node_modules" / name / "package.json"
        if not manifest.is_file() or json.loads(manifest.read_text()).get("version") != version:
            return False
    return True


def npm_ci(env: Mapping[str, str]) -> str | None:
    """The Node.js clients from the lock file; None on success, else what went wrong."""
    npm = shutil.which("npm", path=env.get("PATH", ""))
    assert npm is not None
    cmd = [npm, "ci", "--no-audit", "--no-fund"]
    try:
        done = subprocess.run(
            cmd, cwd=NODE_DIR, env=dict(env), capture_output=True, text=True,
            timeout=INSTALL_TIMEOUT_S, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"npm ci could not run: {exc}"
    if done.returncode != 0:
        return f"npm ci in {NODE_DIR} failed (exit {done.returncode}): {_tail(done)}"
    if not node_modules_ready():
        return "npm ci finished but node_modules does not match package.json"
    return None


def _tail(done: subprocess.CompletedProcess[str]) -> str:
    lines = (done.stderr or done.stdout).strip().splitlines()
    return " / ".join(lines[-3:]) if lines else "no output"


def check(
    needs: Mapping[str, int], env: Mapping[str, str], say: Callable[[str], Any] = print
) -> list[tuple[str, str]]:
    """(tool, why) for each tool needed (with how many tests need it) and not usable, after
    installing what may be installed here. `say` tells the user about an install under way."""
    missing = []
    for tool in TOOLS:
        if not needs.get(tool):
            continue
        why = problem(tool, env)
        if why is not None and tool == "kcat":
            prefix = can_apt_install(env)
            if prefix is not None:
                say(f"kcat is not installed: installing it with apt-get for {needs[tool]} tests")
                failed = apt_install_kcat(prefix, env)
                why = problem(tool, env) if failed is None else f"{why}; {failed}"
        if why is None and tool == "node" and not node_modules_ready():
            say(f"installing the Node.js clients (npm ci in {NODE_DIR}) for {needs[tool]} tests")
            why = npm_ci(env)
        if why is not None:
            missing.append((tool, why))
    return missing


def message(missing: list[tuple[str, str]], needs: Mapping[str, int]) -> str:
    """The one message a run that cannot start prints."""
    lines = ["the selected tests need programs this machine does not have; no test was run.", ""]
    for tool, why in missing:
        t = TOOLS[tool]
        lines += [
            f"  {t.title}, for {needs[tool]} tests ({t.used_by}): {why}",
            f"      Debian/Ubuntu: {t.debian}",
            f"      macOS:         {t.macos}",
            "",
        ]
    lines.append(
        'Install what is missing and run the same command again (README.md, "What the tests need").'
    )
    return "\n".join(lines)
