"""The partitions this process hosts: their logs, appends and reads (Kafka's ReplicaManager).

The logs themselves -- made, opened, recovered, closed, deleted, and the data dir taken offline on a disk
fault -- are its `lifecycle`'s (log_lifecycle.py, Kafka's LogManager role), whose `logs` it reads. Produce
validates and appends here (with the idempotent producer checks); a waiting Fetch watches the partitions it
reads (`watch`), and an append (or a deferred write moving the high watermark) wakes the fetches watching that
partition at once, and no others.

Replicated partitions (LeaderAndIsr, followers' fetches and appends, acks=all, consumers reading from a
follower) are served by the base class in replicated_partitions.py; the preferred read replica is Partition's.

Disk faults (Kafka's LogDirFailureChannel and ReplicaManager.handleLogDirFailure): a write or
fsync that fails (a full disk, an I/O error) takes the log dir offline at once, for good (until
a restart). Its logs are taken out of service (`UnifiedLog.fail`: what was not acknowledged is
dropped and cut, never written later), every partition this process hosts answers
KAFKA_STORAGE_ERROR (56) -- Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords --,
the produce requests waiting for that write get 56 for their partitions, waiting fetches wake,
the group coordinators unload their partitions (NOT_COORDINATOR), and no topic or partition can
be created. Metadata and ApiVersions are still served; Metadata lists the replicas as offline.
Kafka halts a broker whose last log dir failed; Kafkite has one data dir and stays up instead,
so that clients see the error and the operator a live broker to inspect.

Validation (storage.log_validator.prepare_append) reads every record. A small batch is
validated and appended on the event loop in one go; a large one (many records, a large
decompressed size, recompression) is validated in a worker thread while the partition's
append lock is held, and appended on the loop once it is done. A produce that finds the
lock held waits its turn, even when small: appends to a partition happen in the order the
produces arrived, as under Kafka's log lock, and the producer-state check and the append
stay one step on the loop.
"""
from __future__ import annotations

import contextvars
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import structlog
import trio

from ..controller.metadata import INTERNAL_TOPICS
from ..storage.batch import (build_batch, build_batch_with_header, build_control_batch, build_one_record_batch,
                             has_producer_id, read_header)
from ..storage.log_segment import CorruptRecordException
from ..storage.log_validator import KEPT_AS_IS, NeedsWorker, Validated, prepare_append, prepare_simple
from ..storage.unified_log import OffsetOutOfRange
from ..wire.errors import E
from .context import now_ms
from .log_lifecycle import KafkaStorageException, LogLifecycle
from .partition import Partition, replica_selector
from .purgatory import DelayedOperationPurgatory
from .replicated_partitions import LogReadResult, ReplicatedPartitions

if TYPE_CHECKING:
    from ..controller.controller import MetadataCache
    from ..controller.metadata import PartitionInfo
    from .broker import ClusterState
    from .replication import Replication

async def run_in_worker(fn: Callable[[], Any]) -> Any:
    """`fn()` in one of Trio's cached worker threads, the task waiting uncancellably for it: trio.to_thread.run_sync
    with abandon_on_cancel=False and no capacity limiter, without the OS thread renaming it does around every job
    (two pthread_setname_np through ctypes, on the path of each acknowledgement that waits for its fsync)."""
    token, task = trio.lowlevel.current_trio_token(), trio.lowlevel.current_task()
    ctx = contextvars.copy_context()

    def deliver(result) -> None:
        token.run_sync_soon(trio.lowlevel.reschedule, task, result)
    trio.lowlevel.start_thread_soon(functools.partial(ctx.run, fn), deliver)
    return await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.FAILED)


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
    last_offset: int = -1  # of the records appended (or of the original, for a duplicate)


class ReplicaManager(ReplicatedPartitions):
    def __init__(self, state: "ClusterState", *, node_id: int | None = None, data_dir: Path | None = None,
                 in_memory: bool | None = None, replicated: bool | None = None):
        """The partitions of one broker. By default the process's own (its single broker's: `state`'s data dir and
        node id); an in-process cluster gives each broker its own `node_id` and `data_dir`. `replicated`: partitions
        open with the controller's leader and ISR (`become_replica`) and followers copy from their leader
        (ZooKeeper mode, and each broker of an in-process cluster); else every partition of the metadata is open
        here and this broker is its only replica."""
        self.state = state
        in_memory = state.in_memory if in_memory is None else in_memory
        self.is_replicated = state.zk is not None if replicated is None else replicated
        self.lifecycle = LogLifecycle(
            state, data_dir=None if in_memory else Path(data_dir if data_dir is not None else state.data_dir),
            in_memory=in_memory, is_replicated=self.is_replicated, clock=self.log_now_ms)
        self.lifecycle.on_removed = self._log_removed
        self.lifecycle.on_offline = self._log_dir_went_offline
        lc = self.lifecycle
        # the lifecycle's own objects (mutated in place, never rebound), here for the data path's reads
        self.in_memory, self.data_dir, self.log_dir = lc.in_memory, lc.data_dir, lc.log_dir
        self.logs, self._keys, self.offline_log_dirs = lc.logs, lc.keys, lc.offline_log_dirs
        self.purgatory = DelayedOperationPurgatory()  # Fetch (min_bytes) and acks=all Produce waiting on partitions
        self._flushing: dict[int, trio.Event] = {}  # id(log) -> set when its running fsync ends
        self._append_locks: dict[tuple[str, int], trio.Lock] = {}  # held while a worker validates
        # ZooKeeper mode: the leader epoch of each partition's last LeaderAndIsr applied here
        self.leader_epochs: dict[tuple[str, int], int] = {}
        # ZooKeeper mode: every partition this broker replicates, leader or follower (replication.py copies them)
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.node_id = state.config.node_id if node_id is None else node_id
        self.replication: "Replication | None" = None  # the broker's fetchers and ISR requests (ZooKeeper mode)
        self.rack_aware = replica_selector(state.config)  # KIP-392: consumers sent to a replica of their rack
        self.consumer_reads_as_follower = 0  # consumer fetches this broker answered from a follower's copy
        # the log clock (what retention, the cleaner, segment.ms rolls and LogAppendTime read): the wall clock plus
        # this, which a test control moves forward (control/views.py advance_clock)
        self.clock_advanced_ms = 0

    def log_now_ms(self) -> int:
        return now_ms() + self.clock_advanced_ms

    # -- the logs' lifecycle (log_lifecycle.py) ------------------------------------------------------
    def stop_replica(self, topic: str, partition: int, *, delete: bool) -> None:
        """StopReplica (ZooKeeper mode): close the partition's log; with `delete`, remove its directory."""
        self.lifecycle.remove(topic, partition, delete=delete)

    def _log_removed(self, key: tuple[str, int]) -> None:
        """The lifecycle closed the partition's log (StopReplica, its topic deleted): this broker no longer
        replicates it; what waits on it looks again."""
        self.leader_epochs.pop(key, None)
        self.partitions.pop(key, None)
        if self.replication is not None:
            self.replication.remove_fetch(key)
        self.notify(*key)

    def _log_dir_went_offline(self) -> None:
        """Waiting fetches and produces answer KAFKA_STORAGE_ERROR now; the coordinators give up their partitions."""
        self.purgatory.check_all()
        for b in [b for b in self.state.brokers.values() if b.replicas is self]:
            b.groups.on_metadata(b.cache)
            b.transactions.on_metadata(b.cache)

    @property
    def log_dir_offline(self) -> bool:
        return bool(self.offline_log_dirs)

    def handle_log_dir_failure(self, exc: BaseException, what: str) -> KafkaStorageException:
        """A write or fsync in the data dir failed (see the module comment): LogLifecycle.handle_log_dir_failure."""
        return self.lifecycle.handle_log_dir_failure(exc, what)

    def close(self) -> None:
        self.lifecycle.close()

    # -- Kafka's ReplicaManager: what handlers call ----------------------------------------------
    def leader_check(self, cache: "MetadataCache", topic: str, partition: int, current_leader_epoch: int = -1,
                     p: "PartitionInfo | None" = None) -> int:
        """Kafka's partition checks before a read or a write: it exists, its log dir is online
        (else KAFKA_STORAGE_ERROR), this broker leads it, the client's leader epoch is this one (older:
        FENCED_LEADER_EPOCH, newer: UNKNOWN_LEADER_EPOCH). `p`: the partition's metadata when the caller has it
        already (a coordinator's write, which stamps its leader epoch), else it is looked up here."""
        if p is None and (p := cache.partition(topic, partition)) is None:
            return E.UNKNOWN_TOPIC_OR_PARTITION
        if self.offline_log_dirs and cache.node_id in p.replicas:
            return E.KAFKA_STORAGE_ERROR
        lg = self.logs.get((topic, partition))
        # (not opened: no LeaderAndIsr yet; busy: a follower's truncation under way, its LeaderAndIsr waits for it)
        if p.leader != cache.node_id or lg is None or lg.busy:
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
        then validation and the append (see the module comment). The write and its fsync are left to
        `wait_durable(*outcome.durable_wait)`, which the caller awaits (in a worker thread) before
        answering (acks=0: `complete_in_background`): never on the event loop."""
        if acks not in (0, 1, -1):
            return AppendOutcome(error=E.INVALID_REQUIRED_ACKS)
        # internal topics are written by their coordinators only
        pinfo = cache.partition(topic, partition)
        err = E.INVALID_TOPIC_EXCEPTION if topic in INTERNAL_TOPICS else \
            self.leader_check(cache, topic, partition, -1, pinfo)
        if err:
            return AppendOutcome(error=err)
        key = (topic, partition)
        lg = self.logs.get(key)
        if lg is None:
            return AppendOutcome(error=E.KAFKA_STORAGE_ERROR if self.offline_log_dirs else E.UNKNOWN_TOPIC_OR_PARTITION)
        part = self.partitions.get(key)
        isr = part.isr if part is not None else pinfo.isr
        if acks == -1 and len(isr) < lg.config.min_insync_replicas:
            min_isr = lg.config.min_insync_replicas
            return AppendOutcome(error=E.NOT_ENOUGH_REPLICAS,
                                 error_message=f"The size of the current ISR {isr} is insufficient to "
                                               f"satisfy the min.isr requirement of {min_isr}")
        lock = self._append_locks.get(key)
        waited = lock is not None and lock.locked()
        if not waited:
            # the common batch (log_validator.prepare_simple) in one pass; anything else (None) by prepare_append
            buf = prepare_simple(records, lg.config, now_ms)
            if buf is not None:
                if has_producer_id(buf):  # an idempotent producer's: its sequence checked as after prepare_append
                    refused = self._sequence_refusal(lg, read_header(buf, 0), now_ms)
                    if refused is not None:
                        return refused
                try:
                    base = lg.append_produced(buf, now_ms, pinfo.leader_epoch, True)
                except OSError as exc:
                    return self._append_failed(key, exc)
                return self._appended_at(key, lg, base, -1, lg.log_end_offset - 1)
        prepare = functools.partial(prepare_append, records, lg.config, now_ms=now_ms,
                                    topic_partition=f"{topic}-{partition}", produce_version=produce_version)
        if not waited:
            try:  # the common case: validated and appended at once, no task switch
                v = prepare(inline=True)
            except NeedsWorker:
                pass
            else:
                return self._append_validated(key, lg, v, now_ms, pinfo.leader_epoch, True)
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
                if err or self.logs.get(key) is not lg:  # moved, deleted, or its log dir went offline
                    return AppendOutcome(error=err or (E.KAFKA_STORAGE_ERROR if self.offline_log_dirs
                                                       else E.NOT_LEADER_OR_FOLLOWER))
                return self._append_validated(key, lg, v, now_ms, cache.partition(topic, partition).leader_epoch,
                                              True)
        finally:
            if not lock.locked() and self._append_locks.get(key) is lock:
                del self._append_locks[key]

    def needs_txn_verification(self, topic: str, partition: int, producer_id: int, producer_epoch: int) -> bool:
        """Whether a transactional batch must be verified with its coordinator before the append (Kafka's
        UnifiedLog.maybeStartTransactionVerification): not when the producer already has a transaction open on this
        partition at that epoch (its first batch was verified), nor where this broker has no such log (the append
        answers that error)."""
        lg = self.logs.get((topic, partition))
        if lg is None:
            return False
        ps = lg.producer_state
        entry = ps.last_entry(producer_id)
        return not (producer_id in ps.ongoing and entry is not None and entry.epoch == producer_epoch)

    def read(self, cache: "MetadataCache", topic: str, partition: int, fetch_offset: int, current_leader_epoch: int,
             max_bytes: int, min_one: bool, *, client_rack: str | None = None,
             read_committed: bool = False) -> LogReadResult:
        """One partition of a consumer's Fetch: whole batches from fetch_offset below the high watermark.
        `client_rack` (Fetch v11+, KIP-392; "" without client.rack): a follower answers too, from its own copy up
        to its high watermark; a leader with the rack-aware selector sends a consumer of another rack to an
        in-sync replica of the consumer's rack (preferred_read_replica, no records)."""
        err = self.leader_check(cache, topic, partition, current_leader_epoch)
        leading = not err
        if err == E.NOT_LEADER_OR_FOLLOWER and client_rack is not None:
            err = self._follower_read_check(cache, topic, partition, current_leader_epoch)
        if err:
            return LogReadResult(partition, err)
        lg = self.logs[(topic, partition)]
        hw, lso = lg.high_watermark, lg.last_stable_offset
        if leading and client_rack and self.rack_aware:
            p = self.partitions.get((topic, partition))
            preferred = -1 if p is None else p.preferred_read_replica(fetch_offset, client_rack, cache.brokers)
            if preferred >= 0:
                return LogReadResult(partition, 0, hw, lso, lg.log_start_offset, [], preferred)  # empty, not null
        # read_committed reads up to the last stable offset, with the aborted transactions it overlaps
        # (Kafka's LogOffsetMetadata for FetchIsolation.TXN_COMMITTED); read_uncommitted never gets that list
        upper = lso if read_committed else hw
        try:
            data = lg.read_parts(fetch_offset, max_bytes, min_one=min_one, max_offset=upper)
        except OffsetOutOfRange:
            return LogReadResult(partition, E.OFFSET_OUT_OF_RANGE, hw, lso, lg.log_start_offset)
        except CorruptRecordException:  # a batch header damaged on disk: Kafka's CORRUPT_MESSAGE, never an empty answer
            return LogReadResult(partition, E.CORRUPT_MESSAGE, hw, lso, lg.log_start_offset)
        if not leading:
            self.consumer_reads_as_follower += 1
        aborted = lg.collect_aborted(fetch_offset, upper) if read_committed else None
        return LogReadResult(partition, 0, hw, lso, lg.log_start_offset, data, aborted_transactions=aborted)

    def fetch_offset_for_timestamp(self, cache: "MetadataCache", topic: str, partition: int, timestamp: int,
                                   current_leader_epoch: int, *, max_timestamp: bool, read_committed: bool = False
                                   ) -> tuple[int, int, int, int]:
        """ListOffsets for one partition: (error, timestamp, offset, leader epoch). -2 earliest, -1 latest
        (the high watermark; the last stable offset for read_committed), -3 the record with the largest
        timestamp (when the version has it)."""
        err = self.leader_check(cache, topic, partition, current_leader_epoch)
        if err:
            return err, -1, -1, -1
        lg = self.logs[(topic, partition)]
        epoch = cache.partition(topic, partition).leader_epoch
        if timestamp == EARLIEST:
            return 0, -1, lg.log_start_offset, epoch
        if timestamp == LATEST:
            return 0, -1, lg.last_stable_offset if read_committed else lg.high_watermark, epoch
        if timestamp == MAX_TIMESTAMP and max_timestamp:
            found = lg.max_timestamp_entry()
        elif timestamp < 0:
            return (E.UNSUPPORTED_VERSION if timestamp == MAX_TIMESTAMP else E.INVALID_REQUEST), -1, -1, -1
        else:
            found = lg.offset_for_timestamp(timestamp)
        if found is not None and read_committed and found[0] >= lg.last_stable_offset:
            found = None  # Kafka: nothing a read_committed consumer may read yet
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
        """DeleteRecords: (error, the new low watermark); offset -1 means up to the high watermark. The renames of
        the deleted segments' files are left for `rename_deleted_segments` (a worker thread)."""
        err = self.leader_check(cache, topic, partition)
        if err:
            return err, -1
        lg = self.logs[(topic, partition)]
        target = lg.high_watermark if offset == -1 else offset
        if target < 0:
            return E.OFFSET_OUT_OF_RANGE, -1
        try:
            return 0, lg.delete_records_before(target, self.log_now_ms(), defer_renames=True)
        except OffsetOutOfRange:
            return E.OFFSET_OUT_OF_RANGE, -1
        except OSError as exc:
            self.handle_log_dir_failure(exc, f"deleting records of {topic}-{partition}")
            return E.KAFKA_STORAGE_ERROR, -1

    async def rename_deleted_segments(self, keys) -> None:
        """The renames to `.deleted` that DeleteRecords left in these partitions' logs, in a worker thread (~0.2 ms a
        segment on the event loop); their deletion scheduled after file.delete.delay.ms."""
        for key in keys:
            lg = self.logs.get(key)
            run = None if lg is None else lg.renames()
            if run is None:
                continue
            try:
                await trio.to_thread.run_sync(run)
            except OSError as exc:
                if self.logs.get(key) is lg:  # (else deleted meanwhile: not a disk fault)
                    self.handle_log_dir_failure(exc, f"deleting records of {key[0]}-{key[1]}")
                continue
            lg.schedule_renamed()

    # -- data path ------------------------------------------------------------
    def get(self, topic: str, partition: int):
        return self.logs.get((topic, partition))

    def append(self, topic: str, partition: int, records: bytes, now_ms: int, *, leader_epoch: int = 0,
               defer_flush: bool = False, trusted: bool = False) -> AppendOutcome:
        """Validate and append one partition's records on this thread (the broker's own small
        batches: the coordinators'). With defer_flush a file log leaves the write (and the fsync
        flush.messages asks for) to `wait_durable(*outcome.durable_wait)`, which the caller must
        await before acknowledging (the records stay above the high watermark until then).
        `trusted`: one uncompressed batch that storage.batch.build_batch just built (a coordinator's write,
        Kafka's AppendOrigin.COORDINATOR): its records are not walked again, only its size is checked
        against max.message.bytes; the log still assigns offsets, the leader epoch, compression.type and
        LogAppendTime."""
        lg = self.logs.get((topic, partition))
        if lg is None:
            return AppendOutcome(error=E.KAFKA_STORAGE_ERROR if self.offline_log_dirs else E.UNKNOWN_TOPIC_OR_PARTITION)
        if trusted and len(records) <= lg.config.max_message_bytes:
            v = Validated(batches=[(0, read_header(records))], valid_bytes=len(records), data=bytearray(records))
        else:
            v = prepare_append(records, lg.config, now_ms=now_ms, topic_partition=f"{topic}-{partition}")
        # a coordinator's transactional batch (TxnOffsetCommit) carries no sequence to check: Kafka's
        # AppendOrigin.COORDINATOR
        return self._append_validated((topic, partition), lg, v, now_ms, leader_epoch, defer_flush,
                                      check_sequences=False)

    def write_txn_marker(self, cache: "MetadataCache", topic: str, partition: int, *, producer_id: int,
                         producer_epoch: int, commit: bool, coordinator_epoch: int, now_ms: int) -> AppendOutcome:
        """One partition of a WriteTxnMarkers: the control batch ending the producer's transaction, appended as
        the leader (Kafka's appendRecords with AppendOrigin.COORDINATOR). A marker of an older producer epoch
        than the partition knows is refused (INVALID_PRODUCER_EPOCH), and so is one from a transaction coordinator
        older than the one that last ended this producer's transaction here (TRANSACTION_COORDINATOR_FENCED: a zombie
        coordinator), as Kafka's appendEndTxnMarker."""
        err = self.leader_check(cache, topic, partition)
        lg = self.logs.get((topic, partition))
        if err or lg is None:
            return AppendOutcome(error=err or E.UNKNOWN_TOPIC_OR_PARTITION)
        entry = lg.producer_state.last_entry(producer_id)
        if entry is not None and producer_epoch < entry.epoch:
            return AppendOutcome(error=E.INVALID_PRODUCER_EPOCH,
                                 error_message=f"marker epoch {producer_epoch} below the producer's {entry.epoch}")
        if entry is not None and entry.coordinator_epoch > coordinator_epoch:
            return AppendOutcome(error=E.TRANSACTION_COORDINATOR_FENCED,
                                 error_message=f"Invalid coordinator epoch for producerId {producer_id} in partition "
                                               f"{topic}-{partition}: {coordinator_epoch} (zombie), "
                                               f"{entry.coordinator_epoch} (current)")
        data = build_control_batch(producer_id, producer_epoch, commit=commit, coordinator_epoch=coordinator_epoch,
                                   timestamp_ms=now_ms)
        try:
            res = lg.append(bytearray(data), now_ms=now_ms, leader_epoch=cache.partition(topic, partition).leader_epoch,
                            defer_flush=True)
        except OSError as exc:
            self.handle_log_dir_failure(exc, f"writing a transaction marker to {topic}-{partition}")
            return AppendOutcome(error=E.KAFKA_STORAGE_ERROR)
        wait = (lg, res.last_offset) if lg.flush_pending(res.last_offset) else None
        if wait is None:
            self._log_end_moved((topic, partition))
        return AppendOutcome(error=0, base_offset=res.base_offset, durable_wait=wait, last_offset=res.last_offset)

    def _append_validated(self, key: tuple[str, int], lg, v: Validated, now_ms: int, leader_epoch: int,
                          defer_flush: bool, check_sequences: bool = True) -> AppendOutcome:
        """The producer-state checks and the append of validated records, in one step on the loop."""
        if v.error:
            return AppendOutcome(error=v.error, record_errors=v.record_errors,
                                 error_message=v.error_message if v.in_response else None,
                                 log_message=v.error_message,
                                 log_start_offset=lg.log_start_offset if v.log_start else -1)
        if check_sequences:
            for pos, h in v.batches:
                if h.producer_id >= 0:
                    refused = self._sequence_refusal(lg, h, now_ms)
                    if refused is not None:
                        return refused
        try:
            res = lg.append(v.data, now_ms=now_ms, leader_epoch=leader_epoch, defer_flush=defer_flush)
        except OSError as exc:
            return self._append_failed(key, exc)
        return self._appended(key, lg, res)

    @staticmethod
    def _sequence_refusal(lg, h, now_ms: int) -> AppendOutcome | None:
        """An idempotent producer's batch (`h`, producer id >= 0) against the log's producer state: None to append
        it; a retried batch's outcome (acknowledged with its original offsets, nothing appended); or the error
        (OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, ...)."""
        chk = lg.producer_state.check(h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence, now_ms=now_ms)
        if chk.error == "duplicate":
            # the original may still wait for its fsync: so does this acknowledgement
            wait = (lg, chk.last_offset) if lg.flush_pending(chk.last_offset) else None
            return AppendOutcome(error=0, base_offset=chk.base_offset, log_append_time_ms=-1,
                                 log_start_offset=lg.log_start_offset, durable_wait=wait, last_offset=chk.last_offset)
        if chk.error:
            return AppendOutcome(error=chk.code, error_message=chk.message, log_start_offset=lg.log_start_offset)
        return None

    def append_coordinator_batch(self, topic: str, partition: int, records: list[tuple[bytes, bytes | None]],
                                 now_ms: int, leader_epoch: int, producer_id: int = -1, producer_epoch: int = -1,
                                 defer_flush: bool = False) -> AppendOutcome:
        """A coordinator's records (key, value) as one batch (Kafka's AppendOrigin.COORDINATOR): built here at the
        log end offset with the leader epoch stamped, and handed to the log with the header the builder knows --
        not parsed, walked nor copied again. A transactional one (producer_id >= 0: TxnOffsetCommit) has sequence
        0, unchecked, as Kafka writes it. A batch the topic would rewrite (compression.type other than producer /
        uncompressed, LogAppendTime) or one over max.message.bytes takes the validating route, `append`."""
        lg = self.logs.get((topic, partition))
        txn = producer_id >= 0
        if lg is not None and lg.config.compression_type in KEPT_AS_IS and \
                lg.config.message_timestamp_type != "LogAppendTime":
            if len(records) == 1:  # (a commit's: positional arguments, a call with keywords costs more)
                data, h = build_one_record_batch(records[0][0], records[0][1], lg.log_end_offset, now_ms, producer_id,
                                                 producer_epoch, 0 if txn else -1, txn, leader_epoch)
            else:
                data, h = build_batch_with_header(records, base_offset=lg.log_end_offset, timestamp_ms=now_ms,
                                                  producer_id=producer_id, producer_epoch=producer_epoch,
                                                  base_sequence=0 if txn else -1, is_transactional=txn,
                                                  partition_leader_epoch=leader_epoch, headerless=True)
            if len(data) <= lg.config.max_message_bytes:
                try:
                    last = lg.append_built(data, h, now_ms, defer_flush)
                except OSError as exc:
                    return self._append_failed((topic, partition), exc)
                # (_appended's steps for the built batch: keep them alike)
                wait = (lg, last) if lg.flush_pending(last) else None
                if wait is None:
                    key = (topic, partition)
                    p = self.partitions.get(key)
                    if p is not None:
                        p.maybe_increment_hw()
                    self.purgatory.check_and_complete(key)
                return AppendOutcome(0, h.base_offset, -1, lg.log_start_offset, None, None, None, wait, last)
        data = build_batch([(k, v, []) for k, v in records], timestamp_ms=now_ms, producer_id=producer_id,
                           producer_epoch=producer_epoch, base_sequence=0 if txn else -1, is_transactional=txn)
        return self.append(topic, partition, data, now_ms, leader_epoch=leader_epoch, defer_flush=defer_flush,
                           trusted=True)

    def _append_failed(self, key: tuple[str, int], exc: OSError) -> AppendOutcome:
        """The log's append raised: a disk failure takes the log dir offline (KAFKA_STORAGE_ERROR)."""
        self.handle_log_dir_failure(exc, f"appending to {key[0]}-{key[1]}")
        return AppendOutcome(error=E.KAFKA_STORAGE_ERROR)

    def _appended(self, key: tuple[str, int], lg, res) -> AppendOutcome:
        """The log's append result -> its outcome: the high watermark moves now unless the records wait for their
        deferred write."""
        return self._appended_at(key, lg, res.base_offset, res.log_append_time_ms, res.last_offset)

    def _appended_at(self, key: tuple[str, int], lg, base_offset: int, log_append_time_ms: int, last_offset: int
                     ) -> AppendOutcome:
        """_appended of an append from base_offset to last_offset."""
        wait = (lg, last_offset) if lg.flush_pending(last_offset) else None
        if wait is None:  # (_log_end_moved, inline: every append comes here)
            p = self.partitions.get(key)
            if p is not None:
                p.maybe_increment_hw()
            self.purgatory.check_and_complete(key)
        # (positional: a class called with keywords builds a dict of them)
        return AppendOutcome(0, base_offset, log_append_time_ms, lg.log_start_offset, None, None, None, wait,
                             last_offset)

    async def wait_durable(self, lg, offset: int) -> None:
        """Return once the record at `offset` of `lg` is written (and fsynced, when flush.messages
        asks for it). That runs in a worker thread, so the event loop serves other requests
        meanwhile; appends made while one runs are covered by the next, which one waiter starts
        for all (group commit). KafkaStorageException when the write fails or the log dir went
        offline meanwhile: the record is not acknowledged, and never written later."""
        while True:
            if not lg.flush_pending(offset):
                return  # durable before any failure: fail() keeps it, so it is acknowledged
            if self.offline_log_dirs and lg.durable:
                self.lifecycle.check_log_dir()
            running = self._flushing.get(id(lg))
            if running is not None:
                await running.wait()
                continue
            done = self._flushing[id(lg)] = trio.Event()
            try:
                target, run = lg.deferred_flush()
                try:
                    await run_in_worker(run)
                except OSError as exc:
                    if id(lg) not in self._keys and not self.offline_log_dirs:
                        return  # the partition was deleted meanwhile (its files with it): not a disk fault
                    name = "%s-%s" % self._keys.get(id(lg), ("?", "?"))
                    raise self.handle_log_dir_failure(exc, f"writing to {name}") from None
                if not self.offline_log_dirs:
                    lg.mark_flushed(target)
                    self._log_end_moved(self._keys.get(id(lg), ("", -1)))  # the high watermark may move
            finally:
                del self._flushing[id(lg)]
                done.set()

    async def complete_produce(self, topic: str, partition: int, durable_wait: tuple | None, last_offset: int, *,
                               acks_all: bool, deadline: float) -> int:
        """Kafka's DelayedProduce for one partition's append (a client's, a marker, a coordinator's records): once
        written (and fsynced as flush.messages asks) and, with acks=all on a replicated partition, in the whole
        ISR -> 0, or KAFKA_STORAGE_ERROR (the log dir went offline), NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT (wait_replicated)."""
        try:
            if durable_wait is not None:
                await self.wait_durable(*durable_wait)
        except KafkaStorageException:
            return int(E.KAFKA_STORAGE_ERROR)
        if acks_all and self.replicated(topic, partition):
            return await self.wait_replicated(topic, partition, last_offset + 1, deadline)
        return 0

    def complete_in_background(self, writes: list[tuple]) -> None:
        """acks=0: nobody waits for these appends' writes and fsyncs (`durable_wait`s); a task of the broker's own
        awaits them, so that they run in a worker as any other, and a connection closed meanwhile does not leave
        the records unwritten (and unread: reads stop at the written end)."""
        if not writes:
            return

        async def complete() -> None:
            for lg, offset in writes:
                try:
                    await self.wait_durable(lg, offset)
                except KafkaStorageException:
                    pass  # the log dir went offline: logged there, and the records were never acknowledged
                except Exception:  # a system task must not raise
                    log.exception("produce.acks0_write_failed")
        trio.lowlevel.spawn_system_task(complete)

    def _log_end_moved(self, key: tuple[str, int]) -> None:
        """Records were appended (and written): a replicated partition's leader may move its high watermark;
        fetches waiting on the partition look again (followers for the records, consumers for the watermark)."""
        p = self.partitions.get(key)
        if p is not None:
            p.maybe_increment_hw()
        self.purgatory.check_and_complete(key)  # (notify)

    def notify(self, topic: str, partition: int) -> None:
        """The partition changed: the requests waiting on it in the purgatory look again."""
        self.purgatory.check_and_complete((topic, partition))
