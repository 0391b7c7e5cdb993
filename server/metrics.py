"""Prometheus metrics of one server (its own registry, so embedded servers do not collide).

Per-request counters and latencies are fed by the connection; group state, members and log
size are read from the broker when scraped (on the event loop thread: the HTTP endpoint runs
on the loop, so the scrape never races the coordinator).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from minicoord.protocol.apis import api_name
from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.consumer.group import ConsumerGroup, ConsumerGroupState
from minicoord.server.coordinator.results import RebalanceEvent
from minicoord.server.coordinator.state import GroupState
from minicoord.server.request_log import error_counts
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

if TYPE_CHECKING:
    from minicoord.server.broker import Broker

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
REBALANCE_BUCKETS = (0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


class Metrics:
    def __init__(self, broker: Broker) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "minicoord_requests",
            "Requests served, by API and version",
            ["api", "version"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "minicoord_request_latency_seconds",
            "From a request's arrival to its response, parked time included",
            ["api", "version"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.errors = Counter(
            "minicoord_errors",
            "Error codes in responses, top-level and per partition, by API and error",
            ["api", "error"],
            registry=self.registry,
        )
        self.rebalances = Counter(
            "minicoord_rebalances",
            "Rebalances completed (classic: a new generation handed out; consumer: every member "
            "reconciled to a new epoch), by protocol and the state the group reached",
            ["protocol", "state"],
            registry=self.registry,
        )
        self.rebalance_duration = Histogram(
            "minicoord_rebalance_duration_seconds",
            "From a rebalance's first cause (for a consumer group, its epoch bump) to the group "
            "being Stable (or Empty): for consumer groups, the reconciliation time",
            ["protocol"],
            buckets=REBALANCE_BUCKETS,
            registry=self.registry,
        )
        self.join_latency = Histogram(
            "minicoord_join_latency_seconds",
            "JoinGroup requests from arrival to answer (the wait for the rest of the group)",
            buckets=REBALANCE_BUCKETS,
            registry=self.registry,
        )
        self.compactions = Counter(
            "minicoord_log_compactions",
            "Partition cleanings completed",
            registry=self.registry,
        )
        self.compacted_records = Counter(
            "minicoord_log_compaction_removed_records",
            "Records the cleaner removed",
            registry=self.registry,
        )
        self.registry.register(_StateCollector(broker))
        # Label children resolved once per (api, version): the hot path only increments.
        self._request_children: dict[tuple[int, int], tuple[Any, Any]] = {}
        broker.coordinator.groups.rebalance_listeners.append(self.on_rebalance)

    def on_request(self, api_key: int, version: int) -> Any:
        """Count a request; returns the latency histogram child to observe on its response."""
        children = self._request_children.get((api_key, version))
        if children is None:
            name = api_name(api_key)
            children = (
                self.requests.labels(name, str(version)),
                self.latency.labels(name, str(version)),
            )
            self._request_children[(api_key, version)] = children
        children[0].inc()
        return children[1]

    def on_response(self, api_key: int, response: Any, seconds: float, histogram: Any) -> None:
        histogram.observe(seconds)
        if api_key == 11:
            self.join_latency.observe(seconds)
        # Each error once per place it appears (a partition's, a group's), as Kafka's
        # errorCounts feeds its ErrorsPerSec metric.
        for error in error_counts(response) if response is not None else ():
            try:
                name = ErrorCode(error).name
            except ValueError:
                name = str(error)
            self.errors.labels(api_name(api_key), name).inc()

    def on_rebalance(self, event: RebalanceEvent) -> None:
        self.rebalances.labels(event.protocol, event.state).inc()
        self.rebalance_duration.labels(event.protocol).observe(event.duration_ms / 1000)

    def on_compaction(self, removed_records: int) -> None:
        self.compactions.inc()
        self.compacted_records.inc(removed_records)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _StateCollector:
    """Gauges computed at scrape time from the live state."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def collect(self) -> Iterator[GaugeMetricFamily]:
        groups = self.broker.coordinator.groups.groups
        by_state = GaugeMetricFamily(
            "minicoord_groups", "Groups by state and protocol", labels=["state", "protocol"]
        )
        # Every state of both protocols is reported, zero or not, so a dashboard's series
        # do not appear and vanish with the groups.
        counts: dict[tuple[str, str], int] = {(s.value, "classic"): 0 for s in GroupState}
        counts.update({(s.value, "consumer"): 0 for s in ConsumerGroupState})
        members = 0
        for group in groups.values():
            protocol = "consumer" if isinstance(group, ConsumerGroup) else "classic"
            counts[(group.state.value, protocol)] += 1
            members += len(group.members)
        for labels, count in counts.items():
            by_state.add_metric(list(labels), count)
        yield by_state
        yield GaugeMetricFamily("minicoord_members", "Members of all groups", value=members)
        yield GaugeMetricFamily(
            "minicoord_connections", "Open client connections", value=len(self.broker.connections)
        )
        yield CounterMetricFamily(
            "minicoord_produce_duplicates",
            "Retried idempotent batches answered with their original offsets, not appended",
            value=self.broker.data.duplicates,
        )
        yield GaugeMetricFamily(
            "minicoord_log_bytes",
            "Bytes in every log's segments (topics, __consumer_offsets, cluster metadata)",
            value=self.broker.logs.size_bytes(),
        )
