"""Deferred modules (protocol/deferred.py): imported at once, run on first use, then ordinary.

Each case runs in a fresh interpreter, where nothing has used the record modules yet.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path


def run_child(code: str, cwd: Path | None = None) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_record_modules_run_on_first_use_and_encode_as_before() -> None:
    out = run_child(
        """
        import sys
        from minicoord.protocol import deferred
        from minicoord.protocol import consumer_records as cr
        from minicoord.protocol import records

        names = ("classic_records", "consumer_records", "metadata_records")
        assert not any(deferred.loaded(f"minicoord.protocol.{n}") for n in names)
        assert "kafka.protocol.api_data" not in sys.modules

        key = records.group_metadata_key("g")  # runs classic_records
        assert deferred.loaded("minicoord.protocol.classic_records")
        assert records.decode_key(key).group == "g"
        classic = sys.modules["minicoord.protocol.classic_records"]
        assert records.OffsetCommitKey is classic.OffsetCommitKey
        generated = records.generated_offset_commit_key("g", "t", 1)
        assert generated == records.offset_commit_key("g", "t", 1)

        assert 3 in cr.TYPES  # runs consumer_records
        assert deferred.loaded("minicoord.protocol.consumer_records")
        import minicoord.protocol.consumer_records as again
        assert again is cr
        print("ok")
        """
    )
    assert out.strip() == "ok"


def test_threads_that_race_for_a_module_all_see_it_whole() -> None:
    out = run_child(
        """
        import threading
        from minicoord.protocol import consumer_records as cr

        start = threading.Barrier(8)
        seen = []

        def use():
            start.wait()
            seen.append(len(cr.TYPES))

        threads = [threading.Thread(target=use) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(sorted(set(seen)), len(seen))
        """
    )
    assert out.strip() == "[7] 8"


def test_a_failing_module_raises_and_is_tried_again(tmp_path: Path) -> None:
    (tmp_path / "flaky.py").write_text(
        textwrap.dedent(
            """
            import os
            if not os.environ.get("FLAKY_OK"):
                raise RuntimeError("not today")
            VALUE = 42
            """
        )
    )
    out = run_child(
        """
        import os
        import sys
        from minicoord.protocol import deferred

        assert deferred.defer("flaky")
        import flaky
        try:
            flaky.VALUE
        except RuntimeError as exc:
            print("raised", exc)
        assert "flaky" not in sys.modules
        os.environ["FLAKY_OK"] = "1"
        import flaky
        print(flaky.VALUE, deferred.loaded("flaky"))
        try:
            flaky.MISSING
        except AttributeError:
            print("missing stays missing")
        """,
        cwd=tmp_path,
    )
    assert out.split("\n")[:3] == ["raised not today", "42 True", "missing stays missing"]


def test_nothing_is_deferred_twice_or_when_absent() -> None:
    from minicoord.protocol import deferred

    assert deferred.defer("minicoord.protocol.records") is False  # imported already
    assert deferred.defer("no_such_module_here") is False
