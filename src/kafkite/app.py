"""`kafkite serve`: the brokers of one process until SIGINT/SIGTERM (started by server.node.open_node)."""
from __future__ import annotations

import signal
from pathlib import Path

import structlog
import trio

from .config import BrokerConfig
from .server.node import open_node

log = structlog.get_logger("kafkite")


async def serve(config: BrokerConfig, *, data_dir: Path | None, in_memory: bool, brokers: int = 1,
                loop_watchdog_ms: float | None = None, control: tuple[str, int, str | None] | None = None,
                gc_freeze: bool | None = None, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Serve one broker, or `brokers` brokers of one in-process cluster (node ids 1..N; ports P, P+1, ...
    or all free ports when P is 0), until SIGINT or SIGTERM. The loop watchdog (kafkite.loop_watchdog) logs a
    step holding the event loop past `loop_watchdog_ms` (default: KAFKITE_LOOP_WATCHDOG_MS, else 100; 0: off).
    `gc_freeze` (default: KAFKITE_GC_FREEZE, else on): what survives a full garbage collection is frozen, so that
    full collections stay short (kafkite.gc_freeze; the process is the broker's own here)."""
    from .loop_watchdog import install
    install(loop_watchdog_ms)
    install_gc_freeze(gc_freeze)
    # take SIGINT/SIGTERM over before the ready line: a signal sent the moment "ready" is read must be a
    # clean shutdown, not trio's default KeyboardInterrupt (or the default SIGTERM death)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        faults = None
        if control is not None:  # the control listener (control/http.py): faults and the request log
            from .testing.faults import Faults
            faults = Faults()
        if control is not None and config.get("zookeeper.connect"):
            await _serve_zk_with_control(config, data_dir, in_memory, faults, control, signals, task_status)
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


def trim_malloc() -> bool:
    """Give the C heap's free memory back to the system (glibc's `malloc_trim(0)`), once start-up is done: imports and
    the brokers' construction leave about 0.8 MB of it freed but held (measured 2026-11-26, `kafkite serve
    --in-memory`: 44.3 -> 43.5 MB, in 0.5 ms). Python's own object arenas go back without it; a `gc.collect()` at the
    same point found no garbage (0 objects), so none is made. False where there is no glibc (musl, macOS)."""
    try:
        import ctypes
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return False
    trim(0)
    return True


def settle_gc() -> None:
    """Once ready: the first full collection, what it leaves frozen (kafkite.gc_freeze.settle, when installed)."""
    from . import gc_freeze
    gc_freeze.settle()


def _ready(node, first, extra: dict) -> None:
    trim_malloc()
    log.info("ready", bootstrap=node.bootstrap_servers, node_id=first.node_id,
             brokers=len(node.brokers), cluster_id=node.state.metadata.cluster_id,
             data_dir=None if node.state.in_memory else str(node.state.data_dir), **extra)


async def _serve_zk_with_control(config, data_dir, in_memory, faults, control, signals, task_status) -> None:
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
