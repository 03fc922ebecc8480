"""A Trio event loop in a background thread, for servers used from synchronous tests.

Subclasses implement `async def _serve(self)`: set up, then `await self._started()` once ready, then keep
running until cancelled. `start()` returns when it is ready (or raises what made it fail), `stop()`
cancels it and waits, `call(fn, *args)` runs a sync or async function inside the loop.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

import trio


class TrioThread:
    thread_name = "kafkite-trio"
    start_timeout = 60.0

    def __init__(self) -> None:
        self._token: trio.lowlevel.TrioToken | None = None
        self._cancel: trio.CancelScope | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self.watchdog = None  # the loop's LoopWatchdog (kafkite.loop_watchdog), once running

    async def _serve(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    async def _started(self) -> None:
        self._ready.set()

    async def _main(self) -> None:
        from ..loop_watchdog import install
        self._token = trio.lowlevel.current_trio_token()
        self.watchdog = install()  # a WARN line for a step holding the loop past 100 ms (KAFKITE_LOOP_WATCHDOG_MS)
        with trio.CancelScope() as cs:
            self._cancel = cs
            await self._serve()

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # surfaced by start()/stop()
            self._error = exc
        finally:
            self._ready.set()

    def start(self):
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()
        self._ready.wait(self.start_timeout)
        if self._error is not None:
            raise RuntimeError(f"{type(self).__name__} failed to start") from self._error
        return self

    def call(self, fn: Callable, *args) -> Any:
        """Run fn(*args) (sync or async) inside the Trio thread and return its result."""
        async def runner():
            r = fn(*args)
            if hasattr(r, "__await__"):
                r = await r
            return r
        return trio.from_thread.run(runner, trio_token=self._token)

    def stop(self) -> None:
        if self._thread is None:
            return
        if self._cancel is not None and self._thread.is_alive():
            trio.from_thread.run_sync(self._cancel.cancel, trio_token=self._token)
        self._thread.join(60)
        self._thread = None
        if self._error is not None:
            raise RuntimeError(f"{type(self).__name__} failed") from self._error

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    async def __aenter__(self):
        await trio.to_thread.run_sync(self.start)
        return self

    async def __aexit__(self, *exc) -> None:
        await trio.to_thread.run_sync(self.stop)
