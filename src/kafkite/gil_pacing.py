"""A worker thread's pure-Python work paced so that the event loop's thread gets the GIL back quickly.

The log cleaner's work (storage/log_cleaner.py: records decoded, keys hashed, batches rebuilt) is pure Python in a
worker thread: left to Python's switch interval, each time the event loop's thread gave the GIL up (a socket send, a
read) it waited up to 5 ms to get it back, and a loop step of a few dozen such calls held every client for hundreds
of ms. A worker that gives the GIL up every PACE_S, sleeping YIELD_S (long enough for the waiting thread to wake and
take it: a sleep(0) retakes it first), keeps each such wait short; it costs the work about YIELD_S / PACE_S of its
speed. The storage domain stays without a clock: the broker hands its cleaner `Pacer` (services.py)."""
from __future__ import annotations

import time

PACE_S = 0.001
YIELD_S = 0.0001


def yield_gil() -> None:
    time.sleep(YIELD_S)


class Pacer:
    """Called once per record: every 64 calls, sleeps YIELD_S when PACE_S has passed since the last sleep."""
    __slots__ = ("last", "count")

    def __init__(self) -> None:
        self.last, self.count = time.perf_counter(), 0

    def __call__(self) -> None:
        self.count += 1
        if self.count & 63:
            return
        now = time.perf_counter()
        if now - self.last >= PACE_S:
            yield_gil()
            self.last = time.perf_counter()
