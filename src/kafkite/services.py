"""Background services attached to the shared state (logs, coordinator, timers).

Filled in by the storage and coordinator layers; for now nothing runs.
"""
from __future__ import annotations

import math

import trio


def attach(state) -> None:
    pass


async def run(state, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    task_status.started()
    await trio.sleep(math.inf)


def close(state) -> None:
    pass
