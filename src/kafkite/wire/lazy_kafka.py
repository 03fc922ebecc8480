"""kafka-python's `kafka.protocol` (and kafka.errors, kafka.record, kafka.codec) without the package `__init__`s that
import what a broker does not use at start.

kafka-python 3.0's `kafka/__init__.py` imports KafkaAdminClient, KafkaConsumer, KafkaProducer and their network
layer (kafka.net, kafka.metrics, the assignors...): about 110 modules, 4 MB of a broker's resident memory and a
third of `kafkite serve`'s start-up, none of which a broker uses (it needs only the generated protocol classes, the
error table and the record batch codec). `kafka/protocol/admin/__init__.py` imports the classes of every admin API
(ACLs, configs, quotas, SCRAM users, topics, transactions...: 1.4 MB and 30 ms of CPU), which the broker's handlers
import one module at a time when a request of theirs first comes. kafka-python 3.0 has no import path that skips a
package's `__init__` (no lazy `__getattr__` of its own), so `install()` gives these two packages one, without
touching site-packages:

it puts each package into sys.modules as the module its own import spec makes, not yet executed. Its submodules
import as usual (the import system needs only the package's `__path__`); `from kafka import codec` imports the
submodule, as the package would. The first use of anything else on it (`from kafka import KafkaConsumer`,
`kafka.__version__`, `kafka.protocol.admin.__all__`) executes the real `__init__` into that same module, so code
that uses the package's own names sees them as always. `kafkite serve` calls it before anything imports kafka; in a
process that has already imported kafka it does nothing. (kafkite/lazy_modules.py's lazy_module does it, for
standard library modules too.)
"""
from __future__ import annotations

import importlib
import importlib.util
import sys

from ..lazy_modules import lazy_module

PACKAGES = ("kafka", "kafka.protocol.admin", "kafka.protocol.consumer", "kafka.protocol.metadata",
            "kafka.protocol.producer")  # (parents first)


def install() -> bool:
    """Make the PACKAGES packages whose `__init__` runs on first use of their own names (True), unless kafka is
    imported already or cannot be found (False)."""
    if "kafka" in sys.modules:
        return False
    return all(_lazy_package(name) for name in PACKAGES)


def _lazy_package(name: str) -> bool:
    spec = importlib.util.find_spec(name)  # (imports the parent package, lazy or not)
    if spec is None or spec.submodule_search_locations is None:
        return False
    return lazy_module(name)


class LazyName:
    """A name of a module not imported yet (the kafka-python classes a handler answers with, a subsystem only some
    requests need: `kafkite serve` imports less at start, issue 24 item 5): the module is imported at the first use (a
    call, an attribute or a subscript) of any of the names one lazy_names call made, and the real objects then take
    their stand-ins' places in the namespace that holds them, so later requests find the class itself there (no
    per-request cost). Only a call, an attribute and a subscript are passed on: what needs the object itself
    (isinstance, an except clause, subclassing) must come after a use of one of its siblings, or import it."""
    __slots__ = ("_module", "_name", "_namespace", "_target", "_siblings")

    def __init__(self, namespace: dict, module: str, name: str, siblings: list):
        self._namespace, self._module, self._name, self._siblings = namespace, module, name, siblings
        self._target = None
        siblings.append(self)

    def resolve(self):
        target = self._target
        if target is None:
            module = importlib.import_module(self._module)
            for s in self._siblings:  # (all of them: a class an except clause names is then the class too)
                s._target = getattr(module, s._name, None)
                if s._target is None:  # a submodule, or as `from module import name` fails
                    if not hasattr(module, "__path__"):
                        raise ImportError(f"cannot import name {s._name!r} from {s._module!r}")
                    s._target = importlib.import_module(f"{s._module}.{s._name}")
                if s._namespace.get(s._name) is s:
                    s._namespace[s._name] = s._target
            target = self._target
        return target

    def __call__(self, *args, **kwargs):
        return self.resolve()(*args, **kwargs)

    def __getattr__(self, attr: str):
        return getattr(self.resolve(), attr)

    def __getitem__(self, key):  # (a class's FetchRequest[version])
        return self.resolve()[key]

    def __repr__(self) -> str:
        return f"<lazy {self._module}.{self._name}>"


def lazy_names(namespace: dict, module: str, *names: str) -> tuple:
    """Stand-ins (LazyName) for `from module import *names` in the module whose globals() are `namespace`:
    `A, B = lazy_names(globals(), "kafka.protocol.consumer.offsets", "A", "B")`."""
    siblings: list[LazyName] = []
    return tuple(LazyName(namespace, module, name, siblings) for name in names)
