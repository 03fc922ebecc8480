"""Kafka's LogCleaner (with its LogCleanerManager): compaction of cleanup.policy=compact logs.

A compacted log has a clean head (already compacted, below the log's first dirty offset) and a
dirty tail. Kafka's rules, sans-IO (callers pass now_ms; nothing here touches trio):

- Cleanable range: closed (non-active, roll finished) segments from the log start, up to the
  first uncleanable offset: the active segment's base, the first segment holding a record newer
  than `min.compaction.lag.ms`, and the high watermark, whichever is first.
- Scheduling (`grab_filthiest_log`): the log with the highest dirty ratio (dirty bytes / bytes
  of the cleanable range) among those at or above `min.cleanable.dirty.ratio`, or whose first
  dirty segment holds a record older than `max.compaction.lag.ms` (then regardless of ratio).
  The same check rolls a compacted log's active segment older than segment.ms, so its records
  become cleanable without waiting for the next append.
- Cleaning (`CleanJob.run`, in a worker thread: it reads segment files itself, or a snapshot of
  memory segments, and never touches the live log): an offset map (key hash -> latest offset,
  bounded by `log.cleaner.dedupe.buffer.size`: when full, this cleaning's dirty section ends
  there) is built over the dirty records below the high watermark -- unlike Kafka, including the
  active segment's, so an older version is dropped as soon as a newer one is committed; then every
  cleanable segment is rewritten keeping, per key, only records no later record supersedes,
  dropping keyless records and tombstones whose batch is older than `delete.retention.ms`.
  Offsets are preserved (a batch keeps its records' offsets; a batch left empty is dropped); the
  log end offset never moves. Control batches and batches that cannot be decoded (logged as a
  warning) are kept as they are. Transactions (Kafka's cleaner with its aborted-transaction index):
  the cleanable range and the map end at the last stable offset, not the high watermark, so an
  open transaction's records stay as they are; the batches of aborted transactions are left out of
  the map and removed; a commit or abort marker is removed once no batch of its transaction is left (compacted away,
  or aborted) and it is older than `delete.retention.ms`, as Kafka's cleaner removes markers with the tombstones'
  retention (Kafka counts it from the first cleaning that found the marker removable, here from the marker's own
  timestamp, as for tombstones). A changed segment's replacement is prepared as `.cleaned`
  files (file_log_segment.py).
- Swap-in: only if the log did not change underneath (its `version`: retention, DeleteRecords,
  truncation); else the result is discarded. The first dirty offset then moves to the end of the
  cleaned range (or of the map). Its renames (~0.13 ms a segment) run in a worker thread
  (`swap_work`, the log's `replace_segments` under the log's lock, which retention, DeleteRecords, truncation
  and closing take too, as Kafka's), then `swapped` on the log's own thread schedules the old files' deletion
  and moves the checkpoint; `swap_in` does both on the caller's thread.

Each log's first dirty offset is kept in memory and, for file logs, in Kafka's
`cleaner-offset-checkpoint` file of its log directory (version 0, the entry count, then
`topic partition offset` lines; entries of partitions whose directory is gone are dropped when
it is rewritten), so a restarted broker does not clean the same bytes again. The file is
replaced atomically but not fsynced, by a worker thread (`checkpoint_writes`): a lost checkpoint only means one
more cleaning.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable
from weakref import WeakKeyDictionary

import structlog

from .batch import decode_batch, iter_records, rebuild_batch
from .checkpoint_file import read_offsets, write_checkpoint
from .log_segment import BatchSource, LogSegment

log = structlog.get_logger("kafkite.log_cleaner")

# Memory of one offset map entry (16-byte MD5 of the key -> offset) in a Python dict, measured:
# Kafka's SkimpyOffsetMap needs 24 bytes an entry, here a dict needs about 140.
MAP_ENTRY_BYTES = 144
DEDUPE_BUFFER_SIZE = 134217728  # log.cleaner.dedupe.buffer.size, Kafka's default


CHECKPOINT_FILE = "cleaner-offset-checkpoint"


def _key_hash(key: bytes) -> bytes:
    return hashlib.md5(key).digest()


def _no_pace() -> None:
    """CleanJob's pace by default: nothing (a cleaning on the caller's own thread, clean_now)."""


def topic_partition(lg) -> tuple[str, int] | None:
    """A file log's (topic, partition) from its directory name `<topic>-<partition>`, as Kafka
    parses it; None for a memory log or another name."""
    if lg.dir is None:
        return None
    topic, _, partition = lg.dir.name.rpartition("-")
    return (topic, int(partition)) if topic and partition.isdigit() else None


def read_cleaner_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """(topic, partition) -> first dirty offset; empty when missing or unreadable."""
    return read_offsets(path)


@dataclass
class CleanResult:
    replacements: list[tuple[LogSegment, LogSegment]]  # (live segment, prepared replacement)
    dirty_end: int = 0  # the map covered the dirty records below this: the next first dirty offset
    records_removed: int = 0
    batches_kept_undecodable: int = 0
    markers_removed: int = 0


@dataclass
class CleanJob:
    """One log's cleaning (Kafka's LogToClean): what `run` needs, captured on the log's thread."""
    log: object
    name: str
    version: int
    first_dirty: int
    first_uncleanable: int
    dirty_ratio: float
    map_end: int                                   # records at or above are not in the offset map
    map_sources: list[BatchSource]                 # segments holding dirty records
    to_clean: list[tuple[LogSegment, BatchSource]] = field(default_factory=list)
    delete_horizon_ms: int = 0                     # tombstones in batches older than this go
    max_map_entries: int = DEDUPE_BUFFER_SIZE // MAP_ENTRY_BYTES
    aborted: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # producer -> (first, marker offset)
    pace: Callable[[], None] = _no_pace            # called per record read (LogCleaner's `pace`)

    def is_aborted(self, h) -> bool:
        """A data batch of an aborted transaction."""
        if not h.is_transactional or h.is_control:
            return False
        return any(first <= h.base_offset <= last for first, last in self.aborted.get(h.producer_id, ()))

    def run(self) -> CleanResult:
        """The cleaning itself: safe in a worker thread (see the module comment). On an error the
        replacements prepared so far are dropped."""
        result = CleanResult([], dirty_end=self.first_uncleanable)
        try:
            self._clean(self._offset_map(result), result)
        except BaseException:
            LogCleaner.discard(result)
            raise
        return result

    def _offset_map(self, result: CleanResult) -> dict[bytes, int]:
        """Kafka's OffsetMap: the hash of each key of the dirty records below the high watermark ->
        its latest offset, at most max_map_entries keys (the dedupe buffer): when full, the map
        ends before the batch that does not fit, and so does this cleaning's dirty section."""
        latest: dict[bytes, int] = {}
        for source in self.map_sources:
            for h, data in source():
                if h.is_control or h.last_offset < self.first_dirty or h.base_offset >= self.map_end \
                        or self.is_aborted(h):
                    continue
                if latest and len(latest) + h.record_count > self.max_map_entries:
                    self.map_end = h.base_offset
                    result.dirty_end = min(result.dirty_end, h.base_offset)
                    return latest
                hashes, offsets = [], []  # (the batch's keys go in once it decoded whole)
                try:
                    for r in iter_records(data):
                        self.pace()
                        if r.key is not None and self.first_dirty <= r.offset < self.map_end:
                            hashes.append(_key_hash(r.key))
                            offsets.append(r.offset)
                except Exception as exc:
                    self._undecodable(h, exc)
                    continue
                latest.update(zip(hashes, offsets))
        return latest

    def _clean(self, latest: dict[bytes, int], result: CleanResult) -> None:
        # producer id -> whether a data batch of its current transaction is kept (Kafka's CleanedTransactionMetadata):
        # a marker may go only once no batch of its transaction is left, so no transaction ever looks open again
        txn_data_kept: dict[int, bool] = {}
        for seg, source in self.to_clean:
            out, changed = [], False
            for h, data in source():
                if self.is_aborted(h):
                    result.records_removed += h.record_count
                    changed = True
                    continue
                if h.is_control:
                    # Kafka's rule (the tombstones' delete.retention.ms, piggy-backed): a commit or abort marker
                    # whose transaction has no batch left goes once it is older than delete.retention.ms
                    if not txn_data_kept.pop(h.producer_id, False) and 0 <= h.max_timestamp < self.delete_horizon_ms:
                        result.records_removed += h.record_count
                        result.markers_removed += 1
                        changed = True
                    else:
                        out.append(data)
                    continue
                # which records stay, decided from records not kept (none outlives its turn: a cleaning made
                # millions of objects that lived through a collection or two, and the full collections they brought
                # on stopped every thread, the event loop's too, 100-400 ms each); decoded again as Records only
                # to rebuild a batch that keeps some
                try:
                    kept = []
                    for r in iter_records(data):
                        self.pace()
                        kept.append(r.key is not None and latest.get(_key_hash(r.key), r.offset) <= r.offset
                                    and not (r.value is None and h.max_timestamp < self.delete_horizon_ms))
                except Exception as exc:  # a batch we cannot read is kept as it is
                    self._undecodable(h, exc)
                    result.batches_kept_undecodable += 1
                    out.append(data)
                    self._kept(h, txn_data_kept)
                    continue
                n = sum(kept)
                result.records_removed += len(kept) - n
                if n == len(kept):
                    out.append(data)
                else:
                    changed = True
                    if n:
                        recs = decode_batch(data, self.pace)
                        out.append(rebuild_batch(h, [r for r, k in zip(recs, kept) if k]))
                if n:
                    self._kept(h, txn_data_kept)
            if changed:
                result.replacements.append((seg, seg.prepare(out)))

    @staticmethod
    def _kept(h, txn_data_kept: dict[int, bool]) -> None:
        if h.is_transactional and h.producer_id >= 0:
            txn_data_kept[h.producer_id] = True

    def _undecodable(self, h, exc: Exception) -> None:
        log.warning("log_cleaner.undecodable_batch", log=self.name, base_offset=h.base_offset,
                    last_offset=h.last_offset, error=repr(exc))


class LogCleaner:
    """The cleaner's state across logs: each log's first dirty offset (see the module comment)."""

    def __init__(self, dedupe_buffer_size: int = DEDUPE_BUFFER_SIZE,
                 pace: Callable[[], Callable[[], None]] | None = None) -> None:
        # `pace()` makes what each job planned calls once per record it reads: the broker's gives the GIL up now and
        # then (kafkite.gil_pacing.Pacer), for a job run in a worker thread beside the event loop
        self._pace = pace
        self.first_dirty: WeakKeyDictionary = WeakKeyDictionary()
        self.max_map_entries = max(1, dedupe_buffer_size // MAP_ENTRY_BYTES)
        self._checkpoints: dict[Path, dict[tuple[str, int], int]] = {}  # log dir -> its checkpoint file
        self._unwritten: set[Path] = set()  # log dirs whose checkpoint changed since checkpoint_writes

    def checkpoint_reads(self, logs: Iterable) -> Callable[[], dict] | None:
        """The cleaner-offset-checkpoint files of these logs' directories not read yet, as a function reading them
        (for a worker thread: the broker's cleaner reads none on the event loop) whose result goes to `loaded`;
        None when every one is read."""
        read = {os.fspath(d) for d in self._checkpoints}  # (strings: a Path made per log costs ~10 µs)
        dirs = {os.path.dirname(lg._dir) for lg in logs if lg._dir is not None} - read  # (`lg.dir`'s str)
        return (lambda: {Path(d): read_cleaner_checkpoint(Path(d) / CHECKPOINT_FILE) for d in dirs}) if dirs else None

    def loaded(self, read: dict) -> None:
        for log_dir, entries in read.items():
            self._checkpoints.setdefault(log_dir, entries)

    def _dir_checkpoints(self, log_dir: Path) -> dict[tuple[str, int], int]:
        if log_dir not in self._checkpoints:  # (read here, on the caller's thread, unless `loaded` first)
            self._checkpoints[log_dir] = read_cleaner_checkpoint(log_dir / CHECKPOINT_FILE)
        return self._checkpoints[log_dir]

    def _first_dirty(self, lg) -> int:
        cp, tp = self.first_dirty.get(lg), topic_partition(lg)
        if cp is None and tp is not None:
            cp = self._dir_checkpoints(lg.dir.parent).get(tp)
        if cp is None or not lg.log_start_offset <= cp <= lg.log_end_offset:
            return lg.log_start_offset
        return cp

    def _checkpoint(self, lg, offset: int) -> None:
        """The log's first dirty offset, for `checkpoint_writes` to put in its log dir's file."""
        self.first_dirty[lg] = offset
        tp = topic_partition(lg)
        if tp is None:
            return
        log_dir = lg.dir.parent
        self._dir_checkpoints(log_dir)[tp] = offset
        self._unwritten.add(log_dir)

    def checkpoint_writes(self) -> Callable[[], list] | None:
        """The checkpoint files changed since the last call, as a function writing them (for a worker thread: the
        entries of partitions whose directory is gone are left out, a stat each, and the file replaced) that
        returns those gone entries, for `forget`; None when none changed."""
        if not self._unwritten:
            return None
        dirs, self._unwritten = self._unwritten, set()
        snapshot = {d: dict(self._checkpoints[d]) for d in dirs}

        def write() -> list:
            gone = []
            for log_dir, entries in snapshot.items():
                kept = []
                for (t, p), o in entries.items():
                    if (log_dir / f"{t}-{p}").is_dir():
                        kept.append((t, p, o))
                    else:  # deleted partitions
                        gone.append((log_dir, (t, p), o))
                write_checkpoint(log_dir / CHECKPOINT_FILE, kept)
            return gone
        return write

    def forget(self, gone: list) -> None:
        """Drop the entries of deleted partitions a checkpoint write left out (unless set again meanwhile)."""
        for log_dir, tp, offset in gone:
            entries = self._checkpoints.get(log_dir, {})
            if entries.get(tp) == offset:
                del entries[tp]

    def plan(self, lg, now_ms: int, *, name: str = "", force: bool = False) -> CleanJob | None:
        """A job cleaning `lg` when it is due (see the module comment), or from its start whenever
        anything is cleanable with force; None otherwise."""
        cfg = lg.config
        hw = lg.last_stable_offset  # the high watermark, or an open transaction's first offset
        cleanable: list[LogSegment] = []
        for seg in lg.segments[:-1]:
            if seg.closing or seg.next_offset > hw:  # a roll not finished: bytes may still be on their way
                break
            if cfg.min_compaction_lag_ms > 0 and now_ms - seg.largest_ts < cfg.min_compaction_lag_ms:
                break
            cleanable.append(seg)
        if not cleanable:
            return None
        first_uncleanable = cleanable[-1].next_offset
        first_dirty = lg.log_start_offset if force else self._first_dirty(lg)
        dirty = [s for s in cleanable if s.next_offset > first_dirty]
        dirty_bytes = sum(s.size for s in dirty)
        total = sum(s.size for s in cleanable)
        ratio = dirty_bytes / total if total else 0.0
        if not force:
            if not dirty_bytes:
                return None
            oldest = dirty[0].first_batch_ts if dirty[0].first_batch_ts >= 0 else dirty[0].max_ts
            overdue = oldest >= 0 and now_ms - oldest > cfg.max_compaction_lag_ms
            if ratio < cfg.min_cleanable_dirty_ratio and not overdue:
                return None
        sources = [s for s in lg.segments if s.next_offset > first_dirty and s.base < hw]
        aborted: dict[int, list[tuple[int, int]]] = {}
        for t in lg.aborted.entries:
            aborted.setdefault(t.producer_id, []).append((t.first_offset, t.last_offset))
        return CleanJob(lg, name, lg.version, first_dirty, first_uncleanable, ratio, hw,
                        [s.batch_source() for s in sources], [(s, s.batch_source()) for s in cleanable],
                        now_ms - cfg.delete_retention_ms, self.max_map_entries, aborted,
                        self._pace() if self._pace is not None else _no_pace)

    def grab_filthiest_log(self, logs: Iterable[tuple[str, object]], now_ms: int) -> CleanJob | None:
        """Roll compacted logs' active segments past segment.ms, then plan the dirtiest due log."""
        best = None
        for name, lg in logs:
            if not lg.config.compacted:
                continue
            lg.roll_if_due(now_ms)
            job = self.plan(lg, now_ms, name=name)
            if job is not None and (best is None or job.dirty_ratio > best.dirty_ratio):
                best = job
        return best

    @staticmethod
    def swap_work(job: CleanJob, result: CleanResult) -> Callable[[], bool]:
        """The swap-in's renames, as a function for a worker thread: the log's `replace_segments` (under its lock),
        True when swapped in; then call `swapped` on the log's thread with what it returned."""
        return lambda: job.log.replace_segments(result.replacements, job.version)

    def swapped(self, job: CleanJob, result: CleanResult, done: bool) -> bool:
        """On the log's thread, after `swap_work`'s run: the replaced files scheduled for deletion and the first
        dirty offset moved; when it was not swapped in (the log changed underneath), the prepared files dropped.
        -> `done`."""
        if not done:
            self.discard(result)
            log.info("log_cleaner.result_discarded", log=job.name, reason="log changed while cleaning")
            return False
        job.log.schedule_renamed()
        self._checkpoint(job.log, result.dirty_end)
        return True

    def swap_in(self, job: CleanJob, result: CleanResult) -> bool:
        """The swap-in whole, on the caller's thread (see the module comment). True when swapped in."""
        return self.swapped(job, result, self.swap_work(job, result)())

    @staticmethod
    def discard(result: CleanResult) -> None:
        for _seg, prepared in result.replacements:
            prepared.discard()

    def clean_now(self, lg, now_ms: int) -> int:
        """Clean `lg` from its start on this thread; the number of records removed."""
        job = self.plan(lg, now_ms, force=True)
        if job is None:
            return 0
        job.pace = _no_pace  # (on this thread: nothing to give the GIL up to)
        result = job.run()
        if self.swap_in(job, result):
            write = self.checkpoint_writes()
            if write is not None:
                self.forget(write())
        return result.records_removed
