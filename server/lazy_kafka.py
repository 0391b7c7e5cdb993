"""Keep kafka-python's client package from loading in a process that only needs its codecs.

The server uses kafka-python for its protocol classes and record batches (`kafka.protocol.*`,
`kafka.record.*`, `kafka.codec`), never for its clients. But importing any submodule runs
`kafka/__init__.py` first, and that imports the whole client: the admin client, the consumer,
the producer and their network layer, about as long as everything else the server loads at
start. `defer_client_package()` puts a stand-in for the `kafka` package into `sys.modules`:
the real package's own module object, with its path and spec, so submodules import from it
as usual, but with `kafka/__init__.py` not yet run. The first time anything asks the package
itself for an attribute (`from kafka import KafkaConsumer`, `kafka.__version__`), the real
`__init__` runs into that same object, so code in the same process sees the package it
expects, only later.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from types import ModuleType
from typing import Any

_lock = threading.RLock()


def defer_client_package() -> bool:
    """Install the stand-in unless `kafka` is already imported; True if it was installed."""
    if "kafka" in sys.modules:
        return False
    spec = importlib.util.find_spec("kafka")
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return False
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader
    loading = False

    def __getattr__(name: str) -> Any:
        nonlocal loading
        with _lock:
            if loading:
                # Asked by the real __init__ itself (the lock keeps other threads waiting):
                # an attribute of a package still initialising, missing as it would be.
                raise AttributeError(f"partially initialized module 'kafka' has no {name!r}")
            if module.__dict__.get("__getattr__") is __getattr__:
                loading = True
                try:
                    loader.exec_module(module)
                except BaseException:
                    # As after a failed import: the next `import kafka` tries afresh.
                    if sys.modules.get("kafka") is module:
                        del sys.modules["kafka"]
                    raise
                finally:
                    loading = False
                del module.__dict__["__getattr__"]
        return getattr(module, name)

    module.__dict__["__getattr__"] = __getattr__
    sys.modules["kafka"] = module
    return True


def client_package_loaded(module: ModuleType | None = None) -> bool:
    """Whether the real `kafka/__init__.py` has run (always true without the stand-in)."""
    module = module if module is not None else sys.modules.get("kafka")
    return module is not None and "__getattr__" not in module.__dict__
