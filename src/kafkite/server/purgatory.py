"""The delayed-operation purgatory of the data path (Kafka's DelayedOperationPurgatory, keyed by partition).

A request that may wait -- a Fetch for min_bytes (DelayedFetch), a Produce with acks=all for the ISR (DelayedProduce)
-- watches the partitions it waits on and sleeps until one of them changes or its deadline passes; whatever changes a
partition (an append written, a high watermark moved, a leader or replica change, a deletion) calls
`check_and_complete(key)`, and every request watching it looks again. Nothing is completed here: each waiter decides
for itself whether it is done (Kafka's tryComplete), so a spurious wake-up costs one look.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterable, Iterator

import trio

Key = tuple[str, int]


class DelayedOperationPurgatory:
    def __init__(self) -> None:
        self._watchers: dict[Key, list[trio.Event]] = {}  # partition -> the requests waiting on it

    @property
    def watched(self) -> int:
        """How many partitions some request waits on (Kafka's purgatory size, per key)."""
        return len(self._watchers)

    @contextmanager
    def watching(self, keys: Iterable[Key]) -> Iterator[trio.Event]:
        """An event set by the next change of any of `keys`, while the block runs."""
        keys = list(keys)
        ev = trio.Event()
        for key in keys:
            self._watchers.setdefault(key, []).append(ev)
        try:
            yield ev
        finally:
            for key in keys:
                waiting = self._watchers.get(key)
                if waiting is not None and ev in waiting:
                    waiting.remove(ev)
                    if not waiting:
                        del self._watchers[key]

    def check_and_complete(self, key: Key) -> None:
        """`key` changed: every request waiting on it looks again."""
        for ev in self._watchers.pop(key, ()):
            ev.set()

    def check_all(self) -> None:
        """Everything changed (the log dir went offline): every waiting request looks again, and answers its error."""
        watchers, self._watchers = self._watchers, {}
        for events in watchers.values():
            for ev in events:
                ev.set()
