"""Python's full garbage collections kept short: what survived one is frozen (`gc.freeze()`), so the next ones only
go through what was made since. On in `kafkite serve` (`--gc-freeze off` or KAFKITE_GC_FREEZE=0 turns it off); the
in-process brokers (BrokerThread, KafkiteCluster) leave the host process's GC alone unless a caller installs it.

Why: a full (generation 2) collection goes through every object the collector tracks -- a broker's 1,000s of
partitions hold ~20 each (storage keeps it that low: log_segment.MadeOnce) -- and stops every thread meanwhile, the
event loop's too: ~50 ms for 3 brokers x 1,000 partitions on a quiet 2-core machine, several times that on a busy
one (benchmarks/loop_stalls.py measured each phase's longest loop step to be its longest full collection). Python
runs one whenever the objects that reached the oldest generation since the last one pass a quarter of those it
kept then, so a broker that made many partitions (a LeaderAndIsr, its start) runs them now and then for good.

How: after each full collection -- when everything left is reachable, no garbage among it -- the survivors go to
the permanent generation, which later collections skip; `gc.collect()` itself, the thresholds and the young
collections are untouched. A frozen object is still freed by its reference count (a deleted partition's log, a
closed connection), but a reference cycle among frozen objects that became garbage is not collected while frozen.
So that such cycles cannot pile up, every `refresh_s` (an hour by default) the frozen objects are given back
(`gc.unfreeze()`): the next full collection goes through them all once -- the pause there was without this, once
an hour -- frees those cycles, and freezes again. (Measured: 3 in-process brokers with clients in the same process,
a full collection forced while a producer and a consumer were connected, 10 times: ~1,400 objects a time were
cycles left until the refresh; without forcing them, full collections are rare once the partitions are made.)
The first full collection goes through everything the process made at start: `kafkite serve` runs it once ready
(`settle`).
"""
from __future__ import annotations

import gc
import os
import time

ENV = "KAFKITE_GC_FREEZE"
DEFAULT_REFRESH_S = 3600.0


class FreezeAfterFullCollections:
    """The gc callback (see the module comment). `frozen`: how many times it froze; `refreshes`: gave back."""

    def __init__(self, refresh_s: float = DEFAULT_REFRESH_S, clock=time.monotonic) -> None:
        self.refresh_s, self._clock = refresh_s, clock
        self._since = clock()
        self.frozen = self.refreshes = 0

    def __call__(self, phase: str, info: dict) -> None:
        if phase != "stop" or info.get("generation") != 2:
            return
        now = self._clock()
        if now - self._since >= self.refresh_s:
            self._since = now
            self.refreshes += 1
            gc.unfreeze()  # the next full collection goes through everything (and freezes again)
            return
        gc.freeze()
        self.frozen += 1


_installed: FreezeAfterFullCollections | None = None


def enabled_from_env(default: bool = True) -> bool:
    raw = os.environ.get(ENV, "").strip().lower()
    if not raw:
        return default
    if raw in ("0", "off", "false", "no"):
        return False
    if raw in ("1", "on", "true", "yes"):
        return True
    raise ValueError(f"{ENV} must be on or off (1 or 0), got {raw!r}")


def install(refresh_s: float = DEFAULT_REFRESH_S) -> FreezeAfterFullCollections:
    """Freeze after every full collection from now on, in this whole process (idempotent)."""
    global _installed
    if _installed is None:
        _installed = FreezeAfterFullCollections(refresh_s)
        gc.callbacks.append(_installed)
    return _installed


def settle() -> bool:
    """When installed: a full collection now, its survivors frozen -- `kafkite serve` right after its ready line, so
    that the process's first full collection, which goes through everything it made at start (its imports, its
    logs: 35-70 ms for 3 brokers in loop_stalls), comes then, not at some later moment under load. -> whether it
    collected."""
    if _installed is None:
        return False
    gc.collect()  # (the callback freezes what survived)
    return True


def uninstall() -> None:
    """Stop, and give the frozen objects back to the collector."""
    global _installed
    if _installed is not None:
        gc.callbacks.remove(_installed)
        _installed = None
        gc.unfreeze()
