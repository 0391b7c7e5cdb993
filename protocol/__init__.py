"""Sans-IO Kafka wire protocol: framing, headers, the API registry and record schemas.

Nothing here touches a socket: bytes in, typed messages out, and back.
"""

from minicoord.protocol import deferred

# The record modules whose kafka-python classes are built from JSON when they run: a server
# needs them with its first group, commit or topic record, not to start (protocol/deferred.py).
for _module in ("classic_records", "consumer_records", "metadata_records"):
    deferred.defer(f"{__name__}.{_module}")
del _module
