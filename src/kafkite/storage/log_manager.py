"""Kafka's LogManager, for the files of a log directory (the data dir) that are not one log's.

- `.kafka_cleanshutdown`: written (fsynced) at shutdown once every log was closed -- flushed --
  without an error; read and deleted at start before any log is loaded, so that a crash while
  loading counts as an unclean shutdown (KAFKA-10471). Its content is Kafka's JSON,
  `{"version":0,"brokerEpoch":-1}` (no broker epochs here).
- `recovery-point-offset-checkpoint`: each log's recovery point (UnifiedLog.recovery_point), in
  Kafka's OffsetCheckpointFile format (`topic partition offset` lines), written every
  `log.flush.offset.checkpoint.interval.ms` and at shutdown (then the log end offsets). After a
  crash, LogLoader recovers each log from the segment holding its recovery point; a log without
  an entry is recovered whole. An entry may outlive its topic by one interval (a topic deleted
  and re-created meanwhile): harmless, as a segment below the recovery point is trusted only with
  its index files, which are written after its .log was fsynced -- else it is recovered anyway.
- `log-start-offset-checkpoint`: the log start offsets above their log's first segment base,
  written every `log.flush.start.offset.checkpoint.interval.ms` and at shutdown (each partition
  also keeps its own `log-start-offset`, written as it moves; see log_loader.py).
- `replication-offset-checkpoint`: the high watermark of each replicated partition (a broker of a
  cluster), written every `replica.high.watermark.checkpoint.interval.ms` and at shutdown (Kafka's
  ReplicaManager.checkpointHighWatermarks). A replica's log reopens with that high watermark (0
  without an entry), not its log end offset: records it wrote that the ISR never confirmed stay
  invisible until its leader, or its own ISR as leader, vouches for them.
- A partition directory whose `partition.metadata` names another topic id than the topic's (the
  topic was deleted and re-created while the old directory stayed, or the metadata was lost) is
  never served under the new topic: it is renamed `<topic>-<partition>.<32 hex digits>-stray`,
  Kafka's name for a stray log, and kept for the operator; the new topic starts empty.
- A deleted partition's directory is first renamed `<topic>-<partition>.<32 hex digits>-delete`
  (Kafka's LocalLog.logDeleteDirName), at once, then removed in a worker thread; one a crash left
  behind is removed at the next start.

Sans-IO with respect to time; the checkpoint writes fsync, so the broker runs them in a worker
thread (services.py), except at shutdown.
"""
from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

from .checkpoint_file import fsync_dir, read_offsets, write_atomically, write_offsets

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT_FILE = "replication-offset-checkpoint"
STRAY_DIR_SUFFIX = "-stray"
DELETE_DIR_SUFFIX = "-delete"

Offsets = dict[tuple[str, int], int]


def stray_dir_name(topic: str, partition: int, kind: str = STRAY_DIR_SUFFIX) -> str:
    """Kafka's LocalLog.logStrayDirName (logDeleteDirName with `kind` "-delete"):
    `<topic>-<partition>.<uuid without dashes>-stray`, the topic cut so that the name stays within 255 characters."""
    suffix = f"-{partition}.{uuid.uuid4().hex}{kind}"
    return topic[:255 - len(suffix)] + suffix


class LogDirectory:
    """One log directory's own files (see the module comment)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.had_clean_shutdown = False
        self.recovery_points: Offsets = {}
        self.log_start_offsets: Offsets = {}
        self.high_watermarks: Offsets = {}

    def startup(self) -> None:
        """Before any log is loaded: take the clean-shutdown marker away, read the checkpoints."""
        self.path.mkdir(parents=True, exist_ok=True)
        marker = self.path / CLEAN_SHUTDOWN_FILE
        self.had_clean_shutdown = marker.exists()
        if self.had_clean_shutdown:
            marker.unlink()
            fsync_dir(self.path)
        for leftover in self.path.glob(f"*{DELETE_DIR_SUFFIX}"):  # deletions a crash interrupted
            if leftover.is_dir():
                shutil.rmtree(leftover, ignore_errors=True)
        self.recovery_points = read_offsets(self.path / RECOVERY_POINT_CHECKPOINT_FILE)
        self.log_start_offsets = read_offsets(self.path / LOG_START_OFFSET_CHECKPOINT_FILE)
        self.high_watermarks = read_offsets(self.path / HIGH_WATERMARK_CHECKPOINT_FILE)

    def load_options(self, topic: str, partition: int) -> dict:
        """FileLog's keyword arguments for loading this partition's directory."""
        return {"had_clean_shutdown": self.had_clean_shutdown,
                "recovery_point": self.recovery_points.get((topic, partition), 0),
                "log_start_offset": self.log_start_offsets.get((topic, partition), 0)}

    @staticmethod
    def recovery_points_of(logs: dict) -> Offsets:
        """(topic, partition) -> recovery point of each file log (on the logs' own thread)."""
        return {tp: lg.recovery_point for tp, lg in logs.items() if lg.dir is not None}

    @staticmethod
    def log_start_offsets_of(logs: dict) -> Offsets:
        """(topic, partition) -> log start offset, where above the first segment's base (Kafka's rule)."""
        return {tp: lg.log_start_offset for tp, lg in logs.items()
                if lg.dir is not None and lg.log_start_offset > lg.segments[0].base}

    @staticmethod
    def high_watermarks_of(logs: dict) -> Offsets:
        """(topic, partition) -> high watermark of each file log."""
        return {tp: lg.high_watermark for tp, lg in logs.items() if lg.dir is not None}

    def write_high_watermarks(self, offsets: Offsets) -> None:
        write_offsets(self.path / HIGH_WATERMARK_CHECKPOINT_FILE, offsets)

    def write_recovery_points(self, offsets: Offsets) -> None:
        write_offsets(self.path / RECOVERY_POINT_CHECKPOINT_FILE, offsets)

    def write_log_start_offsets(self, offsets: Offsets) -> None:
        write_offsets(self.path / LOG_START_OFFSET_CHECKPOINT_FILE, offsets)

    def write_clean_shutdown(self) -> None:
        """The marker, fsynced: the next start skips recovery."""
        write_atomically(self.path / CLEAN_SHUTDOWN_FILE, json.dumps({"version": 0, "brokerEpoch": -1},
                                                                     separators=(",", ":")), sync=True)

    def set_aside(self, directory: Path, topic: str, partition: int, kind: str = STRAY_DIR_SUFFIX, *,
                  sync: bool = True) -> Path:
        """Rename a partition directory that is not to be served to its stray name (or, `kind` "-delete", to the
        name of one being deleted); returns the new path. Without `sync` the caller makes the rename durable
        (fsync_dir of the log dir: one for many renames, off the event loop)."""
        target = directory.with_name(stray_dir_name(topic, partition, kind))
        os.replace(directory, target)
        if sync:
            fsync_dir(directory.parent)
        return target
