"""Producer-state snapshots: Kafka's `<20-digit offset>.snapshot` files (ProducerStateManager.writeSnapshot /
readSnapshot), so that a file log opens without reading every batch header of every segment.

The format (version 1, big-endian; Kafka's PID_SNAPSHOT_MAP_SCHEMA)::

    version int16 (1) | crc uint32 | count int32 | count x entry
    entry: producerId int64 | epoch int16 | lastSequence int32 | lastOffset int64 | offsetDelta int32 |
           timestamp int64 | coordinatorEpoch int32 | currentTxnFirstOffset int64      (46 bytes)

The CRC32C covers every byte after the crc field (the count and the entries). An entry keeps only the producer's
last batch (its last sequence and offset, and offsetDelta = lastOffset - baseOffset, so its first sequence and
offset follow); lastOffset -1 / lastSequence -1 / offsetDelta 0 for a producer without one (only markers written);
currentTxnFirstOffset -1 without an open transaction. A snapshot at offset N holds the state after every batch
below N.

When (Kafka's UnifiedLog): a snapshot is taken at a segment roll, of the state at the new segment's base (the roll
comes before the batch that triggered it), its bytes captured on the log's thread (10,000 producers: ~3 ms; an
immutable copy for the worker to encode would take ~1.8 ms of it, the entries being changed in place) and written by
the next flush run's worker after the rolled segment is on disk (so a snapshot on disk means every segment below it
is); at a clean close, at the log end offset; and at the end of a load that replayed batches (Kafka's
rebuildProducerState), at the log end offset, the .txnindex files of the replayed segments fsynced first
(`_after_rebuild`). Writes go to `.snapshot.tmp`, fsynced, renamed, the directory fsynced (Kafka writes in place; a
torn file would fail its CRC anyway).

Loading (Kafka's LogLoader / truncateAndReload / removeStraySnapshots): snapshots above the log end offset or below
the first segment's base are deleted, and so are the ones at no segment's base except the newest (a clean close's);
the newest left is read -- a bad version, CRC or length is Kafka's CorruptSnapshotException: a WARN line, the file
deleted, the next older one tried -- and the log replays only the batches from its offset on. Without one the log
rebuilds the state from every batch, as before (a data directory of an older Kafkite, or Kafka's without them).
The aborted transactions below the snapshot come from
the segments' .txnindex files (fsynced with their segment, before the snapshot is written), the rest from the replay.
Differences from Kafka, both to keep state Kafka would forget: snapshots at or below the log start offset are kept
when a segment starts there or above (Kafka deletes them and forgets the producers whose batches retention
deleted), and a directory without snapshots
after a clean shutdown is rebuilt in full (Kafka assumes an upgrade from a broker without idempotence and starts
empty).

Deletion: a segment removed by retention or DeleteRecords (or truncation) takes its snapshot with it, renamed
`.deleted` with its other files and removed file.delete.delay.ms later (file_log_segment.py's retire). Truncation
deletes the snapshots above the new log end offset, truncate_fully_and_start_at all of them.
"""
from __future__ import annotations

import bisect
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import structlog

from .batch import INT32_MAX, crc32c_of
from .checkpoint_file import fsync_dir, write_tmp
from .log_flush import LogFlush
from .producer_state import NO_PRODUCER_EPOCH, BatchMeta, ProducerEntry, ProducerStateManager
from .transaction_index import AbortedTxn, AbortedTxns, decode_entries, index_path, sync_files

VERSION = 1
SUFFIX = ".snapshot"
HEAD = struct.Struct(">hIi")  # version, crc, entry count
ENTRY = struct.Struct(">qhiqiqiq")
CRC_FROM = 6  # Kafka's PRODUCER_ENTRIES_OFFSET

log = structlog.get_logger("kafkite.producer_snapshot")


class CorruptSnapshot(Exception):
    """Kafka's CorruptSnapshotException."""


@dataclass(frozen=True)
class SnapshotEntry:
    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


def snapshot_path(directory: Path, offset: int) -> Path:
    return Path(directory) / f"{offset:020d}{SUFFIX}"


def encode(ps: ProducerStateManager) -> bytes:
    """The snapshot file's bytes for the state as it is now."""
    pack, parts = ENTRY.pack, []
    for pid, e in ps.producers.items():
        last = e.batches[-1] if e.batches else None
        parts.append(pack(pid, e.epoch, last.last_seq if last else -1, last.last_offset if last else -1,
                          last.last_offset - last.base_offset if last else 0, e.last_timestamp,
                          e.coordinator_epoch, ps.ongoing.get(pid, -1)))
    for pid, first in ps.ongoing.items():  # (an open transaction whose producer expired: its first offset kept)
        if pid not in ps.producers:
            parts.append(pack(pid, NO_PRODUCER_EPOCH, -1, -1, 0, -1, -1, first))
    body = struct.pack(">i", len(parts)) + b"".join(parts)
    return struct.pack(">hI", VERSION, crc32c_of(body)) + body


def decode(data: bytes) -> list[SnapshotEntry]:
    """The entries of a snapshot file's bytes; CorruptSnapshot (Kafka's messages) when they are not one."""
    if len(data) < HEAD.size:
        raise CorruptSnapshot(f"Snapshot failed schema validation: {len(data)} bytes, less than its header")
    version, crc, count = HEAD.unpack_from(data)
    if version != VERSION:
        raise CorruptSnapshot(f"Snapshot contained an unknown file version {version}")
    computed = crc32c_of(memoryview(data)[CRC_FROM:])
    if crc != computed:
        raise CorruptSnapshot(f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. "
                              f"Computed crc: {computed}")
    if count < 0 or len(data) != HEAD.size + count * ENTRY.size:
        raise CorruptSnapshot(f"Snapshot failed schema validation: {count} entries in {len(data)} bytes")
    return [SnapshotEntry(*ENTRY.unpack_from(data, HEAD.size + i * ENTRY.size)) for i in range(count)]


def restore(ps: ProducerStateManager, entries: list[SnapshotEntry]) -> None:
    """Kafka's loadProducerEntry for each entry, into a cleared state: the last batch's metadata (its first sequence
    and base offset from offsetDelta) and the open transaction."""
    for s in entries:
        e = ProducerEntry(s.epoch, last_timestamp=s.timestamp, coordinator_epoch=s.coordinator_epoch,
                          current_txn_first_offset=s.current_txn_first_offset)
        if s.last_offset >= 0:
            first_seq = s.last_sequence - s.offset_delta
            if first_seq < 0:  # (Kafka's DefaultRecordBatch.decrementSequence: sequences wrap at Int32 max)
                first_seq += INT32_MAX + 1
            e.batches.append(BatchMeta(first_seq, s.last_sequence, s.last_offset - s.offset_delta, s.last_offset,
                                       s.timestamp))
        ps.producers[s.producer_id] = e
        if s.current_txn_first_offset >= 0:
            ps.ongoing[s.producer_id] = s.current_txn_first_offset


def offsets(directory: Path) -> list[int]:
    """The offsets of the directory's snapshot files, ascending."""
    found = []
    for name in os.listdir(directory):
        if name.endswith(SUFFIX) and len(name) == 20 + len(SUFFIX) and name[:20].isdigit():
            found.append(int(name[:20]))
    return sorted(found)


def write(directory: Path, offset: int, data: bytes, still_wanted: Callable[[], bool] | None = None,
          lock=None, *, sync_dir: bool = True) -> bool:
    """Write a snapshot as checkpoint_file.write_atomically does: `.snapshot.tmp`, fsynced, renamed in place, the
    directory fsynced (unless `sync_dir` is False: the caller fsyncs it) -- with `still_wanted`, renamed only if it
    says so under `lock` (the log's: no truncation or deletion has made it stale meanwhile). True when written."""
    path = snapshot_path(directory, offset)
    tmp = write_tmp(path, data, sync=True)
    if still_wanted is None:
        os.replace(tmp, path)
    else:
        with lock:
            wanted = still_wanted()
            if wanted:
                os.replace(tmp, path)
        if not wanted:
            tmp.unlink(missing_ok=True)
            return False
    if sync_dir:
        fsync_dir(directory)  # (outside the log's lock)
    return True


def fsync_if_exists(path: str) -> None:
    """fsync a file that may not exist (most segments have no .txnindex)."""
    try:
        fsync_dir(path)  # (an open O_RDONLY and an fsync: as good for a file as for a directory)
    except FileNotFoundError:
        pass


def retire_snapshot(log_path: str, suffix: str) -> list[Path]:
    """A retired segment's snapshot (its .log already renamed `log_path`, ending .log + suffix) renamed with the
    suffix too -> [its new path], or [] without one."""
    if not log_path.endswith(".log" + suffix):
        return []
    snapshot = log_path[:-len(".log" + suffix)] + SUFFIX
    try:
        os.replace(snapshot, snapshot + suffix)
    except FileNotFoundError:
        return []
    return [Path(snapshot + suffix)]


def delete(directory: Path, keep: Callable[[int], bool]) -> None:
    """Delete the snapshots whose offset `keep` refuses."""
    for offset in offsets(directory):
        if not keep(offset):
            snapshot_path(directory, offset).unlink(missing_ok=True)


def load(directory: Path, ps: ProducerStateManager, log_end: int, bases: list[int]) -> int | None:
    """Into the cleared `ps`, the newest valid snapshot at or below `log_end` (see the module comment for the files
    deleted first) -> its offset; None when there is none."""
    for name in os.listdir(directory):  # (a write a crash cut short)
        if name.endswith(SUFFIX + ".tmp"):
            (Path(directory) / name).unlink(missing_ok=True)
    known, found = set(bases), offsets(directory)
    newest_stray = max((o for o in found if o not in known and o <= log_end), default=None)
    for o in found:
        if o > log_end or o < bases[0] or (o not in known and (o != newest_stray or o < bases[-1])):
            snapshot_path(directory, o).unlink(missing_ok=True)
    for o in reversed(offsets(directory)):
        path = snapshot_path(directory, o)
        try:
            entries = decode(path.read_bytes())
        except CorruptSnapshot as exc:
            log.warning("producer_snapshot.corrupt", file=str(path), reason=str(exc),
                        message=f"Failed to load producer snapshot from '{path}': {exc}")
            path.unlink(missing_ok=True)
            continue
        except FileNotFoundError:
            continue
        restore(ps, entries)
        return o
    return None


def aborted_below(directory: Path, bases: list[int], offset: int) -> list[AbortedTxn] | None:
    """The aborted transactions whose markers lie below `offset`, from the .txnindex files of the segments below it
    (what a snapshot load does not replay); None when one of them is unreadable (the caller rebuilds in full)."""
    out = []
    for base in bases:
        if base >= offset:
            break
        try:
            data = index_path(directory, base).read_bytes()
            out.extend(t for t in decode_entries(data) if t.last_offset < offset)
        except FileNotFoundError:
            continue
        except (OSError, ValueError):
            return None
    return out


class LogSnapshots(LogFlush):
    """A log's producer snapshots (see the module comment): UnifiedLog extends it; a memory log takes none."""
    producer_state: ProducerStateManager
    aborted: AbortedTxns
    log_start_offset: int
    _snap_pending: list[tuple[int, bytes]] | tuple = ()  # taken at rolls, for the next flush run's worker
    _snap_offset = 0  # the newest snapshot's offset, written or pending
    _snap_gen = 0  # bumped by truncation: a snapshot taken before it is not written after it

    def _roll(self, now_ms: int) -> None:
        super()._roll(now_ms)
        if self._dir is not None and self.log_end_offset > self._snap_offset:
            self._snap_offset = self.log_end_offset
            self._snap_pending = [*self._snap_pending, (self.log_end_offset, encode(self.producer_state))]

    def _snapshot_writes(self) -> Callable[[], None] | None:
        if not self._snap_pending:
            return None
        taken, self._snap_pending = self._snap_pending, ()
        directory, gen = self.dir, self._snap_gen

        def wanted(offset: int) -> bool:  # (under the log's lock: a truncation or deletion since makes it stale)
            return self._snap_gen == gen and self.segments[0].base <= offset <= self.log_end_offset

        def run() -> None:
            for offset, data in taken:
                try:
                    write(directory, offset, data, lambda: wanted(offset), self.lock)  # noqa: B023 (called at once)
                except FileNotFoundError:  # the directory went (a deleted partition's): nothing to keep
                    return
        return run

    def _snapshots_stale(self, keep_upto: int | None) -> None:
        """Truncation: the snapshots above `keep_upto` (None: all) are deleted, pending or written."""
        if self._dir is None:
            return
        with self.lock:
            self._snap_gen += 1
            self._snap_pending = [p for p in self._snap_pending if keep_upto is not None and p[0] <= keep_upto] or ()
            delete(self.dir, lambda o: keep_upto is not None and o <= keep_upto)

    def _load_snapshot(self) -> int | None:
        """Into the cleared producer state and aborted list, the newest valid snapshot and the aborted transactions
        below it -> its offset, where the replay starts; None: no snapshot, rebuild from every batch."""
        bases = [s.base for s in self.segments]
        start = load(self.dir, self.producer_state, self.log_end_offset, bases)
        pending = self._snap_pending[-1][0] if self._snap_pending else -1
        self._snap_offset = max(self.log_start_offset if start is None else start, pending)
        txns = None if start is None else aborted_below(self.dir, bases, start)
        if txns is None:
            self.producer_state.clear()
            return None
        for t in txns:
            self.aborted.add(t)
        return start

    def _after_rebuild(self, start: int, loading: bool) -> None:
        """After the producer state was rebuilt: the .txnindex files made to agree with it, and, at a load that
        replayed batches (after a crash, or without a snapshot), Kafka's snapshot at the log end offset (LogLoader /
        UnifiedLog.rebuildProducerState's takeSnapshot) so that the next start does not replay them again -- the
        .txnindex files it vouches for (of the segments replayed, and the ones rewritten) fsynced first. In the
        thread that loads the log (a worker's, or the start-up's before the broker serves)."""
        bases = [s.base for s in self.segments]
        snapshot = loading and self.log_end_offset > self._snap_offset
        changed = sync_files(self.dir, bases, self.aborted, sync=snapshot)
        if not snapshot:
            return
        try:
            if changed:
                fsync_dir(self.dir)  # (the rewritten files' renames, the removals: before the snapshot's)
            for base in bases[max(0, bisect.bisect_right(bases, start) - 1):]:  # (their appends were not fsynced)
                fsync_if_exists(os.fspath(index_path(self.dir, base)))
            write(self.dir, self.log_end_offset, encode(self.producer_state))
            self._snap_offset = self.log_end_offset
        except OSError as exc:  # (e.g. a full disk: the log opens all the same, the next start replays again)
            log.warning("producer_snapshot.write_failed", directory=str(self.dir), offset=self.log_end_offset,
                        error=str(exc), message=f"Could not write the producer snapshot of {self.dir} at offset "
                                                f"{self.log_end_offset} after its load: {exc}")

    def _close_snapshot(self) -> None:
        """Kafka's close: a snapshot at the log end offset (the log flushed), unless one is there already; then the
        directory fsynced, for its name and those of the index files the close wrote (the clean-shutdown marker,
        written after every log closed, vouches for them: log_manager.py)."""
        if self._dir is None:
            return
        if self.log_end_offset > self._snap_offset:
            write(self.dir, self.log_end_offset, encode(self.producer_state), sync_dir=False)
            self._snap_offset = self.log_end_offset
        fsync_dir(self.dir)
