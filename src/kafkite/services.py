"""Background services attached to the shared state: partition logs, coordinator, timers."""
from __future__ import annotations


import trio


def attach(state) -> None:
    from .server.context import now_ms
    from .server.replica_manager import ReplicaManager
    state.replicas = ReplicaManager(state)
    state.hooks.append(state.replicas)
    state.replicas.open_all(now_ms())


async def run(state, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Retention: every log.retention.check.interval.ms, delete segments past retention.ms / retention.bytes."""
    from .server.context import now_ms
    task_status.started()
    while True:
        await trio.sleep(state.config.get("log.retention.check.interval.ms") / 1000)
        state.replicas.enforce_retention(now_ms())


def close(state) -> None:
    state.replicas.close()
