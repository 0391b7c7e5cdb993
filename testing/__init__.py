"""Run minicoord from tests: an embedded server on its own thread, and a pytest plugin.

    from minicoord.testing import running

    with running(topics=[("orders", 6)]) as server:
        consumer = KafkaConsumer("orders", bootstrap_servers=server.bootstrap, ...)
        server.control.force_rebalance("my-group")   # thread-safe

Installing minicoord is enough for pytest to offer the `minicoord` fixtures (see plugin.py).
"""

from minicoord.testing.embedded import EmbeddedServer, running

__all__ = ["EmbeddedServer", "running"]
