"""Sans-IO Kafka wire protocol: framing, headers, the API registry and record schemas.

Nothing here touches a socket: bytes in, typed messages out, and back.
"""
