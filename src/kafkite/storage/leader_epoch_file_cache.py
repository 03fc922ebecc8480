"""Kafka's LeaderEpochFileCache: (leader epoch, start offset) pairs in increasing order,
persisted as the partition's `leader-epoch-checkpoint` (Kafka's text checkpoint: version 0,
the entry count, then `epoch startOffset` lines) when a path is given.

An append whose write the caller leaves to a worker thread (UnifiedLog's deferred flush) defers the checkpoint's
write too (`assign(..., defer=True)`): `take_pending()` hands the write of the entries as they are to that worker,
which runs it before the records' own write (so the file never lacks the epoch of a record on disk: one it names
for records not written is cut at the next load, as Kafka's truncateFromEnd). A newer write (inline, or another
worker's) is never overwritten by an older one.

The log start's move (DeleteRecords, retention) defers its write the same way (`truncate_from_start(..., defer=True)`,
Kafka's truncateFromStartAsyncFlush): `pending_write()` hands it to the worker that renames the deleted segments,
leaving it pending for the next flush's worker too (whose records must not reach the disk before the epochs they
need). A crash before it is written leaves epochs below the log start, which the next load cuts (Kafka's LogLoader:
"the earliest leader epoch may not be flushed during a hard failure")."""
from __future__ import annotations

import bisect
import threading
from pathlib import Path
from typing import Callable

from .checkpoint_file import read_checkpoint, write_checkpoint
from .log_segment import MadeOnce, StrPath


class LeaderEpochFileCache:
    _lock = MadeOnce(threading.Lock)  # made on first write
    path = StrPath()  # (kept as a str)

    def __init__(self, path: Path | None):
        self.path = path
        rows = read_checkpoint(path) if path is not None else None
        try:
            self.entries: list[tuple[int, int]] = [(int(a), int(b)) for a, b in rows or []]
        except ValueError:  # unreadable: start empty, as Kafka rebuilds it from the log
            self.entries = []
        self._version = 0  # of the entries (each change); the newest written is _written
        self._written = 0
        self._pending = False  # a change whose write is deferred (take_pending)

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else -1

    def assign(self, epoch: int, start_offset: int, *, defer: bool = False) -> None:
        """Note that `epoch` starts at `start_offset` (only a newer epoch is recorded); `defer`: the file is written
        by the worker the caller runs `take_pending()` in."""
        if epoch < 0 or (self.entries and (epoch <= self.entries[-1][0] or start_offset < self.entries[-1][1])):
            return
        self.entries.append((epoch, start_offset))
        if defer and self._path is not None:
            self._version += 1
            self._pending = True
        else:
            self._save()

    def take_pending(self) -> Callable[[], None] | None:
        """The deferred write of the entries as they are now, for a worker thread (None: nothing deferred)."""
        if not self._pending:
            return None
        self._pending = False
        entries, version = list(self.entries), self._version
        return lambda: self._write(entries, version)

    def pending_write(self) -> Callable[[], None] | None:
        """As `take_pending`, but the change stays pending: the next `take_pending` (a flush's worker, which writes
        records after it) writes it too unless written by then."""
        if not self._pending:
            return None
        entries, version = list(self.entries), self._version
        return lambda: self._write(entries, version)

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs starting at or after end_offset (log truncated to end_offset)."""
        kept = [e for e in self.entries if e[1] < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._save()

    def truncate_from_start(self, start_offset: int, *, defer: bool = False) -> None:
        """Log start moved to start_offset: the epoch covering it now starts there. `defer`: the file is written by
        the worker the caller runs `pending_write()` (or a flush's `take_pending()`) in."""
        i = bisect.bisect_right([o for _, o in self.entries], start_offset) - 1
        if i < 0:
            return
        kept = [(self.entries[i][0], max(self.entries[i][1], start_offset))] + self.entries[i + 1:]
        if kept != self.entries:
            self.entries = kept
            if defer and self._path is not None:
                self._version += 1
                self._pending = True
            else:
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
        if self._path is not None:
            self._version += 1
            self._pending = False
            self._write(list(self.entries), self._version)

    def _write(self, entries: list[tuple[int, int]], version: int) -> None:
        with self._lock:
            if version > self._written:
                write_checkpoint(self.path, entries)
                self._written = version


LeaderEpochCache = LeaderEpochFileCache  # older name
