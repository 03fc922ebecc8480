"""Kafkite for tests: brokers in a background thread, in a child process, or a whole cluster.

    from kafkite.testing import BrokerThread, BrokerProcess, KafkiteCluster, ProcessCluster

The names are imported on first use, so `import kafkite.testing` (and the pytest plugin) stays cheap.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .cluster import KafkiteCluster
    from .process import BrokerProcess
    from .process_cluster import ProcessCluster
    from .runner import BrokerThread

__all__ = ["BrokerProcess", "BrokerThread", "KafkiteCluster", "ProcessCluster"]

_WHERE = {"BrokerThread": ".runner", "BrokerProcess": ".process", "KafkiteCluster": ".cluster",
          "ProcessCluster": ".process_cluster"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])
