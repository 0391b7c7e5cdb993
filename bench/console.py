"""Where the bench's progress bar and log lines go: the terminal's stderr, in both forms.

Under spark-submit the Python driver is a child of the spark-submit JVM, which merges the
child's stderr into its own stdout (PythonRunner redirects the error stream so the two stay
in order). Lines written to `sys.stderr` would then land on stdout, among what a script
reads. So once Spark is up, the console writes through the JVM's `System.err` instead,
which is spark-submit's own stderr.
"""

from __future__ import annotations

import os
import sys
from typing import Any

PREFIX = "minicoord bench: "


def under_spark_submit() -> bool:
    """True when spark-submit launched this interpreter (it hands over its gateway)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


class Console:
    """A minimal text stream for tqdm and log lines; stderr until `attach` finds a JVM."""

    def __init__(self) -> None:
        self._jvm_err: Any = None
        self._jvm_gone: tuple[type[BaseException], ...] = ()

    def attach(self, spark: Any) -> None:
        if under_spark_submit():
            from py4j.protocol import Py4JError

            self._jvm_gone = (Py4JError,)
            self._jvm_err = spark.sparkContext._jvm.System.err

    @property
    def encoding(self) -> str:
        # The JVM's stderr charset depends on the locale it started in: plain ASCII is safe.
        return "ascii" if self._jvm_err is not None else (sys.stderr.encoding or "ascii")

    def isatty(self) -> bool:
        return self._jvm_err is None and sys.stderr.isatty()

    def write(self, text: str) -> int:
        if self._jvm_err is None:
            return sys.stderr.write(text)
        try:
            self._jvm_err.print(text)
        except self._jvm_gone:  # the JVM is shutting down: the line still reaches a stream
            self._jvm_err = None
            return sys.stderr.write(text)
        return len(text)

    def flush(self) -> None:
        if self._jvm_err is None:
            sys.stderr.flush()
            return
        try:
            self._jvm_err.flush()
        except self._jvm_gone:
            self._jvm_err = None

    def line(self, message: str) -> None:
        """One log line, prefixed with the command's name."""
        self.write(f"{PREFIX}{message}\n")
        self.flush()
