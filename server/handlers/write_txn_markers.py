"""WriteTxnMarkers (key 27), versions 1-2: transaction markers written on request.

Kafka's coordinator sends it to each partition's leader; here the coordinator writes its own
markers, so what arrives is the admin client's abort of a hanging transaction (KIP-664:
Admin.abortTransaction, `kafka-transactions.sh abort`, kafka-python's abort_transaction),
which sends one marker to the partition's leader. As Kafka's leader answers it: ClusterAction
on the cluster (else CLUSTER_AUTHORIZATION_FAILED for every partition); an unknown topic or
partition UNKNOWN_TOPIC_OR_PARTITION; an epoch older than the partition's for that producer
INVALID_PRODUCER_EPOCH; otherwise the marker is appended and answered once durable, ending
the producer's transaction in the partition (an abort lists it as aborted to read_committed
fetches), the marker carrying the request's coordinator epoch (-1 from an admin client),
which is not checked against the partition's. v1 is
flexible; v2 adds the transaction version, which changes nothing here.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.producer import WriteTxnMarkersResponse
from minicoord.protocol.apis import SPECS
from minicoord.protocol.errors import ErrorCode
from minicoord.server.coordinator.results import Result
from minicoord.server.handlers.base import Handler, RequestContext
from minicoord.server.security import authorize
from minicoord.server.security.acls import Operation
from minicoord.server.transactions.answers import after_writes

API_KEY = 27
MarkerResult = WriteTxnMarkersResponse.WritableTxnMarkerResult
TopicResult = MarkerResult.WritableTxnMarkerTopicResult
PartitionResult = TopicResult.WritableTxnMarkerPartitionResult


def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    data = broker.data
    allowed = broker.authorizer is None or authorize.cluster_allowed(ctx, Operation.CLUSTER_ACTION)
    now = broker.now()
    results = []
    for marker in request.markers:
        topics = []
        for t in marker.topics:
            topic = broker.topics.get(t.name)
            partitions = []
            for index in t.partition_indexes:
                if not allowed:
                    error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                elif topic is None or not 0 <= index < topic.partitions:
                    error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif (state := data.partition(topic, index)) is None:
                    error = data.error_for(topic, index)
                else:
                    entry = state.producers.producers.get(marker.producer_id)
                    if entry is not None and marker.producer_epoch < entry.epoch:
                        error = ErrorCode.INVALID_PRODUCER_EPOCH
                    else:
                        data.write_marker(
                            state,
                            marker.producer_id,
                            marker.producer_epoch,
                            marker.transaction_result,
                            now,
                            marker.coordinator_epoch,
                        )
                        error = ErrorCode.NONE
                partitions.append(PartitionResult(partition_index=index, error_code=error))
            topics.append(TopicResult(name=t.name, partitions=partitions))
        results.append(MarkerResult(producer_id=marker.producer_id, topics=topics))
    response = WriteTxnMarkersResponse(version=ctx.version, markers=results)
    return after_writes(ctx, Result(None, [], []), lambda _: response)


HANDLER = Handler.for_spec(SPECS[API_KEY], handle)
