"""The control API's routes: each `minicoord ctl` action, answered as JSON with its words.

Every answer is `{"ok": ..., "message": ...}` plus the action's data; `message` is what
happened in a sentence, which `minicoord ctl` prints (with `--json`, the whole answer). A
missing group or member is 404 and an action its target cannot take now (a group without
members, already rebalancing) is 409, so a script can tell them from a bad request (400).
`result` keeps the value the Python API (`server.control.…`) returns, for older scripts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.partition_status import PartitionStatus
from minicoord.server.faults import Controller, api_key, error_code
from minicoord.server.group_views import describe_group, generation, group_type

Route = Callable[[dict[str, str]], tuple[int, str, bytes]]
Answer = tuple[int, dict[str, Any]]


class NotFound(LookupError):
    """The group or member named does not exist (404)."""


class NotNow(Exception):
    """The target exists but cannot take this action now (409)."""


def control_routes(control: Controller) -> dict[tuple[str, str], Route]:
    actions: dict[str, Callable[[dict[str, str]], dict[str, Any]]] = {
        "rebalance": lambda q: _rebalance(control, q["group"]),
        "expire": lambda q: _expire(control, q["group"], q["member"]),
        "fail": lambda q: _fail(control, q),
        "cut": lambda q: _cut(control, q),
        "latency": lambda q: _latency(control, q),
        "moved": lambda q: _partitions(control, q, "moved"),
        "loading": lambda q: _partitions(control, q, "loading"),
        "clear": lambda q: _clear(control),
        "log-level": lambda q: _log_level(control, q),
    }
    routes: dict[tuple[str, str], Route] = {
        ("POST", f"/{name}"): _route(fn, PARAMETERS[name]) for name, fn in actions.items()
    }
    routes[("GET", "/groups")] = _route(lambda q: _groups(control), PARAMETERS["groups"])
    describe = _route(lambda q: _describe(control, q["group"]), PARAMETERS["describe"])
    routes[("GET", "/describe")] = describe
    return routes


# What each action reads: a parameter it does not (a misspelt `duration_ms`) is refused, not
# ignored, so that an action never runs on defaults its caller thought they had changed.
PARAMETERS: dict[str, frozenset[str]] = {
    "rebalance": frozenset({"group"}),
    "expire": frozenset({"group", "member"}),
    "fail": frozenset({"api", "error", "count", "group", "client"}),
    "cut": frozenset({"api", "count", "before"}),
    "latency": frozenset({"api", "ms", "duration_ms"}),
    "moved": frozenset({"duration_ms", "group"}),
    "loading": frozenset({"duration_ms", "group"}),
    "clear": frozenset(),
    "log-level": frozenset({"level", "logger"}),
    "groups": frozenset(),
    "describe": frozenset({"group"}),
}


def _route(fn: Callable[[dict[str, str]], dict[str, Any]], takes: frozenset[str]) -> Route:
    def route(query: dict[str, str]) -> tuple[int, str, bytes]:
        unknown = sorted(set(query) - takes)
        if unknown:
            why = f"unknown parameter {', '.join(map(repr, unknown))} (takes: "
            why += f"{', '.join(sorted(takes)) or 'none'})"
            status, body = 400, {"ok": False, "message": why, "error": why}
        else:
            status, body = _answer(fn, query)
        return status, "application/json", json.dumps(body).encode()

    return route


def _answer(fn: Callable[[dict[str, str]], dict[str, Any]], query: dict[str, str]) -> Answer:
    try:
        return 200, {"ok": True, **fn(query)}
    # A refusal says why under `message`, as an answer says what happened (and, as before,
    # under `error`).
    except NotFound as exc:
        return 404, {"ok": False, "message": str(exc), "error": str(exc), "not_found": True}
    except NotNow as exc:
        return 409, {"ok": False, "message": str(exc), "error": str(exc), "not_found": False}
    except KeyError as exc:
        why = f"missing parameter {exc}"
        return 400, {"ok": False, "message": why, "error": why}
    except ValueError as exc:
        return 400, {"ok": False, "message": str(exc), "error": str(exc)}


def _int(q: dict[str, str], name: str, default: str | None = None) -> int:
    """An integer parameter; a refusal in words, not int()'s, when it is not one."""
    value = q[name] if default is None else q.get(name, default)
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None


def _summary(control: Controller, group_id: str) -> dict[str, Any] | None:
    group = control.broker.coordinator.groups.groups.get(group_id)
    if group is None:
        return None
    return {
        "type": group_type(group),
        "state": group.state.value,
        "generation": generation(group),
        "members": len(group.members),
    }


def _generation_word(summary: dict[str, Any]) -> str:
    return "epoch" if summary["type"] == "consumer" else "generation"


def _rebalance(control: Controller, group_id: str) -> dict[str, Any]:
    before = _summary(control, group_id)
    # Asked of the controller whatever the answer: it logs every action, refused ones too.
    if not control.force_rebalance(group_id):
        if before is None:
            raise NotFound(f"group {group_id} does not exist")
        if not before["members"]:
            raise NotNow(f"group {group_id} has no members: there is nothing to rebalance")
        raise NotNow(f"group {group_id} is {before['state']}: a rebalance is already under way")
    assert before is not None
    after = _summary(control, group_id) or before
    word = _generation_word(before)
    if before["type"] == "consumer":
        change = f"{word} {before['generation']} → {after['generation']}"
    else:
        # A classic generation moves on when the members have rejoined.
        change = (
            f"{word} {before['generation']} → {before['generation'] + 1} once the members rejoin"
        )
    return {
        "result": True,
        "message": f"group {group_id}: rebalance forced ({change})",
        "before": before,
        "after": after,
    }


def _expire(control: Controller, group_id: str, member_id: str) -> dict[str, Any]:
    before = _summary(control, group_id)
    described = describe_group(control.broker, group_id) or {"members": []}
    known = [m["member_id"] for m in described["members"]]
    if not control.expire_member(group_id, member_id):
        if before is None:
            raise NotFound(f"group {group_id} does not exist")
        listing = ", ".join(known) if known else "none"
        raise NotFound(f"group {group_id} has no member {member_id} (members: {listing})")
    assert before is not None
    after = _summary(control, group_id) or {**before, "members": 0}
    word = _generation_word(before)
    return {
        "result": True,
        "message": (
            f"group {group_id}: member {member_id} expired "
            f"({before['members']} → {after['members']} members, "
            f"{before['state']} → {after['state']}, "
            f"{word} {before['generation']} → {after['generation']})"
        ),
        "before": before,
        "after": after,
    }


def _api_name(api: str) -> str:
    return SPECS[api_key(api)].name


def _optional(q: dict[str, str], name: str) -> str | None:
    """A parameter that may be left out, but not given empty (which would read as "all")."""
    value = q.get(name)
    if value == "":
        raise ValueError(f"parameter '{name}' is empty; leave it out to mean every {name}")
    return value


def _fail(control: Controller, q: dict[str, str]) -> dict[str, Any]:
    count = _int(q, "count", "1")
    control.fail_next(q["api"], count, q["error"], _optional(q, "group"), _optional(q, "client"))
    scope = [
        f"group {q['group']}" if q.get("group") else "",
        f"client {q['client']}" if q.get("client") else "",
    ]
    scoped = f" ({', '.join(s for s in scope if s)})" if any(scope) else ""
    return {
        "result": None,
        "message": (
            f"{_next(count, _api_name(q['api']))}{scoped} "
            f"{'fails' if count == 1 else 'fail'} with {error_code(q['error']).name}"
        ),
    }


def _next(count: int, api: str) -> str:
    return f"the next {api} request" if count == 1 else f"the next {count} {api} requests"


def _cut(control: Controller, q: dict[str, str]) -> dict[str, Any]:
    count = _int(q, "count", "1")
    before = q.get("before", "false")
    if before not in ("true", "false"):
        raise ValueError(f"parameter 'before' is {before!r}; true or false")
    after = before == "false"
    control.cut_connection(q["api"], count, after)
    loses = "loses its connection" if count == 1 else "lose their connection"
    when = "after taking effect" if after else "before taking effect"
    return {"result": None, "message": f"{_next(count, _api_name(q['api']))} {loses} {when}"}


def _latency(control: Controller, q: dict[str, str]) -> dict[str, Any]:
    duration = _int(q, "duration_ms") if "duration_ms" in q else None
    control.add_latency(q["api"], _int(q, "ms"), duration)
    until = "until cleared" if duration is None else f"for {duration} ms"
    return {
        "result": None,
        "message": f"{_api_name(q['api'])} answers delayed by {_int(q, 'ms')} ms {until}",
    }


def _partitions(control: Controller, q: dict[str, str], kind: str) -> dict[str, Any]:
    duration = _int(q, "duration_ms")
    group = _optional(q, "group")
    fn = control.coordinator_moved if kind == "moved" else control.coordinator_loading
    partitions = fn(duration, group)
    error = "NOT_COORDINATOR" if kind == "moved" else "COORDINATOR_LOAD_IN_PROGRESS"
    if group is not None:
        where = (
            f"group {group} (offsets partition {control.broker.coordinator.partition_for(group)})"
        )
    else:
        where = f"every group ({len(partitions)} offsets partitions)"
    if not partitions:
        message = f"nothing changed: {where} is loading or failed already"
    else:
        message = f"{where} answers {error} for {duration} ms"
    return {"result": partitions, "message": message}


def _clear(control: Controller) -> dict[str, Any]:
    cleared = control.clear()
    if not any(cleared.values()):
        return {"result": cleared, "message": "nothing to clear", "cleared": cleared}
    return {
        "result": cleared,
        "message": (
            f"cleared {cleared['fail']} fail, {cleared['latency']} latency and "
            f"{cleared['cut']} cut rules; {cleared['partitions']} partitions restored"
        ),
        "cleared": cleared,
    }


def _log_level(control: Controller, q: dict[str, str]) -> dict[str, Any]:
    logger = q.get("logger", "minicoord")
    if not logger:
        raise ValueError("parameter 'logger' is empty; leave it out to mean minicoord")
    before, after = control.set_log_level(q["level"], logger)
    on = control.broker.request_log is not None
    return {
        "result": [before, after],
        "message": f"log level of {logger}: {before} → {after} "
        f"(request log {'on' if on else 'off'})",
        "request_log": on,
    }


def _groups(control: Controller) -> dict[str, Any]:
    groups = control.groups()
    status = control.broker.coordinator.partition_status
    loading = sum(1 for s in status.values() if s is PartitionStatus.LOADING)
    failed = sum(1 for s in status.values() if s is PartitionStatus.FAILED)
    # Kafka's ListGroups answers an error then; the list says what it is short of.
    notes = [f"{loading} offsets partitions still loading"] if loading else []
    notes += [f"{failed} offsets partitions not served"] if failed else []
    tail = f" ({'; '.join(notes)})" if notes else ""
    return {
        "message": f"{len(groups)} groups{tail}",
        "groups": groups,
        "loading": loading,
        "failed": failed,
    }


def _describe(control: Controller, group_id: str) -> dict[str, Any]:
    described = control.describe_group(group_id)
    if described is None:
        coordinator = control.broker.coordinator
        unavailable = coordinator.unavailable(group_id)
        partition = coordinator.partition_for(group_id)
        # What Kafka answers a describe then (COORDINATOR_LOAD_IN_PROGRESS, or
        # COORDINATOR_NOT_AVAILABLE); "does not exist" would be wrong.
        if unavailable is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            raise NotNow(
                f"group {group_id}: its offsets partition {partition} is still loading; "
                "ask again shortly"
            )
        if unavailable is ErrorCode.COORDINATOR_NOT_AVAILABLE:
            raise NotNow(
                f"group {group_id}: its offsets partition {partition} is not served (its log "
                "could not be loaded: see the server log and `minicoord log verify`)"
            )
        raise NotFound(f"group {group_id} does not exist")
    return {"message": f"group {group_id}", **described}
