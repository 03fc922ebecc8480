"""A watchdog on the Trio event loop: a Trio instrument that times each task step and logs a WARN line naming
the task when one step held the loop longer than a threshold (nothing else can run meanwhile: every client of
the broker waits). On in `kafkite serve` and in the test helpers' loops (TrioThread), 100 ms by default;
`KAFKITE_LOOP_WATCHDOG_MS` sets the threshold (0 turns it off), `kafkite serve --loop-watchdog-ms` too.

    event='event_loop.blocked' task='kafkite.services.clean_logs' held_ms=312.4 threshold_ms=100

A step is the code a task runs between two awaits that yield (a checkpoint), so the line names the task that
did blocking work -- an fsync, a file rename, a decompression left on the loop -- and how long it held it.
"""
from __future__ import annotations

import collections
import math
import os
from time import perf_counter

import structlog
import trio

log = structlog.get_logger("kafkite.watchdog")
DEFAULT_THRESHOLD_MS = 100.0
ENV = "KAFKITE_LOOP_WATCHDOG_MS"


class LoopWatchdog(trio.abc.Instrument):
    """Two hooks a step, each a clock read and an attribute: a loop runs one step at a time, so the step that ends is
    the one that began last (no map of tasks to their starts). Trio's own call of the two hooks costs about as much
    again: ~1 us a step in all (benchmarks/commits.py's null broker, `kafkite serve` too, has it)."""

    def __init__(self, threshold_ms: float = DEFAULT_THRESHOLD_MS) -> None:
        self.threshold_s = threshold_ms / 1000.0
        self.blocked: collections.deque[tuple[str, float]] = collections.deque(maxlen=1000)  # (task, ms held)
        # when the running step began; +inf until a step begins with the watchdog on (the step that installs it)
        self.step_started = math.inf

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.step_started = perf_counter()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        # (every step ends here, a task's last one too: trio calls task_exited before this hook)
        held = perf_counter() - self.step_started
        if held > self.threshold_s:
            ms = round(held * 1000, 1)
            self.blocked.append((task.name, ms))
            log.warning("event_loop.blocked", task=task.name, held_ms=ms, threshold_ms=self.threshold_s * 1000,
                        message=f"task {task.name} held the event loop for {ms} ms")


def threshold_from_env(default: float = DEFAULT_THRESHOLD_MS) -> float:
    """The threshold in ms from KAFKITE_LOOP_WATCHDOG_MS (0: off), else `default`."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{ENV} must be a number of milliseconds, got {raw!r}") from None
    if value < 0:
        raise ValueError(f"{ENV} must be 0 (off) or more, got {raw!r}")
    return value


def install(threshold_ms: float | None = None) -> LoopWatchdog | None:
    """Add a watchdog to the running Trio loop (threshold from the environment unless given; None when 0)."""
    ms = threshold_from_env() if threshold_ms is None else threshold_ms
    if ms <= 0:
        return None
    dog = LoopWatchdog(ms)
    trio.lowlevel.add_instrument(dog)
    return dog
