"""The doctor's findings for a person: what the server advertises, then the verdicts."""

from __future__ import annotations

from typing import Any

from minicoord.server.tables import table


def _verdict(finding: dict[str, str]) -> str:
    verdict = finding["verdict"]
    return verdict.upper() if verdict == "cannot work" else verdict


def render(report: dict[str, Any]) -> str:
    if "error" in report:
        return f"minicoord doctor {report['bootstrap']}: {report['error']}"
    out = [f"minicoord doctor {report['bootstrap']}"]
    if report.get("cluster_id") is not None or report.get("controller_id") is not None:
        out.append(
            f"cluster {report.get('cluster_id') or '-'}, controller node "
            f"{report.get('controller_id')}"
        )
    if report.get("unanswered"):
        out.append(f"after ApiVersions, no answer: {report['unanswered']}")
    brokers = report.get("brokers")
    if brokers is not None:
        out += ["", f"brokers ({len(brokers)}), as advertised in Metadata:"]
        out.append(
            table(
                ["node", "host", "port", "rack", "reachable"],
                [
                    [
                        b["node_id"],
                        b["host"],
                        b["port"],
                        b["rack"],
                        "yes" if b["reachable"] else "NO",
                    ]
                    for b in brokers
                ],
            )
        )
    apis = report["apis"]
    out += ["", f"APIs ({len(apis)}), as advertised in ApiVersions:"]
    out.append(
        table(
            ["key", "api", "versions"],
            [[a["key"], a["name"], f"{a['min']}-{a['max']}"] for a in apis],
        )
    )
    features = report.get("finalized_features") or {}
    if features:
        out.append(
            "finalized features: " + ", ".join(f"{k}={v}" for k, v in sorted(features.items()))
        )
    topics = report.get("topics")
    if topics is not None:
        out += ["", f"topics ({len(topics)}):"]
        if topics:
            out.append(
                table(
                    ["topic", "partitions", "internal"],
                    [
                        [t["name"], t["partitions"], "yes" if t["internal"] else "no"]
                        for t in topics
                    ],
                )
            )
    groups = report.get("groups")
    if groups is not None:
        out += ["", f"groups ({len(groups)}):"]
        if groups:
            out.append(
                table(
                    ["group", "type", "state", "protocol-type"],
                    [[g["group"], g["type"], g["state"], g["protocol_type"]] for g in groups],
                )
            )
    out += ["", "what can work here:"]
    rows = [
        [f["subject"], _verdict(f), f["reason"]] for f in [*report["features"], report["listeners"]]
    ]
    out.append(table(["client", "verdict", "why"], rows))
    checks = report["checks"]
    if checks:
        out += ["", "your settings:"]
        out.append(
            table(
                ["setting", "verdict", "why"],
                [[f["subject"], _verdict(f), f["reason"]] for f in checks],
            )
        )
    return "\n".join(out)
