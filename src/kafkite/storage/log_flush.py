"""A log's durability (UnifiedLog's, unified_log.py, which extends LogFlush): fsyncs and deferred writes.

Durability: the active .log is fsynced once `flush.messages` records are unflushed (1 by
default here: an acknowledged write is on disk), or on an append `flush.ms` after the last
flush; `scheduled_flush` is Kafka's flush scheduler's check, for a periodic task. A rolled
segment's fsync and index files are left to the next flush run (deferred or scheduled), as
Kafka leaves them to its scheduler, so a roll does not wait for the disk. An append
may leave the write -- and that fsync when one is due -- to its caller (`defer_flush=True`:
`deferred_flush()` gives a function to run in a worker thread that writes the pending bytes
and fsyncs if asked to, `mark_flushed()` records it done); until then the appended records stay
above the high watermark, so no consumer reads a record that a crash could still take away,
and reads stop where the file's written bytes end. One run covers every append made before it
started (group commit).

A failed write or fsync leaves the records of that append, and every one after the first whose
deferred write had not completed, unacknowledged; `fail()` (the log dir went offline: Kafka's
LogManager.handleLogDirFailure closing the log's handlers) drops them, unwritten, and gives a
function for a worker thread that cuts them from the files and closes them, so that neither a
later flush nor a restart brings them back.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from .local_log import LocalLog

if TYPE_CHECKING:
    from .leader_epoch_file_cache import LeaderEpochFileCache


class LogFlush(LocalLog):
    """The flushing of a log's appends (see the module comment); UnifiedLog appends and keeps the counts."""
    epochs: LeaderEpochFileCache  # (UnifiedLog's: its deferred checkpoint write goes before the records)
    _unflushed: int  # records appended since the last flush
    _last_flush_ms: int
    _dirty_from: int | None  # first offset whose deferred write or fsync has not happened

    def flush(self, now_ms: int | None = None) -> None:
        """Write and fsync everything appended, on this thread."""
        self._flush_run(False)()
        self.active.flush()
        self._unflushed = 0
        self._dirty_from = None
        if now_ms is not None:
            self._last_flush_ms = now_ms

    def flush_pending(self, offset: int) -> bool:
        """True while the record at `offset` waits for a deferred fsync."""
        return self._dirty_from is not None and self._dirty_from <= offset

    def deferred_flush(self) -> tuple[int, Callable[[], None]]:
        """(target, run): `run()` -- safe to call in another thread -- makes every record below
        `target` durable; then call `mark_flushed(target)` on the log's own thread. It finishes
        the rolls still under way (LogSegment.finish_roll), then writes the active segment's
        deferred appends (and fsyncs when one of them asked for it)."""
        return self.log_end_offset, self._flush_run(False)

    def _flush_run(self, force_sync: bool) -> Callable[[], None]:
        closing = [s for s in self.segments[:-1] if s.closing]
        active = self.active
        epochs = self.epochs.take_pending()  # (written before the records: see leader_epoch_file_cache.py)
        snapshots = self._snapshot_writes()  # (a file log's producer snapshots taken at rolls: after their segments)

        def run() -> None:
            if epochs is not None:
                epochs()
            for seg in closing:
                seg.finish_roll()
            if snapshots is not None and not any(s.closing for s in closing):  # (a failed segment's stays closing)
                snapshots()
            active.write_deferred(force_sync)
        return run

    def _snapshot_writes(self) -> Callable[[], None] | None:
        """The producer snapshots the rolls took, to write once the rolled segments are on disk (UnifiedLog's)."""
        return None

    def scheduled_flush(self, now_ms: int) -> tuple[int, Callable[[], None]] | None:
        """Kafka's flush scheduler: when records are unflushed and flush.ms has passed since the
        last flush (the run then fsyncs), or a roll is still to be finished, (target, run) as
        deferred_flush's; else None."""
        due = self._unflushed > 0 and now_ms - self._last_flush_ms >= self.config.flush_ms
        if not due and not any(s.closing for s in self.segments[:-1]):
            return None
        if due:
            self._unflushed, self._last_flush_ms = 0, now_ms
        return self.log_end_offset, self._flush_run(due)

    def fail(self) -> Callable[[], None]:
        """The log dir failed: the log takes no more writes, and the appends not acknowledged (from the
        first record whose deferred write or fsync had not completed) are dropped, unwritten. Returns
        `run()` for a worker thread: cuts them from the files, as far as the disk allows, and closes
        the files (see the module comment). A cleaning under way is not swapped in."""
        self.version += 1
        keep = self.log_end_offset if self._dirty_from is None else self._dirty_from
        segments = list(self.segments)
        for s in segments:
            s.fail()
        self._collect_retired(None)
        doomed, self._doomed = self._doomed, ()

        def run() -> None:
            # under the log's lock: a follower's truncation in another worker ends first (its descriptors are
            # closed after it), and a cleaner's swap-in that was past its version check when fail() ran has put
            # its segments in: they are failed and closed too
            with self.lock:
                known = {id(s) for s in segments}
                live = list(self.segments)
                for s in live:
                    if id(s) not in known:
                        s.fail()
                now = {id(s) for s in live}
                replaced = [s for s in segments if id(s) not in now]  # swapped out: closed, their files kept
                self._abandon(live, keep, doomed, replaced)
        return run

    @staticmethod
    def _abandon(segments, keep: int, doomed, replaced) -> None:
        for i, s in enumerate(segments):
            try:
                s.abandon(keep, delete=i > 0 and s.base >= keep)
            except OSError:
                pass  # the disk failed: what it kept, recovery checks at the next start
        for s in replaced:
            try:
                s.close()
            except OSError:
                pass
        for files in doomed:  # left for the next start's LogLoader
            try:
                files.close()
            except OSError:
                pass

    def mark_flushed(self, target: int) -> None:
        if self._dirty_from is None:
            return
        if target >= self.log_end_offset:
            self._dirty_from = None
        elif target > self._dirty_from:
            self._dirty_from = target
