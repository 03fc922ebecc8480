"""Kafka's LogLoader: opening a partition directory and recovering it.

A partition is a directory `<topic>-<partition>/` holding its segments' files (log_segment.py)
and `leader-epoch-checkpoint` (leader_epoch_file_cache.py), `partition.metadata` (Kafka's
PartitionMetadataFile: `version: 0` / `topic_id: <base64 topic id>`) and `log-start-offset`
(our one-number checkpoint).

On open, the active segment is always recovered: each batch's length and CRC32C are checked,
a torn tail (short batch or bad CRC) is truncated away and its indexes rebuilt. An older
segment's indexes are loaded; when missing or stale, the segment is recovered the same way
(a roll may not have finished, see log_segment.py) and, if torn, becomes the last segment. `.cleaned` files
are an interrupted compaction's output: the old files stand, the leftovers are deleted.
"""
from __future__ import annotations

import base64
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from .checkpoint_file import write_atomically
from .log_segment import FileLogSegment


def topic_id_to_string(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


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


@dataclass
class LoadedLog:
    segments: list[FileLogSegment]
    log_start_offset: int
    log_end_offset: int


class LogLoader:
    def __init__(self, directory: Path, index_interval: int, now_ms: int):
        self.dir, self.index_interval, self.now_ms = directory, index_interval, now_ms

    def new_segment(self, base: int, now_ms: int) -> FileLogSegment:
        return FileLogSegment(self.dir, base, now_ms, index_interval=self.index_interval)

    def load(self) -> LoadedLog:
        self.dir.mkdir(parents=True, exist_ok=True)
        for leftover in self.dir.glob("*.cleaned"):  # an interrupted compaction: the old files stand
            leftover.unlink()
        bases = sorted(int(p.stem) for p in self.dir.glob("*.log") if p.stem.isdigit() and len(p.stem) == 20)
        segments = [self.new_segment(b, self.now_ms) for b in bases] or [self.new_segment(0, self.now_ms)]
        # older segments: indexes from disk; else a roll may not have finished (its index files are
        # written after the .log's fsync): every batch is checked and the indexes rebuilt, and a
        # torn segment ends the log, as Kafka's recovery truncates at the first invalid batch
        for i, seg in enumerate(segments[:-1]):
            if seg.load_indexes(segments[i + 1].base):
                continue
            file_size = seg.size
            if seg.recover(check_crc=True) < file_size:
                for later in segments[i + 1:]:
                    later.delete()
                del segments[i + 1:]
                seg.size = file_size  # recovered again below, as the active segment
                break
            seg.final_time_entry()
            seg.next_offset = segments[i + 1].base
            seg.write_indexes()
        # the active segment: every batch re-checked, a torn tail truncated away
        last = segments[-1]
        file_size = last.size
        valid = last.recover(check_crc=True)
        if valid < file_size:
            os.ftruncate(last.fd, valid)
            os.fsync(last.fd)
            last.size = valid
        last.unlink_indexes()  # rewritten on roll/close
        log_end = last.next_offset
        log_start = segments[0].base
        try:
            log_start = max(log_start, int((self.dir / "log-start-offset").read_text()))
        except (FileNotFoundError, ValueError):
            pass
        return LoadedLog(segments, min(log_start, log_end), log_end)
