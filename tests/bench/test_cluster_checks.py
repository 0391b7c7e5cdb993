"""The checks before a barrier stage, without a cluster: what the executor probe reports, and
which line of a failed Spark job's error the bench shows (texts as Spark 4 words them)."""

from __future__ import annotations

import sys

import pytest
from minicoord.bench import cluster_checks
from minicoord.bench.cluster_checks import ProbeResult, failure_reason, probe_python

# A Python worker that could not start (PYSPARK_PYTHON does not exist on the worker).
NO_INTERPRETER = """An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 0.0 failed 4 times, most recent failure: Lost task 0.3 in stage 0.0 (TID 6) (127.0.0.1 executor 1): java.io.IOException: Cannot run program "/opt/py/bin/python3": error=2, No such file or directory
\tat java.base/java.lang.ProcessBuilder.start(ProcessBuilder.java:1143)
Caused by: java.io.IOException: error=2, No such file or directory
\tat java.base/java.lang.ProcessImpl.forkAndExec(Native Method)
"""  # noqa: E501

# An error raised by the Python worker itself.
VERSION_MISMATCH = """An error occurred while calling o41.collect.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage 0.0 failed 4 times, most recent failure: Lost task 1.3 in stage 0.0 (TID 7) (127.0.0.1 executor 0): org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/spark/python/lib/pyspark.zip/pyspark/worker.py", line 3050, in main
    raise PySparkRuntimeError(
pyspark.errors.exceptions.base.PySparkRuntimeError: [PYTHON_VERSION_MISMATCH] Python in worker has different version (3, 10) than that in driver 3.11, PySpark cannot run with different minor versions.
\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:600)
"""  # noqa: E501


def test_failure_reason_names_what_failed_on_the_executor() -> None:
    assert failure_reason(Exception(NO_INTERPRETER)) == (
        'IOException: Cannot run program "/opt/py/bin/python3": error=2, No such file or directory'
    )
    assert failure_reason(Exception(VERSION_MISMATCH)).startswith(
        "PySparkRuntimeError: [PYTHON_VERSION_MISMATCH] Python in worker has different version"
    )
    assert failure_reason(RuntimeError("")) == "RuntimeError"


def test_probe_reports_this_interpreter_and_nothing_missing() -> None:
    (result,) = probe_python(iter([0]))
    assert isinstance(result, ProbeResult)
    assert result.executable == sys.executable and result.missing == ""
    assert result.version == ".".join(map(str, sys.version_info[:3]))


def test_probe_names_a_module_that_does_not_import(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster_checks, "TASK_MODULE", "minicoord_no_such_module.tasks")
    (result,) = probe_python(iter([0]))
    assert result.missing == (
        "minicoord_no_such_module: No module named 'minicoord_no_such_module'"
    )
