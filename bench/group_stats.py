"""Figures of groups forming and re-forming: time to Stable and assignment checks per group
(cold-join, join-scaling), reassignment per rejoin round, and rebalances under churn."""

from __future__ import annotations

from typing import Any

from minicoord.bench.operation_stats import ACCURACY, QUANTILES, rounded

KEY_SEP = "\x00"  # between target and step in the map of expected partitions


def group_stats(df: Any, partitions: dict[str, dict[str, int]]) -> dict[str, Any]:
    """Per group: time to Stable (first JoinGroup of any member to the last member's
    assignment of the full generation), join rounds (the generation it settled at), and
    whether its assignment is disjoint and complete (`partitions`: per target and step, the
    partitions of the topic its members subscribed to, as the server had it)."""
    from pyspark.sql import functions as F

    joins = df.filter((F.col("kind") == "phase") & (F.col("op") == "join"))
    per_group = joins.groupBy("target", "step", "group_id").agg(
        F.min("start").alias("t0"),
        F.max("end").alias("t1"),
        F.max("generation").alias("rounds"),
        F.count("*").alias("members"),
        F.sum(F.when(F.col("error") != 0, 1).otherwise(0)).alias("failed"),
        F.max("group_size").alias("size"),
        F.avg("value").alias("join_trips"),
    )
    per_group = per_group.withColumn("stable_ms", (F.col("t1") - F.col("t0")) * 1000)
    qs = F.array(*[F.lit(q) for q in QUANTILES])
    summary = (
        per_group.groupBy("target", "step")
        .agg(
            F.count("*").alias("groups"),
            F.max("size").alias("group_size"),
            F.percentile_approx("stable_ms", qs, ACCURACY).alias("q"),
            F.max("stable_ms").alias("max_ms"),
            F.avg("rounds").alias("rounds_avg"),
            F.max("rounds").alias("rounds_max"),
            F.avg("join_trips").alias("join_trips_avg"),
            F.sum(F.when(F.col("failed") > 0, 1).otherwise(0)).alias("groups_with_failures"),
        )
        .orderBy("target", "step")
        .collect()
    )
    assignments = (
        df.filter(F.col("kind") == "assignment")
        .groupBy("target", "step", "group_id")
        .agg(
            F.count("*").alias("held"),
            F.countDistinct("op").alias("distinct"),
            F.countDistinct("generation").alias("generations"),
        )
    )
    pairs = [(f"{t}{KEY_SEP}{s}", n) for t, steps in partitions.items() for s, n in steps.items()]
    expected = F.create_map(*[x for k, v in pairs for x in (F.lit(k), F.lit(v))])
    checked = (
        per_group.join(assignments, ["target", "step", "group_id"], "left")
        .withColumn("partitions", expected[F.concat_ws(KEY_SEP, "target", "step")])
        .withColumn(
            "ok",
            (F.col("failed") == 0)
            & (F.col("members") == F.col("size"))
            & (F.col("held") == F.col("partitions"))
            & (F.col("distinct") == F.col("partitions"))
            & (F.col("generations") == 1),
        )
    )
    verdict = {
        (r["target"], r["step"]): (r["ok"], r["bad"])
        for r in checked.groupBy("target", "step")
        .agg(
            F.sum(F.when(F.col("ok"), 1).otherwise(0)).alias("ok"),
            F.sum(F.when(F.col("ok"), 0).otherwise(1)).alias("bad"),
        )
        .collect()
    }
    bad_examples = [
        r.asDict()
        for r in checked.filter(~F.col("ok") | F.col("ok").isNull())
        .select("target", "step", "group_id", "members", "size", "held", "distinct", "generations")
        .limit(10)
        .collect()
    ]
    out = []
    for r in summary:
        q = r["q"] or [None] * 3
        ok, bad = verdict.get((r["target"], r["step"]), (0, r["groups"]))
        out.append(
            {
                "target": r["target"],
                "step": r["step"],
                "groups": r["groups"],
                "group_size": r["group_size"],
                "time_to_stable_p50_ms": rounded(q[0]),
                "time_to_stable_p95_ms": rounded(q[1]),
                "time_to_stable_p99_ms": rounded(q[2]),
                "time_to_stable_max_ms": rounded(r["max_ms"]),
                "join_rounds_avg": rounded(r["rounds_avg"]),
                "join_rounds_max": r["rounds_max"],
                "join_requests_per_member_avg": rounded(r["join_trips_avg"]),
                "groups_with_failures": r["groups_with_failures"],
                "assignment_disjoint_and_complete": ok,
                "assignment_violations": bad,
            }
        )
    return {"groups": out, "assignment_violation_examples": bad_examples}


def rejoin_stats(df: Any) -> list[dict[str, Any]]:
    """Per round: from the newcomer's first request until every member holds the new
    generation's assignment."""
    from pyspark.sql import functions as F

    rows = (
        df.filter((F.col("kind") == "phase") & (F.col("op") == "rejoin"))
        .groupBy("target", "step")
        .agg(
            F.max(F.when(F.col("error") == 0, F.col("latency_ms"))).alias("all_reassigned_ms"),
            F.percentile_approx(F.when(F.col("error") == 0, F.col("latency_ms")), 0.5).alias("p50"),
            F.count("*").alias("members"),
            F.sum(F.when(F.col("error") != 0, 1).otherwise(0)).alias("not_reassigned"),
            F.max("group_size").alias("group_size"),
        )
        .orderBy("target", "step")
        .collect()
    )
    return [
        {
            "target": r["target"],
            "round": r["step"],
            "group_size": r["group_size"],
            "all_reassigned_ms": rounded(r["all_reassigned_ms"]),
            "member_reassigned_p50_ms": rounded(r["p50"]),
            "members": r["members"],
            "not_reassigned": r["not_reassigned"],
        }
        for r in rows
    ]


def churn_stats(df: Any) -> dict[str, Any]:
    from pyspark.sql import functions as F

    rebalances = (
        df.filter((F.col("kind") == "phase") & (F.col("op") == "rebalance"))
        .groupBy("target", "group_id", "generation")
        .agg(
            ((F.max("end") - F.min("start")) * 1000).alias("ms"),
            F.count("*").alias("members"),
            F.min("start").alias("t0"),
            F.max("end").alias("t1"),
        )
    )
    qs = F.array(*[F.lit(q) for q in QUANTILES])
    per_target = {
        r["target"]: {
            "rebalances_completed": r["n"],
            "rebalance_p50_ms": rounded((r["q"] or [None])[0]),
            "rebalance_p95_ms": rounded((r["q"] or [None] * 3)[1]),
            "rebalance_p99_ms": rounded((r["q"] or [None] * 3)[2]),
            "rebalance_max_ms": rounded(r["mx"]),
            "members_per_rebalance_avg": rounded(r["m"]),
            "rebalances_per_s": rounded(
                r["n"] / (r["t1"] - r["t0"]) if r["t1"] > r["t0"] else None
            ),
        }
        for r in rebalances.groupBy("target")
        .agg(
            F.count("*").alias("n"),
            F.percentile_approx("ms", qs, ACCURACY).alias("q"),
            F.max("ms").alias("mx"),
            F.avg("members").alias("m"),
            F.min("t0").alias("t0"),
            F.max("t1").alias("t1"),
        )
        .collect()
    }
    errors = (
        df.filter((F.col("error") != 0) & F.col("kind").isin("request", "phase"))
        .groupBy("target", "kind", "op", "error")
        .count()
        .orderBy("target", "op", "error")
        .collect()
    )
    for r in errors:
        entry = per_target.setdefault(r["target"], {})
        entry.setdefault("errors", []).append(
            {"op": r["op"], "kind": r["kind"], "error": r["error"], "count": r["count"]}
        )
    return per_target
