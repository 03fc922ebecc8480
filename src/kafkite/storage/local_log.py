"""Kafka's LocalLog: a partition's segments -- the list, rolling, and deleting their files.

`LocalLog` is the part of a log (UnifiedLog, unified_log.py, extends it; Kafka's UnifiedLog holds a
LocalLog) that keeps its segments (log_segment.py), each holding the batches from its base offset up
to the next segment's base. The last segment is the active one: appends go there, and it is
rolled (a new segment started at the log end offset) when the next append would take it past
`segment.bytes`, when its offset or time index is full (`segment.index.bytes`), or when
`segment.ms` minus the segment's jitter has passed since its first batch (`roll_if_due` also
rolls a compacted log's active segment from the cleaner's periodic check). The jitter is Kafka's
LogConfig.randomSegmentJitter, drawn when the segment is made: a random value in
[0, min(segment.jitter.ms, segment.ms)), from `rng` (the `random` module unless one is given, so
that a test can fix it). With `preallocate` a new file segment's .log is set to segment.bytes
(file_log_segment.py).

Segment deletion (Kafka's asynchronous deleteSegmentFiles): a segment leaving the log -- retention,
DeleteRecords, truncation -- has its files renamed `.deleted` at once, and so have the files a
compaction replaced; they are removed `file.delete.delay.ms` later (the delay of the log's config
when they were renamed): `files_to_delete(now_ms)`, from a periodic task (services.py), hands the due
ones over as a function for a worker thread. The delay runs from the `now_ms` of the operation that
renamed them, or, for those that take none (compaction's swap, truncation), from the first
`files_to_delete` call that sees them. At close they are left for LogLoader, which removes `.deleted`
files when it opens the directory.

The log's lock (`lock`, Kafka's UnifiedLog.lock): held by whatever changes which segments make the log or renames
their files -- retention, DeleteRecords and a follower's log start removing the oldest segments, truncation, close,
delete, and the cleaner's swap-in (`replace_segments`, Kafka's LocalLog.replaceSegments), which
runs in a worker thread: the renames of a 200 MB log's 8 segments held the event loop ~1 ms. The segment list
itself is changed on the log's thread only, except by `replace_segments`, which puts each replacement in its
segment's place in the list in one item assignment: a read on the log's thread meanwhile uses the old segment or
the new one, each whole (the old one's files renamed `.deleted`, its file still open). A log dir failure's `fail()`
does not wait for it (the event loop would wait for a follower's truncation): it counts a change, so a swap not yet
begun is not made, and its worker closes the files the failed log had.
"""
from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import structlog

from .log_config import LogConfig
from .log_segment import LogSegment, MadeOnce, StrPath

if TYPE_CHECKING:
    from .segment_deletion import DeletedFiles

INT32_MAX = (1 << 31) - 1

log = structlog.get_logger("kafkite.unified_log")


class LocalLog:
    """A partition's segments (see the module comment). `new_segment(base, now_ms)` makes a segment
    of the log's kind (a subclass may define `_new_segment` instead); `directory` is None for a memory log."""
    log_end_offset: int  # where a roll starts the new segment (kept by UnifiedLog)
    version: int         # UnifiedLog's change count: a swap_in's retired files are collected once per version
    # (a broker holds 1,000s of logs: these lists are empty tuples until used, the lock made on first use and the
    # directory kept as a str, for fewer objects the garbage collector tracks: log_segment.MadeOnce)
    _doomed: list[DeletedFiles] | tuple = ()  # renamed .deleted, waiting for file.delete.delay.ms
    _to_rename: list[tuple[LogSegment, int | None]] | tuple = ()  # retired, files not renamed yet (_retire_later)
    _renamed: list[tuple[DeletedFiles, int | None]] | tuple = ()  # renamed by a worker, to schedule
    _retiring = MadeOnce(threading.Lock)  # held while retired segments' files are renamed
    lock = MadeOnce(threading.RLock)  # the log's lock (see the module comment)
    dir = StrPath()  # None for a memory log

    def __init__(self, config: LogConfig, segments: list[LogSegment], *,
                 new_segment: Callable[[int, int], LogSegment] | None = None, directory: Path | None = None,
                 rng: random.Random | None = None) -> None:
        self.config = config
        self.segments = segments
        self.dir = directory
        if new_segment is not None:  # (else the subclass's method)
            self._new_segment = new_segment
        self._rng = rng if rng is not None else random
        self._swept_version = 0  # the version whose segments' retired files were collected
        for seg in segments:
            seg.roll_jitter_ms = self._random_jitter()
        if config.preallocate:
            self.active.preallocate(config.segment_bytes)

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    @property
    def recovery_point(self) -> int:
        """Kafka's recovery point, at segment granularity: every segment below it is on disk whole
        (its .log fsynced, then its index files written): the first segment still rolling, else
        the active one. LogLoader rescans from the segment holding it after a crash."""
        return next((s.base for s in self.segments if s.closing), self.active.base)

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    # -- rolling
    def _should_roll(self, nbytes: int, ts: int, now_ms: int, next_offset: int) -> bool:
        """Kafka's LogSegment.shouldRoll (an empty segment never rolls) before an append of `nbytes` whose largest
        timestamp is `ts`."""
        seg, cfg = self.segments[-1], self.config
        if seg.size == 0:
            return False
        if seg.size + nbytes > cfg.segment_bytes:
            return True
        if next_offset - 1 - seg.base > INT32_MAX:  # relative offsets are int32 in the indexes
            return True
        if seg.index_full(cfg.segment_index_bytes):
            return True
        # (self._waited(ts, now_ms) > self._roll_ms(seg), inline: every append comes here)
        waited = ts - seg.first_batch_ts if seg.first_batch_ts >= 0 else now_ms - seg.created_ms
        return waited > cfg.segment_ms - seg.roll_jitter_ms

    def _roll_ms(self, seg: LogSegment) -> int:
        return self.config.segment_ms - seg.roll_jitter_ms

    def _random_jitter(self) -> int:
        """Kafka's LogConfig.randomSegmentJitter: [0, min(segment.jitter.ms, segment.ms)), 0 without jitter."""
        jitter = min(self.config.segment_jitter_ms, self.config.segment_ms)
        return self._rng.randrange(jitter) if jitter > 0 else 0

    def _make_segment(self, base: int, now_ms: int) -> LogSegment:
        """A new segment of the log's kind: its roll jitter drawn, its file preallocated (preallocate)."""
        self.retire_left()  # (a retired segment of that base is renamed first: its names are the new one's)
        seg = self._new_segment(base, now_ms)
        seg.roll_jitter_ms = self._random_jitter()
        if self.config.preallocate:
            seg.preallocate(self.config.segment_bytes)
        return seg

    def _waited(self, ts: int, now_ms: int) -> int:
        """Kafka's LogSegment.shouldRoll: time since the first batch's timestamp (record time), or
        since the segment was created when batches carry no timestamp."""
        seg = self.active
        return ts - seg.first_batch_ts if seg.first_batch_ts >= 0 else now_ms - seg.created_ms

    def roll_if_due(self, now_ms: int) -> bool:
        """Roll a non-empty active segment older than segment.ms (the cleaner's periodic check,
        so a compacted topic's records become cleanable without waiting for an append)."""
        if self.active.size == 0 or self._waited(now_ms, now_ms) <= self._roll_ms(self.active):
            return False
        self._roll(now_ms)
        return True

    def _roll(self, now_ms: int) -> None:
        self.active.roll()  # its fsync and index files (and a preallocated file's trim): finish_roll
        self.segments.append(self._make_segment(self.log_end_offset, now_ms))

    # -- deleting segment files (see the module comment)
    def _retire(self, seg: LogSegment, now_ms: int | None = None) -> None:
        """The segment left the log: its files renamed `.deleted` now, removed after file.delete.delay.ms."""
        files = seg.retire()
        if files is not None:
            self._schedule(files, now_ms)

    def _retire_later(self, seg: LogSegment, now_ms: int | None) -> None:
        """As `_retire`, but a file segment's renames are left for `renames()` (retention: ~0.2 ms a segment, 100
        segments would hold the event loop ~20 ms); the segment has left the log already."""
        if self._dir is None:
            self._retire(seg, now_ms)
        else:
            with self._retiring:
                if not self._to_rename:
                    self._to_rename = []
                self._to_rename.append((seg, now_ms))

    def renames(self) -> Callable[[], None] | None:
        """The renames to `.deleted` that `_retire_later` left, as a function for a worker thread (None: none);
        the caller then schedules their deletion on the log's thread (`schedule_renamed`). Whatever makes a
        segment, closes or deletes the log does what is left of them first (`retire_left`)."""
        return self._rename_left if self._to_rename else None

    def _rename_left(self) -> None:
        with self._retiring:  # a second caller meanwhile waits: the names are free once it returns
            left, self._to_rename = self._to_rename, ()
            renamed = []
            for seg, now_ms in left:
                files = seg.retire()
                if files is not None:
                    renamed.append((files, now_ms))
            if renamed:
                self._renamed = [*self._renamed, *renamed]

    def schedule_renamed(self) -> None:
        """Schedule the deletion of the files renamed by `renames()`' function (file.delete.delay.ms)."""
        with self._retiring:
            done, self._renamed = self._renamed, ()
        for files, now_ms in done:
            self._schedule(files, now_ms)

    def retire_left(self) -> None:
        """Rename the files of the segments `_retire_later` left, on the caller's thread, and schedule them."""
        if self._to_rename or self._renamed:
            self._rename_left()
            self.schedule_renamed()

    def replace_segments(self, replacements: list[tuple[LogSegment, LogSegment]], version: int) -> bool:
        """The cleaner's swap-in (Kafka's LocalLog.replaceSegments), safe in a worker thread: under the log's lock,
        unless the log changed since `version` or a segment to replace left it (then False, nothing done), each
        prepared segment takes its live segment's file names and its place in the list; the old segments' files,
        renamed `.deleted`, wait for `schedule_renamed()` on the log's thread. True when replaced."""
        with self.lock:
            if self.version != version:
                return False
            where = {id(seg): i for i, seg in enumerate(self.segments)}
            if any(id(old) not in where for old, _ in replacements):
                return False
            renamed = []
            for old, prepared in replacements:
                files = old.replaced_by(prepared)
                self.segments[where[id(old)]] = prepared  # (one item assignment: see the module comment)
                if files is not None:
                    renamed.append((files, None))
            if replacements:
                self.version += 1
            if renamed:
                with self._retiring:
                    self._renamed = [*self._renamed, *renamed]
            return True

    def _schedule(self, files: DeletedFiles, now_ms: int | None) -> None:
        for older in self._doomed:  # a name the new files took over (the same base offset): theirs now
            if older.base == files.base:
                older.paths = [p for p in older.paths if p not in files.paths]
        if now_ms is not None:
            files.due_ms = now_ms + self.config.file_delete_delay_ms
        if not self._doomed:
            self._doomed = []
        self._doomed.append(files)

    def _collect_retired(self, now_ms: int | None) -> None:
        """The files compaction's swap_in set aside (each segment's `retired`), once per log version."""
        if self._swept_version == self.version:
            return
        self._swept_version = self.version
        for seg in self.segments:
            if seg.retired:
                retired, seg.retired = seg.retired, ()
                for files in retired:
                    self._schedule(files, now_ms)

    @property
    def deletions_pending(self) -> bool:
        """Whether `files_to_delete` may have anything to do: cheap, for the periodic check to skip the 1,000s of logs
        that have not (a call each cost the event loop ~1.6 µs a log, 10 times a second)."""
        return bool(self._doomed) or self._swept_version != self.version

    @property
    def pending_deletions(self) -> list[DeletedFiles]:
        """The `.deleted` files still waiting for file.delete.delay.ms."""
        self._collect_retired(None)
        return list(self._doomed)

    def files_to_delete(self, now_ms: int) -> Callable[[], None] | None:
        """The periodic check (Kafka schedules each deletion file.delete.delay.ms ahead): the `.deleted`
        files whose delay has passed at `now_ms` leave the log's list, and `run()` -- for a worker thread,
        never the event loop: unlinking a large file takes time -- closes and removes them; None when
        none is due. Files renamed by an operation that took no `now_ms` start their delay here."""
        self._collect_retired(now_ms)
        if not self._doomed:
            return None
        due = []
        for files in self._doomed:
            if files.due_ms is None:
                files.due_ms = now_ms + self.config.file_delete_delay_ms
            if files.due_ms <= now_ms:
                due.append(files)
        if not due:
            return None
        self._doomed = [f for f in self._doomed if f not in due] or ()
        where = self._dir if self._dir is not None else "memory"

        def run() -> None:
            log.info("log.deleting_segment_files", log=where, files=[p.name for f in due for p in f.paths],
                     message=f"Deleting segment files {', '.join(p.name for f in due for p in f.paths)}")
            for files in due:
                files.delete()
        return run

    def _close_doomed(self) -> None:
        """Close what keeps the `.deleted` files open; the files stay (LogLoader removes them at the next start)."""
        self.retire_left()
        self._collect_retired(None)
        doomed, self._doomed = self._doomed, ()
        for files in doomed:
            try:
                files.close()
            except OSError:
                pass
