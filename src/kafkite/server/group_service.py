"""The Trio side of the group coordinator: one per broker.

The coordinator itself (`kafkite.coordinator`) is sans-IO: it never waits and
never reads the clock. This service drives it: it passes `now_ms`, parks
JoinGroup/SyncGroup callers whose answers come later (`Pending` tokens), calls
`poll()` at the coordinator's next deadline, loads `__consumer_offsets`
partitions in the background a chunk at a time when this broker becomes their
leader (COORDINATOR_LOAD_IN_PROGRESS meanwhile), and unloads them when it stops
leading them (NOT_COORDINATOR afterwards).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import structlog
import trio

from ..coordinator.coordinator import GroupCoordinator, Pending
from ..storage.batch import build_batch, decode_records
from .context import now_ms

if TYPE_CHECKING:
    from .broker import Broker

log = structlog.get_logger("kafkite.groups")
OFFSETS_TOPIC = "__consumer_offsets"
LOAD_CHUNK = 1000


class OffsetsLogStore:
    """The coordinator's view of `__consumer_offsets`: append records, read them back (shared logs)."""

    def __init__(self, broker: "Broker"):
        self.broker = broker

    def append(self, partition: int, records: list[tuple[bytes, bytes | None]], now_ms: int) -> int:
        rm = self.broker.state.replicas
        data = build_batch([(k, v, []) for k, v in records], timestamp_ms=now_ms)
        p = self.broker.metadata.partition(OFFSETS_TOPIC, partition)
        out = rm.append(OFFSETS_TOPIC, partition, data, now_ms, leader_epoch=p.leader_epoch if p else 0,
                        internal=True)
        if out.error:
            raise RuntimeError(f"append to {OFFSETS_TOPIC}-{partition} failed with error {out.error}")
        return out.base_offset + len(records) - 1

    def read(self, partition: int, from_offset: int = 0):
        lg = self.broker.state.replicas.get(OFFSETS_TOPIC, partition)
        if lg is None:
            return
        offset = max(from_offset, lg.log_start_offset)
        while offset < lg.log_end_offset:
            data = lg.read(offset, 1 << 20, min_one=True)
            if not data:
                break
            last = offset
            for rec in decode_records(data):
                if rec.offset < offset:
                    continue
                yield rec.offset, rec.key, rec.value
                last = rec.offset
            offset = last + 1


class GroupService:
    def __init__(self, broker: "Broker"):
        self.broker = broker
        cfg = broker.config
        self.num_partitions = cfg.get("offsets.topic.num.partitions")
        self.coordinator = GroupCoordinator(_coordinator_config(cfg), OffsetsLogStore(broker), now_ms())
        self._parked: dict[Any, list] = {}  # token -> [event, result]
        self._wake = trio.Event()
        self.leading: set[int] = set()
        self._to_load: list[int] = []

    # -- calls from handlers ----------------------------------------------------
    async def call(self, method: str, **kwargs):
        """Call a coordinator API; wait if its answer comes later (delayed join/sync)."""
        fn = getattr(self.coordinator, method)
        result = fn(now_ms=now_ms(), **kwargs)
        slot = None
        if isinstance(result, Pending):
            slot = [trio.Event(), None]
            self._parked[result] = slot  # park before delivering: the answer may already be there
        self._deliver_completions()
        self._wake.set()
        if slot is not None:
            await slot[0].wait()
            return slot[1]
        return result

    def _deliver_completions(self) -> None:
        for token, result in self.coordinator.drain_completions():
            slot = self._parked.pop(token, None)
            if slot is not None:
                slot[1] = result
                slot[0].set()

    # -- leadership of __consumer_offsets partitions ---------------------------------
    def on_metadata(self, cache) -> None:
        t = cache.topic(OFFSETS_TOPIC)
        now_leading = set()
        if t is not None and self.broker.node_id in cache.brokers:
            now_leading = {p.index for p in t.partitions if p.leader == self.broker.node_id}
        for p in sorted(self.leading - now_leading):
            log.info("coordinator.unload", broker=self.broker.node_id, partition=p)
            self.coordinator.unload(p)
        for p in sorted(now_leading - self.leading):
            log.info("coordinator.load_begin", broker=self.broker.node_id, partition=p)
            self.coordinator.begin_loading(p, now_ms())
            self._to_load.append(p)
        self.leading = now_leading
        self._wake.set()

    # -- the driver loop --------------------------------------------------------------
    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            while self._to_load:
                p = self._to_load[0]
                if p not in self.leading:
                    self._to_load.pop(0)
                    continue
                done = self.coordinator.load_step(p, LOAD_CHUNK)
                if done:
                    self._to_load.pop(0)
                    log.info("coordinator.load_done", broker=self.broker.node_id, partition=p)
                self._deliver_completions()
                await trio.sleep(0)  # let requests in between chunks (they get LOAD_IN_PROGRESS)
            self.coordinator.poll(now_ms())
            self._deliver_completions()
            deadline = self.coordinator.next_deadline_ms()
            self._wake = trio.Event()
            timeout = math.inf if deadline is None else max(0.0, (deadline - now_ms()) / 1000)
            with trio.move_on_after(min(timeout, 1.0)):
                await self._wake.wait()


def _coordinator_config(cfg) -> dict:
    keys = ["group.min.session.timeout.ms", "group.max.session.timeout.ms", "group.initial.rebalance.delay.ms",
            "group.max.size", "offsets.retention.minutes", "offsets.retention.check.interval.ms",
            "offset.metadata.max.bytes", "offsets.topic.num.partitions"]
    return {k: cfg.get(k) for k in keys}
