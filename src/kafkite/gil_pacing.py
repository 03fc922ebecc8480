"""A worker thread's pure-Python work paced so that the event loop's thread gets the GIL back quickly.

The log cleaner's work (storage/log_cleaner.py: records decoded, keys hashed, batches rebuilt) is pure Python in a
worker thread: left to Python's switch interval, each time the event loop's thread gave the GIL up (a socket send, a
read) it waited up to 5 ms to get it back, and a loop step of a few dozen such calls held every client for hundreds
of ms. A worker that gives the GIL up every PACE_S, sleeping YIELD_S (long enough for the waiting thread to wake and
take it: a sleep(0) retakes it first), keeps each such wait short; it costs the work about YIELD_S / PACE_S of its
speed. The storage domain stays without a clock: the broker hands its cleaner `Pacer` (services.py).

The same holds for any other long run of Python in a worker thread: a LeaderAndIsr's new logs made in one
(server/prepared_logs.py: ~2 ms of Python a log, 1,000 logs per broker) kept the traffic of an in-process cluster
waiting 90 ms for the loop to get the GIL back. `paced(items)` gives the GIL up the same way between items."""
from __future__ import annotations

import time
from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")

PACE_S = 0.001
YIELD_S = 0.0001


def yield_gil() -> None:
    time.sleep(YIELD_S)


class Pacer:
    """Called once per record: every `every` calls (a power of two, 64 by default), sleeps YIELD_S when PACE_S has
    passed since the last sleep."""
    __slots__ = ("last", "count", "mask")

    def __init__(self, every: int = 64) -> None:
        self.last, self.count, self.mask = time.perf_counter(), 0, every - 1

    def __call__(self) -> None:
        self.count += 1
        if self.count & self.mask:
            return
        now = time.perf_counter()
        if now - self.last >= PACE_S:
            yield_gil()
            self.last = time.perf_counter()


def paced(items: Iterable[T]) -> Iterator[T]:
    """The items, the GIL given up between two of them once PACE_S has passed (for a worker thread's loop over
    items each worth ~0.1 ms or more of Python: logs to make, open or close)."""
    pace = Pacer(every=1)
    for item in items:
        yield item
        pace()
