"""A file segment's files leaving the log: SegmentDeletion, a part of FileLogSegment (file_log_segment.py).

Deletion (Kafka's LocalLog.deleteSegmentFiles with asyncDelete): a segment that leaves the log --
retention, DeleteRecords, truncation -- is `retire()`d: its files renamed with the `.deleted`
suffix at once, the segment kept open (a read that still holds it goes on working), and a
`DeletedFiles` returned, which the log removes `file.delete.delay.ms` later, in a worker thread
(LocalLog.files_to_delete, local_log.py). A compaction's `swap_in` keeps the replaced files the same
way: the old .log is hard-linked as `.log.deleted` before the cleaned one is renamed over it (so a
crash in between leaves the old segment whole, never no segment), its index files renamed `.deleted`;
they wait in `retired` for the log to collect them. LogLoader removes the `.deleted` files a crash left
behind.
"""
from __future__ import annotations

import errno
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from .offset_index import OffsetIndex
from .producer_snapshot import retire_snapshot
from .time_index import TimeIndex

if TYPE_CHECKING:
    from .file_log_segment import FileLogSegment

DELETED_SUFFIX = ".deleted"  # Kafka's LogFileUtils.DELETED_FILE_SUFFIX


def deleted_path(path: Path) -> Path:
    return path if path.name.endswith(DELETED_SUFFIX) else path.with_name(path.name + DELETED_SUFFIX)


class DeletedFiles:
    """A segment's files renamed `.deleted` (see the module comment), waiting for file.delete.delay.ms:
    `delete()`, in a worker thread, closes what kept them open and removes them; `close()` (shutdown) only
    closes, the files staying for LogLoader to remove at the next start. `due_ms`: when the log may
    delete them (None until the log knows the time)."""

    def __init__(self, base: int, paths: list[Path], closer: Callable[[], None] | None = None):
        if not all(p.name.endswith(DELETED_SUFFIX) for p in paths):  # never a live file
            raise ValueError(f"not files renamed {DELETED_SUFFIX}: {paths}")
        self.base, self.paths, self._closer = base, list(paths), closer
        self.due_ms: int | None = None

    def close(self) -> None:
        closer, self._closer = self._closer, None
        if closer is not None:
            closer()

    def delete(self) -> None:
        self.close()
        for p in self.paths:
            p.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"DeletedFiles({[p.name for p in self.paths]}, due_ms={self.due_ms})"


def _keep_mtime(fd: int, modified_ms: int) -> None:
    """A cleaned segment's file keeps the last modification time of the one it replaces (Kafka's cleaner sets it):
    retention.ms of a segment without timestamps counts from there after a restart too."""
    os.utime(fd, ns=(os.fstat(fd).st_atime_ns, modified_ms * 1_000_000))  # (its access time kept: no clock read)


class SegmentDeletion:
    """FileLogSegment's `.deleted` renames (see the module comment). It uses the segment's files and state."""
    base: int
    fd: int
    log_path: Path
    txn_index_path: Path
    _log_path: str
    modified_ms: int
    bytes_since_index: int
    offset_index: OffsetIndex
    time_index: TimeIndex
    _index_from_file: bool
    _preallocated: bool
    _writer: threading.Lock
    _io: threading.Condition
    _index_lock: threading.Lock

    def retire(self) -> DeletedFiles:
        """Rename the segment's files `.deleted` (Kafka's changeFileSuffixes("", ".deleted")), the .log first, its
        producer snapshot (producer_snapshot.py) last;
        the file stays open for a read still under way. Pending deferred writes are dropped (the records go
        with the segment) and a roll's finish under way ends first (it writes the index files by name)."""
        with self._writer:
            with self._io:
                self._pending, self._pending_sync = (), False
            self.closing = False  # no finish_roll for a segment being deleted
            with self._index_lock:
                paths = []
                for holder, attr in ((self, "log_path"), (self.offset_index, "path"), (self.time_index, "path"),
                                     (self, "txn_index_path")):
                    old = getattr(holder, attr)
                    new = deleted_path(old)
                    try:
                        os.replace(old, new)
                        paths.append(new)
                    except FileNotFoundError:  # the active segment's indexes are in memory; most have no .txnindex
                        pass
                    setattr(holder, attr, new)
                paths.extend(retire_snapshot(self._log_path, DELETED_SUFFIX))  # (its producer snapshot)
        return DeletedFiles(self.base, paths, self.close)

    def swap_in(self, prepared: "FileLogSegment") -> None:
        """Put a prepared replacement in place: the old indexes renamed `.deleted` first, the old .log
        hard-linked as `.log.deleted`, then each new file renamed over the old one, so a crash in between
        leaves a .log whose indexes are rebuilt on open. The old files wait in `retired` (the old .log kept
        open) for the log to delete them after file.delete.delay.ms (see the module comment)."""
        self.complete_writes()
        with self._index_lock:  # an index rebuild under way is not put in place after this
            aside = []
            for idx in (self.offset_index, self.time_index):
                try:
                    os.replace(idx.path, deleted_path(idx.path))
                    aside.append(deleted_path(idx.path))
                except FileNotFoundError:
                    pass
            old_log = deleted_path(self.log_path)
            try:
                old_log.unlink(missing_ok=True)  # an earlier compaction's, still waiting: its fd keeps it
                os.link(self.log_path, old_log)
                aside.append(old_log)
            except OSError as exc:  # no hard links on this filesystem: the old .log goes at once
                if exc.errno == errno.EIO:
                    raise
            old_fd = self.fd
            _keep_mtime(prepared.fd, self.modified_ms)
            os.replace(prepared.log_path, self.log_path)
            for mine, theirs in ((self.offset_index, prepared.offset_index), (self.time_index, prepared.time_index)):
                os.replace(theirs.path, mine.path)
                theirs.path = mine.path
            self.fd, prepared.fd = prepared.fd, -1
            self.offset_index, self.time_index = prepared.offset_index, prepared.time_index
            self._index_from_file = False
            self._preallocated = False
        self.retired = [*self.retired, DeletedFiles(self.base, aside, lambda: os.close(old_fd))]  # (a tuple until then)
        self.bytes_since_index = prepared.bytes_since_index
        self._adopt(prepared)

    def replaced_by(self, prepared: "FileLogSegment") -> DeletedFiles:
        """The cleaner's swap-in (log_segment.py), its files in the order of `swap_in`: this segment's indexes renamed
        `.deleted`, its .log hard-linked as `.log.deleted`, then each prepared file renamed over the live name, so
        that a crash in between leaves a .log whose indexes are rebuilt on open. This segment keeps its file open
        and its in-memory indexes (a read holding it goes on working) under its `.deleted` names, where a rebuild of
        its index under way puts the index, never over the new one."""
        super().replaced_by(prepared)
        self.complete_writes()
        live_log, live_indexes = self.log_path, (self.offset_index.path, self.time_index.path)
        with self._index_lock:
            aside = []
            for idx in (self.offset_index, self.time_index):
                gone = deleted_path(idx.path)
                try:
                    os.replace(idx.path, gone)
                    aside.append(gone)
                except FileNotFoundError:
                    pass
                idx.path = gone
            old_log = deleted_path(live_log)
            try:
                old_log.unlink(missing_ok=True)  # an earlier compaction's, still waiting: its fd keeps it
                os.link(live_log, old_log)
                aside.append(old_log)
                self.log_path = old_log
            except OSError as exc:  # no hard links on this filesystem: the old .log goes at once
                if exc.errno == errno.EIO:
                    raise
            self._index_from_file = False
            _keep_mtime(prepared.fd, self.modified_ms)
            os.replace(prepared.log_path, live_log)
            prepared.log_path = live_log
            for live, theirs in zip(live_indexes, (prepared.offset_index, prepared.time_index)):
                os.replace(theirs.path, live)
                theirs.path = live
            prepared.txn_index_path = self.txn_index_path  # (the live .txnindex, if any, stays: the same base)
        return DeletedFiles(self.base, aside, self.close)
