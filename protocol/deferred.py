"""Modules whose code runs when they are first used, not when they are first imported.

kafka-python builds every protocol and record class from its JSON schema when the class's
module runs: tens of milliseconds and megabytes that a server pays at start for records it may
never write. `defer(name)` puts the module's own object into `sys.modules` (its spec, path and
loader set, as an import makes it) with its code not yet run. Importing it, or a submodule of
it, finds it as usual; its code runs, into that same object, the first time anything asks the
module for an attribute it does not have (a PEP 562 module `__getattr__`), and from then on it
is an ordinary module. So code that imports such a module at its top and uses it inside its
functions (`from minicoord.protocol import consumer_records as cr`, then `cr.TYPES`) pays for
it only when one of those functions first runs; `from module import name` at a module's top
loads it there, which is correct, only earlier.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from typing import Any

# One lock for every deferred module: one module's code may use another's (records.py's
# functions use consumer_records), and a thread that finds a module loading waits for it.
_lock = threading.RLock()
# Deferred modules whose code has not run yet, by name: the `__getattr__` that will run it.
_pending: dict[str, Any] = {}


def defer(name: str) -> bool:
    """Defer module `name` (absolute); False if it is already imported or cannot be found."""
    if name in sys.modules:
        return False
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return False
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader
    parent_name, _, child = name.rpartition(".")
    parent = sys.modules.get(parent_name) if parent_name else None
    running = False

    def __getattr__(attr: str) -> Any:
        nonlocal running
        with _lock:
            if running:
                # Asked by the module's own code while it runs (other threads wait on the
                # lock): missing, as in any module still initialising.
                raise AttributeError(f"partially initialized module {name!r} has no {attr!r}")
            if _pending.get(name) is __getattr__:
                running = True
                try:
                    loader.exec_module(module)
                except BaseException:
                    # As after a failed import: the next import tries afresh.
                    if sys.modules.get(name) is module:
                        del sys.modules[name]
                    raise
                finally:
                    running = False
                    del _pending[name]
                    if module.__dict__.get("__getattr__") is __getattr__:
                        del module.__dict__["__getattr__"]
        return getattr(module, attr)

    module.__dict__["__getattr__"] = __getattr__
    _pending[name] = __getattr__
    sys.modules[name] = module
    if parent is not None:
        # What an import of the submodule does, so `from parent import child` finds it.
        setattr(parent, child, module)
    return True


def loaded(name: str) -> bool:
    """Whether module `name` is imported and its code has run."""
    return name in sys.modules and name not in _pending
