"""kafka-python's `kafka.protocol` (and kafka.errors, kafka.record, kafka.codec) without its package `__init__`.

kafka-python 3.0's `kafka/__init__.py` imports KafkaAdminClient, KafkaConsumer, KafkaProducer and their network
layer (kafka.net, kafka.metrics, the assignors...): about 110 modules, 4 MB of a broker's resident memory and a
third of `kafkite serve`'s start-up, none of which a broker uses (it needs only the generated protocol classes, the
error table and the record batch codec). kafka-python 3.0 has no import path that skips the package `__init__`
(it has no lazy `__getattr__` of its own), so `install()` gives it one, without touching site-packages:

it puts the `kafka` package into sys.modules as the module its own import spec makes, not yet executed. Its
submodules import as usual (the import system needs only the package's `__path__`); `from kafka import codec`
imports the submodule, as the package would. The first use of anything else on it (`from kafka import
KafkaConsumer`, `kafka.__version__`, `kafka.__all__`) executes the real `__init__` into that same module, so code
that uses the package's own names sees them as always. `kafkite serve` calls it before anything imports kafka; in a
process that has already imported kafka it does nothing.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
import threading

_lock = threading.Lock()


def install() -> bool:
    """Make `kafka` a package whose `__init__` runs on first use of its own names (True), unless kafka is imported
    already or cannot be found (False)."""
    if "kafka" in sys.modules:
        return False
    spec = importlib.util.find_spec("kafka")
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return False
    module = importlib.util.module_from_spec(spec)
    ran = []

    def __getattr__(name: str):
        if not name.startswith("__") and importlib.util.find_spec(f"kafka.{name}") is not None:
            return importlib.import_module(f"kafka.{name}")  # a submodule: what the package attribute would be
        with _lock:
            if not ran:
                ran.append(True)
                del module.__getattr__  # the package as it is: no module __getattr__ of its own
                spec.loader.exec_module(module)
        try:
            return module.__dict__[name]
        except KeyError:
            raise AttributeError(f"module 'kafka' has no attribute {name!r}") from None

    module.__getattr__ = __getattr__
    sys.modules["kafka"] = module
    return True
