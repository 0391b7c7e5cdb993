"""DeleteTopics (key 20), versions 1-6.

Removes each topic: its metadata record (RemoveTopicRecord) first, then its logs, the fetches
waiting on it (answered at once) and every group's offsets for it, as Kafka does. A topic of
the same name created later has a new id and starts at offset 0. v4 is flexible; v5 adds
error messages; v6 names topics by name or id. `delete.topic.enable=false` refuses all
(TOPIC_DELETION_DISABLED). Unlike a KRaft controller, minicoord refuses to delete its
`__consumer_offsets` topic: the coordinator's state lives there.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from kafka.protocol.admin import DeleteTopicsResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.results import Result
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize
from minicoord.server.topics import Topic

API_KEY = 20
DESCRIBE = authorize.DESCRIBE
Result_ = DeleteTopicsResponse.DeletableTopicResult
_ZERO_UUID = uuid.UUID(int=0)


def _may(ctx: RequestContext, op: authorize.Operation, name: str | None) -> bool:
    return name is not None and authorize.allowed(ctx, op, authorize.TOPIC, name)


def handle(ctx: RequestContext, request: Any) -> Any:
    version = ctx.version
    broker = ctx.broker
    registry = broker.topics
    if version >= 6:
        entries = [(t.name, t.topic_id) for t in request.topics]
    else:
        entries = [(name, None) for name in request.topic_names]
    results = []
    # A name or id given twice is answered once, INVALID_REQUEST, and that topic is left
    # alone (Kafka's ControllerApis; clients match results by name or id).
    named = Counter(name for name, _ in entries if name is not None)
    by_id = Counter(i for _, i in entries if i is not None and i != _ZERO_UUID)
    names_seen: set[str] = set()
    to_delete: list[Topic] = []
    for name, topic_id in entries:
        topic_id = None if topic_id == _ZERO_UUID else topic_id
        if named[name] > 1 or by_id[topic_id] > 1:
            continue
        topic: Topic | None = None
        error, message = ErrorCode.NONE, None
        if not broker.config.delete_topic_enable:
            error = ErrorCode.TOPIC_DELETION_DISABLED if version >= 3 else ErrorCode.INVALID_REQUEST
            message = "Topic deletion is disabled (delete.topic.enable=false)."
        elif name is None and topic_id is None:
            error, message = ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified."
        elif name is not None and topic_id is not None:
            error, message = (
                ErrorCode.INVALID_REQUEST,
                "You may not specify both topic name and topic id.",
            )
        else:
            topic = registry.get(name) if name is not None else registry.by_id(topic_id)
            # With ACLs (as Kafka): Delete on the topic (and, named by id, Describe, else
            # its name is not returned), checked before whether a named topic exists.
            checked = broker.authorizer is not None
            target = topic.name if topic is not None else name
            if checked and name is None and topic is not None and not _may(ctx, DESCRIBE, target):
                error, message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, None
                topic, name = None, None
            elif checked and target is not None and not _may(ctx, authorize.DELETE, target):
                error, message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, None
            elif topic is None:
                # Kafka's ApiError(error): the error's own words (ReplicationControlManager's
                # findTopicIds and findTopicNames).
                if name:
                    error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    message = "This server does not host this topic-partition."
                else:
                    error = ErrorCode.UNKNOWN_TOPIC_ID
                    message = "This server does not host this topic ID."
            elif topic.name in names_seen:
                error, message = ErrorCode.INVALID_REQUEST, "Duplicate topic name."
            elif topic.internal:
                error = ErrorCode.INVALID_REQUEST
                message = f"minicoord keeps its internal topic {topic.name}: groups live there"
            else:
                names_seen.add(topic.name)
                to_delete.append(topic)
        results.append(
            Result_(
                name=topic.name if topic is not None else name,
                topic_id=topic.topic_id if topic is not None else (topic_id or _ZERO_UUID),
                error_code=error,
                error_message=message,
            )
        )
    twice = [(n, _ZERO_UUID, "name") for n in dict.fromkeys(n for n, _ in entries) if named[n] > 1]
    twice += [(None, i, "id") for i in dict.fromkeys(i for _, i in entries) if by_id[i] > 1]
    results += [
        Result_(
            name=name,
            topic_id=topic_id,
            error_code=ErrorCode.INVALID_REQUEST,
            error_message=f"Duplicate topic {what}.",
        )
        for name, topic_id, what in twice
    ]
    for topic in to_delete:
        broker.delete_topic(topic)
    response = DeleteTopicsResponse(version=version, throttle_time_ms=0, responses=results)
    parked = ctx.park(lambda _: response)
    broker.apply(Result(None, [], []), parked)  # answered once the removals are durable
    return parked


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
