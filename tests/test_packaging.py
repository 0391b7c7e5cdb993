"""The wheel installs one import namespace, `minicoord`, and nothing else at the top."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("server", "protocol", "storage", "clients", "bench")


def test_wheel_holds_only_the_minicoord_namespace(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("minicoord-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"minicoord"}
    # Every source module of the project's packages made it in, under the namespace.
    for package in PACKAGES:
        for source in (ROOT / package).rglob("*.py"):
            rel = source.relative_to(ROOT).as_posix()
            assert f"minicoord/{rel}" in names, rel
    assert "minicoord/protocol/schemas/OffsetCommitValue.json" in names
    assert not any(n.startswith("minicoord/tests") for n in names)
