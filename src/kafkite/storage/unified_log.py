"""Kafka's UnifiedLog: one partition's log, over file or memory segments.

A log is a list of segments (log_segment.py), each holding the batches from its base offset up
to the next segment's base; keeping them -- rolling the active one, deleting the files of those
that leave the log -- is LocalLog's (local_log.py), which UnifiedLog extends (through LogFlush). Every rule --
offset assignment, rolling, reads, the high watermark, retention, DeleteRecords, timestamp
lookup, truncation, the leader epoch cache and producer state -- is the same for both kinds of
segment, so file and memory logs behave alike to the offset. Directory loading and recovery
are LogLoader's (log_loader.py); compaction is LogCleaner's (log_cleaner.py).

Durability -- fsyncs per flush.messages / flush.ms, the write and fsync an append may leave to a
worker thread, and what a failed one leaves -- is LogFlush's (log_flush.py), which UnifiedLog extends.

Sans-IO with respect to time: every operation that needs the clock takes `now_ms`.
"""
from __future__ import annotations

import bisect
import random
import shutil
import struct
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from .batch import (CONTROL_BIT, LOG_OVERHEAD, BatchHeader, Record, crc_ok, decode_batch, iter_batches, read_header,
                    read_marker, valid_prefix)
from .leader_epoch_file_cache import LeaderEpochFileCache
from .producer_snapshot import LogSnapshots
from .log_config import LogConfig
from .checkpoint_file import write_atomically
from .log_segment import LogSegment, MadeOnce
from .log_validator import assign_offsets_and_compress
from .memory_log_segment import MemoryLogSegment
from .producer_state import CompletedTxn, ProducerStateManager
from .transaction_index import AbortedTxn, AbortedTxns, append_entry
from ..wire.lazy_kafka import lazy_names

_PACK_OFFSET_LENGTH_EPOCH = struct.Struct(">qii").pack_into  # baseOffset, batchLength, partitionLeaderEpoch

# the segment files' modules, imported when the first FileLog is made (not by a broker --in-memory)
LogLoader, check_topic_id, read_topic_id, write_partition_metadata = lazy_names(
    globals(), "kafkite.storage.log_loader", "LogLoader", "check_topic_id", "read_topic_id", "write_partition_metadata")
(FileLogSegment,) = lazy_names(globals(), "kafkite.storage.file_log_segment", "FileLogSegment")


class UnexpectedAppend(Exception):
    """A follower's append whose batches do not go on from the log end offset, or are corrupt (Kafka's
    UnexpectedAppendOffsetException / CorruptRecordException on the replica fetcher)."""


class OffsetOutOfRange(Exception):
    """An offset outside [log start offset, log end offset] (or above the high watermark for
    DeleteRecords): Kafka's OFFSET_OUT_OF_RANGE."""


@dataclass
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int


class UnifiedLog(LogSnapshots):
    """One partition's log (see the module comment). `new_segment(base, now_ms)` makes a segment
    of the log's kind; `directory` is None for a memory log."""
    _start_lock = MadeOnce(threading.Lock)  # the `log-start-offset` file's writes (made on first use)
    _start_version = _start_written = 0  # of the log start's changes: the newest, the newest written
    _start_pending = False  # a change whose write was deferred (`renames()`)

    def __init__(self, config: LogConfig, segments: list[LogSegment], *, epochs: LeaderEpochFileCache,
                 new_segment: Callable[[int, int], LogSegment] | None = None, log_start_offset: int = 0,
                 directory: Path | None = None, now_ms: int = 0, rng: random.Random | None = None) -> None:
        super().__init__(config, segments, new_segment=new_segment, directory=directory, rng=rng)
        self.epochs = epochs
        self.producer_state = ProducerStateManager()
        self.log_start_offset = log_start_offset
        self.log_end_offset = self.active.next_offset if self.active.size else self.active.base
        self._hw: int | None = None
        self._unflushed = 0
        self._last_flush_ms = now_ms
        self._dirty_from = None
        self.version = 0  # bumped by every change other than an append or a roll (the cleaner checks it)
        # a worker thread is changing the log (a follower's truncation, server/replication.py): the broker's
        # services and requests leave it alone, and the changes that arrive meanwhile (a LeaderAndIsr, StopReplica)
        # wait in `after_busy`, run in order once the worker is done
        self.busy = False
        self.after_busy: list[Callable[[], None]] | tuple = ()  # (a list while busy: server/replication.py)
        self.aborted = AbortedTxns()
        self._rebuild_producer_state(loading=True)

    # -- offsets
    @property
    def high_watermark(self) -> int:
        """Single broker: follows the log end offset unless set lower (never above it), and never
        above records whose deferred fsync is still to come."""
        hw = self.log_end_offset if self._hw is None else min(self._hw, self.log_end_offset)
        return hw if self._dirty_from is None else min(hw, self._dirty_from)

    @high_watermark.setter
    def high_watermark(self, v: int) -> None:
        self._hw = None if v >= self.log_end_offset else max(v, self.log_start_offset)

    def set_replicated_high_watermark(self, v: int) -> None:
        """A replicated partition: the high watermark is what its leader computed (the minimum log end
        offset over the ISR), kept as given -- an append no longer moves it -- clamped to
        [log start offset, log end offset]."""
        self._hw = max(min(v, self.log_end_offset), self.log_start_offset)

    def follow_log_end(self) -> None:
        """Back to a single copy: the high watermark follows the log end offset."""
        self._hw = None

    @property
    def last_stable_offset(self) -> int:
        """The high watermark, or below it the first offset of a transaction still open (or whose marker the
        ISR does not have yet): read_committed consumers read up to here. Never below the log start offset (Kafka's
        maybeIncrementFirstUnstableOffset): retention or DeleteRecords may have deleted an open transaction's first
        records."""
        hw = self.high_watermark
        first = self.producer_state.first_unstable_offset(hw)
        return hw if first is None else min(hw, max(first, self.log_start_offset))

    def collect_aborted(self, fetch_offset: int, upper_bound: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions overlapping [fetch_offset, upper_bound)."""
        return self.aborted.collect(fetch_offset, upper_bound)

    def _note_txn(self, done: CompletedTxn | None, seg_base: int, *, write: bool) -> None:
        if done is None or not done.aborted:
            return
        txn = AbortedTxn(done.last_offset, done.producer_id, done.first_offset,
                         self.producer_state.last_stable_offset_after(done))
        self.aborted.add(txn)
        if write and self._dir is not None:
            append_entry(self.dir, seg_base, txn)

    def _rebuild_producer_state(self, loading: bool = False) -> None:
        """Producer and transaction state from the log's batches (a marker's type is read from its batch) -- a file
        log's from its newest producer snapshot and the batches after it, then its .txnindex files made to agree and,
        `loading`, a snapshot taken (producer_snapshot.py's _after_rebuild)."""
        ps = self.producer_state
        ps.clear()
        self.aborted.clear()
        start = -1 if self._dir is None else self._load_snapshot()
        start = -1 if start is None else start
        segs = self.segments
        for i, seg in enumerate(segs):
            if start >= (segs[i + 1].base if i + 1 < len(segs) else self.log_end_offset):
                continue  # (wholly below the snapshot)
            for h in seg.iter_headers():
                if h.producer_id < 0 or h.base_offset < start:
                    continue
                marker = None
                if h.is_control:
                    data = seg.read(h.base_offset, h.size, True, None)
                    marker = read_marker(data, 0, h) if data else None
                self._note_txn(ps.update(h, marker=marker), seg.base, write=False)
        if self._dir is not None:
            self._after_rebuild(start, loading)

    @property
    def durable(self) -> bool:
        """True where flush() puts records on stable storage."""
        return self._dir is not None

    def iter_headers(self) -> Iterator[BatchHeader]:
        """Every batch header in offset order (producer state rebuild, tools)."""
        for seg in self.segments:
            yield from seg.iter_headers()

    # -- append
    def append(self, batches, *, now_ms: int, leader_epoch: int = 0, defer_flush: bool = False) -> AppendResult:
        """Append validated batches (a bytearray, patched in place and kept by the log: the caller hands it over and
        neither keeps nor changes it; anything else is copied): recompress per the topic's
        compression.type, assign offsets from the log end offset, stamp the leader epoch (and
        LogAppendTime when the topic uses it), roll the active segment if needed, update indexes,
        producer state and the epoch cache, fsync per flush.messages / flush.ms (or, with
        defer_flush, leave it to the caller: see the module comment). Bytes after the last
        complete batch are ignored."""
        buf = batches if isinstance(batches, bytearray) else bytearray(batches)
        end = valid_prefix(buf)
        if end == 0:
            raise ValueError("no complete record batch to append")
        if end < len(buf):
            del buf[end:]
        lat = now_ms if self.config.message_timestamp_type == "LogAppendTime" else -1
        base = self.log_end_offset
        buf, headers = assign_offsets_and_compress(buf, base, leader_epoch, lat, self.config.compression_type)
        self._append_batches(buf, headers, now_ms=now_ms, defer_flush=defer_flush, owned=True)
        return AppendResult(base, headers[-1][1].last_offset, lat, self.log_start_offset)

    def append_produced(self, buf: bytearray, now_ms: int, leader_epoch: int, defer_flush: bool) -> int:
        """One produced batch as log_validator.prepare_simple gave it (the log's own copy, which it keeps: one whole
        uncompressed CreateTime batch the topic keeps as it is): its offsets assigned from the log end offset and
        the leader epoch stamped, in place, then appended as `append` appends -> its base offset."""
        base = self.log_end_offset
        _PACK_OFFSET_LENGTH_EPOCH(buf, 0, base, len(buf) - LOG_OVERHEAD, leader_epoch)
        self._append_batches(buf, [(0, read_header(buf, 0))], now_ms, defer_flush, True)
        return base

    def append_built(self, batch: bytes, header: BatchHeader, now_ms: int, defer_flush: bool = False) -> int:
        """A batch the broker has just built at the log end offset, with the leader epoch stamped and the header
        the builder knows (a coordinator's write, Kafka's AppendOrigin.COORDINATOR; ReplicaManager checks that
        neither compression.type nor LogAppendTime would rewrite it): appended as it is, not parsed again -> its
        last offset."""
        if header.base_offset != self.log_end_offset:
            raise ValueError(f"a built batch at offset {header.base_offset}, the log end is {self.log_end_offset}")
        self._append_batches(batch, [(0, header)], now_ms, defer_flush)
        return self.log_end_offset - 1

    def append_as_follower(self, batches, *, now_ms: int, defer_flush: bool = False) -> AppendResult:
        """A follower's append (Kafka's appendAsFollower): the leader's batches as they are -- their offsets,
        leader epochs and timestamps kept, no client rule checked again, no recompression. Every batch's CRC
        must hold and offsets must go up from the log end offset (a compacted leader may leave gaps):
        else UnexpectedAppend and nothing is appended. The epoch cache learns each batch's leader epoch."""
        buf = batches if isinstance(batches, (bytes, bytearray)) else bytes(batches)
        headers = list(iter_batches(buf))
        if not headers:
            raise ValueError("no complete record batch to append")
        end = headers[-1][0] + headers[-1][1].size
        if end < len(buf):
            buf = buf[:end]
        expected = self.log_end_offset
        for pos, h in headers:
            if h.magic != 2 or not crc_ok(buf, pos, h):
                raise UnexpectedAppend(f"the batch at offset {h.base_offset} is corrupt (magic {h.magic} or CRC)")
            if h.base_offset < expected or h.last_offset_delta < 0:
                raise UnexpectedAppend(f"the batch at offset {h.base_offset} does not follow offset {expected - 1}")
            expected = h.next_offset
        self._append_batches(buf, headers, now_ms=now_ms, defer_flush=defer_flush)
        return AppendResult(headers[0][1].base_offset, headers[-1][1].last_offset, -1, self.log_start_offset)

    def _append_batches(self, buf, headers, now_ms: int, defer_flush: bool, owned: bool = False) -> None:
        """Write batches whose offsets are assigned: roll if needed, segment, epoch cache, producer state,
        log end offset, fsync (or leave it to the caller's worker). `owned`: buf is the log's, a memory segment
        keeps it rather than a copy."""
        last = headers[-1][1]
        base, offset = headers[0][1].base_offset, last.base_offset + last.last_offset_delta + 1
        if self._should_roll(len(buf), last.max_timestamp if len(headers) == 1 else
                             max(h.max_timestamp for _, h in headers), now_ms, offset):
            self._roll(now_ms)
        count = last.record_count if len(headers) == 1 else sum(h.record_count for _, h in headers)
        flush_due = (self._unflushed + count >= self.config.flush_messages
                     or now_ms - self._last_flush_ms >= self.config.flush_ms)
        # the write, and the fsync when one is due, go to the caller's worker
        durable = self._dir is not None
        deferring = defer_flush and durable
        try:
            seg = self.segments[-1]
            seg.append(buf, headers, self.config.index_interval_bytes, defer_write=deferring, sync=flush_due,
                       max_index_bytes=self.config.segment_index_bytes, owned=owned)
            seg.modified_ms = now_ms
            for pos, h in headers:
                self.epochs.assign(h.partition_leader_epoch, h.base_offset, defer=deferring)
                if h.attributes & CONTROL_BIT:  # (h.is_control)
                    done = self.producer_state.update(h, marker=read_marker(buf, pos, h))
                    if done is not None:
                        # the completed transactions whose markers the high watermark has passed are forgotten as
                        # each one completes, as Kafka does when the high watermark moves: reading the last stable
                        # offset (a fetch) forgets them too, but a partition nobody fetches (__consumer_offsets,
                        # with transactional offset commits) kept them all. (Not in a rebuild at load, which runs
                        # before a replica's high watermark is known.)
                        self.producer_state.remove_unreplicated(self.high_watermark)
                    self._note_txn(done, self.active.base, write=True)
                elif h.producer_id >= 0:  # (update returns at once for a batch of no producer: a coordinator's)
                    self.producer_state.update(h)
                self._unflushed += h.record_count
            self.log_end_offset = offset
            if deferring:
                if self._dirty_from is None:
                    self._dirty_from = base
                if flush_due:
                    self._unflushed, self._last_flush_ms = 0, now_ms
            elif flush_due and durable:
                self.flush(now_ms)
            elif flush_due:  # a memory log: nothing to write or fsync, only the count starts again
                self._unflushed, self._last_flush_ms = 0, now_ms
        except OSError:  # nothing of this append is acknowledged: fail() cuts it
            self._dirty_from = base if self._dirty_from is None else min(self._dirty_from, base)
            raise

    # -- read
    def _check_range(self, offset: int) -> None:
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRange(f"offset {offset} not in [{self.log_start_offset}, {self.log_end_offset}]")

    def _segment_index(self, offset: int) -> int:
        return max(0, bisect.bisect_right([s.base for s in self.segments], offset) - 1)

    def read(self, offset: int, max_bytes: int, *, min_one: bool = True, max_offset: int | None = None) -> bytes:
        """Whole batches starting with the one containing `offset`, up to max_bytes, from one
        segment; with min_one the first batch comes whole even if bigger than max_bytes (Kafka's
        rule so a consumer always makes progress). Batches at or past max_offset (the high
        watermark for consumers) are left out. At the log end offset: b''."""
        return b"".join(self.read_parts(offset, max_bytes, min_one=min_one, max_offset=max_offset))

    def read_parts(self, offset: int, max_bytes: int, *, min_one: bool = True,
                   max_offset: int | None = None) -> list:
        """What `read` returns, as a list of buffers that concatenate to it: the fetch path
        writes them to the socket as they are (see wire/fetch_response.py)."""
        self._check_range(offset)
        if offset == self.log_end_offset or (max_offset is not None and offset >= max_offset):
            return []
        for seg in self.segments[self._segment_index(offset):]:
            # a compacted segment may hold nothing at or after offset: go on to the next one
            if seg.next_offset > offset and seg.size:
                parts = seg.read_parts(offset, max_bytes, min_one, max_offset)
                if parts is not None:
                    return parts
        return []

    # -- ListOffsets
    def offset_for_timestamp(self, ts: int) -> tuple[int, int, int] | None:
        """ListOffsets by time: (offset, timestamp, leader epoch) of the first record at or after
        the log start offset whose timestamp >= ts; None when there is none (below the high
        watermark)."""
        for seg in self.segments:
            if seg.max_ts < ts or seg.next_offset <= self.log_start_offset:
                continue
            start = max(seg.timestamp_search_start(ts), self.log_start_offset)
            for h, data in seg.iter_batches(start):
                if h.base_offset >= self.high_watermark:
                    return None
                if h.max_timestamp < ts or h.last_offset < self.log_start_offset:
                    continue
                for r in decode_batch(data):
                    if r.timestamp >= ts and r.offset >= self.log_start_offset:
                        if r.offset >= self.high_watermark:
                            return None
                        return r.offset, r.timestamp, h.partition_leader_epoch
        return None

    def max_timestamp_entry(self) -> tuple[int, int, int] | None:
        """ListOffsets MAX_TIMESTAMP (-3, KIP-734): (offset, timestamp, leader epoch) of the first
        record carrying the largest timestamp; None for an empty log."""
        best = None
        for seg in self.segments:
            if seg.max_ts >= 0 and (best is None or seg.max_ts > best.max_ts):
                best = seg
        if best is None:
            return None
        for h, data in best.iter_batches(best.max_ts_offset):
            top: Record | None = None
            for r in decode_batch(data):
                if top is None or r.timestamp > top.timestamp:
                    top = r
            return top.offset, top.timestamp, h.partition_leader_epoch
        return None

    # -- OffsetForLeaderEpoch
    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.epochs.end_offset_for(epoch, self.log_end_offset)

    # -- removing the head
    def _advance_log_start(self, offset: int, defer: bool = False) -> None:
        if offset <= self.log_start_offset:
            return
        self.log_start_offset = offset
        self.epochs.truncate_from_start(offset, defer=defer)
        self.producer_state.truncate_head(offset)
        self.aborted.drop_below(offset)
        self._save_log_start(defer)

    def _delete_oldest(self, now_ms: int | None, defer_renames: bool = False) -> LogSegment:
        self.version += 1
        seg = self.segments.pop(0)
        if defer_renames:
            self._retire_later(seg, now_ms)
        else:
            self._retire(seg, now_ms)
        return seg

    def delete_records_before(self, offset: int, now_ms: int | None = None, defer_renames: bool = False) -> int:
        """DeleteRecords: move the log start offset up to `offset` (never down), deleting
        segments wholly below it (their files after file.delete.delay.ms from `now_ms`, see
        local_log.py). OffsetOutOfRange above the high watermark. With `defer_renames` the deleted segments' renames
        to `.deleted`, and the writes of the `log-start-offset` and leader-epoch-checkpoint files, are left for
        `renames()` (a worker thread)."""
        if offset > self.high_watermark or offset < 0:
            raise OffsetOutOfRange(f"offset {offset} is not in [0, high watermark {self.high_watermark}]")
        with self.lock:
            self._advance_log_start(offset, defer_renames)
            self.version += 1
            while len(self.segments) > 1 and self.segments[1].base <= self.log_start_offset:
                self._delete_oldest(now_ms, defer_renames)
        return self.log_start_offset

    def enforce_retention(self, now_ms: int, defer_renames: bool = False, *, delete: bool = True) -> int:
        """As Kafka's deleteOldSegments (its deletableSegments/deleteSegments): from the oldest, the segments wholly
        below the log start offset (a log start loaded from its checkpoint may be past segments still there) and,
        with `delete` (cleanup.policy=delete), those whose largest timestamp is older than retention.ms or whose
        deletion leaves the log at least retention.bytes, each wholly below the high watermark (the log start never
        passes it). The active segment too when it is not empty: the log rolls a new one first, so that it always
        has a segment. Returns the number of segments deleted. With `defer_renames` their files' renames to
        `.deleted`, and the log start's file writes, are left for `renames()` (a worker thread)."""
        cfg, n = self.config, 0
        segs = self.segments
        if len(segs) == 1:  # (most logs, each retention pass: only a segment not past retention, told without the lock)
            seg = segs[0]
            if not seg.size or not delete or not (cfg.retention_bytes == 0 or (
                    cfg.retention_ms >= 0 and now_ms - seg.largest_ts > cfg.retention_ms)):
                return 0
        with self.lock:
            segs, hw, start = self.segments, self.high_watermark, self.log_start_offset
            total = self.size_bytes  # (under the lock: a cleaner's swap-in holding it shrinks the log)
            # (one pass for Kafka's three, log start, retention.bytes then retention.ms: the first two delete a
            # prefix each, so it deletes the same segments)
            for i, seg in enumerate(segs):
                last = i == len(segs) - 1
                if last and seg.size == 0:
                    break
                upper = self.log_end_offset if last else segs[i + 1].base
                if hw < upper:
                    break
                below_start = not last and upper <= start
                too_old = delete and cfg.retention_ms >= 0 and now_ms - seg.largest_ts > cfg.retention_ms
                too_big = delete and cfg.retention_bytes >= 0 and total - seg.size >= cfg.retention_bytes
                if not (below_start or too_old or too_big):
                    break
                total -= seg.size
                n += 1
            if n and n == len(segs):
                self._roll(now_ms)
            for _ in range(n):
                self._delete_oldest(now_ms, defer_renames)
            if n:
                self._advance_log_start(self.segments[0].base, defer_renames)
        return n

    # -- compaction
    def compact(self, now_ms: int) -> int:
        """Clean the whole log now, on this thread (LogCleaner.clean_now): returns the number of
        records removed. The broker's cleaner runs in a worker thread instead (services.py)."""
        from .log_cleaner import LogCleaner
        return LogCleaner().clean_now(self, now_ms)

    # -- truncation (followers, tests)
    def truncate_to(self, offset: int) -> None:
        """Drop everything at and after `offset`, at a batch boundary (a batch straddling offset
        goes whole, so the log end offset may end up below offset)."""
        if offset >= self.log_end_offset:
            return
        if offset <= self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        with self.lock:
            self.version += 1
            while len(self.segments) > 1 and self.active.base >= offset:
                self._retire(self.segments.pop())
            self.active.truncate_to(offset)
            if self.active.size == 0 and len(self.segments) > 1 and self.active.base > offset:
                self._retire(self.segments.pop())
        self.log_end_offset = self.active.next_offset if self.active.size else self.active.base
        self.epochs.truncate_from_end(self.log_end_offset)
        self._snapshots_stale(self.log_end_offset)
        self._rebuild_producer_state()
        if self._dirty_from is not None and self._dirty_from >= self.log_end_offset:
            self._dirty_from = None  # what waited for an fsync is gone

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every record and start the log empty at `offset` (a follower whose fetch offset fell below the
        leader's log start offset, Kafka's truncateFullyAndStartAt)."""
        with self.lock:
            self.version += 1
            created_ms = self.active.created_ms
            for seg in self.segments:
                self._retire(seg)  # renamed before the new segment's files are made (it may have the same base)
            self.segments = [self._make_segment(offset, created_ms)]
        self.log_start_offset = self.log_end_offset = offset
        self._save_log_start()
        self.epochs.clear()
        self._snapshots_stale(None)
        self._rebuild_producer_state()
        self._dirty_from = None
        if self._hw is not None:
            self._hw = offset

    # -- files of the partition
    def _save_log_start(self, defer: bool = False) -> None:
        """`log-start-offset`: our one-number checkpoint (Kafka keeps log start offsets in a
        per-log-dir file the storage layer does not own); `defer`: written by `renames()`' worker."""
        if self._dir is None:
            return
        self._start_version += 1
        self._start_pending = defer
        if not defer:
            self._write_log_start(self.dir, self.log_start_offset, self._start_version)

    def _write_log_start(self, directory: Path, offset: int, version: int) -> None:
        with self._start_lock:  # (a newer write, inline or another worker's, is never overwritten by an older one)
            if version > self._start_written:
                write_atomically(directory / "log-start-offset", str(offset))
                self._start_written = version

    def _start_writes(self) -> list[Callable[[], None]]:
        """The deferred writes of the log start's files as they are now (`log-start-offset`, the leader epochs' left
        pending for the next flush too: see leader_epoch_file_cache.py), for a worker thread."""
        runs = [self.epochs.pending_write()]
        if self._start_pending:
            self._start_pending = False
            args = (self.dir, self.log_start_offset, self._start_version)
            runs.insert(0, lambda: self._write_log_start(*args))
        return [f for f in runs if f is not None]

    def renames(self) -> Callable[[], None] | None:
        """LocalLog's, after the deferred writes of the log start's files (DeleteRecords, retention: Kafka's
        truncateFromStartAsyncFlush; a crash before them leaves the old files: the next load's log start is the
        first segment's base or above, log_loader.py, and its leader epochs are cut there)."""
        runs = [f for f in (*self._start_writes(), super().renames()) if f is not None]
        if len(runs) < 2:
            return runs[0] if runs else None

        def run() -> None:
            for f in runs:
                f()
        return run

    @property
    def topic_id(self) -> uuid.UUID | None:
        return None if self._dir is None else read_topic_id(self.dir)

    def close(self) -> bool:
        """fsync and write the active segment's indexes; close every file. False when the flush
        failed (the broker's shutdown is then not a clean one)."""
        with self.lock:
            return self._close()

    def _close(self) -> bool:
        self.version += 1  # a cleaning under way is not swapped in
        flushed = True
        try:
            for write in self._start_writes():  # (a deferred write no worker took)
                write()
            self._flush_run(False)()
            self.active.on_roll()
            self._close_snapshot()
        except OSError:
            flushed = False
        for s in self.segments:
            s.close()
        self._close_doomed()
        return flushed

    def close_for_deletion(self) -> None:
        """Close every file of a log that is about to be deleted: pending writes completed (no worker is left
        writing to a closed file), but nothing flushed, fsynced or checkpointed (Kafka's closeHandlers before an
        asyncDelete): its directory is renamed and removed next, so none of that would survive."""
        with self.lock:
            self.version += 1  # a cleaning under way is not swapped in
            for s in self.segments:
                s.close()
            self._close_doomed()

    def delete(self) -> None:
        """Close and remove the partition (its directory, for a file log)."""
        with self.lock:
            self.version += 1
            for s in self.segments:
                if self._dir is not None:
                    s.close()
                else:
                    s.delete()
            self._close_doomed()
        if self._dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
        else:
            self.segments = [self._new_segment(0, 0)]


class MemoryLog(UnifiedLog):
    """A log of memory segments: for --in-memory brokers and tests."""

    def __init__(self, config: LogConfig, *, now_ms: int = 0, rng: random.Random | None = None):
        super().__init__(config, [MemoryLogSegment(0, now_ms)], epochs=LeaderEpochFileCache(None),
                         new_segment=MemoryLogSegment, now_ms=now_ms, rng=rng)


class FileLog(UnifiedLog):
    """A partition directory of Kafka segment files, loaded and recovered by LogLoader (see
    there for `had_clean_shutdown`, `recovery_point` and `log_start_offset`). A directory whose
    partition.metadata holds another topic id than `topic_id` is not opened: InconsistentTopicId."""

    def _new_segment(self, base: int, now_ms: int) -> FileLogSegment:
        """(LogLoader.new_segment's, without keeping the loader: fewer objects the garbage collector tracks)"""
        return FileLogSegment(self._dir, base, now_ms, index_interval=self._index_interval)

    def __init__(self, directory: Path, config: LogConfig, *, now_ms: int = 0,
                 topic_id: uuid.UUID | None = None, had_clean_shutdown: bool = False,
                 recovery_point: int = 0, log_start_offset: int = 0, rng: random.Random | None = None):
        directory = Path(directory)
        check_topic_id(directory, topic_id)
        loader = LogLoader(directory, config.index_interval_bytes, now_ms, had_clean_shutdown=had_clean_shutdown,
                           recovery_point=recovery_point, log_start_offset=log_start_offset)
        loaded = loader.load()
        if topic_id is not None:
            write_partition_metadata(directory, topic_id)
        epochs = LeaderEpochFileCache(directory / "leader-epoch-checkpoint")
        epochs.truncate_from_end(loaded.log_end_offset)
        epochs.truncate_from_start(loaded.log_start_offset)  # (a deferred write a crash lost: Kafka's LogLoader)
        self._index_interval = loader.index_interval
        super().__init__(config, loaded.segments, epochs=epochs,
                         log_start_offset=loaded.log_start_offset, directory=directory, now_ms=now_ms, rng=rng)
