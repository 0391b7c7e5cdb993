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

kafka-python's record code (`kafka.record`, which a server with a data directory runs at
start to read its logs back) imports, through `kafka.codec` and `kafka.record.util`, every
compression library and the `crc32c` package: about 7 MB of RSS and 57 modules, most of them
the crc32c package's `__init__` (its version string reads its distribution metadata with
importlib.metadata, which loads email, zipfile and csv) and the compression extensions, for
logs that are uncompressed. `defer_codec_packages()` defers those packages the same way, so
each loads when a batch is first compressed or decompressed with it.
"""

from __future__ import annotations

import sys
from typing import Any

from minicoord.protocol import deferred

# The compression libraries `kafka.codec` imports at its top and uses only inside its
# functions. Not lz4: kafka.codec reads `lz4.frame.decompress` as it runs.
_CODEC_PACKAGES = ("snappy", "zstandard")


def defer_client_package() -> bool:
    """Defer `kafka/__init__.py` unless `kafka` is already imported; True if deferred."""
    return deferred.defer("kafka")


def client_package_loaded() -> bool:
    """Whether `kafka/__init__.py` has run (always true once imported without deferral)."""
    return deferred.loaded("kafka")


def defer_codec_packages() -> list[str]:
    """Defer the compression packages and `crc32c` that are not yet imported; their names.

    `from crc32c import crc32c` (kafka.record.util's only use of the package) finds a
    stand-in that loads the extension module alone on its first call, as storage/batch.py
    does for the server's own CRCs; any other use of the package runs its `__init__`.
    """
    done = [name for name in _CODEC_PACKAGES if deferred.defer(name)]
    if deferred.defer("crc32c"):
        sys.modules["crc32c"].crc32c = _crc32c
        done.append("crc32c")
    return done


def _crc32c(data: Any, *args: Any, **kwargs: Any) -> int:
    from minicoord.storage.batch import load_crc32c

    return load_crc32c()(data, *args, **kwargs)
