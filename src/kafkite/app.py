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


async def serve(config: BrokerConfig, *, data_dir: Path | None, in_memory: bool,
                task_status=trio.TASK_STATUS_IGNORED) -> None:
    state = build_state(config, data_dir=data_dir, in_memory=in_memory)
    broker = Broker(state)
    async with trio.open_nursery() as nursery:
        await nursery.start(state_services_run, state)
        await nursery.start(broker.serve)
        log.info("ready", bootstrap=broker.bootstrap, node_id=broker.node_id,
                 cluster_id=state.metadata.cluster_id,
                 data_dir=None if state.in_memory else str(state.data_dir))
        task_status.started(broker)
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                log.info("shutdown", signal=signal.Signals(signum).name)
                nursery.cancel_scope.cancel()
                break
    from . import services
    services.close(state)


async def state_services_run(state: ClusterState, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    from . import services
    await services.run(state, task_status=task_status)
