"""`minicoord ctl`: the control API of a running server, in words, tables or JSON.

Exit status: 0 done; 1 the group or member named does not exist, or cannot take the action
now (no members, already rebalancing); 2 a bad request (unknown API, error or level, or a
malformed --control address); 3 the control API cannot be reached (or what answers there is
not it). With `--json` the server's whole answer is printed on stdout
whatever happened, for scripts; the exit status is the same.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from minicoord.server.tables import cell, table

READS = {"groups", "describe"}


def _params(args: argparse.Namespace) -> dict[str, object]:
    action = args.action
    params: dict[str, object] = {}
    if action in ("rebalance", "describe"):
        params = {"group": args.group}
    elif action == "expire":
        params = {"group": args.group, "member": args.member}
    elif action == "fail":
        params = {"api": args.api, "error": args.error, "count": args.count}
        params.update({k: v for k, v in (("group", args.group), ("client", args.client)) if v})
    elif action == "cut":
        params = {"api": args.api, "count": args.count, "before": str(args.before).lower()}
    elif action == "latency":
        params = {"api": args.api, "ms": args.ms}
        if args.duration_ms is not None:
            params["duration_ms"] = args.duration_ms
    elif action in ("moved", "loading"):
        params = {"duration_ms": args.duration_ms}
        if args.group:
            params["group"] = args.group
    elif action == "log-level":
        params = {"level": args.level, "logger": args.logger}
    return params


class NotControlApi(Exception):
    """Something answered HTTP at the address, but not as minicoord's control API does."""


def call(control: str, action: str, params: dict[str, object]) -> tuple[int, dict[str, Any]]:
    """One control API call: (HTTP status, answer); raises OSError when unreachable and
    NotControlApi when what answers is not the control API (the metrics port, say)."""
    method = "GET" if action in READS else "POST"
    url = f"http://{control}/{action}?{urllib.parse.urlencode(params)}"
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    # Every answer of the control API, refusals included, is a JSON object saying "ok".
    if not isinstance(body, dict) or "ok" not in body:
        text = raw.decode(errors="replace").strip().splitlines()
        raise NotControlApi(f"HTTP {status}: {text[0][:80] if text else 'no body'}")
    return status, body


def run(args: argparse.Namespace) -> int:
    from minicoord.clients.connection import parse_address

    try:
        parse_address(args.control)
    except ValueError as exc:
        print(f"minicoord: --control: {exc}", file=sys.stderr)
        return 2
    try:
        status, body = call(args.control, args.action, _params(args))
    except NotControlApi as exc:
        print(
            f"minicoord: {args.control} is not minicoord's control API "
            f"(--control-port's address; it answered {exc})",
            file=sys.stderr,
        )
        return 3
    except OSError as exc:
        print(f"minicoord: cannot reach the control API at {args.control}: {exc}", file=sys.stderr)
        return 3
    code = 0 if body.get("ok") else 1 if status in (404, 409) else 2
    if args.json:
        print(json.dumps(body, indent=2, ensure_ascii=False))
        return code
    if code:
        print(f"minicoord: {body.get('error', 'refused')}", file=sys.stderr)
        return code
    if args.action == "groups":
        print(groups_table(body["groups"]))
        if body.get("loading"):
            loading = body["loading"]
            print(f"({loading} offsets partitions still loading: their groups are not listed yet)")
        if body.get("failed"):
            failed = body["failed"]
            print(f"({failed} offsets partitions not served: their groups are not listed)")
    elif args.action == "describe":
        print(describe_text(body))
    else:
        print(body.get("message", "done"))
    return 0


def groups_table(groups: list[dict[str, Any]]) -> str:
    if not groups:
        return "no groups"
    rows = [
        [g["group"], g["type"], g["state"], g["members"], g["generation"], g["protocol"], g["lag"]]
        for g in groups
    ]
    # GENERATION is a consumer group's epoch: what a rebalance moves on in either protocol.
    return table(["group", "type", "state", "members", "generation", "assignor", "lag"], rows)


def _partitions(assignment: dict[str, list[int]]) -> str:
    return " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in assignment.items()) or "-"


def describe_text(group: dict[str, Any]) -> str:
    consumer = group["type"] == "consumer"
    word = "epoch" if consumer else "generation"
    head = (
        f"group {group['group']} ({group['type']}, {group['state']}, "
        f"{word} {group['generation']}, assignor {cell(group['protocol'])}, "
        f"offsets partition {group['coordinator_partition']}): "
        f"{len(group['members'])} member{'' if len(group['members']) == 1 else 's'}, "
        f"lag {cell(group['lag'])}"
    )
    parts = [head, ""]
    members = group["members"]
    if members:
        headers = ["member", "client-id", "host", "instance"]
        headers += ["protocol", "epoch"] if consumer else []
        headers.append("assignment")
        rows = []
        for m in members:
            row = [m["member_id"], m["client_id"], m["host"], m["instance_id"]]
            row += [m["protocol"], m["epoch"]] if consumer else []
            row.append(_partitions(m["assignment"]))
            rows.append(row)
        parts.append(table(headers, rows))
    else:
        parts.append("no members")
    parts.append("")
    offsets = group["offsets"]
    if offsets:
        rows = [
            [o["topic"], o["partition"], o["committed"], o["log_end"], o["lag"], o["member"]]
            for o in offsets
        ]
        parts.append(table(["topic", "partition", "committed", "log-end", "lag", "member"], rows))
    else:
        parts.append("no committed offsets or assigned partitions")
    return "\n".join(parts)
