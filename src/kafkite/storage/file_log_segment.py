"""Kafka's LogSegment on disk: one segment's files (`FileLogSegment`; the abstract LogSegment is in
log_segment.py).

On disk a segment is `<20-digit base offset>.log` -- v2 record batches exactly as on the wire,
read and written by position, never held in memory -- with its `.index` (OffsetIndex) and
`.timeindex` (TimeIndex). The indexes of the active segment live in memory and are written out
when it rolls and on close; after a clean shutdown they are loaded from there (active_segment.py).
The read path checks every `.index` entry it uses and rebuilds a damaged index (offset_index_check.py).

Deferred writes: an append may leave the write -- and an fsync when one is due -- to a worker
thread (`write_deferred`); until then reads stop where the file's written bytes end
(`readable_size`). Any other operation on the file first waits for a running worker and writes
what is still pending (`complete_writes`), so the .log always ends up in append order.

A failed write or fsync (a full disk, an I/O error) marks the segment failed: what is still pending
is dropped, never written, and nothing more is written to it (a retry once space returns would
write records that were answered with an error). After a log dir failure `fail()` does the same
from the log's thread, and `abandon(offset)`, in a worker, cuts the bytes from `offset` on (never
acknowledged) as far as the disk allows and closes the file.

Rolling (Kafka flushes a rolled segment from its scheduler, not in roll()): `roll()`, on the
log's thread, writes the pending bytes unless a worker is writing them, adds the final
time-index entry and marks the segment `closing`; `finish_roll()`, in a worker, writes what is
left, fsyncs the .log and only then writes and fsyncs the index files. So a closed segment
without index files may not be on disk whole: LogLoader checks such a segment's batches.

Deletion and replacement -- a segment's files renamed `.deleted` when it leaves the log (`retire`) or a
compaction replaces them (`swap_in`, `replaced_by`) -- are SegmentDeletion's (segment_deletion.py).

Index size (segment.index.bytes, Kafka's maxIndexSize): the offset index holds at most
`max_index_bytes // 8` entries and the time index `max_index_bytes // 12` (full one short of that: its
last slot is kept for the final entry a roll adds, as Kafka's TimeIndex.isFull); a full index takes no
more entries and the log rolls the segment before its next append (`index_full`), as Kafka's
LogSegment.shouldRoll does.

Preallocation (preallocate, Kafka's FileRecords.open with preallocate): `preallocate(n)` sets a new,
empty .log's length to segment.bytes (`ftruncate`: as Java's RandomAccessFile.setLength, sparse on
Linux filesystems, so no block is reserved); `size` stays the logical end and every read, scan and
recovery stops there. The file is trimmed back to it when the segment rolls (`finish_roll`, in a worker,
before its fsync; `on_roll`) and on close. After a crash the zero tail of an untrimmed segment ends its
recovery at the last batch (LogLoader truncates it, with Kafka's "Found invalid messages" warning).
"""
from __future__ import annotations

import errno
import os
import threading
from pathlib import Path
from typing import Callable, Iterator

from .active_segment import ActiveSegmentLoad
from .batch import HEADER_SIZE, BatchHeader, crc_ok, iter_batches, read_header
from .log_segment import BatchSource, LogSegment, MadeOnce, StrPath, segment_name
from .offset_index import OffsetIndex
from .offset_index_check import OffsetIndexCheck
from .producer_snapshot import fsync_if_exists
from .segment_deletion import SegmentDeletion
from .time_index import TimeIndex


class FileLogSegment(ActiveSegmentLoad, SegmentDeletion, OffsetIndexCheck, LogSegment):
    """One segment's files (see the module comment)."""

    # Many segments (one active per partition: 1,000s) are only ever appended to from the log's thread, so what the
    # deferred writes and index rebuilds need -- a Condition (8 GC-tracked objects), two locks, lists -- is made on first
    # use (`MadeOnce`), and the paths are kept as str (a PosixPath is 2 tracked objects): fewer objects for every full
    # garbage collection to traverse, and a full collection stops the event loop (benchmarks/loop_stalls.py).
    _io = MadeOnce(threading.Condition)         # guards the deferred writes' state; a worker's end is notified on it
    _writer = MadeOnce(threading.Lock)          # held by the worker writing (one at a time: bytes land in append order)
    _index_lock = MadeOnce(threading.Lock)      # putting a rebuilt index in place vs swap_in and retire
    _pending: list[tuple[int, object]] | tuple = ()  # deferred writes (position, buffer), in position order
    index_rebuild: threading.Thread | None = None       # the last index rebuild's thread (tests join it)
    log_path = StrPath()
    txn_index_path = StrPath()

    def __init__(self, directory: Path, base: int, created_ms: int, *, index_interval: int = 4096,
                 suffix: str = ""):
        self.base, self.created_ms, self.index_interval = base, created_ms, index_interval
        stem = os.path.join(os.fspath(directory), segment_name(base))
        self._log_path = stem + ".log" + suffix
        self.offset_index = OffsetIndex(stem + ".index" + suffix, base)
        self.time_index = TimeIndex(stem + ".timeindex" + suffix, base)
        self._txn_index_path = stem + ".txnindex" + suffix  # storage/transaction_index.py
        self.fd = os.open(self._log_path, os.O_RDWR | os.O_CREAT | (os.O_TRUNC if suffix else 0), 0o644)
        self.size = os.fstat(self.fd).st_size
        self.modified_ms = created_ms  # (a loaded file's: its mtime, LogLoader sets it)
        self.next_offset = base
        self._reset_indexes()
        # deferred writes (see UnifiedLog.deferred_flush): appended bytes a worker thread writes (_pending)
        self._pending_sync = False                    # the next worker run must also fsync
        self._inflight = 0                            # worker runs under way (or waiting for _writer)
        self._written_to = self.size                  # all bytes below are in the file, while dirty
        self._failed = False                          # a write or fsync failed: nothing more is written
        # a damaged .index entry found by a read: its rebuild (offset_index_check.py)
        self._rebuilding: OffsetIndex | None = None   # the damaged index whose rebuild was started
        self._preallocated = False                    # the file is longer than `size` (preallocate)

    def _reset_indexes(self) -> None:
        self.offset_index.reset()
        self.time_index.reset()
        self._index_from_file = False  # True while the offset index is the one loaded from the .index
        self.bytes_since_index = 0
        self._reset_stats()

    @property
    def index(self) -> list[tuple[int, int]]:
        """The .index entries (relative offset, position), for tests and tools."""
        return self.offset_index.entries

    @property
    def timeindex(self) -> list[tuple[int, int]]:
        """The .timeindex entries (timestamp, relative offset)."""
        return self.time_index.entries

    # -- indexes
    def load_indexes(self, next_offset: int) -> bool:
        """Load .index/.timeindex of an inactive segment ending before `next_offset`; False when
        missing or stale, CorruptIndexException when one fails its sanity check."""
        if not (self.offset_index.load(self.size, next_offset) and self.time_index.load(next_offset)):
            return False
        last = self.time_index.last
        if self.size > 0 and last is None:
            return False  # no final time-index entry: rebuild
        if last is not None:
            self.max_ts, self.max_ts_offset = last
        self.next_offset = next_offset
        self._index_from_file = True
        return True

    def recover(self, check_crc: bool) -> int:
        """Scan the .log from the start, rebuilding indexes and stats; return the length of the
        valid prefix (complete batches, with a good CRC when check_crc)."""
        self._reset_indexes()
        self.next_offset = self.base
        return self._walk(0, check_crc)

    def _walk(self, pos: int, check_crc: bool) -> int:
        """`recover` from the batch at `pos` on, the indexes and stats holding what the batches before it gave."""
        size = self.size
        self.size = pos
        while size - pos >= HEADER_SIZE:
            h = read_header(os.pread(self.fd, HEADER_SIZE, pos))
            if h.batch_length < HEADER_SIZE - 12 or pos + h.size > size or h.magic != 2 \
                    or h.base_offset < self.base:
                break
            if check_crc and not crc_ok(os.pread(self.fd, h.size, pos), 0, h):
                break
            self._index_batch(h, pos, self.index_interval)
            pos += h.size
        return pos

    def _index_batch(self, h: BatchHeader, pos: int, interval: int, max_index_bytes: int | None = None) -> None:
        """Kafka's LogSegment.append: an index entry once more than index.interval.bytes were
        appended since the last one (none into a full index: the log rolls before the next append);
        stats updated."""
        self._note(h)
        self.size = pos + h.size
        if self.bytes_since_index > interval and \
                (max_index_bytes is None or not self.offset_index.is_full(max_index_bytes)):
            self.offset_index.append(h.last_offset, pos)
            if max_index_bytes is None or not self.time_index.is_full(max_index_bytes):
                self.final_time_entry()
            self.bytes_since_index = 0
        self.bytes_since_index += h.size

    def final_time_entry(self) -> None:
        self.time_index.maybe_append(self.max_ts, self.max_ts_offset)

    def write_indexes(self, sync: bool = False) -> None:
        self.offset_index.write(sync)
        self.time_index.write(sync)
        if sync:  # (its .txnindex too: a producer snapshot above this segment trusts it, producer_snapshot.py)
            fsync_if_exists(self._txn_index_path)

    def unlink_indexes(self) -> None:
        self.offset_index.path.unlink(missing_ok=True)
        self.time_index.path.unlink(missing_ok=True)

    def index_full(self, max_index_bytes: int) -> bool:
        return self.offset_index.is_full(max_index_bytes) or self.time_index.is_full(max_index_bytes)

    # -- preallocate
    def preallocate(self, nbytes: int) -> None:
        if self.size == 0 and nbytes > 0 and not self._preallocated and self.fd >= 0:
            os.ftruncate(self.fd, nbytes)  # sparse: a length, not blocks (Java's RandomAccessFile.setLength)
            self._preallocated = True

    def _trim(self) -> None:
        """Cut a preallocated file back to its logical end (Kafka's FileRecords.trim)."""
        if self._preallocated and self.fd >= 0 and not self._failed:
            os.ftruncate(self.fd, self.size)
            self._preallocated = False

    # -- data
    def append(self, buf, headers: list[tuple[int, BatchHeader]], index_interval: int, *,
               defer_write: bool = False, sync: bool = False, max_index_bytes: int | None = None,
               owned: bool = False) -> None:
        """Write buf (any bytes-like: no copy) at the end; with defer_write the write (and with
        sync an fsync after it) is left to `write_deferred` in a worker thread (the caller keeps the
        records invisible until then). The indexes take no entry past `max_index_bytes`."""
        start = self.size
        if self._failed:
            raise OSError(errno.EIO, f"{self.log_path}: an earlier write to this segment failed")
        if defer_write:
            with self._io:
                if not self._dirty:
                    self._written_to = start
                if not self._pending:
                    self._pending = []
                self._pending.append((start, buf))
                self._pending_sync = self._pending_sync or sync
        else:
            self.complete_writes()
            self._pwrite(buf, start)
        self._index_from_file = False  # its entries now come from appends too: never rebuilt behind them
        for pos, h in headers:
            self._index_batch(h, start + pos, index_interval, max_index_bytes)

    def _pwrite(self, data, pos: int, fd: int | None = None) -> None:
        """Write all of data at pos (a short write is continued: on a full disk the next call raises
        ENOSPC); a failure marks the segment failed."""
        view, done = memoryview(data), 0
        try:
            while done < len(view):
                n = os.pwrite(self.fd if fd is None else fd, view[done:], pos + done)
                if n <= 0:
                    raise OSError(errno.EIO, f"{self.log_path}: write returned {n}")
                done += n
        except OSError as exc:
            if exc.errno != errno.EBADF:
                self._mark_failed()
            raise

    def _mark_failed(self) -> None:
        with self._io:
            self._failed = True
            self._pending, self._pending_sync = (), False

    @property
    def _dirty(self) -> bool:
        return bool(self._pending) or self._inflight > 0

    @property
    def readable_size(self) -> int:
        """Bytes of the .log that are in the file (deferred writes may still be on their way)."""
        return self._written_to if self._dirty else self.size

    def write_deferred(self, force_sync: bool = False) -> None:
        """In a worker thread: write the deferred appends, then fsync if one of them asked for it
        (or force_sync). Appends made while this runs wait for the next call. Every other file
        operation first waits for this to end."""
        self._in_worker(lambda: self._write_pending(force_sync))

    def _in_worker(self, work: Callable[[], None]) -> None:
        """Run work as a worker: one at a time (bytes land in append order), and every other file
        operation waits for it (complete_writes)."""
        with self._io:
            self._inflight += 1
        try:
            with self._writer:
                work()
        finally:
            with self._io:
                self._inflight -= 1
                self._io.notify_all()

    def _write_pending(self, force_sync: bool) -> None:
        with self._io:
            if self._failed:
                raise OSError(errno.EIO, f"{self.log_path}: an earlier write to this segment failed")
            writes, self._pending = self._pending, ()
            sync, self._pending_sync = self._pending_sync or force_sync, False
            fd = self.fd
        try:
            for pos, data in writes:
                self._pwrite(data, pos, fd)
                self._written_to = pos + len(data)
            if sync:
                os.fsync(fd)
        except OSError as exc:
            if exc.errno == errno.EBADF:  # the partition was deleted meanwhile: nothing to write
                return
            # e.g. a full disk: these records are answered with an error, so they are never written
            # later (no retry once space returns); the log dir goes offline (ReplicaManager)
            self._mark_failed()
            raise

    def complete_writes(self) -> None:
        """Make the .log hold every appended byte: wait for a running worker, write what is left."""
        if not self._dirty:
            return
        with self._io:
            while self._inflight:
                self._io.wait()
            writes, self._pending = (() if self._failed else self._pending), ()
        for pos, data in writes:
            self._pwrite(data, pos)

    def _header_at(self, pos: int) -> BatchHeader:
        return read_header(os.pread(self.fd, HEADER_SIZE, pos))

    def iter_batches(self, from_offset: int | None = None) -> Iterator[tuple[BatchHeader, bytes]]:
        """The batches from the one holding from_offset; stops at a header no batch has (never loops on it)."""
        self.complete_writes()
        pos = 0 if from_offset is None else self.find_position(from_offset)
        while self.size - pos >= HEADER_SIZE:
            h = self._header_at(pos)
            if not self._is_batch(h, pos, self.size):
                return
            yield h, os.pread(self.fd, h.size, pos)
            pos += h.size

    def iter_headers(self) -> Iterator[BatchHeader]:
        self.complete_writes()
        pos = 0
        while self.size - pos >= HEADER_SIZE:
            h = self._header_at(pos)
            if not self._is_batch(h, pos, self.size):
                return
            yield h
            pos += h.size

    def read_parts(self, offset: int, max_bytes: int, min_one: bool, max_offset: int | None) -> list | None:
        """Whole batches from the one containing offset, as one buffer: the bytes read from the file
        (a view when trimmed, not a copy). Only bytes already in the file are read: deferred writes
        hold records above the high watermark, which no consumer asks for."""
        pos = self.find_position(offset)
        limit = self.readable_size
        if pos >= limit:
            return None
        want = max(max_bytes, 0)
        if min_one:
            want = max(want, self._header_at(pos).size)
        data = os.pread(self.fd, min(want, limit - pos), pos)
        end = 0
        for p, h in iter_batches(data):  # whole batches only, below max_offset
            if max_offset is not None and h.base_offset >= max_offset:
                break
            if p + h.size > max_bytes and not (min_one and p == 0):
                break
            end = p + h.size
        return [memoryview(data)[:end] if end < len(data) else data]

    def timestamp_search_start(self, ts: int) -> int:
        return self.time_index.search_start(ts)

    def batch_source(self) -> BatchSource:
        path, limit = self.log_path, self.readable_size

        def read() -> Iterator[tuple[BatchHeader, bytes]]:
            with open(path, "rb", buffering=1 << 20) as f:
                pos = 0
                while limit - pos >= HEADER_SIZE:
                    head = f.read(HEADER_SIZE)
                    h = read_header(head)
                    if pos + h.size > limit:
                        return
                    yield h, head + f.read(h.size - HEADER_SIZE)
                    pos += h.size
        return read

    # -- rolling
    def roll(self) -> None:
        with self._io:
            writes, self._pending = ((), self._pending) if self._inflight else (self._pending, ())
        for pos, data in writes:
            self._pwrite(data, pos)
        self.final_time_entry()
        self.closing = True

    def finish_roll(self) -> None:
        def finish() -> None:
            if self.closing and self.fd >= 0 and not self._failed:
                self._trim()  # to the logical end, which the pending writes fill: then their fsync
                self._write_pending(force_sync=True)
                self.write_indexes(sync=True)
                self.closing = False
        self._in_worker(finish)

    # -- replacement (the cleaner)
    def scratch(self) -> "FileLogSegment":
        return FileLogSegment(self.log_path.parent, self.base, self.created_ms, index_interval=self.index_interval,
                              suffix=".cleaned")

    def truncate_to(self, offset: int) -> None:
        self.complete_writes()
        pos = self.find_position(offset)  # the batch reaching offset is dropped whole
        os.ftruncate(self.fd, pos)
        os.fsync(self.fd)
        self.size = pos
        self._preallocated = False  # as Kafka's FileRecords.truncateTo: the file ends at the cut
        self.recover(check_crc=False)
        self.closing = False  # active again (truncation pops the segments after it)

    def on_roll(self) -> None:
        """No longer active: final time-index entry, indexes and .log on disk, now."""
        self.complete_writes()
        self.final_time_entry()
        self._trim()
        os.fsync(self.fd)
        self.write_indexes(sync=True)
        self.closing = False

    def flush(self) -> None:
        self.complete_writes()
        try:
            os.fsync(self.fd)
        except OSError:
            self._mark_failed()
            raise

    # -- after a log dir failure
    def fail(self) -> None:
        self._mark_failed()

    def abandon(self, offset: int, delete: bool = False) -> None:
        with self._writer:  # a write under way ends first (fail() stops the next ones)
            if self.fd < 0:
                return
            try:
                if delete:
                    self.unlink_indexes()
                    self.txn_index_path.unlink(missing_ok=True)
                    self.log_path.unlink(missing_ok=True)
                else:
                    cut = self._cut_position(offset)
                    if cut < os.fstat(self.fd).st_size:
                        self.unlink_indexes()  # rebuilt from the .log on the next start
                        os.ftruncate(self.fd, cut)
                        os.fsync(self.fd)
            finally:
                os.close(self.fd)
                self.fd = -1

    def _cut_position(self, offset: int) -> int:
        """Start of the first batch in the file reaching `offset` (else the end of its whole batches)."""
        end = os.fstat(self.fd).st_size
        _, pos, _ = self._entry_start(self.offset_index, self.offset_index.slot(offset), end, [])
        pos = pos if pos < end else 0
        while end - pos >= HEADER_SIZE:
            h = self._header_at(pos)
            if h.last_offset >= offset or h.batch_length < HEADER_SIZE - 12 or pos + h.size > end:
                break
            pos += h.size
        return pos

    def close(self) -> None:
        if self.fd >= 0:
            self.complete_writes()
            try:
                self._trim()
            except OSError:
                pass  # left for recovery at the next start (it ends the segment at its last batch)
            os.close(self.fd)
            self.fd = -1

    def delete(self) -> None:
        self.close()
        for p in (self.log_path, self.offset_index.path, self.time_index.path, self.txn_index_path):
            p.unlink(missing_ok=True)


FileSegment = Segment = FileLogSegment  # older names
