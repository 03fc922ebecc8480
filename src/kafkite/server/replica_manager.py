"""The partitions this process hosts: their logs, appends and reads (Kafka's ReplicaManager).

Owns one log per (topic, partition) -- `FileLog` under `<data dir>/<topic>-<N>/`
or `MemoryLog` for --in-memory -- created when the topic is created and removed
when it is deleted. Produce validates and appends here (with the idempotent
producer checks); a waiting Fetch watches the partitions it reads (`watch`), and an
append (or a deferred write moving the high watermark) wakes the fetches watching
that partition at once, and no others.

Validation (storage.log_validator.prepare_append) reads every record. A small batch is
validated and appended on the event loop in one go; a large one (many records, a large
decompressed size, recompression) is validated in a worker thread while the partition's
append lock is held, and appended on the loop once it is done. A produce that finds the
lock held waits its turn, even when small: appends to a partition happen in the order the
produces arrived, as under Kafka's log lock, and the producer-state check and the append
stay one step on the loop.
"""
from __future__ import annotations

import functools
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import structlog
import trio

from ..config import TOPIC_CONFIGS
from ..controller.metadata import INTERNAL_TOPICS
from ..storage.log_config import LogConfig
from ..storage.log_validator import NeedsWorker, Validated, prepare_append
from ..storage.unified_log import FileLog, MemoryLog, OffsetOutOfRange
from ..wire.errors import E
from .context import now_ms

if TYPE_CHECKING:
    from ..controller.controller import MetadataCache
    from ..controller.metadata import TopicInfo
    from .broker import ClusterState

log = structlog.get_logger("kafkite.replica_manager")
EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3


@dataclass
class AppendOutcome:
    error: int = 0
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    record_errors: list[tuple[int, str | None]] | None = None
    error_message: str | None = None  # in the response (Kafka sends only record errors' message)
    log_message: str | None = None  # why, for the broker's log
    durable_wait: tuple[object, int] | None = None  # (log, last offset) still to be written: see wait_durable


@dataclass
class LogReadResult:
    """One partition of a Fetch (Kafka's LogReadResult)."""
    partition: int
    error: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: list | None = None  # the log's buffers, not copied


class ReplicaManager:
    def __init__(self, state: "ClusterState"):
        self.state = state
        self.logs: dict[tuple[str, int], object] = {}
        self._watchers: dict[tuple[str, int], list[trio.Event]] = {}  # partition -> fetches waiting on it
        self._keys: dict[int, tuple[str, int]] = {}  # id(log) -> its partition
        self._closed = False
        self._flushing: dict[int, trio.Event] = {}  # id(log) -> set when its running fsync ends
        self._append_locks: dict[tuple[str, int], trio.Lock] = {}  # held while a worker validates

    # -- lifecycle ------------------------------------------------------------
    def effective_configs(self, topic: "TopicInfo") -> dict[str, str]:
        cfg = {}
        for name in TOPIC_CONFIGS:
            cfg[name] = topic.configs[name] if name in topic.configs else self.state.config.topic_default(name)[0]
        return cfg

    def log_config(self, topic: "TopicInfo") -> LogConfig:
        return LogConfig.from_topic_configs(self.effective_configs(topic))

    def _dir(self, topic: str, partition: int) -> Path:
        assert self.state.data_dir is not None
        return self.state.data_dir / f"{topic}-{partition}"

    def _open(self, topic: "TopicInfo", partition: int, now_ms: int):
        cfg = self.log_config(topic)
        if self.state.in_memory:
            lg = MemoryLog(cfg, now_ms=now_ms)
        else:
            lg = FileLog(self._dir(topic.name, partition), cfg, now_ms=now_ms, topic_id=topic.topic_id)
        self.logs[(topic.name, partition)] = lg
        self._keys[id(lg)] = (topic.name, partition)
        return lg

    def open_all(self, now_ms: int) -> None:
        """At start-up: open (and recover) every partition the metadata knows."""
        for t in self.state.metadata.topics.values():
            for p in t.partitions:
                self._open(t, p.index, now_ms)

    def on_topic_created(self, topic: "TopicInfo") -> None:
        for p in topic.partitions:
            self._open(topic, p.index, now_ms())

    def on_partitions_added(self, topic: "TopicInfo") -> None:
        for p in topic.partitions:
            if (topic.name, p.index) not in self.logs:
                self._open(topic, p.index, now_ms())

    def on_topic_deleted(self, topic: "TopicInfo") -> None:
        for p in topic.partitions:
            lg = self.logs.pop((topic.name, p.index), None)
            if lg is not None:
                self._keys.pop(id(lg), None)
                lg.close()
            if not self.state.in_memory:
                shutil.rmtree(self._dir(topic.name, p.index), ignore_errors=True)

    def on_configs_changed(self, topic: "TopicInfo") -> None:
        cfg = self.log_config(topic)
        for p in topic.partitions:
            lg = self.logs.get((topic.name, p.index))
            if lg is not None:
                lg.config = cfg

    def close(self) -> None:
        for lg in self.logs.values():
            try:
                lg.close()
            except Exception:  # closing is best effort at shutdown
                log.exception("log.close_failed")
        self.logs.clear()

    # -- Kafka's ReplicaManager: what handlers call ----------------------------------------------
    @staticmethod
    def leader_check(cache: "MetadataCache", topic: str, partition: int, current_leader_epoch: int = -1) -> int:
        """Kafka's partition checks before a read or a write: it exists, this broker leads it, the
        client's leader epoch is this one (older: FENCED_LEADER_EPOCH, newer: UNKNOWN_LEADER_EPOCH)."""
        p = cache.partition(topic, partition)
        if p is None:
            return E.UNKNOWN_TOPIC_OR_PARTITION
        if p.leader != cache.node_id:
            return E.NOT_LEADER_OR_FOLLOWER
        if current_leader_epoch is not None and current_leader_epoch >= 0:
            if current_leader_epoch < p.leader_epoch:
                return E.FENCED_LEADER_EPOCH
            if current_leader_epoch > p.leader_epoch:
                return E.UNKNOWN_LEADER_EPOCH
        return 0

    async def append_records(self, cache: "MetadataCache", topic: str, partition: int, records: bytes, *,
                             acks: int, now_ms: int, produce_version: int | None = None) -> AppendOutcome:
        """A client's Produce to one partition (Kafka's appendRecords): acks, the leader check, no
        client writes to internal topics, min.insync.replicas for acks=all (checked before the append),
        then validation and the append (see the module comment). acks=0 has nobody to wait for the
        fsync: it is done inline; otherwise the caller awaits `wait_durable(*outcome.durable_wait)`
        before answering."""
        if acks not in (0, 1, -1):
            return AppendOutcome(error=E.INVALID_REQUIRED_ACKS)
        # internal topics are written by their coordinators only
        err = E.INVALID_TOPIC_EXCEPTION if topic in INTERNAL_TOPICS else self.leader_check(cache, topic, partition)
        if err:
            return AppendOutcome(error=err)
        pinfo = cache.partition(topic, partition)
        key = (topic, partition)
        lg = self.logs.get(key)
        if lg is None:
            return AppendOutcome(error=E.UNKNOWN_TOPIC_OR_PARTITION)
        if acks == -1 and len(pinfo.isr) < lg.config.min_insync_replicas:
            min_isr = lg.config.min_insync_replicas
            return AppendOutcome(error=E.NOT_ENOUGH_REPLICAS,
                                 error_message=f"The size of the current ISR {pinfo.isr} is insufficient to "
                                               f"satisfy the min.isr requirement of {min_isr}")
        prepare = functools.partial(prepare_append, records, lg.config, now_ms=now_ms,
                                    topic_partition=f"{topic}-{partition}", produce_version=produce_version)
        lock = self._append_locks.get(key)
        waited = lock is not None and lock.locked()
        if not waited:
            try:  # the common case: validated and appended at once, no task switch
                v = prepare(inline=True)
            except NeedsWorker:
                pass
            else:
                return self._append_validated(key, lg, v, now_ms, pinfo.leader_epoch, acks != 0)
        lock = self._append_locks.setdefault(key, trio.Lock())
        try:
            async with lock:
                try:
                    if not waited:
                        raise NeedsWorker
                    v = prepare(inline=True)
                except NeedsWorker:
                    v = await trio.to_thread.run_sync(prepare)
                # the partition may have moved or gone while this produce waited
                err = self.leader_check(cache, topic, partition)
                if err or self.logs.get(key) is not lg:
                    return AppendOutcome(error=err or E.NOT_LEADER_OR_FOLLOWER)
                return self._append_validated(key, lg, v, now_ms, cache.partition(topic, partition).leader_epoch,
                                              acks != 0)
        finally:
            if not lock.locked() and self._append_locks.get(key) is lock:
                del self._append_locks[key]

    def read(self, cache: "MetadataCache", topic: str, partition: int, fetch_offset: int, current_leader_epoch: int,
             max_bytes: int, min_one: bool) -> LogReadResult:
        """One partition of a consumer's Fetch: whole batches from fetch_offset below the high watermark."""
        err = self.leader_check(cache, topic, partition, current_leader_epoch)
        if err:
            return LogReadResult(partition, err)
        lg = self.logs[(topic, partition)]
        hw = lg.high_watermark
        try:
            data = lg.read_parts(fetch_offset, max_bytes, min_one=min_one, max_offset=hw)
        except OffsetOutOfRange:
            return LogReadResult(partition, E.OFFSET_OUT_OF_RANGE, hw, hw, lg.log_start_offset)
        return LogReadResult(partition, 0, hw, hw, lg.log_start_offset, data)

    def fetch_offset_for_timestamp(self, cache: "MetadataCache", topic: str, partition: int, timestamp: int,
                                   current_leader_epoch: int, *, max_timestamp: bool
                                   ) -> tuple[int, int, int, int]:
        """ListOffsets for one partition: (error, timestamp, offset, leader epoch). -2 earliest, -1 latest
        (the high watermark), -3 the record with the largest timestamp (when the version has it)."""
        err = self.leader_check(cache, topic, partition, current_leader_epoch)
        if err:
            return err, -1, -1, -1
        lg = self.logs[(topic, partition)]
        epoch = cache.partition(topic, partition).leader_epoch
        if timestamp == EARLIEST:
            return 0, -1, lg.log_start_offset, epoch
        if timestamp == LATEST:
            return 0, -1, lg.high_watermark, epoch
        if timestamp == MAX_TIMESTAMP and max_timestamp:
            found = lg.max_timestamp_entry()
        elif timestamp < 0:
            return (E.UNSUPPORTED_VERSION if timestamp == MAX_TIMESTAMP else E.INVALID_REQUEST), -1, -1, -1
        else:
            found = lg.offset_for_timestamp(timestamp)
        return (0, -1, -1, -1) if found is None else (0, found[1], found[0], found[2])

    def last_offset_for_leader_epoch(self, cache: "MetadataCache", topic: str, partition: int,
                                     current_leader_epoch: int, leader_epoch: int) -> tuple[int, int, int]:
        """OffsetForLeaderEpoch: (error, the largest epoch <= leader_epoch, its end offset)."""
        err = self.leader_check(cache, topic, partition, current_leader_epoch)
        if err:
            return err, -1, -1
        epoch, end = self.logs[(topic, partition)].end_offset_for_epoch(leader_epoch)
        return 0, epoch, end

    def delete_records(self, cache: "MetadataCache", topic: str, partition: int, offset: int) -> tuple[int, int]:
        """DeleteRecords: (error, the new low watermark); offset -1 means up to the high watermark."""
        err = self.leader_check(cache, topic, partition)
        if err:
            return err, -1
        lg = self.logs[(topic, partition)]
        target = lg.high_watermark if offset == -1 else offset
        if target < 0:
            return E.OFFSET_OUT_OF_RANGE, -1
        try:
            return 0, lg.delete_records_before(target)
        except OffsetOutOfRange:
            return E.OFFSET_OUT_OF_RANGE, -1

    # -- data path ------------------------------------------------------------
    def get(self, topic: str, partition: int):
        return self.logs.get((topic, partition))

    def append(self, topic: str, partition: int, records: bytes, now_ms: int, *, leader_epoch: int = 0,
               defer_flush: bool = False) -> AppendOutcome:
        """Validate and append one partition's records on this thread (the broker's own small
        batches: the coordinators'). With defer_flush a file log leaves the write (and the fsync
        flush.messages asks for) to `wait_durable(*outcome.durable_wait)`, which the caller must
        await before acknowledging (the records stay above the high watermark until then)."""
        lg = self.logs.get((topic, partition))
        if lg is None:
            return AppendOutcome(error=E.UNKNOWN_TOPIC_OR_PARTITION)
        v = prepare_append(records, lg.config, now_ms=now_ms, topic_partition=f"{topic}-{partition}")
        return self._append_validated((topic, partition), lg, v, now_ms, leader_epoch, defer_flush)

    def _append_validated(self, key: tuple[str, int], lg, v: Validated, now_ms: int, leader_epoch: int,
                          defer_flush: bool) -> AppendOutcome:
        """The producer-state checks and the append of validated records, in one step on the loop."""
        if v.error:
            return AppendOutcome(error=v.error, record_errors=v.record_errors,
                                 error_message=v.error_message if v.in_response else None,
                                 log_message=v.error_message,
                                 log_start_offset=lg.log_start_offset if v.log_start else -1)
        # Idempotent producers: a retried batch is acknowledged with its original offset.
        ps = lg.producer_state
        for pos, h in v.batches:
            if h.producer_id >= 0:
                chk = ps.check(h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence, now_ms=now_ms)
                if chk.error == "duplicate":
                    # the original may still wait for its fsync: so does this acknowledgement
                    wait = (lg, chk.last_offset) if lg.flush_pending(chk.last_offset) else None
                    return AppendOutcome(error=0, base_offset=chk.base_offset, log_append_time_ms=-1,
                                         log_start_offset=lg.log_start_offset, durable_wait=wait)
                if chk.error:
                    return AppendOutcome(error=chk.code, error_message=chk.message,
                                         log_start_offset=lg.log_start_offset)
        res = lg.append(v.data, now_ms=now_ms, leader_epoch=leader_epoch, defer_flush=defer_flush)
        wait = (lg, res.last_offset) if lg.flush_pending(res.last_offset) else None
        if wait is None:
            self.notify(*key)
        return AppendOutcome(error=0, base_offset=res.base_offset, log_append_time_ms=res.log_append_time_ms,
                             log_start_offset=res.log_start_offset, durable_wait=wait)

    async def wait_durable(self, lg, offset: int) -> None:
        """Return once the record at `offset` of `lg` is written (and fsynced, when flush.messages
        asks for it). That runs in a worker thread, so the event loop serves other requests
        meanwhile; appends made while one runs are covered by the next, which one waiter starts
        for all (group commit)."""
        while lg.flush_pending(offset):
            running = self._flushing.get(id(lg))
            if running is not None:
                await running.wait()
                continue
            done = self._flushing[id(lg)] = trio.Event()
            try:
                target, run = lg.deferred_flush()
                await trio.to_thread.run_sync(run)
                lg.mark_flushed(target)
                self.notify(*self._keys.get(id(lg), ("", -1)))  # the high watermark moved
            finally:
                del self._flushing[id(lg)]
                done.set()

    # -- fetches waiting for data ---------------------------------------------------------------
    def watch(self, partitions: list[tuple[str, int]]) -> trio.Event:
        """An event set by the next append to any of these partitions; `unwatch` it when done."""
        ev = trio.Event()
        for key in partitions:
            self._watchers.setdefault(key, []).append(ev)
        return ev

    def unwatch(self, partitions: list[tuple[str, int]], ev: trio.Event) -> None:
        for key in partitions:
            waiting = self._watchers.get(key)
            if waiting is not None and ev in waiting:
                waiting.remove(ev)
                if not waiting:
                    del self._watchers[key]

    def notify(self, topic: str, partition: int) -> None:
        for ev in self._watchers.pop((topic, partition), ()):
            ev.set()
