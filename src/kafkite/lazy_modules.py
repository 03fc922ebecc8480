"""Modules whose code runs at their first use instead of at their import (`kafkite serve`'s idle memory, issue 24 item
5).

Trio and structlog import, at their own import, modules a broker uses only for some features or never:
- `ssl` (trio's SSLStream, and asyncio's): with `_ssl` it maps OpenSSL's libssl and libcrypto, about 6 MB;
- `hmac` and `hashlib` (trio's DTLS, which Kafkite does not use; SCRAM credentials): `_hashlib` maps libcrypto;
- `asyncio` (structlog's stdlib module, for its async log methods, which Kafkite does not call): 40 modules, and
  `ssl` again;
- `idna` (trio's socket module, for non-ASCII host names) and `zipfile` (importlib.resources' zip reader): 2 MB and
  1 MB of tables and code.
Measured with `benchmarks/memory.py` (2026-11-26): idle RSS of `kafkite serve --in-memory` 34.6 MB with all of them
imported, 27.7 MB with none.

`lazy_module(name)` puts the module into sys.modules as the module its own import spec makes, not yet executed
(importlib.util.LazyLoader's idea; LazyLoader itself runs the module at the next `import` statement of it, since
the import system reads the module's `__spec__`, so it does not serve here). `import ssl` then finds it and binds
it; the first use of one of its names (`ssl.SSLContext`, `from ssl import ...`, `hashlib.sha256`) executes its code
into that same module, once, under a lock, so every holder of it sees the real module from then on. A package's
submodules import as usual without running the package's `__init__` (the import system needs only its `__path__`),
as kafka-python's packages do in wire/lazy_kafka.py, which uses this too. A module already imported is left as it
is. Only `kafkite serve` installs these (cli.py), before it imports trio: a process that imports Kafkite as a library
gets its modules the usual way.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
import threading

# (what imports them at start: trio, trio._dtls, structlog.stdlib, trio._socket, importlib.resources.readers)
LIBRARIES = ("ssl", "hmac", "hashlib", "asyncio", "idna", "zipfile")


def install(names: tuple[str, ...] = LIBRARIES) -> list[str]:
    """The modules of `names` made lazy (the others are imported already or cannot be found)."""
    return [name for name in names if name not in sys.modules and lazy_module(name)]


def lazy_module(name: str) -> bool:
    """Put module `name` into sys.modules unexecuted, its code run at the first use of a name of its own (see the
    module's docstring). False when it cannot be found; a parent package is imported (lazily, if it is so)."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return False
    module = importlib.util.module_from_spec(spec)
    package = spec.submodule_search_locations is not None
    ran = []
    lock = threading.RLock()  # its own, as the import system has one per module (re-entered: its code may use its
    # own package's names, as kafka's __init__ uses kafka.protocol.admin's through kafka.admin)

    def __getattr__(attr: str):
        if package and not attr.startswith("__") and importlib.util.find_spec(f"{name}.{attr}") is not None:
            return importlib.import_module(f"{name}.{attr}")  # a submodule: what the package attribute would be
        with lock:  # (another thread asking meanwhile waits here until the code has run, as for an import)
            if not ran:
                ran.append(None)  # (its own thread's further asks, from inside that code, see the module so far)
                try:
                    spec.loader.exec_module(module)
                except BaseException as exc:  # (kept: every later use fails as an import of it would)
                    ran[0] = exc
                    raise
                finally:
                    if ran[0] is None and module.__dict__.get("__getattr__") is __getattr__:
                        del module.__getattr__  # the module as it is: no module __getattr__ unless it has its own
            elif ran[0] is not None:
                raise ImportError(f"module {name!r} failed to load: {ran[0]!r}") from ran[0]
        try:
            return module.__dict__[attr]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}") from None

    module.__getattr__ = __getattr__
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)  # as the import system does for a submodule it loads
    return True
