"""Older home of the partition log, kept so importers keep working: the log now lives in Kafka's
classes, one module each (see unified_log.py)."""
from .leader_epoch_file_cache import LeaderEpochCache, LeaderEpochFileCache
from .log_config import LogConfig
from .log_loader import topic_id_from_string, topic_id_to_string
from .log_segment import FileLogSegment, FileSegment, LogSegment, Segment
from .memory_log_segment import MemoryLogSegment, MemorySegment
from .unified_log import AppendResult, FileLog, MemoryLog, OffsetOutOfRange, UnifiedLog

__all__ = ["LeaderEpochCache", "LeaderEpochFileCache", "LogConfig", "topic_id_from_string", "topic_id_to_string",
           "FileLogSegment", "FileSegment", "LogSegment", "Segment", "MemoryLogSegment", "MemorySegment",
           "AppendResult", "FileLog", "MemoryLog", "OffsetOutOfRange", "UnifiedLog"]
