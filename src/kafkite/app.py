"""`kafkite serve`: the brokers of one process until SIGINT/SIGTERM (started by server.node.open_node)."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import structlog
import trio

from .config import BrokerConfig, ConfigError
from .server.node import open_node

log = structlog.get_logger("kafkite")


async def serve(config: BrokerConfig, *, data_dir: Path | None, in_memory: bool, brokers: int = 1,
                loop_watchdog_ms: float | None = None, control: tuple[str, int, str | None] | None = None,
                gc_freeze: bool | None = None, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Serve one broker, or `brokers` brokers of one in-process cluster (node ids 1..N; ports P, P+1, ...
    or all free ports when P is 0), until SIGINT or SIGTERM. The loop watchdog (kafkite.loop_watchdog) logs a
    step holding the event loop past `loop_watchdog_ms` (default: KAFKITE_LOOP_WATCHDOG_MS, else 100; 0: off).
    `gc_freeze` (default: KAFKITE_GC_FREEZE, else on): what survives a full garbage collection is frozen, so that
    full collections stay short (kafkite.gc_freeze; the process is the broker's own here). Once ready, the C heap's
    free memory goes back to the system every KAFKITE_MALLOC_TRIM_S seconds (trim_malloc_every; default 60)."""
    from .loop_watchdog import install
    install(loop_watchdog_ms)
    install_gc_freeze(gc_freeze)
    trim_s = malloc_trim_interval()  # a bad KAFKITE_MALLOC_TRIM_S stops the start, before anything listens
    # take SIGINT/SIGTERM over before the ready line: a signal sent the moment "ready" is read must be a
    # clean shutdown, not trio's default KeyboardInterrupt (or the default SIGTERM death)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        faults = None
        if control is not None:  # the control listener (control/http.py): faults and the request log
            from .testing.faults import Faults
            faults = Faults()
        if control is not None and config.get("zookeeper.connect"):
            await _serve_zk_with_control(config, data_dir, in_memory, faults, control, signals, task_status, trim_s)
            return
        async with open_node(config, data_dir=data_dir, in_memory=in_memory, brokers=brokers,
                             faults=faults) as node, trio.open_nursery() as side:
            first = node.brokers[min(node.brokers)]
            extra = {}
            if control is not None:
                from .control.http import ControlApp, serve_control
                host, port, token = control
                bound = await side.start(serve_control, ControlApp(faults, sorted(node.brokers), lambda: node.brokers, lambda: node),
                                     host, port, token)
                extra["control"] = f"http://{host}:{bound}"
            _ready(node, first, extra)
            task_status.started(first)
            settle_gc()
            side.start_soon(trim_malloc_every, trim_s)
            async for signum in signals:
                log.info("shutdown", signal=signal.Signals(signum).name)
                break
            side.cancel_scope.cancel()


def install_gc_freeze(on: bool | None) -> bool:
    """`kafkite serve`'s gc freeze (kafkite.gc_freeze), unless `on` is False (None: KAFKITE_GC_FREEZE, else on)."""
    from . import gc_freeze
    if not (gc_freeze.enabled_from_env() if on is None else on):
        return False
    gc_freeze.install()
    return True


def _malloc_trim():
    """glibc's `malloc_trim` (ctypes: the GIL is let go during the call), None where there is no glibc (musl, macOS)."""
    try:
        import ctypes
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def trim_malloc() -> bool:
    """Give the C heap's free memory back to the system (glibc's `malloc_trim(0)`), once start-up is done: imports and
    the brokers' construction leave about 0.8 MB of it freed but held (measured 2026-11-26, `kafkite serve
    --in-memory`: 44.3 -> 43.5 MB, in 0.5 ms). Python's own object arenas go back without it; a `gc.collect()` at the
    same point found no garbage (0 objects), so none is made. False where there is no glibc (musl, macOS)."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


MALLOC_TRIM_ENV = "KAFKITE_MALLOC_TRIM_S"
MALLOC_TRIM_S = 60.0


def malloc_trim_interval() -> float:
    """Seconds between `kafkite serve`'s trims of the C heap (KAFKITE_MALLOC_TRIM_S, else 60; 0: none)."""
    raw = os.environ.get(MALLOC_TRIM_ENV, "").strip()
    try:
        s = float(raw) if raw else MALLOC_TRIM_S
    except ValueError:
        s = -1.0
    if not s >= 0:
        raise ConfigError(f"{MALLOC_TRIM_ENV} must be a number of seconds, 0 or more (0: off), got {raw!r}")
    return s


async def trim_malloc_every(interval_s: float, trim=None) -> None:
    """Every `interval_s`, glibc's malloc_trim(0) in a worker thread (it walks the heap's free chunks: about a
    millisecond here). A broker under mixed traffic (benchmarks/soak.py, on disk) leaves memory freed but held in the
    C heap: glibc's own numbers (mallinfo2) showed 7.5 MB in use, flat, while the free space inside the heap grew
    1.2 MB a minute, and with it the process's RSS (about 1 MB a minute for 45 minutes, not levelling off); the
    automatic trim only gives back free space at the heap's top. malloc_trim gives back every free page
    (madvise), so RSS follows what is in use. Returns at once where there is no glibc or `interval_s` is 0."""
    trim = trim or _malloc_trim()
    if trim is None or interval_s <= 0:
        return
    while True:
        await trio.sleep(interval_s)
        await trio.to_thread.run_sync(trim, 0)


def settle_gc() -> None:
    """Once ready: the first full collection, what it leaves frozen (kafkite.gc_freeze.settle, when installed)."""
    from . import gc_freeze
    gc_freeze.settle()


def _ready(node, first, extra: dict) -> None:
    trim_malloc()
    log.info("ready", bootstrap=node.bootstrap_servers, node_id=first.node_id,
             brokers=len(node.brokers), cluster_id=node.state.metadata.cluster_id,
             data_dir=None if node.state.in_memory else str(node.state.data_dir), **extra)


async def _serve_zk_with_control(config, data_dir, in_memory, faults, control, signals, task_status,
                                 trim_s: float) -> None:
    """A ZooKeeper-mode broker with a control listener: the broker runs under control/zk_restart.py's runner, so
    POST /v1/brokers/stop and /start stop it (as if its process died) and start it again from the same config while
    the control listener stays up. SIGINT/SIGTERM: a clean stop (a controlled shutdown) when it is running."""
    from .control.http import ControlApp, serve_control
    from .control.zk_restart import ZkBrokerRunner
    runner = ZkBrokerRunner(config, data_dir=data_dir, in_memory=in_memory, faults=faults)
    async with trio.open_nursery() as side:
        node = await side.start(runner.run)
        first = node.brokers[min(node.brokers)]
        host, port, token = control
        bound = await side.start(serve_control, ControlApp(faults, [runner.node_id], lambda: runner.brokers,
                                                           lambda: runner), host, port, token)
        _ready(node, first, {"control": f"http://{host}:{bound}"})
        task_status.started(first)
        settle_gc()
        side.start_soon(trim_malloc_every, trim_s)
        async for signum in signals:
            log.info("shutdown", signal=signal.Signals(signum).name)
            break
        with trio.CancelScope(shield=True), trio.move_on_after(120):
            if runner.node is not None:
                try:
                    await runner.stop(runner.node_id, clean=True)
                except ValueError:  # stopped meanwhile over the control listener
                    pass
        side.cancel_scope.cancel()
