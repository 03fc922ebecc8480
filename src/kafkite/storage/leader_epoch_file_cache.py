"""Kafka's LeaderEpochFileCache: (leader epoch, start offset) pairs in increasing order,
persisted as the partition's `leader-epoch-checkpoint` (Kafka's text checkpoint: version 0,
the entry count, then `epoch startOffset` lines) when a path is given."""
from __future__ import annotations

import bisect
from pathlib import Path

from .checkpoint_file import read_checkpoint, write_checkpoint


class LeaderEpochFileCache:
    def __init__(self, path: Path | None):
        self.path = path
        rows = read_checkpoint(path) if path is not None else None
        try:
            self.entries: list[tuple[int, int]] = [(int(a), int(b)) for a, b in rows or []]
        except ValueError:  # unreadable: start empty, as Kafka rebuilds it from the log
            self.entries = []

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else -1

    def assign(self, epoch: int, start_offset: int) -> None:
        """Note that `epoch` starts at `start_offset` (only a newer epoch is recorded)."""
        if epoch < 0 or (self.entries and (epoch <= self.entries[-1][0] or start_offset < self.entries[-1][1])):
            return
        self.entries.append((epoch, start_offset))
        self._save()

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs starting at or after end_offset (log truncated to end_offset)."""
        kept = [e for e in self.entries if e[1] < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._save()

    def truncate_from_start(self, start_offset: int) -> None:
        """Log start moved to start_offset: the epoch covering it now starts there."""
        i = bisect.bisect_right([o for _, o in self.entries], start_offset) - 1
        if i < 0:
            return
        kept = [(self.entries[i][0], max(self.entries[i][1], start_offset))] + self.entries[i + 1:]
        if kept != self.entries:
            self.entries = kept
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
        if self.path is not None:
            write_checkpoint(self.path, self.entries)


LeaderEpochCache = LeaderEpochFileCache  # older name
