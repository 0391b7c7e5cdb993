"""Injected failures: every API that `fail_next` accepts can be answered with the error at
every version it serves, and the error lands where that version's clients read it."""

from __future__ import annotations

import pytest
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.faults import can_fail, error_response

ERROR = ErrorCode.NOT_COORDINATOR


def _error_codes(message: object, version: int) -> list[int]:
    """Every error_code field anywhere in a decoded message that `version` carries."""
    found: list[int] = []
    stack = [message]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
            continue
        fields = getattr(getattr(item, "_struct", None), "fields", None)
        if not fields:
            continue
        for name, field in dict(fields).items():
            if not field.for_version_q(version):
                continue
            value = getattr(item, name, None)
            if name == "error_code" and value is not None:
                found.append(value)
            elif isinstance(value, list) or hasattr(value, "_struct"):
                stack.append(value)
    return found


def _request(key: int, version: int) -> object:
    spec = SPECS[key]
    request = spec.request(version=version)
    # One resource per request so per-resource answers have somewhere to put the error.
    if key == 0:
        data = spec.request.TopicProduceData
        part = data.PartitionProduceData(index=3, records=None)
        request = spec.request(
            version=version,
            acks=-1,
            timeout_ms=1,
            topic_data=[data(name="t", partition_data=[part])],
        )
    elif key == 8:
        topic = spec.request.OffsetCommitRequestTopic
        part = topic.OffsetCommitRequestPartition(partition_index=3, committed_offset=1)
        request = spec.request(
            version=version, group_id="g", topics=[topic(name="t", partitions=[part])]
        )
    elif key == 15:
        request = spec.request(version=version, groups=["g"])
    elif key == 42:
        request = spec.request(version=version, groups_names=["g"])
    elif key == 69:
        request = spec.request(version=version, group_ids=["g"])
    elif key == 10 and version >= 4:
        request = spec.request(version=version, key_type=0, coordinator_keys=["g"])
    elif key == 9 and version >= 8:
        group = spec.request.OffsetFetchRequestGroup
        request = spec.request(version=version, groups=[group(group_id="g", topics=None)])
    return request


CASES = [
    (key, version)
    for key, spec in sorted(SPECS.items())
    if can_fail(key)
    for version in range(spec.min_version, spec.max_version + 1)
    if can_fail(key, version)
]


@pytest.mark.parametrize(("key", "version"), CASES, ids=[f"{SPECS[k].name}-v{v}" for k, v in CASES])
def test_the_injected_error_survives_the_wire(key: int, version: int) -> None:
    spec = SPECS[key]
    response = error_response(spec, version, _request(key, version), ERROR)
    decoded = spec.response.decode(response.encode(version=version), version=version)
    codes = _error_codes(decoded, version)
    assert codes and set(codes) == {ERROR}, (spec.name, version, codes)


def test_apis_answering_per_resource_are_refused_up_front() -> None:
    assert not can_fail(2)  # ListOffsets: errors per partition only
    assert not can_fail(3, 12)  # Metadata: per topic before v13
    assert can_fail(0) and can_fail(68) and can_fail(69)
    # Old versions without a top-level error: the connection is cut instead.
    assert not can_fail(1, 6) and can_fail(1, 7)
