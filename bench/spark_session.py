"""The bench's SparkSession: local mode, a cluster master, or whatever spark-submit gives it;
the Spark settings a barrier job needs; and minicoord's code shipped to the executors."""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from minicoord.bench.console import under_spark_submit

# Defaults for every run; --spark-conf, spark-submit --conf and spark-defaults.conf win.
BARRIER_DEFAULTS = {
    # A barrier stage submitted before enough executors registered is re-checked at this
    # interval: Spark's 15 s adds up to 15 s to a job that could start a second later.
    "spark.scheduler.barrier.maxConcurrentTasksCheck.interval": "1s",
    # ...and fails after this many checks (about 30 s) rather than 40 checks 15 s apart.
    "spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures": "30",
}
QUIET_LOG_LEVEL = "ERROR"  # Spark's warnings come back when a stage makes no progress


def is_local(master: str) -> bool:
    return master.startswith("local")


def _already_set() -> set[str]:
    """Spark settings given outside the bench: spark-submit --conf, spark-defaults.conf."""
    from pyspark import SparkConf, SparkContext

    # Without its JVM, SparkConf() is an empty Python dict: start the gateway first (the
    # session would start it a moment later anyway).
    SparkContext._ensure_initialized()
    return {key for key, _ in SparkConf().getAll()}


def spark_session(o: dict[str, Any]) -> Any:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(f"minicoord-bench-{o['scenario']}")
    master = o["master"] or (None if under_spark_submit() else "local[*]")
    if master is not None:
        builder = builder.master(master)
    if master is not None and is_local(master):
        # Embedded Spark: loopback only, no web UI, workers on this very interpreter.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = (
            builder.config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.enabled", "false")
        )
    builder = builder.config("spark.ui.showConsoleProgress", "false").config(
        "spark.sql.shuffle.partitions", "8"
    )
    given = _already_set() | {key for key, _ in o["spark_conf"]}
    for key, value in BARRIER_DEFAULTS.items():
        if key not in given:
            builder = builder.config(key, value)
    for key, value in o["spark_conf"]:
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(QUIET_LOG_LEVEL)
    if not is_local(spark.sparkContext.master):
        ship_package(spark)
    return spark


def driver_addresses(spark: Any) -> tuple[str, str]:
    """(bind, advertised): where the driver's RPC endpoint listens, and the name executors
    reach it by; an endpoint of the bench's own next to it is as reachable."""
    conf = spark.sparkContext.getConf()
    host = conf.get("spark.driver.host") or "127.0.0.1"
    return conf.get("spark.driver.bindAddress") or host, host


def ship_package(spark: Any) -> None:
    """Send minicoord's own code to the executors (kafka-python and uvloop must be there)."""
    import minicoord.bench
    import minicoord.clients
    import minicoord.protocol
    import minicoord.server

    tmp = Path(tempfile.mkdtemp(prefix="minicoord-bench-")) / "minicoord.zip"
    with zipfile.ZipFile(tmp, "w") as zf:
        zf.writestr("minicoord/__init__.py", "")
        for pkg in (minicoord.bench, minicoord.clients, minicoord.protocol, minicoord.server):
            root = Path(pkg.__path__[0])
            name = pkg.__name__.split(".", 1)[1]
            for path in root.rglob("*"):
                if path.suffix in (".py", ".json") and "__pycache__" not in path.parts:
                    zf.write(path, f"minicoord/{name}/{path.relative_to(root)}")
    spark.sparkContext.addPyFile(str(tmp))
