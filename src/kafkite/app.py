"""Running a broker: build the shared state and serve until cancelled."""
from __future__ import annotations

import signal
from pathlib import Path

import structlog
import trio

from .config import BrokerConfig
from .server.broker import Broker, ClusterState

log = structlog.get_logger("kafkite")


def build_state(config: BrokerConfig, *, data_dir: Path | None, in_memory: bool) -> ClusterState:
    state = ClusterState(config, data_dir=data_dir, in_memory=in_memory)
    from . import services
    services.attach(state)
    return state


async def serve(config: BrokerConfig, *, data_dir: Path | None, in_memory: bool, brokers: int = 1,
                task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Serve one broker, or `brokers` brokers of one in-process cluster (node ids 1..N; ports P, P+1, ...
    or all free ports when P is 0)."""
    state = build_state(config, data_dir=data_dir, in_memory=in_memory)
    # take SIGINT/SIGTERM over before the ready line: a signal sent the moment "ready" is read must be a
    # clean shutdown, not trio's default KeyboardInterrupt (or the default SIGTERM death)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(state_services_run, state)
            started = []
            if brokers == 1:
                started.append(Broker(state))
            else:
                base = Broker(state, node_id=1)
                for i in range(brokers):
                    port = 0 if base.port == 0 else base.port + i
                    started.append(base if i == 0 and port == base.port else Broker(state, node_id=i + 1, port=port))
            for b in started:
                await nursery.start(b.serve)
            log.info("ready", bootstrap=",".join(b.bootstrap for b in started), node_id=started[0].node_id,
                     brokers=len(started), cluster_id=state.metadata.cluster_id,
                     data_dir=None if state.in_memory else str(state.data_dir))
            task_status.started(started[0])
            async for signum in signals:
                log.info("shutdown", signal=signal.Signals(signum).name)
                nursery.cancel_scope.cancel()
                break
    from . import services
    services.close(state)


async def state_services_run(state: ClusterState, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    from . import services
    await services.run(state, task_status=task_status)
