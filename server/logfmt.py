"""Log output of `minicoord serve`: text lines for people, or JSON lines for machines.

`--log-format json` writes each record as one JSON object on one line: `ts` (UTC, ISO 8601
with milliseconds), `level`, `logger`, `message`, any structured fields the record carries
(the request log's `api`, `client_id`, `group`, `error`, `ms`, ...), and `exc` with the
traceback when there is one. Newlines inside a message are escaped, so a line is a record.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# What every LogRecord has; anything else on a record came through `extra=`.
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


class TextFormatter(logging.Formatter):
    """The stock formatter's text lines, the date part made once per second: a thousand
    members leaving log a thousand lines within a second or two, and localtime() with
    strftime() were two thirds of what formatting each one cost."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)
        self._second = -1
        self._stamp = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        second = int(record.created)
        if second != self._second:
            self._stamp = time.strftime(self.default_time_format, self.converter(record.created))
            self._second = second
        assert self.default_msec_format is not None
        return self.default_msec_format % (self._stamp, record.msecs)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        # Imported here: a server logging text lines (the default) never needs them.
        import datetime
        import json

        ts = datetime.datetime.fromtimestamp(record.created, datetime.UTC)
        out: dict[str, Any] = {
            "ts": ts.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in out:
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def configure(level: str, fmt: str = "text") -> None:
    """Log to stderr at `level`, as text lines or JSON lines. Only `minicoord serve`, which
    owns its process's logging, calls this: an embedding application keeps its own."""
    # Neither format shows where a call was made from, nor its thread or process: not
    # collecting them (the logging HOWTO's "Optimization" switches) spares each line a frame
    # walk, a thread lookup and a getpid() system call. When a thousand-member group leaves,
    # Kafka logs a line per member, and so do we: that logging was half the cost of a leave.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    logging.basicConfig(level=level, handlers=[handler])
