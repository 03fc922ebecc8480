"""The Trio side of a coordinator (Kafka 4's CoordinatorRuntime): one per broker and internal topic, the same for
the group coordinator (__consumer_offsets) and the transaction coordinator (__transaction_state).

The coordinator itself is sans-IO (kafkite.coordinator): an operation returns a
CoordinatorResult, records + response. This runtime

- writes: appends the records to the shard's partition through the ReplicaManager with the
  deferred write Produce uses (the fsync runs in a worker thread; one fsync covers every
  append gathered before it), opens a snapshot of the shard's state at the offset they were
  written at (coordinator/timeline.py, Kafka's SnapshotRegistry), replays them into the shard,
  and answers once they are committed: durable and, on a replicated partition, in the ISR.
  A committed write drops the snapshots below it. A write that fails -- the append itself
  (nothing is applied: coordinator/result.py), its write or fsync, the ISR not reached in time
  (REQUEST_TIMED_OUT), an ISR below min.insync.replicas (NOT_ENOUGH_REPLICAS_AFTER_APPEND),
  the partition's leadership moving -- reverts the shard to the snapshot at its offset, undoing
  its records and those of every write made after it (which fail too), and answers the error
  Kafka maps it to (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR; write_error). The partition
  stays loaded and serves on: the client's retry is the next write. The records may still be in
  the log (and reach the ISR later): as in Kafka's transaction coordinator, memory holds only
  what was acknowledged, until the next load replays the log. A write or fsync that fails
  takes the log dir offline, and then the partitions are unloaded (on_metadata) and not loaded
  again while it is offline;
- reads (and operations that write nothing, as Kafka's): answer from the shard once every write
  made before them is committed or reverted, so that they never see a write that is undone;
- loads a partition when this broker becomes its leader (replaying it in chunks in the
  background; COORDINATOR_LOAD_IN_PROGRESS meanwhile) and unloads it when it stops leading it
  (NOT_COORDINATOR afterwards). A batch that cannot be decoded, or a record (the shard's
  replay), is logged with the partition and its offsets and skipped, and so are records of
  group kinds this broker does not run (counted in the load's last log line): the partition
  loads without them, and the broker serves on (Kafka fails the partition's load on a corrupt
  record and skips only unknown record types);
- parks requests whose answers come later (`Pending` tokens: JoinGroup, SyncGroup) and runs the
  coordinator's timers at its next deadline.
"""
from __future__ import annotations

import math
import time
from types import CoroutineType
from typing import TYPE_CHECKING, Any, Callable

import structlog
import trio

from ..coordinator.result import CoordinatorResult, Pending, Record, finish_write, write_error
from ..storage.batch import COMMIT_MARKER, control_type, decode_batch, iter_batches
from ..wire.errors import E, kafka_name
from .context import now_ms
from .replica_manager import KafkaStorageException

_time = time.time

if TYPE_CHECKING:
    from .broker import Broker

log = structlog.get_logger("kafkite.coordinator_runtime")
REPLICATION_TIMEOUT_S = 5.0  # Kafka's offsets.commit.timeout.ms
READ_BYTES = 1 << 20


def replay_batches(shard, data, offset: int, topic: str) -> tuple[int, int]:
    """Replay the records at or above `offset` of the batches in `data` (a read of the shard's
    partition) into the shard, as Kafka's CoordinatorLoaderImpl. A batch that cannot be decoded is
    logged and skipped whole. Returns (the offset after the last complete batch, or `offset` when
    none is, the number of batches skipped)."""
    mv, skipped = memoryview(data), 0
    for pos, h in iter_batches(data):
        if h.last_offset < offset:
            continue
        if h.is_control:  # a transaction marker: the producer's transactional records take effect, or not
            marker = control_type(data, pos, h)
            if marker is not None and h.base_offset >= offset:
                shard.replay_marker(h.producer_id, marker == COMMIT_MARKER)
        else:
            try:
                recs = decode_batch(mv[pos:pos + h.size])
            except Exception as exc:
                skipped += 1
                log.warning("coordinator.undecodable_batch", topic=topic, partition=shard.partition,
                            base_offset=h.base_offset, last_offset=h.last_offset, error=str(exc))
                recs = ()
            pid = h.producer_id if h.is_transactional else -1
            for rec in recs:
                if rec.offset >= offset:
                    shard.replay(rec.key, rec.value, rec.offset, pid)
        offset = h.last_offset + 1
    return offset, skipped


class _Write:
    """A write appended to a shard's partition, until it is committed or reverted (Kafka's deferred event)."""
    __slots__ = ("shard", "base", "end", "failed", "done")

    def __init__(self, shard, base: int, end: int):
        self.shard, self.base, self.end = shard, base, end
        self.failed = 0  # the error of an earlier write whose revert undid this one
        self.done = trio.Event()


class CoordinatorRuntime:
    def __init__(self, broker: "Broker", topic: str, coordinator: Any):
        self.broker = broker
        self.topic = topic
        # begin/finish_loading, unload, poll, next_deadline_ms, drain_completions (and `completed`: any to drain)
        self.coordinator = coordinator
        self.leading: set[int] = set()
        self._to_load: list[int] = []
        self._parked: dict[Pending, list] = {}  # token -> [event, result]
        self._last_write: dict[int, tuple[Any, int]] = {}  # partition -> (log, last offset appended)
        self._inflight: dict[Any, list[_Write]] = {}  # shard -> its writes not committed nor reverted yet
        self._writes: dict[int, _Write] = {}  # id(result) -> its write, from _start to _finish
        self.reverted_writes = 0  # writes that failed after their append and were undone (tests, the log)
        self._wake = trio.Event()

    # -- writes and reads ----------------------------------------------------------------------------
    async def write(self, shard, result: CoordinatorResult) -> Any:
        """Run an operation's result (the operation ran just before, with no await in between): append,
        replay, wait until durable, answer -- a parked token's answer when the response is one."""
        got = self.write_now(shard, result)
        return (await got) if type(got) is CoroutineType else got

    def write_now(self, shard, result: CoordinatorResult) -> Any:
        """`write` without a coroutine of its own (an OffsetCommit's: group_coordinator_service.commit_offsets): the
        answer when there is nothing to wait for, else the coroutine (CoroutineType) that waits and answers, to
        await. An operation's response is never a coroutine."""
        error = self._start(shard, result)
        coordinator = self.coordinator
        completions = coordinator.drain_completions() if coordinator.completed else ()
        if id(result) not in self._writes and type(result.response) is not Pending and \
                (shard is None or result.records or not self._inflight.get(shard)):
            # nothing to wait for (committed as appended, failed, or wrote nothing after no open write): _finish's
            # answer at once (finish_write's; requests its on_success or on_failure completes are answered too)
            if (result.on_failure if error else result.on_success) is None:
                response = result.response
            else:
                response = finish_write(result, error)
                if coordinator.completed:
                    completions = [*completions, *coordinator.drain_completions()]
            if completions:
                self._deliver(completions)
            return response
        return self._finish(shard, result, error, list(completions))

    def _start(self, shard, result: CoordinatorResult) -> int:
        """Append the result's records, open the shard's snapshot at the offset they start at, and replay them
        (coordinator/result.py's start_write, with the snapshot around them) -> 0, or the coordinator's error for a
        failed append (then nothing was applied). A write committed as it is appended (in memory, or already
        flushed, on an unreplicated partition, with no earlier write of the shard still open) has nothing to wait
        for nor to settle: only its snapshot is opened (a replay that raises is undone), and dropped once it is
        replayed."""
        records = result.records
        if shard is None or not records:
            return 0
        partition = shard.partition
        code = self._append(partition, records, result)
        if code:
            return write_error(code)
        lg, end = self._last_write[partition]
        base = end - len(records) + 1
        timeline = shard.timeline
        if self._inflight.get(shard) or lg is None or lg.flush_pending(end) or \
                self.broker.replicas.replicated(self.topic, partition):
            w = self._writes[id(result)] = self._open(shard, base, end)
        else:  # committed as appended
            w = None
            timeline.snapshot(base)
        try:
            if not result.replay:
                pass
            elif result.producer_id >= 0:  # a transactional write: pending until its marker
                pid = result.producer_id
                for k, value in records:
                    shard.replay(k, value, -1, pid)
            else:
                replay = shard.replay
                for k, value in records:
                    replay(k, value)
        except BaseException:
            # a replay that raised (a bug): what it changed is undone, and no read waits for this write forever
            if w is None:  # committed as appended: only its snapshot to revert to
                if timeline.revert_to(base):
                    self.reverted_writes += 1
                    log.warning("coordinator.write_reverted", topic=self.topic, partition=partition, offset=base,
                                last_offset=end, error="UNKNOWN_SERVER_ERROR")
            else:
                self._writes.pop(id(result), None)
                self._settle(w, int(E.UNKNOWN_SERVER_ERROR))
            raise
        if w is None:  # committed as appended, and replayed: its snapshot goes
            timeline.delete_up_to(end + 1)
        return 0

    async def _finish(self, shard, result: CoordinatorResult, error: int, completions: list) -> Any:
        """Answers to the operation and to requests it completed go out once its records are durable."""
        token = result.response if isinstance(result.response, Pending) else None
        if token is not None:  # parked first: another request may complete it while we wait
            slot = self._parked[token] = [trio.Event(), None]
        w = self._writes.pop(id(result), None)
        try:
            # shielded: the follow-up (e.g. SyncGroup's propagation) must run even if the client left
            if w is not None:
                if self._must_wait(shard.partition):
                    with trio.CancelScope(shield=True):
                        try:
                            await self._durable(shard.partition)
                            error = await self._replicated(shard.partition, w.end)
                        except KafkaStorageException:  # the partition is unloaded (see on_metadata)
                            error = write_error(E.KAFKA_STORAGE_ERROR)
                error = self._settle(w, error)
            elif shard is not None and not result.records and self._inflight.get(shard):
                with trio.CancelScope(shield=True):  # wrote nothing: answers as a read (Kafka's empty write)
                    await self._settled(shard)
            response = finish_write(result, error)
            self._deliver(completions + self.coordinator.drain_completions())
            if token is None or response is not token:
                return response
            await slot[0].wait()
            return slot[1]
        finally:
            if token is not None:
                self._parked.pop(token, None)

    async def read(self, partition: int, read: Callable[[], Any]) -> Any:
        """Answer `read()` once every write made before it is committed (durable and in the ISR) or reverted."""
        try:
            await self._durable(partition)
        except KafkaStorageException:
            pass  # the partition is unloaded: read() answers NOT_COORDINATOR
        shard = self.coordinator.shards.get(partition)
        if shard is not None and self._inflight.get(shard):
            await self._settled(shard)
        return read()

    # -- snapshots: a failed write reverts the shard (coordinator/timeline.py) ------------------------------
    def _open(self, shard, base: int, end: int) -> _Write:
        """Records at base..end are appended: the shard's state as it was before them is kept until they are
        committed (Kafka's updateLastWrittenOffset)."""
        w = _Write(shard, base, end)
        shard.timeline.snapshot(base)
        self._inflight.setdefault(shard, []).append(w)
        return w

    def _settle(self, w: _Write, error: int) -> int:
        """The write is committed (error 0: the snapshots below it are dropped, Kafka's updateLastCommittedOffset)
        or failed (the shard reverts to the snapshot at its offset, Kafka's revertLastWrittenOffset) -> the
        write's error: its own, or that of an earlier write whose revert undid it (and this one with it)."""
        ws = self._inflight.get(w.shard, [])
        if w in ws:
            ws.remove(w)
        if not ws:
            self._inflight.pop(w.shard, None)
        if w.failed:
            error = w.failed
        elif error:
            if w.shard.timeline.revert_to(w.base):
                self.reverted_writes += 1
                for later in ws:
                    if later.base > w.base and not later.failed:
                        later.failed = error
                log.warning("coordinator.write_reverted", topic=self.topic, partition=w.shard.partition,
                            offset=w.base, last_offset=w.end, error=kafka_name(error))
            else:  # its snapshot is gone: a later write was committed, so this one is too (the ISR caught up)
                error = 0
        if not error:
            w.shard.timeline.delete_up_to(w.end + 1)
        w.done.set()
        return error

    async def _settled(self, shard) -> None:
        """Until every write made to the shard so far is committed or reverted."""
        for w in list(self._inflight.get(shard, ())):
            await w.done.wait()

    def _append(self, partition: int, records: list[Record], result: CoordinatorResult | None = None) -> int:
        b, topic = self.broker, self.topic
        rm, md = b.replicas, b.cache
        p = md.partition(topic, partition)  # (looked up once: the leader check's, and the epoch the batch gets)
        err = rm.leader_check(md, topic, partition, -1, p)  # (p: positional, cheaper than a keyword)
        if err:
            return int(err)
        # built at the log end, the CRC computed once, handed over with its header: not walked, parsed nor copied
        # again (AppendOrigin.COORDINATOR); a transactional one (TxnOffsetCommit: producer_id >= 0) has sequence 0,
        # unchecked (a result's producer id and epoch are -1 unless it is one)
        # (positional: now_ms() inline, leader epoch, producer id and epoch, defer_flush)
        out = rm.append_coordinator_batch(topic, partition, records, int(_time() * 1000), p.leader_epoch,
                                          -1 if result is None else result.producer_id,
                                          -1 if result is None else result.producer_epoch, True)
        if out.error:
            log.warning("coordinator.append_failed", topic=topic, partition=partition, error=E(out.error).name)
            return out.error
        self._last_write[partition] = (rm.logs.get((topic, partition)), out.last_offset)
        return 0

    def _must_wait(self, partition: int) -> bool:
        """Whether the last write must still be made durable or reach the ISR (else the answer goes at once, with no
        cancel scope entered: in memory, or already flushed, on an unreplicated partition)."""
        return self._pending(partition) or (partition in self._last_write
                                            and self.broker.replicas.replicated(self.topic, partition))

    def _pending(self, partition: int) -> bool:
        last = self._last_write.get(partition)
        return last is not None and last[0].flush_pending(last[1])

    async def _durable(self, partition: int) -> None:
        if self._pending(partition):
            lg, offset = self._last_write[partition]
            await self.broker.replicas.wait_durable(lg, offset)

    async def _replicated(self, partition: int, upto: int) -> int:
        """A replicated partition (ZooKeeper mode): wait, as Kafka's coordinators append with acks=all, until every
        ISR member has the write's records (up to offset `upto`) -> 0 or the coordinator's error
        (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR)."""
        rm = self.broker.replicas
        if not rm.replicated(self.topic, partition):
            return 0
        code = await rm.wait_replicated(self.topic, partition, upto + 1,
                                        trio.current_time() + REPLICATION_TIMEOUT_S)
        return write_error(code) if code else 0

    async def complete_transaction(self, partition: int, *, producer_id: int, producer_epoch: int, commit: bool,
                                   coordinator_epoch: int) -> int:
        """A WriteTxnMarkers for one of this topic's partitions: the marker is appended, the shard (when loaded; a
        load under way replays it from the log) applies it, and the answer comes once it is durable and, when
        replicated, in the ISR -> 0 or Kafka's error for the marker."""
        b = self.broker
        out = b.replicas.write_txn_marker(b.metadata, self.topic, partition, producer_id=producer_id,
                                          producer_epoch=producer_epoch, commit=commit,
                                          coordinator_epoch=coordinator_epoch, now_ms=now_ms())
        if out.error:
            return int(out.error)
        lg = b.replicas.get(self.topic, partition)
        self._last_write[partition] = (lg, out.last_offset)
        shard = self.coordinator.shards.get(partition)
        w = None
        try:
            if shard is not None:
                w = self._open(shard, out.last_offset, out.last_offset)
                shard.replay_marker(producer_id, commit)
            with trio.CancelScope(shield=True):
                code = await b.replicas.complete_produce(self.topic, partition, (lg, out.last_offset),
                                                         out.last_offset, acks_all=True,
                                                         deadline=trio.current_time() + REPLICATION_TIMEOUT_S)
        except BaseException:
            if w is not None:  # (as in _start: a replay that raised is undone, and nothing waits for it forever)
                self._settle(w, int(E.UNKNOWN_SERVER_ERROR))
            raise
        # failed (or undone by an earlier write's failure): the offsets it committed are pending again, and the
        # transaction coordinator sends the marker again
        return self._settle(w, code) if w is not None else code

    # -- parked answers ------------------------------------------------------------------------------
    def _deliver(self, completions: list[tuple[Pending, Any]]) -> None:
        for token, result in completions:
            slot = self._parked.get(token)
            if slot is not None:  # else its request went away (connection closed)
                slot[1] = result
                slot[0].set()
        if completions:
            self._wake.set()

    # -- leadership of the topic's partitions --------------------------------------------------------
    def on_metadata(self, cache) -> None:
        t = cache.topic(self.topic)
        now_leading = set()
        # a partition in an offline log dir is not served (Kafka moves its leadership away)
        if t is not None and self.broker.node_id in cache.brokers and not self.broker.replicas.log_dir_offline:
            now_leading = {p.index for p in t.partitions if p.leader == self.broker.node_id}
        for p in sorted(self.leading - now_leading):
            log.info("coordinator.unload", broker=self.broker.node_id, topic=self.topic, partition=p)
            self.coordinator.unload(p)
            self._last_write.pop(p, None)
        self._deliver(self.coordinator.drain_completions())
        for p in sorted(now_leading - self.leading):
            log.info("coordinator.load_begin", broker=self.broker.node_id, topic=self.topic, partition=p)
            self.coordinator.begin_loading(p, now_ms())
            self._to_load.append(p)
        self.leading = now_leading
        self._wake.set()

    async def _load(self, partition: int) -> None:
        """Replay the partition from its start, a chunk at a time (requests in between get LOAD_IN_PROGRESS)."""
        shard = self.coordinator.loading.get(partition)
        lg = self.broker.replicas.get(self.topic, partition)
        skipped = 0
        if lg is not None and shard is not None:
            end = lg.log_end_offset
            if end > 0 and lg.flush_pending(end - 1):  # the previous leader's last writes
                await self.broker.replicas.wait_durable(lg, end - 1)
            offset = lg.log_start_offset
            while offset < lg.log_end_offset and self.coordinator.loading.get(partition) is shard:
                data = lg.read(offset, READ_BYTES, min_one=True)
                nxt, bad = replay_batches(shard, data, offset, self.topic)
                skipped += bad
                if nxt <= offset:  # no complete batch from there: Kafka's loader stops too
                    if offset < lg.log_end_offset:
                        log.warning("coordinator.load_stopped", topic=self.topic, partition=partition, offset=offset,
                                    log_end_offset=lg.log_end_offset, reason="no readable batch")
                    break
                offset = nxt
                await trio.sleep(0)
        if self.coordinator.loading.get(partition) is shard:
            self.coordinator.finish_loading(partition, now_ms())
            ignored = sum(shard.ignored.values()) if shard is not None else 0
            log.info("coordinator.load_done", broker=self.broker.node_id, topic=self.topic, partition=partition,
                     **({"batches_skipped": skipped} if skipped else {}),
                     **({"records_ignored": ignored, "ignored_key_versions": sorted(shard.ignored)}
                        if ignored else {}))

    # -- the driver loop ------------------------------------------------------------------------------
    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            task_status.started()
            while True:
                while self._to_load:
                    p = self._to_load.pop(0)
                    if p in self.leading:
                        await self._load(p)
                results = self.coordinator.poll(now_ms())
                completions = self.coordinator.drain_completions()
                for shard, result in results:
                    error = self._start(shard, result)  # applied now; answered once durable
                    nursery.start_soon(self._finish, shard, result, error, completions)
                    completions = []
                self._deliver(completions)
                deadline = self.coordinator.next_deadline_ms()
                self._wake = trio.Event()
                timeout = math.inf if deadline is None else max(0.0, (deadline - now_ms()) / 1000)
                with trio.move_on_after(min(timeout, 1.0)):
                    await self._wake.wait()
