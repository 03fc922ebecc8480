"""Run brokers in a background thread so plain synchronous tests can use them."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable

import trio

from ..app import build_state, state_services_run
from ..config import BrokerConfig
from ..server.broker import Broker, ClusterState


class BrokerThread:
    """A single broker on 127.0.0.1 (random free port by default) in its own Trio thread.

    with BrokerThread() as b:
        KafkaProducer(bootstrap_servers=b.bootstrap_servers)
    """

    def __init__(self, *, data_dir: str | Path | None = None, overrides: dict[str, str] | None = None,
                 port: int = 0):
        static = {"listeners": f"PLAINTEXT://127.0.0.1:{port}", "group.initial.rebalance.delay.ms": "0"}
        static.update(overrides or {})
        self.config = BrokerConfig(static=static)
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.state: ClusterState | None = None
        self.broker: Broker | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._cancel: trio.CancelScope | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self.state = build_state(self.config, data_dir=self.data_dir, in_memory=self.data_dir is None)
        self.broker = Broker(self.state)
        with trio.CancelScope() as cs:
            self._cancel = cs
            async with trio.open_nursery() as nursery:
                await nursery.start(state_services_run, self.state)
                await nursery.start(self.broker.serve)
                self._ready.set()
        from .. import services
        services.close(self.state)

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # surfaced by start()/stop()
            self._error = exc
        finally:
            self._ready.set()

    def start(self) -> "BrokerThread":
        self._thread = threading.Thread(target=self._run, name="kafkite-broker", daemon=True)
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise RuntimeError("broker failed to start") from self._error
        return self

    def call(self, fn: Callable, *args):
        """Run fn(*args) (sync or async) inside the broker's Trio thread and return its result."""
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
        self._thread.join(30)
        self._thread = None
        if self._error is not None:
            raise RuntimeError("broker failed") from self._error

    @property
    def bootstrap_servers(self) -> str:
        assert self.broker is not None
        return self.broker.bootstrap

    @property
    def port(self) -> int:
        assert self.broker is not None and self.broker.bound_port is not None
        return self.broker.bound_port

    def __enter__(self) -> "BrokerThread":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
