"""Keep kafka-python's client package from loading in a process that only needs its codecs.

The server uses kafka-python for its protocol classes and record batches (`kafka.protocol.*`,
`kafka.record.*`, `kafka.codec`), never for its clients. But importing any submodule runs
`kafka/__init__.py` first, and that imports the whole client: the admin client, the consumer,
the producer and their network layer, about as long as everything else the server loads at
start. `defer_client_package()` defers the package (protocol/deferred.py): submodules import
from it as usual with `kafka/__init__.py` not yet run, and the first time anything asks the
package itself for an attribute (`from kafka import KafkaConsumer`, `kafka.__version__`), the
real `__init__` runs into the same package object, so code in the same process sees the
package it expects, only later.
"""

from __future__ import annotations

from minicoord.protocol import deferred


def defer_client_package() -> bool:
    """Defer `kafka/__init__.py` unless `kafka` is already imported; True if deferred."""
    return deferred.defer("kafka")


def client_package_loaded() -> bool:
    """Whether `kafka/__init__.py` has run (always true once imported without deferral)."""
    return deferred.loaded("kafka")
