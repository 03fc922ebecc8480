"""Partition logs: Kafka's segment files, or memory, behind one interface.

A log is a list of segments, each holding the batches from its base offset up to the next
segment's base. The last segment is the active one: appends go there, and it is rolled
(a new segment started at the log end offset) when the next append would take it past
`segment.bytes`, or when `segment.ms` has passed since its first batch. `FileLog` and
`MemoryLog` share every rule (offset assignment, rolling, reads, retention, DeleteRecords,
timestamp lookup, compaction, truncation, the leader epoch cache and producer state);
only the segment storage differs, so the two behave alike to the offset.

On disk (`FileLog`) a partition is a directory `<topic>-<partition>/` holding, per segment,
Kafka's files:

- `<20-digit base offset>.log`: v2 record batches exactly as on the wire;
- `.index`: 8-byte big-endian entries (offset relative to the base: the last offset of a
  batch, int32 file position of that batch), one every `index.interval.bytes` of log;
- `.timeindex`: 12-byte entries (int64 max timestamp so far, int32 relative offset of the
  batch holding it), monotonic in the timestamp, at the same interval, plus a final entry
  when the segment stops being active;

and for the partition `leader-epoch-checkpoint` (Kafka's text checkpoint: version 0, the
entry count, then `epoch startOffset` lines), `partition.metadata` (`version: 0` /
`topic_id: <base64 topic id>`) and `log-start-offset` (our one-number checkpoint; Kafka
keeps log start offsets in a per-log-dir file the storage layer does not own).

The indexes of the active segment live in memory and are written out when it rolls and
on close. On open, the active segment is always recovered: each batch's length and CRC32C
are checked, a torn tail (short batch or bad CRC) is truncated away and its indexes rebuilt.
An older segment's indexes are loaded, or rebuilt from the .log when missing or stale.
Durability: the active .log is fsynced once `flush.messages` records are unflushed
(1 by default here: an acknowledged write is on disk). An append may leave the write -- and
that fsync when one is due -- to its caller (`defer_flush=True`: `deferred_flush()` gives a
function to run in a worker thread that writes the pending bytes and fsyncs if asked to,
`mark_flushed()` records it done); until then the appended records stay above the high
watermark, so no consumer reads a record that a crash could still take away, and reads stop
where the file's written bytes end.
One run covers every append made before it started (group commit). Any other operation on the
file (roll, close, truncation, compaction, full scans, an inline append) first waits for a
running worker and writes what is still pending, so the .log always ends up in append order.

This module is sans-IO with respect to time: every operation that needs the clock takes
`now_ms` from the caller.
"""
from __future__ import annotations

import base64
import bisect
import errno
import os
import shutil
import struct
import sys
import threading
import uuid
from array import array
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Callable, Iterator

from .batch import (HEADER_SIZE, BatchHeader, Record, crc_ok, decode_batch, iter_batches, patch_base_offset,
                    patch_partition_leader_epoch, read_header, rebuild_batch, set_log_append_time, valid_prefix)
from .producer_state import ProducerStateManager

LONG_MAX = 9223372036854775807
INT32_MAX = (1 << 31) - 1


class OffsetOutOfRange(Exception):
    """An offset outside [log start offset, log end offset] (or above the high watermark for
    DeleteRecords): Kafka's OFFSET_OUT_OF_RANGE."""


# -- configuration ------------------------------------------------------------------------------
_TOPIC_CONFIG_NAMES = {
    # field -> Kafka topic config name
    "segment_bytes": "segment.bytes",
    "segment_ms": "segment.ms",
    "index_interval_bytes": "index.interval.bytes",
    "retention_ms": "retention.ms",
    "retention_bytes": "retention.bytes",
    "flush_interval_messages": "flush.messages",
    "max_message_bytes": "max.message.bytes",
    "message_timestamp_type": "message.timestamp.type",
    "message_timestamp_before_max_ms": "message.timestamp.before.max.ms",
    "message_timestamp_after_max_ms": "message.timestamp.after.max.ms",
    "cleanup_policy": "cleanup.policy",
    "delete_retention_ms": "delete.retention.ms",
    "min_compaction_lag_ms": "min.compaction.lag.ms",
    "min_insync_replicas": "min.insync.replicas",
}


@dataclass
class LogConfig:
    """Per-topic log settings, Kafka's names and defaults (flush.messages: 1 here, see above)."""
    segment_bytes: int = 1073741824          # segment.bytes / log.segment.bytes
    segment_ms: int = 604800000              # segment.ms / log.roll.ms
    index_interval_bytes: int = 4096         # index.interval.bytes
    retention_ms: int = 604800000            # retention.ms, -1 = infinite
    retention_bytes: int = -1                # retention.bytes, -1 = infinite
    flush_interval_messages: int = 1         # flush.messages; Kafka's default Long.MAX = never
    max_message_bytes: int = 1048588         # max.message.bytes
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3600000
    cleanup_policy: tuple[str, ...] = ("delete",)
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    min_insync_replicas: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.cleanup_policy, str):
            self.cleanup_policy = _policy(self.cleanup_policy)

    @property
    def compacted(self) -> bool:
        return "compact" in self.cleanup_policy

    @classmethod
    def from_topic_configs(cls, c: dict[str, str | None]) -> "LogConfig":
        """From Kafka topic config names (segment.bytes, retention.ms, cleanup.policy, ...);
        missing or empty values keep the defaults, unknown names are ignored."""
        kw = {}
        types = {f.name: f.type for f in fields(cls)}
        for attr, name in _TOPIC_CONFIG_NAMES.items():
            v = c.get(name)
            if v is None or v == "":
                continue
            if attr == "cleanup_policy":
                kw[attr] = _policy(str(v))
            elif types[attr] in ("str", str):
                kw[attr] = str(v)
            else:
                kw[attr] = int(v)
        return cls(**kw)


def _policy(s: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in s.split(",") if x.strip()) or ("delete",)


@dataclass
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int


# -- leader epoch cache ---------------------------------------------------------------------------
class LeaderEpochCache:
    """(leader epoch, start offset) pairs in increasing order: Kafka's LeaderEpochFileCache,
    persisted as `leader-epoch-checkpoint` when a path is given."""

    def __init__(self, path: Path | None):
        self.path = path
        self.entries: list[tuple[int, int]] = []
        if path is not None and path.exists():
            try:
                lines = path.read_text().split("\n")
                n = int(lines[1])
                self.entries = [(int(a), int(b)) for a, b in (ln.split() for ln in lines[2:2 + n])]
            except (ValueError, IndexError):
                self.entries = []  # unreadable: start empty, as Kafka rebuilds it from the log

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else -1

    def assign(self, epoch: int, start_offset: int) -> None:
        """Note that `epoch` starts at `start_offset` (only a newer epoch is recorded)."""
        if epoch < 0 or (self.entries and (epoch <= self.entries[-1][0] or start_offset < self.entries[-1][1])):
            return
        self.entries.append((epoch, start_offset))
        self._save()

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs starting at or after end_offset (log truncated to end_offset)."""
        kept = [e for e in self.entries if e[1] < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._save()

    def truncate_from_start(self, start_offset: int) -> None:
        """Log start moved to start_offset: the epoch covering it now starts there."""
        i = bisect.bisect_right([o for _, o in self.entries], start_offset) - 1
        if i < 0:
            return
        kept = [(self.entries[i][0], max(self.entries[i][1], start_offset))] + self.entries[i + 1:]
        if kept != self.entries:
            self.entries = kept
            self._save()

    def epoch_for_offset(self, offset: int) -> int:
        i = bisect.bisect_right([o for _, o in self.entries], offset) - 1
        return self.entries[i][0] if i >= 0 else -1

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= requested, end offset of that epoch), Kafka's
        LeaderEpochFileCache.endOffsetFor: the latest epoch ends at the log end offset; a
        requested epoch below every known one answers (requested, first start offset);
        unknown/newer epochs answer (-1, -1)."""
        if epoch < 0 or not self.entries:
            return -1, -1
        if epoch == self.entries[-1][0]:
            return epoch, log_end_offset
        epochs = [e for e, _ in self.entries]
        hi = bisect.bisect_right(epochs, epoch)  # first entry with a larger epoch
        if hi >= len(self.entries):
            return -1, -1
        if hi == 0:
            return epoch, self.entries[0][1]
        return self.entries[hi - 1][0], self.entries[hi][1]

    def clear(self) -> None:
        self.entries = []
        self._save()

    def _save(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text("0\n%d\n%s" % (len(self.entries), "".join(f"{e} {o}\n" for e, o in self.entries)))
        os.replace(tmp, self.path)


# -- segments ------------------------------------------------------------------------------------
class _Segment:
    """What the log needs of a segment; MemorySegment and FileSegment implement it."""
    base: int
    size: int            # bytes
    next_offset: int     # last offset + 1 (base when empty)
    max_ts: int          # largest batch max timestamp, -1 when none
    max_ts_offset: int   # last offset of the first batch carrying max_ts
    first_batch_ts: int  # max timestamp of the first batch (time-based rolling), -1 when none
    created_ms: int

    def _note(self, h: BatchHeader) -> None:
        if self.size == 0:
            self.first_batch_ts = h.max_timestamp
        if h.max_timestamp > self.max_ts:
            self.max_ts, self.max_ts_offset = h.max_timestamp, h.last_offset
        self.next_offset = h.next_offset


class MemorySegment(_Segment):
    def __init__(self, base: int, created_ms: int):
        self.base, self.created_ms = base, created_ms
        self.batches: list[bytes] = []
        self.lasts: list[int] = []  # last offset of each batch, for bisect
        self.size, self.next_offset = 0, base
        self.max_ts, self.max_ts_offset, self.first_batch_ts = -1, -1, -1

    def append(self, buf, headers: list[tuple[int, BatchHeader]], index_interval: int, *,
               defer_write: bool = False, sync: bool = False) -> None:
        mv = memoryview(buf)
        for pos, h in headers:
            self._note(h)
            self.batches.append(bytes(mv[pos:pos + h.size]))
            self.lasts.append(h.last_offset)
            self.size += h.size

    def iter_batches(self, from_offset: int | None = None) -> Iterator[tuple[BatchHeader, bytes]]:
        i = 0 if from_offset is None else bisect.bisect_left(self.lasts, from_offset)
        for b in self.batches[i:]:
            yield read_header(b), b

    def iter_headers(self) -> Iterator[BatchHeader]:
        return (read_header(b) for b in self.batches)

    def read(self, offset: int, max_bytes: int, min_one: bool, max_offset: int | None) -> bytes | None:
        """Whole batches from the one containing offset; None when no batch reaches offset."""
        parts = self.read_parts(offset, max_bytes, min_one, max_offset)
        return None if parts is None else b"".join(parts)

    def read_parts(self, offset: int, max_bytes: int, min_one: bool, max_offset: int | None) -> list | None:
        """Like read, as the stored batch objects themselves (nothing copied)."""
        out, size = [], 0
        start = bisect.bisect_left(self.lasts, offset)
        if start >= len(self.batches):
            return None
        for i in range(start, len(self.batches)):
            b = self.batches[i]
            if max_offset is not None and self.lasts[i] - read_header(b).last_offset_delta >= max_offset:
                break
            if size + len(b) > max_bytes and not (min_one and not out):
                break
            out.append(b)
            size += len(b)
        return out

    def timestamp_search_start(self, ts: int) -> int:
        return self.base

    def replace(self, batches: list[bytes]) -> None:
        """The cleaner's output replaces the segment's batches (base and next offset kept)."""
        nxt = self.next_offset
        self.batches, self.lasts, self.size = [], [], 0
        self.max_ts, self.max_ts_offset, self.first_batch_ts = -1, -1, -1
        self.append(b"".join(batches), list(iter_batches(b"".join(batches))), 0)
        self.next_offset = nxt

    def truncate_to(self, offset: int) -> None:
        i = bisect.bisect_left(self.lasts, offset)  # first batch reaching offset: dropped whole
        kept = self.batches[:i]
        self.batches, self.lasts, self.size, self.next_offset = [], [], 0, self.base
        self.max_ts, self.max_ts_offset, self.first_batch_ts = -1, -1, -1
        data = b"".join(kept)
        self.append(data, list(iter_batches(data)), 0)

    def on_roll(self) -> None:
        pass

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    def delete(self) -> None:
        self.batches, self.lasts = [], []


_IDX = struct.Struct(">ii")
_TIDX = struct.Struct(">qi")


def _name(base: int) -> str:
    return f"{base:020d}"


def _be_array(code: str, raw: bytes) -> array:
    a = array(code)
    a.frombytes(raw)
    if sys.byteorder == "little":
        a.byteswap()
    return a


class FileSegment(_Segment):
    """One segment's .log (read and written by position, never held in memory) and its
    .index/.timeindex (held as compact arrays, written out when the segment rolls or closes)."""

    def __init__(self, directory: Path, base: int, created_ms: int):
        self.base, self.created_ms = base, created_ms
        self.log_path = directory / (_name(base) + ".log")
        self.index_path = directory / (_name(base) + ".index")
        self.time_path = directory / (_name(base) + ".timeindex")
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.next_offset = base
        self._reset_indexes()
        # deferred writes (see FileLog.deferred_flush): appended bytes a worker thread writes
        self._io = threading.Condition()
        self._pending: list[tuple[int, object]] = []  # (position, buffer), in position order
        self._pending_sync = False                    # the next worker run must also fsync
        self._inflight = 0                            # worker runs under way
        self._written_to = self.size                  # all bytes below are in the file, while dirty

    def _reset_indexes(self) -> None:
        self.idx_rel, self.idx_pos = array("i"), array("i")   # .index
        self.tidx_ts, self.tidx_rel = array("q"), array("i")  # .timeindex
        self.bytes_since_index = 0
        self.max_ts, self.max_ts_offset, self.first_batch_ts = -1, -1, -1

    @property
    def index(self) -> list[tuple[int, int]]:
        """The .index entries (relative offset, position), for tests and tools."""
        return list(zip(self.idx_rel, self.idx_pos))

    @property
    def timeindex(self) -> list[tuple[int, int]]:
        """The .timeindex entries (timestamp, relative offset)."""
        return list(zip(self.tidx_ts, self.tidx_rel))

    # -- indexes
    def load_indexes(self, next_offset: int) -> bool:
        """Load .index/.timeindex of an inactive segment; False when missing or stale."""
        try:
            raw, traw = self.index_path.read_bytes(), self.time_path.read_bytes()
        except FileNotFoundError:
            return False
        if len(raw) % 8 or len(traw) % 12:
            return False
        pairs = _be_array("i", raw)
        tpairs_ts = _be_array("q", b"".join(traw[i:i + 8] for i in range(0, len(traw), 12)))
        tpairs_rel = _be_array("i", b"".join(traw[i + 8:i + 12] for i in range(0, len(traw), 12)))
        self.idx_rel, self.idx_pos = pairs[0::2], pairs[1::2]
        if any(p >= self.size for p in self.idx_pos[-1:]) or (self.size > 0 and not tpairs_ts):
            return False  # positions past the end, or no final time-index entry: rebuild
        self.tidx_ts, self.tidx_rel = tpairs_ts, tpairs_rel
        if self.tidx_ts:
            self.max_ts, self.max_ts_offset = self.tidx_ts[-1], self.base + self.tidx_rel[-1]
        self.next_offset = next_offset
        return True

    def recover(self, check_crc: bool) -> int:
        """Scan the .log from the start, rebuilding indexes and stats; return the length of the
        valid prefix (complete batches, with a good CRC when check_crc)."""
        self._reset_indexes()
        self.next_offset = self.base
        pos, size, interval = 0, self.size, self._interval
        self.size = 0
        while size - pos >= HEADER_SIZE:
            h = read_header(os.pread(self.fd, HEADER_SIZE, pos))
            if h.batch_length < HEADER_SIZE - 12 or pos + h.size > size or h.magic != 2 \
                    or h.base_offset < self.base:
                break
            if check_crc and not crc_ok(os.pread(self.fd, h.size, pos), 0, h):
                break
            self._index_batch(h, pos, interval)
            pos += h.size
        return pos

    _interval = 4096

    def _index_batch(self, h: BatchHeader, pos: int, interval: int) -> None:
        """Kafka's LogSegment.append: an index entry once more than index.interval.bytes were
        appended since the last one; stats updated."""
        self._note(h)
        self.size = pos + h.size
        if self.bytes_since_index > interval:
            self.idx_rel.append(h.last_offset - self.base)
            self.idx_pos.append(pos)
            self._maybe_time_entry()
            self.bytes_since_index = 0
        self.bytes_since_index += h.size

    def _maybe_time_entry(self) -> None:
        if self.max_ts >= 0 and (not self.tidx_ts or self.max_ts > self.tidx_ts[-1]):
            self.tidx_ts.append(self.max_ts)
            self.tidx_rel.append(self.max_ts_offset - self.base)

    def write_indexes(self, sync: bool = False) -> None:
        pairs = array("i", [0]) * (2 * len(self.idx_rel))
        pairs[0::2], pairs[1::2] = self.idx_rel, self.idx_pos
        ts, rel = array("q", self.tidx_ts), array("i", self.tidx_rel)
        if sys.byteorder == "little":
            pairs.byteswap()
            ts.byteswap()
            rel.byteswap()
        tb, rb = ts.tobytes(), rel.tobytes()
        tdata = b"".join(tb[i * 8:i * 8 + 8] + rb[i * 4:i * 4 + 4] for i in range(len(ts)))
        for path, data in ((self.index_path, pairs.tobytes()), (self.time_path, tdata)):
            with open(path, "wb") as f:
                f.write(data)
                if sync:
                    f.flush()
                    os.fsync(f.fileno())

    def unlink_indexes(self) -> None:
        self.index_path.unlink(missing_ok=True)
        self.time_path.unlink(missing_ok=True)

    # -- data
    def append(self, buf, headers: list[tuple[int, BatchHeader]], index_interval: int, *,
               defer_write: bool = False, sync: bool = False) -> None:
        """Write buf (any bytes-like: no copy) at the end; with defer_write the write (and with
        sync an fsync after it) is left to `write_deferred` in a worker thread (the caller keeps the
        records invisible until then)."""
        start = self.size
        if defer_write:
            with self._io:
                if not self._dirty:
                    self._written_to = start
                self._pending.append((start, buf))
                self._pending_sync = self._pending_sync or sync
        else:
            self.complete_writes()
            self._pwrite(buf, start)
        for pos, h in headers:
            self._index_batch(h, start + pos, index_interval)

    def _pwrite(self, data, pos: int, fd: int | None = None) -> None:
        n = os.pwrite(self.fd if fd is None else fd, data, pos)
        if n != len(data):
            raise OSError(f"short write to {self.log_path}: {n} of {len(data)} bytes")

    @property
    def _dirty(self) -> bool:
        return bool(self._pending) or self._inflight > 0

    @property
    def readable_size(self) -> int:
        """Bytes of the .log that are in the file (deferred writes may still be on their way)."""
        return self._written_to if self._dirty else self.size

    def write_deferred(self) -> None:
        """In a worker thread: write the deferred appends, then fsync if one of them asked for it.
        Appends made while this runs wait for the next call. Every other file operation first
        waits for this to end."""
        with self._io:
            writes, self._pending = self._pending, []
            sync, self._pending_sync = self._pending_sync, False
            self._inflight += 1
            fd = self.fd
        done = 0
        try:
            for pos, data in writes:
                self._pwrite(data, pos, fd)
                self._written_to = pos + len(data)
                done += 1
            if sync:
                os.fsync(fd)
        except OSError as exc:
            if exc.errno == errno.EBADF:  # the partition was deleted meanwhile: nothing to write
                return
            with self._io:  # e.g. a full disk: the next run tries again, in order; nothing is acked
                self._pending[0:0] = writes[done:]
                self._pending_sync = self._pending_sync or sync
            raise
        finally:
            with self._io:
                self._inflight -= 1
                self._io.notify_all()

    def complete_writes(self) -> None:
        """Make the .log hold every appended byte: wait for a running worker, write what is left."""
        if not self._dirty:
            return
        with self._io:
            while self._inflight:
                self._io.wait()
            writes, self._pending = self._pending, []
        for pos, data in writes:
            self._pwrite(data, pos)

    def _header_at(self, pos: int) -> BatchHeader:
        return read_header(os.pread(self.fd, HEADER_SIZE, pos))

    def find_position(self, offset: int) -> int:
        """Position of the batch containing offset (or the first batch after it): the .index
        gives the nearest indexed batch at or below, then a short header scan (never into bytes
        a deferred write has not put in the file yet)."""
        i = bisect.bisect_right(self.idx_rel, offset - self.base) - 1
        pos = self.idx_pos[i] if i >= 0 else 0
        limit = self.readable_size
        while pos < limit:
            h = self._header_at(pos)
            if h.last_offset >= offset:
                return pos
            pos += h.size
        return limit

    def iter_batches(self, from_offset: int | None = None) -> Iterator[tuple[BatchHeader, bytes]]:
        self.complete_writes()
        pos = 0 if from_offset is None else self.find_position(from_offset)
        while pos < self.size:
            h = self._header_at(pos)
            yield h, os.pread(self.fd, h.size, pos)
            pos += h.size

    def iter_headers(self) -> Iterator[BatchHeader]:
        self.complete_writes()
        pos = 0
        while pos < self.size:
            h = self._header_at(pos)
            yield h
            pos += h.size

    def read(self, offset: int, max_bytes: int, min_one: bool, max_offset: int | None) -> bytes | None:
        """Whole batches from the one containing offset; None when no batch reaches offset."""
        parts = self.read_parts(offset, max_bytes, min_one, max_offset)
        return None if parts is None else bytes(parts[0])

    def read_parts(self, offset: int, max_bytes: int, min_one: bool, max_offset: int | None) -> list | None:
        """Like read, as one buffer: the bytes read from the file (a view when trimmed, not a copy).
        Only bytes already in the file are read: deferred writes hold records above the high
        watermark, which no consumer asks for."""
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
        """An offset from which scanning finds the first record with timestamp >= ts: after the
        last time-index entry whose timestamp is below ts, everything earlier is below ts."""
        i = bisect.bisect_left(self.tidx_ts, ts) - 1
        return self.base + self.tidx_rel[i] if i >= 0 else self.base

    def replace(self, batches: list[bytes]) -> None:
        """Atomically swap in the cleaner's output (indexes removed first, so a crash in between
        leaves a segment whose indexes are rebuilt on open)."""
        self.complete_writes()
        directory = self.log_path.parent
        tmp = directory / (_name(self.base) + ".log.cleaned")
        with open(tmp, "wb") as f:
            f.write(b"".join(batches))
            f.flush()
            os.fsync(f.fileno())
        self.unlink_indexes()
        os.close(self.fd)
        os.replace(tmp, self.log_path)
        self.fd = os.open(self.log_path, os.O_RDWR)
        nxt = self.next_offset
        self.size = os.fstat(self.fd).st_size
        self.recover(check_crc=False)
        self._maybe_time_entry()
        self.next_offset = max(nxt, self.next_offset)
        self.write_indexes(sync=True)

    def truncate_to(self, offset: int) -> None:
        self.complete_writes()
        pos = self.find_position(offset)  # the batch reaching offset is dropped whole
        os.ftruncate(self.fd, pos)
        os.fsync(self.fd)
        self.size = pos
        self.recover(check_crc=False)

    def on_roll(self) -> None:
        """No longer active: final time-index entry, indexes and .log on disk."""
        self.complete_writes()
        self._maybe_time_entry()
        os.fsync(self.fd)
        self.write_indexes(sync=True)

    def flush(self) -> None:
        self.complete_writes()
        os.fsync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            self.complete_writes()
            os.close(self.fd)
            self.fd = -1

    def delete(self) -> None:
        self.close()
        for p in (self.log_path, self.index_path, self.time_path):
            p.unlink(missing_ok=True)


Segment = FileSegment  # older name


# -- the log ------------------------------------------------------------------------------------
class _Log:
    """The rules shared by FileLog and MemoryLog; subclasses provide `_new_segment`,
    `_save_log_start` and `flush`."""

    config: LogConfig
    segments: list
    epochs: LeaderEpochCache

    def __init__(self, config: LogConfig) -> None:
        self.config = config
        self.producer_state = ProducerStateManager()
        self.log_start_offset = 0
        self.log_end_offset = 0
        self._hw: int | None = None
        self._unflushed = 0
        self._dirty_from: int | None = None  # first offset whose deferred fsync has not happened

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

    @property
    def active(self):
        return self.segments[-1]

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def iter_headers(self) -> Iterator[BatchHeader]:
        """Every batch header in offset order (producer state rebuild, tools)."""
        for seg in self.segments:
            yield from seg.iter_headers()

    # -- append
    def append(self, batches, *, now_ms: int, leader_epoch: int = 0, defer_flush: bool = False) -> AppendResult:
        """Append validated batches (a bytearray, patched in place): assign offsets from the log
        end offset, stamp the leader epoch (and LogAppendTime when the topic uses it), roll the
        active segment if needed, update indexes, producer state and the epoch cache, fsync per
        flush.messages (or, with defer_flush, leave it to the caller: see the module comment).
        Bytes after the last complete batch are ignored."""
        buf = batches if isinstance(batches, bytearray) else bytearray(batches)
        end = valid_prefix(buf)
        if end == 0:
            raise ValueError("no complete record batch to append")
        if end < len(buf):
            del buf[end:]
        lat = now_ms if self.config.message_timestamp_type == "LogAppendTime" else -1
        offset = base = self.log_end_offset
        headers = []
        for pos, h in list(iter_batches(buf)):
            patch_base_offset(buf, pos, offset)
            patch_partition_leader_epoch(buf, pos, leader_epoch)
            if lat >= 0:
                set_log_append_time(buf, pos, now_ms)
            h = read_header(buf, pos)
            headers.append((pos, h))
            offset = h.next_offset
        if self._should_roll(len(buf), headers, now_ms, offset):
            self._roll(now_ms)
        flush_due = self._unflushed + sum(h.record_count for _, h in headers) >= self.config.flush_interval_messages
        # the write, and the fsync when flush.messages asks for one, go to the caller's worker
        deferring = defer_flush and self.durable
        self.active.append(buf, headers, self.config.index_interval_bytes, defer_write=deferring,
                           sync=flush_due)
        self.epochs.assign(leader_epoch, base)
        for _pos, h in headers:
            self.producer_state.update(h)
            self._unflushed += h.record_count
        self.log_end_offset = offset
        if deferring:
            if self._dirty_from is None:
                self._dirty_from = base
            if flush_due:
                self._unflushed = 0
        elif flush_due:
            self.flush()
        return AppendResult(base, offset - 1, lat, self.log_start_offset)

    # -- deferred fsync (group commit)
    durable = False  # True where flush() puts records on stable storage

    def flush_pending(self, offset: int) -> bool:
        """True while the record at `offset` waits for a deferred fsync."""
        return self._dirty_from is not None and self._dirty_from <= offset

    def deferred_flush(self) -> tuple[int, Callable[[], None]]:
        """(target, run): `run()` -- safe to call in another thread -- makes every record below
        `target` durable; then call `mark_flushed(target)` on the log's own thread."""
        return self.log_end_offset, lambda: None

    def mark_flushed(self, target: int) -> None:
        if self._dirty_from is None:
            return
        if target >= self.log_end_offset:
            self._dirty_from = None
        elif target > self._dirty_from:
            self._dirty_from = target

    def _should_roll(self, nbytes: int, headers, now_ms: int, next_offset: int) -> bool:
        seg = self.active
        if seg.size == 0:
            return False
        if seg.size + nbytes > self.config.segment_bytes:
            return True
        if next_offset - 1 - seg.base > INT32_MAX:  # relative offsets are int32 in the indexes
            return True
        # Kafka's LogSegment.shouldRoll: time since the first batch's timestamp (record time),
        # or since the segment was created when batches carry no timestamp
        if seg.first_batch_ts >= 0:
            waited = max(h.max_timestamp for _, h in headers) - seg.first_batch_ts
        else:
            waited = now_ms - seg.created_ms
        return waited > self.config.segment_ms

    def _roll(self, now_ms: int) -> None:
        self.active.on_roll()
        self.segments.append(self._new_segment(self.log_end_offset, now_ms))

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
    def _advance_log_start(self, offset: int) -> None:
        if offset <= self.log_start_offset:
            return
        self.log_start_offset = offset
        self.epochs.truncate_from_start(offset)
        self.producer_state.truncate_head(offset)
        self._save_log_start()

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to `offset` (never down), deleting
        segments wholly below it. OffsetOutOfRange above the high watermark."""
        if offset > self.high_watermark or offset < 0:
            raise OffsetOutOfRange(f"offset {offset} is not in [0, high watermark {self.high_watermark}]")
        self._advance_log_start(offset)
        while len(self.segments) > 1 and self.segments[1].base <= self.log_start_offset:
            self.segments.pop(0).delete()
        return self.log_start_offset

    def enforce_retention(self, now_ms: int) -> int:
        """cleanup.policy=delete: delete the oldest segments whose largest timestamp is older than
        retention.ms, then while the log exceeds retention.bytes by at least a segment. The
        active segment stays. Returns the number of segments deleted."""
        cfg, n = self.config, 0
        total = self.size_bytes
        while len(self.segments) > 1:
            seg = self.segments[0]
            too_old = cfg.retention_ms >= 0 and seg.max_ts >= 0 and now_ms - seg.max_ts > cfg.retention_ms
            too_big = cfg.retention_bytes >= 0 and total - seg.size >= cfg.retention_bytes
            if not (too_old or too_big):
                break
            total -= seg.size
            self.segments.pop(0).delete()
            n += 1
        if n:
            self._advance_log_start(self.segments[0].base)
        return n

    # -- compaction
    def compact(self, now_ms: int) -> int:
        """The log cleaner for cleanup.policy=compact. In every segment but the active one (and
        only segments older than min.compaction.lag.ms), keep for each key only its newest
        record in the log; drop keyless records and tombstones whose batch is older than
        delete.retention.ms. Offsets are preserved; control batches are kept. Returns the number
        of records removed."""
        lag = self.config.min_compaction_lag_ms
        cleanable = []
        for seg in self.segments[:-1]:
            if lag > 0 and (seg.max_ts < 0 or now_ms - seg.max_ts < lag):
                break
            cleanable.append(seg)
        if not cleanable:
            return 0
        latest: dict[bytes, int] = {}  # key -> offset of its newest record
        for seg in self.segments:
            for h, data in seg.iter_batches():
                if not h.is_control:
                    for r in decode_batch(data):
                        if r.key is not None:
                            latest[r.key] = r.offset
        removed = 0
        horizon = now_ms - self.config.delete_retention_ms
        for seg in cleanable:
            out, changed = [], False
            for h, data in seg.iter_batches():
                if h.is_control:
                    out.append(data)
                    continue
                recs = decode_batch(data)
                keep = [r for r in recs if r.key is not None and latest.get(r.key) == r.offset
                        and not (r.value is None and h.max_timestamp < horizon)]
                removed += len(recs) - len(keep)
                if len(keep) == len(recs):
                    out.append(data)
                else:
                    changed = True
                    if keep:
                        out.append(rebuild_batch(h, keep))
            if changed:
                seg.replace(out)
        return removed

    # -- truncation (followers, tests)
    def truncate_to(self, offset: int) -> None:
        """Drop everything at and after `offset`, at a batch boundary (a batch straddling offset
        goes whole, so the log end offset may end up below offset)."""
        if offset >= self.log_end_offset:
            return
        if offset <= self.log_start_offset:
            for seg in self.segments:
                seg.delete()
            self.segments = [self._new_segment(offset, self.active.created_ms)]
            self.log_start_offset = offset
            self._save_log_start()
            self.epochs.clear()
        else:
            while len(self.segments) > 1 and self.active.base >= offset:
                self.segments.pop().delete()
            self.active.truncate_to(offset)
            if self.active.size == 0 and len(self.segments) > 1 and self.active.base > offset:
                self.segments.pop().delete()
        self.log_end_offset = self.active.next_offset if self.active.size else self.active.base
        self.epochs.truncate_from_end(self.log_end_offset)
        self.producer_state.rebuild(self)
        if self._dirty_from is not None and self._dirty_from >= self.log_end_offset:
            self._dirty_from = None  # what waited for an fsync is gone

    def _save_log_start(self) -> None:
        pass


class MemoryLog(_Log):
    """Batches kept in memory, in segments like FileLog's: for --in-memory brokers and tests."""

    def __init__(self, config: LogConfig, *, now_ms: int = 0):
        super().__init__(config)
        self.epochs = LeaderEpochCache(None)
        self.segments: list[MemorySegment] = [MemorySegment(0, now_ms)]

    def _new_segment(self, base: int, now_ms: int) -> MemorySegment:
        return MemorySegment(base, now_ms)

    def flush(self) -> None:
        self._unflushed = 0

    def close(self) -> None:
        pass

    def delete(self) -> None:
        for seg in self.segments:
            seg.delete()
        self.segments = [MemorySegment(0, 0)]


class FileLog(_Log):
    """A partition directory of Kafka segment files (see the module comment)."""

    def __init__(self, directory: Path, config: LogConfig, *, now_ms: int = 0,
                 topic_id: uuid.UUID | None = None):
        super().__init__(config)
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.epochs = LeaderEpochCache(self.dir / "leader-epoch-checkpoint")
        if topic_id is not None:
            self._write_partition_metadata(topic_id)
        for leftover in self.dir.glob("*.cleaned"):  # an interrupted compaction: the old .log stands
            leftover.unlink()
        bases = sorted(int(p.stem) for p in self.dir.glob("*.log") if p.stem.isdigit() and len(p.stem) == 20)
        self.segments: list[FileSegment] = [FileSegment(self.dir, b, now_ms) for b in bases]
        for seg in self.segments:
            seg._interval = config.index_interval_bytes
        if not self.segments:
            self.segments.append(FileSegment(self.dir, 0, now_ms))
        self._recover()
        self.producer_state.rebuild(self)

    def _recover(self) -> None:
        # older segments: indexes from disk, or rebuilt from the .log
        for i, seg in enumerate(self.segments[:-1]):
            if not seg.load_indexes(self.segments[i + 1].base):
                seg.recover(check_crc=False)
                seg._maybe_time_entry()
                seg.next_offset = self.segments[i + 1].base
                seg.write_indexes()
        # the active segment: every batch re-checked, a torn tail truncated away
        last = self.active
        file_size = last.size
        valid = last.recover(check_crc=True)
        if valid < file_size:
            os.ftruncate(last.fd, valid)
            os.fsync(last.fd)
            last.size = valid
        last.unlink_indexes()  # rewritten on roll/close
        self.log_end_offset = last.next_offset
        self.log_start_offset = self.segments[0].base
        try:
            self.log_start_offset = max(self.log_start_offset, int((self.dir / "log-start-offset").read_text()))
        except (FileNotFoundError, ValueError):
            pass
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self.epochs.truncate_from_end(self.log_end_offset)

    def _new_segment(self, base: int, now_ms: int) -> FileSegment:
        seg = FileSegment(self.dir, base, now_ms)
        seg._interval = self.config.index_interval_bytes
        return seg

    # -- partition.metadata (Kafka's PartitionMetadataFile)
    def _write_partition_metadata(self, topic_id: uuid.UUID) -> None:
        p = self.dir / "partition.metadata"
        text = f"version: 0\ntopic_id: {topic_id_to_string(topic_id)}\n"
        if not p.exists() or p.read_text() != text:
            tmp = p.with_name(p.name + ".tmp")
            tmp.write_text(text)
            os.replace(tmp, p)

    @property
    def topic_id(self) -> uuid.UUID | None:
        try:
            for line in (self.dir / "partition.metadata").read_text().splitlines():
                if line.startswith("topic_id:"):
                    return topic_id_from_string(line.split(":", 1)[1].strip())
        except (FileNotFoundError, ValueError):
            pass
        return None

    def _save_log_start(self) -> None:
        p = self.dir / "log-start-offset"
        tmp = p.with_name(p.name + ".tmp")
        tmp.write_text(str(self.log_start_offset))
        os.replace(tmp, p)

    durable = True

    def flush(self) -> None:
        self.active.flush()
        self._unflushed = 0
        self._dirty_from = None

    def deferred_flush(self) -> tuple[int, Callable[[], None]]:
        # Segments that rolled wrote and fsynced everything in on_roll: only the active one can
        # hold deferred writes or unsynced bytes.
        return self.log_end_offset, self.active.write_deferred

    def close(self) -> None:
        """fsync and write the active segment's indexes; close every file."""
        try:
            if self.active.fd >= 0:
                self.active.on_roll()
        except OSError:
            pass
        for s in self.segments:
            s.close()

    def delete(self) -> None:
        """Close and remove the partition directory."""
        for s in self.segments:
            s.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def topic_id_to_string(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def topic_id_from_string(s: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)))
