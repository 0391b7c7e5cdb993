"""The BROKER_LOGGER config resource (type 8): this process's loggers and their levels.

As Kafka's RuntimeLoggerManager and Log4jController: DescribeConfigs lists every logger that
exists (the root as `root`) with its effective level, and IncrementalAlterConfigs sets a
logger's level (SET) or lets it inherit again (DELETE; not the root's), in force at once and
for this run only (put back when the server stops, as `ctl log-level`'s are). Levels have
log4j's names; TRACE is Python's level 5, FATAL its CRITICAL. The resource is named by this
node's id. Legacy AlterConfigs does not take this type.
"""

from __future__ import annotations

import logging
from typing import Any

from minicoord.protocol.errors import ErrorCode

BROKER_LOGGER = 8
ROOT = "root"
LEVELS = {"TRACE": 5, "DEBUG": 10, "INFO": 20, "WARN": 30, "ERROR": 40, "FATAL": 50}
_VALID = ", ".join(sorted(LEVELS))
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

Refusal = tuple[ErrorCode, str]


def level_name(level: int) -> str:
    if level <= 0:
        return "ALL"  # a root logger set to NOTSET lets everything through
    for name, number in LEVELS.items():
        if level <= number:
            return name
    return "FATAL"


def loggers() -> dict[str, str]:
    """Every logger that exists, by name, with its effective level."""
    out = {ROOT: level_name(logging.getLogger().getEffectiveLevel())}
    for name, logger in sorted(logging.Logger.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger):  # not a placeholder for a parent name
            out[name] = level_name(logger.getEffectiveLevel())
    return out


def _logger(name: str) -> logging.Logger | None:
    if name == ROOT:
        return logging.getLogger()
    found = logging.Logger.manager.loggerDict.get(name)
    return found if isinstance(found, logging.Logger) else None


def check(changes: Any) -> Refusal | None:
    """RuntimeLoggerManager.validateLogLevelConfigs: the first change Kafka would refuse."""
    for c in changes:
        op = c.config_operation
        if op in (SET, DELETE) and _logger(c.name) is None:
            return ErrorCode.INVALID_CONFIG, f"Logger {c.name} does not exist!"
        if op == SET and c.value not in LEVELS:
            return (
                ErrorCode.INVALID_CONFIG,
                f"Cannot set the log level of {c.name} to {c.value} as it is not a supported "
                f"log level. Valid log levels are {_VALID}",
            )
        if op == DELETE and c.name == ROOT:
            return (
                ErrorCode.INVALID_REQUEST,
                "Removing the log level of the root logger is not allowed",
            )
        if op in (APPEND, SUBTRACT):
            what = "APPEND" if op == APPEND else "SUBTRACT"
            return (
                ErrorCode.INVALID_REQUEST,
                f"{what} operation is not allowed for the BROKER_LOGGER resource",
            )
        if op not in (SET, DELETE):
            return (
                ErrorCode.INVALID_REQUEST,
                f"Unknown operation type {op} is not allowed for the BROKER_LOGGER resource",
            )
    return None


def apply(server: object, changes: Any) -> None:
    """Make checked changes (see `check`) on behalf of `server`, which puts the levels back
    when it stops (log_levels.py)."""
    from minicoord.server import log_levels

    log = logging.getLogger("minicoord.server")
    for c in changes:
        logger = _logger(c.name)
        assert logger is not None
        if c.config_operation == SET:
            log_levels.set_level(server, logger, LEVELS[c.value])
            log.warning("Updated the log level of %s to %s", c.name, c.value)
        else:
            log_levels.set_level(server, logger, logging.NOTSET)
            log.warning("Unset the log level of %s", c.name)
