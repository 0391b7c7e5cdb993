"""Fault injection: what a test asks the server to do wrong, on purpose.

A real Kafka makes rebalances and coordinator failures hard to provoke; here a test can ask for
them. `Faults` holds the rules and is consulted by the connection for every request, before its
handler runs (so an injected error changes no state):

- the next N requests of an API (optionally only for one group or client id) fail with a code;
- an API's responses are delayed;
- the connection of the next N requests of an API is closed instead of answered, before or
  after the request took effect (a lost answer, which the client must retry);
- groups (one, or all) are answered as if their coordinator moved (NOT_COORDINATOR) or were
  loading (COORDINATOR_LOAD_IN_PROGRESS) for a while: that one is a partition status in the
  coordinator, so every API sees it consistently.

`Controller` is the single place these actions and the coordinator's own (force a rebalance,
expire a member now) are exposed from: the Python API of an embedded server and the HTTP
control endpoint behind `minicoord ctl` both call it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from minicoord.protocol.apis import SOURCES, SPECS, api_name
from minicoord.protocol.errors import ErrorCode
from minicoord.protocol.lean_dataclass import dataclass
from minicoord.server.coordinator.partition_status import PartitionStatus

if TYPE_CHECKING:
    from minicoord.server.broker import Broker

log = logging.getLogger("minicoord.faults")

API_BY_NAME = {name.lower(): key for key, (name, _) in SOURCES.items()}


def api_key(api: str | int) -> int:
    """An API named as Kafka names it (case-insensitive, e.g. "Heartbeat") or by key."""
    if isinstance(api, int) or str(api).isdigit():
        key = int(api)
        if key not in SPECS:
            raise ValueError(f"API key {key} is not one minicoord serves")
        return key
    try:
        return API_BY_NAME[str(api).lower()]
    except KeyError:
        names = ", ".join(sorted(name for name, _ in SOURCES.values()))
        raise ValueError(f"unknown API {api!r}; one of {names}") from None


def error_code(error: str | int) -> ErrorCode:
    if isinstance(error, int) or str(error).lstrip("-").isdigit():
        return ErrorCode(int(error))
    try:
        return ErrorCode[str(error).upper()]
    except KeyError:
        raise ValueError(f"unknown error code {error!r}") from None


@dataclass
class FailRule:
    api_key: int
    error: ErrorCode
    remaining: int
    group_id: str | None = None
    client_id: str | None = None


@dataclass
class CutRule:
    """Close the connection of the next `remaining` requests of an API, without an answer."""

    api_key: int
    remaining: int
    # After the request took effect (an append, a commit): the client sees a lost answer
    # and retries, which is what idempotence and commit retries must survive.
    after_handling: bool = True


@dataclass
class LatencyRule:
    api_key: int
    delay_ms: int
    until: int | None  # wall-clock ms; None: until cleared


def group_ids_of(api_key: int, request: Any) -> list[str]:
    """The groups a request is about, for rules scoped to a group."""
    if api_key == 10:  # FindCoordinator
        keys = getattr(request, "coordinator_keys", None) or [getattr(request, "key", None)]
        return [k for k in keys if k]
    if api_key == 15:
        return list(request.groups)
    if api_key == 42:
        return list(request.groups_names)
    if api_key == 69:  # ConsumerGroupDescribe
        return list(request.group_ids)
    if api_key == 9 and getattr(request, "groups", None):
        return [g.group_id for g in request.groups]
    group_id = getattr(request, "group_id", None)
    return [group_id] if group_id else []


class Faults:
    def __init__(self) -> None:
        self.fail_rules: list[FailRule] = []
        self.latency_rules: list[LatencyRule] = []
        self.cut_rules: list[CutRule] = []

    def __bool__(self) -> bool:
        return bool(self.fail_rules or self.latency_rules or self.cut_rules)

    def cut(self, api_key: int) -> CutRule | None:
        """The cut rule this request consumes, if any."""
        for rule in self.cut_rules:
            if rule.api_key == api_key:
                rule.remaining -= 1
                if rule.remaining <= 0:
                    self.cut_rules.remove(rule)
                return rule
        return None

    def injected_error(self, api_key: int, client_id: str | None, request: Any) -> ErrorCode | None:
        """The error to answer this request with, consuming one use of the matching rule."""
        for rule in self.fail_rules:
            if rule.api_key != api_key or rule.remaining <= 0:
                continue
            if rule.client_id is not None and rule.client_id != client_id:
                continue
            if rule.group_id is not None and rule.group_id not in group_ids_of(api_key, request):
                continue
            rule.remaining -= 1
            if rule.remaining == 0:
                self.fail_rules.remove(rule)
            return rule.error
        return None

    def delay_ms(self, api_key: int, now: int) -> int:
        self.latency_rules = [r for r in self.latency_rules if r.until is None or r.until > now]
        return max((r.delay_ms for r in self.latency_rules if r.api_key == api_key), default=0)


def error_response(spec: Any, version: int, request: Any, error: ErrorCode) -> Any:
    """A response to `request` that carries `error` wherever this API reports errors."""
    response_cls = spec.response
    key = spec.key
    if key == 8:  # OffsetCommit: per partition only
        topic_cls = response_cls.OffsetCommitResponseTopic
        part_cls = topic_cls.OffsetCommitResponsePartition
        topics = [
            topic_cls(
                name=t.name,
                topic_id=t.topic_id,
                partitions=[
                    part_cls(partition_index=p.partition_index, error_code=error)
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ]
        return response_cls(version=version, throttle_time_ms=0, topics=topics)
    if key == 0:  # Produce: per partition, so a producer's retry path sees the error
        topic_cls = response_cls.TopicProduceResponse
        part_cls = topic_cls.PartitionProduceResponse
        responses = [
            topic_cls(
                name=t.name,
                topic_id=t.topic_id,
                partition_responses=[
                    part_cls(index=p.index, error_code=error, base_offset=-1)
                    for p in t.partition_data
                ],
            )
            for t in request.topic_data
        ]
        return response_cls(version=version, throttle_time_ms=0, responses=responses)
    if key == 42:  # DeleteGroups: per group
        result_cls = response_cls.DeletableGroupResult
        results = [result_cls(group_id=g, error_code=error) for g in request.groups_names]
        return response_cls(version=version, throttle_time_ms=0, results=results)
    if key == 15:  # DescribeGroups: per group
        group_cls = response_cls.DescribedGroup
        groups = [
            group_cls(
                error_code=error,
                group_id=g,
                group_state="",
                protocol_type="",
                protocol_data="",
                members=[],
            )
            for g in request.groups
        ]
        return response_cls(version=version, throttle_time_ms=0, groups=groups)
    if key == 69:  # ConsumerGroupDescribe: per group
        group_cls = response_cls.DescribedGroup
        groups = [
            group_cls(error_code=error, group_id=g, members=[], authorized_operations=-(2**31))
            for g in request.group_ids
        ]
        return response_cls(version=version, throttle_time_ms=0, groups=groups)
    if key == 10 and version >= 4:  # FindCoordinator, batched
        coord_cls = response_cls.Coordinator
        coordinators = [
            coord_cls(key=k, node_id=-1, host="", port=-1, error_code=error, error_message=None)
            for k in request.coordinator_keys
        ]
        return response_cls(version=version, throttle_time_ms=0, coordinators=coordinators)
    if key == 9 and version >= 8:  # OffsetFetch, batched groups
        group_cls = response_cls.OffsetFetchResponseGroup
        groups = [
            group_cls(group_id=g.group_id, topics=[], error_code=error) for g in request.groups
        ]
        return response_cls(version=version, throttle_time_ms=0, groups=groups)
    fields = response_cls._struct.fields
    if "error_code" in fields:
        # The SASL APIs and DescribeQuorum have no throttle time.
        if "throttle_time_ms" not in fields:
            return response_cls(version=version, error_code=error)
        return response_cls(version=version, throttle_time_ms=0, error_code=error)
    raise ValueError(f"{spec.name} v{version} has no error field to inject into")


# APIs whose errors sit per group or per partition, each answered by error_response.
_PER_RESOURCE = {
    0: range(3, 14),
    8: range(0, 10),
    9: range(2, 11),
    10: range(0, 7),
    15: range(0, 7),
    42: range(0, 3),
    69: range(0, 2),
}


def can_fail(api_key: int, version: int | None = None) -> bool:
    """Whether error_response can carry an error in this API's answer (at `version`, or at
    any version when None)."""
    if api_key == 18:
        # Clients read a failed ApiVersions answer as v0 (what brokers send for an unsupported
        # version), so an injected error there is a cut connection.
        return False
    spec = SPECS[api_key]
    versions = range(spec.min_version, spec.max_version + 1) if version is None else [version]
    field = dict(spec.response._struct.fields).get("error_code")
    return any(
        v in _PER_RESOURCE.get(api_key, ()) or (field is not None and field.for_version_q(v))
        for v in versions
    )


class Controller:
    """The operator's handle on a running server (Python API and `minicoord ctl`)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        if broker.faults is None:
            # The rules come to be with their only source: a server nobody controls loads
            # none of this module.
            broker.faults = Faults()
        self.faults = broker.faults
        self._restores: dict[int, Any] = {}

    def force_rebalance(self, group_id: str) -> bool:
        broker = self.broker
        done = broker.apply(broker.coordinator.force_rebalance(broker.now(), group_id))
        log.info(
            "control: force rebalance of %s: %s",
            group_id,
            "done" if done else self._not_done(group_id),
        )
        return done

    def _not_done(self, group_id: str) -> str:
        group = self.broker.coordinator.groups.groups.get(group_id)
        if group is None:
            return "no such group"
        if not group.members:
            return "it has no members"
        return f"it is {group.state.value}"

    def expire_member(self, group_id: str, member_id: str) -> bool:
        broker = self.broker
        done = broker.apply(broker.coordinator.expire_member(broker.now(), group_id, member_id))
        log.info(
            "control: expire member %s of %s: %s",
            member_id,
            group_id,
            "done"
            if done
            else "no such member"
            if group_id in self.broker.coordinator.groups.groups
            else "no such group",
        )
        return done

    def fail_next(
        self,
        api: str | int,
        count: int,
        error: str | int,
        group_id: str | None = None,
        client_id: str | None = None,
    ) -> None:
        rule = FailRule(api_key(api), error_code(error), count, group_id, client_id)
        if rule.remaining < 1:
            raise ValueError("count must be at least 1")
        if rule.error is ErrorCode.NONE:
            raise ValueError("NONE is not an error: name the one to fail with")
        if not can_fail(rule.api_key):
            why = (
                "clients read a failed ApiVersions answer as an unsupported version"
                if rule.api_key == 18
                else "its answer carries errors per topic or resource"
            )
            raise ValueError(
                f"{api_name(rule.api_key)} cannot be failed here: {why} "
                "(cut its connection instead)"
            )
        self.faults.fail_rules.append(rule)
        log.info(
            "control: the next %d %s requests fail with %s%s",
            count,
            SPECS[rule.api_key].name,
            rule.error.name,
            "".join(f" ({k} {v})" for k, v in (("group", group_id), ("client", client_id)) if v),
        )

    def cut_connection(self, api: str | int, count: int = 1, after_handling: bool = True) -> None:
        """Close the connection of the next `count` requests of an API instead of answering,
        after they took effect (or before, with `after_handling=False`)."""
        if count < 1:
            raise ValueError("count must be at least 1")
        self.faults.cut_rules.append(CutRule(api_key(api), count, after_handling))
        log.info(
            "control: the next %d %s requests lose their connection %s taking effect",
            count,
            SPECS[api_key(api)].name,
            "after" if after_handling else "before",
        )

    def add_latency(self, api: str | int, delay_ms: int, duration_ms: int | None = None) -> None:
        if delay_ms < 0:
            raise ValueError("delay must not be negative")
        if duration_ms is not None and duration_ms < 1:
            raise ValueError("duration must be at least 1 ms")
        until = None if duration_ms is None else self.broker.now() + duration_ms
        self.faults.latency_rules.append(LatencyRule(api_key(api), delay_ms, until))
        log.info(
            "control: %s answers delayed by %d ms %s",
            SPECS[api_key(api)].name,
            delay_ms,
            "until cleared" if duration_ms is None else f"for {duration_ms} ms",
        )

    def coordinator_moved(self, duration_ms: int, group_id: str | None = None) -> list[int]:
        return self._partition_fault(PartitionStatus.MOVED, duration_ms, group_id)

    def coordinator_loading(self, duration_ms: int, group_id: str | None = None) -> list[int]:
        return self._partition_fault(PartitionStatus.LOADING, duration_ms, group_id)

    def _partition_fault(
        self, status: PartitionStatus, duration_ms: int, group_id: str | None
    ) -> list[int]:
        if duration_ms < 1:
            raise ValueError("duration must be at least 1 ms")
        coordinator = self.broker.coordinator
        if group_id is not None:
            partitions = [coordinator.partition_for(group_id)]
        else:
            partitions = list(range(coordinator.offsets_partitions))
        # Only partitions that are healthy now or already under an injected fault: a partition
        # really loading or failed must not be "restored" when the fault ends.
        partitions = [
            p for p in partitions if p not in coordinator.partition_status or p in self._restores
        ]
        for p in partitions:
            coordinator.set_partition_status(p, status)
            previous = self._restores.pop(p, None)
            if previous is not None:
                previous.cancel()
            self._restores[p] = self.broker.call_later(duration_ms, lambda p=p: self._restore(p))
        log.info(
            "control: %d offsets partitions %s for %d ms%s",
            len(partitions),
            status.value,
            duration_ms,
            f" (group {group_id})" if group_id is not None else "",
        )
        return partitions

    def _restore(self, partition: int) -> None:
        self._restores.pop(partition, None)
        coordinator = self.broker.coordinator
        coordinator.restart_sessions(partition, self.broker.now())
        coordinator.set_partition_status(partition, PartitionStatus.ACTIVE)
        self.broker.rearm()

    def clear(self) -> dict[str, int]:
        """Drop every injected fault; returns how many of each kind there were."""
        faults = self.faults
        cleared = {
            "fail": len(faults.fail_rules),
            "latency": len(faults.latency_rules),
            "cut": len(faults.cut_rules),
            "partitions": len(self._restores),
        }
        faults.fail_rules.clear()
        faults.latency_rules.clear()
        faults.cut_rules.clear()
        for p, handle in list(self._restores.items()):
            handle.cancel()
            self._restore(p)
        log.info(
            "control: cleared %d fail, %d latency and %d cut rules; %d partitions restored",
            *cleared.values(),
        )
        return cleared

    # -- reading, and the log level --------------------------------------------------------

    def groups(self) -> list[dict[str, Any]]:
        """Every group: type, state, members, generation (or epoch), total lag."""
        from minicoord.server.group_views import list_groups

        return list_groups(self.broker)

    def describe_group(self, group_id: str) -> dict[str, Any] | None:
        """A group's members, assignments, committed offsets and lag (None: no such group)."""
        from minicoord.server.group_views import describe_group

        return describe_group(self.broker, group_id)

    def set_log_level(self, level: str, logger: str = "minicoord") -> tuple[str, str]:
        """Set a logger's level on the running server; returns (before, after) as effective
        level names. DEBUG on `minicoord` or `minicoord.requests` turns the request log on.
        Levels are the process's: the server puts it back when it stops (log_levels.py)."""
        from minicoord.server import log_levels

        name = str(level).upper()
        if name not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", "NOTSET"):
            raise ValueError(f"unknown log level {level!r}; DEBUG, INFO, WARNING or ERROR")
        target = logging.getLogger(logger)
        before = logging.getLevelName(target.getEffectiveLevel())
        log_levels.set_level(self.broker, target, name)
        after = logging.getLevelName(target.getEffectiveLevel())
        log.info("control: log level of %s: %s -> %s", logger, before, after)
        return before, after
