"""Kafka's LogSegment: the batches of a log from a base offset up to the next segment's base.

`LogSegment` holds what every segment keeps (size, next offset, largest timestamp) and what the log
(unified_log.py, local_log.py) asks of a segment; its two variants are `FileLogSegment` (Kafka's files,
file_log_segment.py) and `MemoryLogSegment` (memory_log_segment.py, for --in-memory brokers and tests).
`CorruptRecordException` is what a read raises at a batch header no batch has (offset_index_check.py).

The cleaner: `batch_source()` gives a function that reads the segment's batches in another
thread (by path, up to the bytes written when it was called); `prepare(batches)`, also in a
worker, writes a replacement as `.cleaned` files; `replaced_by(prepared)` gives it the segment's file names (renames
only, under the log's lock: LocalLog.replace_segments puts it in the segment's place), and `discard()` drops it.
(`swap_in(prepared)` puts it in place inside the segment object itself: `replace`, for tools and tests.)
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from kafka.errors import CorruptRecordError

from .batch import BatchHeader, iter_batches

if TYPE_CHECKING:
    from .segment_deletion import DeletedFiles

BatchSource = Callable[[], Iterator[tuple[BatchHeader, bytes]]]


class CorruptRecordException(CorruptRecordError):
    """Kafka's CorruptRecordException (CORRUPT_MESSAGE): a batch of the .log whose header no batch has,
    met where a batch must start. `position`: its byte position in the segment."""

    def __init__(self, message: str, position: int):
        super().__init__(message)
        self.position = position


_MAKING = threading.Lock()


class MadeOnce:
    """An attribute made by `make()` on its first use, then kept in the instance's dict, where later reads find it
    without this descriptor (thread-safe: two threads asking at once get the same one).

    The storage objects of a partition make their locks and such on first use: a broker holds 1,000s of logs, most of
    which never need them, and every object the garbage collector tracks lengthens each full collection, which stops
    every thread, the event loop's too (benchmarks/loop_stalls.py)."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        with _MAKING:
            made = obj.__dict__.get(self.name)
            if made is None:
                made = obj.__dict__[self.name] = self.make()
            return made


class StrPath:
    """An attribute read as a Path (or None) and kept as a str in `_<name>`: a PosixPath is 2 objects the garbage
    collector tracks, and a broker holds 1,000s of logs, each with a directory, segment files and indexes (see
    `MadeOnce`)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.attr = "_" + name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        value = getattr(obj, self.attr)
        return None if value is None else Path(value)

    def __set__(self, obj: Any, value: Any) -> None:
        setattr(obj, self.attr, None if value is None else os.fspath(value))


def segment_name(base: int) -> str:
    return f"{base:020d}"


class LogSegment:
    """What the log needs of a segment; the file and memory variants implement it."""
    base: int
    size: int            # bytes
    next_offset: int     # last offset + 1 (base when empty)
    max_ts: int          # largest batch max timestamp, -1 when none
    max_ts_offset: int   # last offset of the first batch carrying max_ts
    first_batch_ts: int  # max timestamp of the first batch (time-based rolling), -1 when none
    created_ms: int
    modified_ms: int     # the last append's time (Kafka's lastModified, which a cleaning keeps: swap_in keeps it)
    roll_jitter_ms = 0   # subtracted from segment.ms for this segment (segment.jitter.ms, drawn by the log)
    retired: list["DeletedFiles"] | tuple = ()  # files a swap_in replaced, for the log to delete later

    def _reset_stats(self) -> None:
        self.max_ts, self.max_ts_offset, self.first_batch_ts = -1, -1, -1

    @property
    def largest_ts(self) -> int:
        """Kafka's LogSegment.largestTimestamp: the largest batch timestamp, else (no batch has one: e.g. a cleaning
        left the segment empty) its last modification's time."""
        return self.max_ts if self.max_ts >= 0 else self.modified_ms

    def _note(self, h: BatchHeader) -> None:
        last = h.base_offset + h.last_offset_delta  # (h.last_offset, and h.next_offset - 1: no property calls)
        if self.size == 0:
            self.first_batch_ts = h.max_timestamp
        if h.max_timestamp > self.max_ts:
            self.max_ts, self.max_ts_offset = h.max_timestamp, last
        self.next_offset = last + 1

    def read_parts(self, offset: int, max_bytes: int, min_one: bool, max_offset: int | None) -> list | None:
        raise NotImplementedError

    def read(self, offset: int, max_bytes: int, min_one: bool, max_offset: int | None) -> bytes | None:
        """Whole batches from the one containing offset; None when no batch reaches offset."""
        parts = self.read_parts(offset, max_bytes, min_one, max_offset)
        return None if parts is None else b"".join(parts)

    def append(self, buf, headers: list[tuple[int, BatchHeader]], index_interval: int, *,
               defer_write: bool = False, sync: bool = False, max_index_bytes: int | None = None,
               owned: bool = False) -> None:
        """`owned`: buf is the log's own (no one else keeps or changes it): a segment may keep it, not a copy."""
        raise NotImplementedError

    def index_full(self, max_index_bytes: int) -> bool:
        """Kafka's offsetIndex.isFull || timeIndex.isFull for indexes of at most `max_index_bytes`."""
        return False

    def preallocate(self, nbytes: int) -> None:
        """A new, empty segment's file set to `nbytes` (file_log_segment.py); the memory segment has none."""

    def retire(self) -> "DeletedFiles | None":
        """The segment leaves the log: a file segment's files are renamed `.deleted` and returned for a
        delayed `delete()` (file_log_segment.py); a memory segment is dropped at once (None)."""
        self.delete()
        return None

    def scratch(self) -> "LogSegment":
        raise NotImplementedError

    closing = False  # rolled, its fsync and index files still to come (finish_roll)

    def on_roll(self) -> None:
        """No longer active: everything on disk now (close, the cleaner's replacements)."""

    def roll(self) -> None:
        """No longer active, on the log's thread: what is slow is left to `finish_roll`."""

    def finish_roll(self) -> None:
        """In a worker thread: the rolled segment's remaining writes, fsync and index files."""

    def write_deferred(self, force_sync: bool = False) -> None:
        pass

    def fail(self) -> None:
        """The log dir failed: no more writes (a file segment drops what is still pending)."""

    def abandon(self, offset: int, delete: bool = False) -> None:
        """After fail(), in a worker thread: cut the batches from `offset` on (all of them and the
        files, with delete) as far as the disk allows, and close the files."""

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    def prepare(self, batches: list[bytes]) -> "LogSegment":
        """A replacement holding `batches` (safe in a worker thread: the live segment is untouched)."""
        s = self.scratch()
        data = b"".join(batches)
        s.append(data, list(iter_batches(data)), self.index_interval)
        s.on_roll()
        return s

    def _adopt(self, prepared: "LogSegment") -> None:
        nxt = self.next_offset
        self.size = prepared.size
        self.max_ts, self.max_ts_offset, self.first_batch_ts = \
            prepared.max_ts, prepared.max_ts_offset, prepared.first_batch_ts
        self.next_offset = max(nxt, prepared.next_offset)  # offsets are kept: the end stays

    def replace(self, batches: list[bytes]) -> None:
        """The cleaner's output replaces the segment's batches (base and next offset kept)."""
        self.swap_in(self.prepare(batches))

    def swap_in(self, prepared: "LogSegment") -> None:
        raise NotImplementedError

    def replaced_by(self, prepared: "LogSegment") -> "DeletedFiles | None":
        """The cleaner's swap-in of this segment (LocalLog.replace_segments: under the log's lock, in a worker
        thread): `prepared` is to take this segment's place in the log, with this one's file names and end offset;
        this one stays readable as it is. -> this one's files, renamed `.deleted`, for the log to delete later
        (a memory segment: None)."""
        prepared.next_offset = max(self.next_offset, prepared.next_offset)  # offsets are kept: the end stays
        prepared.roll_jitter_ms = self.roll_jitter_ms
        prepared.modified_ms = self.modified_ms  # (Kafka's cleaner: cleaned.lastModified = the segment's)
        return None

    def discard(self) -> None:
        """Drop a prepared replacement that will not be swapped in."""
        self.delete()

    def delete(self) -> None:
        raise NotImplementedError
