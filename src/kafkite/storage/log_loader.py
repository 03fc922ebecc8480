"""Kafka's LogLoader: opening a partition directory and recovering it.

A partition is a directory `<topic>-<partition>/` holding its segments' files (file_log_segment.py)
and `leader-epoch-checkpoint` (leader_epoch_file_cache.py), `partition.metadata` (Kafka's
PartitionMetadataFile: `version: 0` / `topic_id: <base64 topic id>`) and `log-start-offset`
(our one-number checkpoint, written as the log start offset moves; the log directory's
`log-start-offset-checkpoint` is Kafka's, written periodically: the larger one wins).

Recovery, as Kafka's: the log directory says whether the broker stopped cleanly (the
`.kafka_cleanshutdown` marker) and up to where each log was flushed (its recovery point, from
`recovery-point-offset-checkpoint`); see log_manager.py.
- After a clean shutdown nothing is rescanned for corruption: every segment's indexes are
  loaded, the active segment's too (written and fsynced at the clean close), and only the active
  segment's batch headers after its last offset-index entry are walked, to know its end (Kafka's
  LogSegment.readNextOffset; active_segment.py). A batch whose bytes were damaged on disk afterwards
  stays as it is and is served as it is: consumers check its CRC, as with Kafka. The active
  segment's index files are deleted once loaded (written again at the next roll or clean close): a
  later crash recovers that segment from its batches, never from files older than them.
- After a crash, every segment from the one holding the recovery point on is recovered: each
  batch's length and CRC32C checked, indexes rebuilt. At the first invalid batch the segment is
  truncated and every later segment deleted (Kafka's "Found invalid messages in log segment ...
  at byte offset ..." / "Corruption found in segment ..., truncating to offset ..."), with a
  WARN line naming the file, the byte offset and the bytes dropped. Segments below the recovery
  point were fsynced before it moved past them: they are not rescanned.
- A segment whose index files are missing or stale is recovered whatever the shutdown (a roll's
  index files are written after its .log's fsync, see file_log_segment.py); so is one whose index
  file fails its sanity check (Kafka's CorruptIndexException: "Found a corrupted index file
  corresponding to log file ..., recovering segment and rebuilding index files..."); the active
  segment after a clean shutdown has its batch headers walked, not its CRCs checked. An .index
  entry that passes it but does not point at a batch start is found and rebuilt by the read path
  (offset_index_check.py).
Producer snapshots (`.snapshot`) are loaded by the log itself after this (producer_snapshot.py).
`.cleaned` files are an interrupted compaction's output: the old files stand, the leftovers are
deleted. `.deleted` files are segments whose delayed deletion (file.delete.delay.ms) a stop or a crash
cut short: removed, as Kafka's LogLoader removes them. So is an index file (`.index`, `.timeindex`,
`.txnindex`) with no `.log` of its base (Kafka's "Found an orphaned index file"), e.g. left by a
crash while a deleted segment's files were being renamed.
"""
from __future__ import annotations

import base64
import bisect
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import structlog

from .batch import CRC_START, HEADER_SIZE, MIN_BATCH_LENGTH, crc32c_of, read_header
from .checkpoint_file import InconsistentTopicId, topic_id_to_string, write_atomically  # noqa: F401 (names of here)
from .file_log_segment import FileLogSegment
from .offset_index import CorruptIndexException
from .segment_deletion import DELETED_SUFFIX

log = structlog.get_logger("kafkite.log_loader")


def topic_id_from_string(s: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)))


def write_partition_metadata(directory: Path, topic_id: uuid.UUID) -> None:
    p = directory / "partition.metadata"
    text = f"version: 0\ntopic_id: {topic_id_to_string(topic_id)}\n"
    if not p.exists() or p.read_text() != text:
        write_atomically(p, text)


def read_topic_id(directory: Path) -> uuid.UUID | None:
    try:
        for line in (directory / "partition.metadata").read_text().splitlines():
            if line.startswith("topic_id:"):
                return topic_id_from_string(line.split(":", 1)[1].strip())
    except (FileNotFoundError, ValueError):
        pass
    return None


def check_topic_id(directory: Path, topic_id: uuid.UUID | None) -> None:
    """Raise InconsistentTopicId when the directory belongs to another topic id."""
    found = read_topic_id(directory) if topic_id is not None else None
    if found is not None and found != topic_id:
        raise InconsistentTopicId(directory, topic_id, found)


def invalid_reason(seg: FileLogSegment, pos: int, size: int) -> str:
    """Why the batch at `pos` of a segment of `size` bytes is not valid (FileLogSegment.recover's
    checks, in its order), in Kafka's words where it has them."""
    left = size - pos
    if left < HEADER_SIZE:
        return f"{left} bytes left, less than a batch header ({HEADER_SIZE})"
    h = read_header(os.pread(seg.fd, HEADER_SIZE, pos))
    if h.batch_length < MIN_BATCH_LENGTH:
        return f"Record batch size {h.batch_length} is smaller than the minimum allowed overhead {MIN_BATCH_LENGTH}"
    if h.size > left:
        return f"batch of {h.size} bytes, only {left} bytes left in the file"
    if h.magic != 2:
        return f"invalid magic {h.magic}"
    if h.base_offset < seg.base:
        return f"base offset {h.base_offset} below the segment's base offset {seg.base}"
    computed = crc32c_of(os.pread(seg.fd, h.size - CRC_START, pos + CRC_START))
    return f"Record is corrupt (stored crc = {h.crc}, computed crc = {computed})"


@dataclass
class LoadedLog:
    segments: list[FileLogSegment]
    log_start_offset: int
    log_end_offset: int


class LogLoader:
    """Loads one partition directory. `had_clean_shutdown` and `recovery_point` come from the log
    directory (log_manager.py); without them every segment is recovered, as Kafka does for a log
    missing from recovery-point-offset-checkpoint. `log_start_offset`: the log directory's
    log-start-offset-checkpoint entry."""

    def __init__(self, directory: Path, index_interval: int, now_ms: int, *, had_clean_shutdown: bool = False,
                 recovery_point: int = 0, log_start_offset: int = 0):
        self.dir, self.index_interval, self.now_ms = directory, index_interval, now_ms
        self.had_clean_shutdown, self.recovery_point = had_clean_shutdown, recovery_point
        self.log_start_checkpoint = log_start_offset

    def new_segment(self, base: int, now_ms: int) -> FileLogSegment:
        return FileLogSegment(self.dir, base, now_ms, index_interval=self.index_interval)

    def _existing(self, base: int) -> FileLogSegment:
        seg = self.new_segment(base, self.now_ms)
        seg.modified_ms = os.fstat(seg.fd).st_mtime_ns // 1_000_000  # (Kafka's LogSegment.lastModified)
        return seg

    def load(self) -> LoadedLog:
        self.dir.mkdir(parents=True, exist_ok=True)
        for leftover in self.dir.glob("*.cleaned"):  # an interrupted compaction: the old files stand
            leftover.unlink()
        for leftover in self.dir.glob(f"*{DELETED_SUFFIX}"):  # a deletion file.delete.delay.ms still held
            leftover.unlink()
        bases = sorted(int(p.stem) for p in self.dir.glob("*.log") if p.stem.isdigit() and len(p.stem) == 20)
        known = set(bases)
        for suffix in (".index", ".timeindex", ".txnindex"):
            for orphan in self.dir.glob(f"*{suffix}"):
                if orphan.stem.isdigit() and len(orphan.stem) == 20 and int(orphan.stem) not in known:
                    log.warning("log.orphaned_index", file=str(orphan),
                                message=f"Found an orphaned index file {orphan}, with no corresponding log file.")
                    orphan.unlink()
        segments = [self._existing(b) for b in bases] or [self.new_segment(0, self.now_ms)]
        # the first segment to recover: none after a clean shutdown, else the one holding the recovery point
        first_unflushed = len(segments) if self.had_clean_shutdown else \
            max(0, bisect.bisect_right([s.base for s in segments], self.recovery_point) - 1)
        for i, seg in enumerate(segments):
            last = i == len(segments) - 1
            if i >= first_unflushed:
                if seg.size:
                    log.info("log.recovering_segment", partition=self.dir.name, segment=seg.base,
                             message=f"Recovering unflushed segment {seg.base}")
                dropped = self._recover(seg, check_crc=True)
            elif last:  # the active segment after a clean shutdown: its index files and the headers after them
                size = seg.size
                try:
                    valid = seg.load_active()
                    if valid is None and size:
                        self._index_warning(seg, None)
                except CorruptIndexException as exc:
                    self._index_warning(seg, exc)
                    valid = None
                dropped = self._recover(seg, check_crc=False) if valid is None else self._cut(seg, valid, size)
            else:
                try:
                    if seg.load_indexes(segments[i + 1].base):
                        continue
                    self._index_warning(seg, None)
                except CorruptIndexException as exc:
                    self._index_warning(seg, exc)
                dropped = self._recover(seg, check_crc=True)
            if dropped:
                later = segments[i + 1:]
                dropped += sum(s.size for s in later)
                for s in later:
                    s.delete()
                del segments[i + 1:]
                log.warning("log.recovery_truncated", partition=self.dir.name, segment=seg.base,
                            truncated_to_offset=seg.next_offset, bytes_dropped=dropped,
                            segments_deleted=[s.base for s in later],
                            message=f"Corruption found in segment {seg.base}, truncating to offset "
                                    f"{seg.next_offset}")
                break
            if not last:
                seg.final_time_entry()
                seg.next_offset = segments[i + 1].base
                seg.write_indexes()
        last = segments[-1]
        last.unlink_indexes()  # the active segment's are rewritten on roll/close: never read after a later crash
        log_end = last.next_offset
        log_start = max(segments[0].base, self.log_start_checkpoint)
        try:
            log_start = max(log_start, int((self.dir / "log-start-offset").read_text()))
        except (FileNotFoundError, ValueError):
            pass
        return LoadedLog(segments, min(log_start, log_end), log_end)

    @staticmethod
    def _index_warning(seg: FileLogSegment, exc: CorruptIndexException | None) -> None:
        """Kafka's WARN for a segment whose index files are rebuilt: missing or stale (exc None), or corrupt."""
        if exc is None:
            reason = "missing or stale"
            message = f"Could not find offset index file corresponding to log file {seg.log_path}, " \
                      "recovering segment and rebuilding index files..."
        else:
            reason = str(exc)
            message = f"Found a corrupted index file corresponding to log file {seg.log_path} due to " \
                      f"{exc}, recovering segment and rebuilding index files..."
        log.warning("log.index_rebuilt", file=str(seg.log_path), reason=reason, message=message)

    def _recover(self, seg: FileLogSegment, *, check_crc: bool) -> int:
        """Rebuild the segment's indexes from its batches; truncate it at the first invalid one
        (with a WARN line). Returns the bytes dropped."""
        size = seg.size
        return self._cut(seg, seg.recover(check_crc=check_crc), size)

    def _cut(self, seg: FileLogSegment, valid: int, size: int) -> int:
        """Truncate a segment of `size` bytes whose batches are valid up to `valid` (with a WARN line when it cuts).
        Returns the bytes dropped."""
        if valid == size:
            return 0
        reason = invalid_reason(seg, valid, size)
        log.warning("log_segment.invalid_messages", file=str(seg.log_path), byte_offset=valid,
                    offset=seg.next_offset, bytes_dropped=size - valid,
                    message=f"Found invalid messages in log segment {seg.log_path} at byte offset {valid}: "
                            f"{reason}. Truncating {size - valid} bytes, from offset {seg.next_offset}")
        os.ftruncate(seg.fd, valid)
        os.fsync(seg.fd)
        seg.size = valid
        return size - valid
