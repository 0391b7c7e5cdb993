"""The test suite's own check of what it needs (tests/prereqkit.py, run from tests/conftest.py
before any test): with a program missing or too old on PATH, the run stops before the first
test with one message that names what is missing, which tests need it and how to install it.

The machine's real tools are hidden by giving the child pytest a PATH of fakes made here:
small scripts that print the version a real java or node would.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import prereqkit
import pytest

ROOT = Path(__file__).resolve().parent.parent


def fake_bin(tmp_path: Path, java: str | None = "17.0.15", node: str | None = "v20.20.2") -> Path:
    """A folder of fake programs: java and node printing these versions, npm; no kcat, and no
    apt-get or sudo (so that nothing tries to install kcat)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scripts = {"npm": "echo 10.9.0"}
    if java is not None:
        scripts["java"] = f"echo 'openjdk version \"{java}\" 2025-04-15' >&2"
    if node is not None:
        scripts["node"] = f"echo {node}"
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    return bin_dir


def run_pytest(bin_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "PYTEST_ADDOPTS")}
    env["PATH"] = str(bin_dir)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_missing_kcat_stops_the_run_with_one_message(tmp_path: Path) -> None:
    done = run_pytest(fake_bin(tmp_path), "tests/matrix/test_kcat.py")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert done.stderr.count("ERROR: ") == 1, done.stderr
    message = done.stderr[done.stderr.index("ERROR: ") :]
    assert message.splitlines()[:5] == [
        "ERROR: the selected tests need programs this machine does not have; no test was run.",
        "",
        "  kcat, for 2 tests (the kcat members and round trips (tests/matrix)): "
        "kcat is not on PATH",
        "      Debian/Ubuntu: sudo apt-get install -y kcat",
        "      macOS:         brew install kcat",
    ]
    assert 'README.md, "What the tests need"' in message
    # Not one test ran, and none failed on its own.
    assert "passed" not in done.stdout and "failed" not in done.stdout


def test_every_missing_program_is_in_the_same_message(tmp_path: Path) -> None:
    done = run_pytest(
        fake_bin(tmp_path, java="11.0.2", node="v18.19.0"),
        "tests/matrix/test_mixed_group.py",
        "tests/bench/test_spark_smoke.py",
        "tests/unit/test_assignors.py",
    )
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert done.stderr.count("ERROR: ") == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("  ") and ": " in line]
    heads = [line for line in lines if not line.startswith("      ")]
    # Every test of the Spark smoke file needs Java (none is parametrized).
    smoke = (ROOT / "tests/bench/test_spark_smoke.py").read_text()
    spark_tests = len(re.findall(r"^(?:async )?def test_", smoke, re.M))
    assert heads == [
        f"  Java 17+, for {spark_tests} tests (the Spark tests (tests/bench/test_spark_*.py)): "
        f"{tmp_path}/bin/java is Java 11.0.2",
        "  Node.js 20.19.4+ and npm, for 2 tests (the Node.js clients, kafkajs and "
        f"@platformatic/kafka (tests/matrix)): {tmp_path}/bin/node is v18.19.0",
        "  kcat, for 2 tests (the kcat members and round trips (tests/matrix)): "
        "kcat is not on PATH",
    ]
    assert "sudo apt-get install -y openjdk-17-jre-headless" in done.stderr
    assert "brew install node@22" in done.stderr


def test_the_tools_found_and_what_pyspark_would_run(tmp_path: Path) -> None:
    bin_dir = fake_bin(tmp_path, java="1.8.0_292", node="v22.18.0")
    env = {"PATH": str(bin_dir)}
    assert prereqkit.problem("java", env) == f"{bin_dir}/java is Java 1.8.0_292"
    assert prereqkit.problem("node", env) is None
    assert prereqkit.problem("kcat", env) == "kcat is not on PATH"
    assert prereqkit.problem("python", env) is None
    # PySpark runs $JAVA_HOME/bin/java when JAVA_HOME is set, whatever is on PATH.
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text("#!/bin/sh\necho 'openjdk version \"21.0.4\" 2024-07-16' >&2\n")
    java.chmod(0o755)
    assert prereqkit.problem("java", {**env, "JAVA_HOME": str(home)}) is None
    assert prereqkit.problem("java", {**env, "JAVA_HOME": str(tmp_path / "none")}) == (
        f"no java at {tmp_path}/none/bin/java"
    )
    kcat = bin_dir / "kcat"
    kcat.write_text("#!/bin/sh\n")
    kcat.chmod(0o755)
    # Nothing missing, nothing installed: the run goes on.
    said: list[str] = []
    env["JAVA_HOME"] = str(home)
    assert prereqkit.check({"python": 9, "java": 1, "kcat": 2}, env, said.append) == []
    assert said == []


def test_the_tests_that_need_each_program() -> None:
    bench = ROOT / "tests" / "bench"
    assert prereqkit.needs_of(bench / "test_spark_smoke.py", []) == {"python", "java"}
    assert prereqkit.needs_of(bench / "test_member.py", []) == {"python"}
    matrix = ROOT / "tests" / "matrix" / "test_mixed_group.py"
    assert prereqkit.needs_of(matrix, ["server", "node_clients", "kcat"]) == {
        "python", "node", "kcat"
    }  # fmt: skip
