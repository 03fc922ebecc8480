"""Kafka's TimeIndex: a segment's `.timeindex` file.

12-byte big-endian entries (int64 largest timestamp so far, int32 offset relative to the base of
the batch holding it), monotonic in the timestamp, added with the offset index's entries plus a
final one when the segment stops being active (segment.index.bytes: full one entry short of its
`// 12` entries, the last slot kept for that final entry, as Kafka's). A file that fails the sanity check at start-up
(Kafka's TimeIndex.sanityCheck, and its entries in order) raises CorruptIndexException: rebuilt.
"""
from __future__ import annotations

import bisect
from array import array

from .offset_index import CorruptIndexException, IndexFile, be_array, be_bytes, increasing


class TimeIndex(IndexFile):
    entry_size = 12
    kind = "Time index"
    columns = ("ts", "rel")
    codes = ("q", "i")
    ts: array
    rel: array

    def is_full(self, max_index_bytes: int) -> bool:
        """Kafka's TimeIndex.isFull: one entry short of `max_index_bytes // 12`, the last slot being kept for
        the final entry a roll adds."""
        return len(self.ts) >= max_index_bytes // self.entry_size - 1

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add (timestamp, offset) if the timestamp is larger than the last entry's."""
        if timestamp >= 0 and (not self.ts or timestamp > self.ts[-1]):
            if not self.ts:
                self._columns()
            self.ts.append(timestamp)
            self.rel.append(offset - self.base)

    @property
    def last(self) -> tuple[int, int] | None:
        """(timestamp, absolute offset) of the last entry."""
        return (self.ts[-1], self.base + self.rel[-1]) if self.ts else None

    def search_start(self, timestamp: int) -> int:
        """An offset from which scanning finds the first record with a timestamp >= `timestamp`:
        after the last entry below it, everything earlier is below it."""
        i = bisect.bisect_left(self.ts, timestamp) - 1
        return self.base + self.rel[i] if i >= 0 else self.base

    def load(self, next_offset: int | None = None) -> bool:
        """Read the file: False when missing; CorruptIndexException when it fails the sanity check."""
        raw = self._read()
        if raw is None:
            return False
        words = memoryview(raw).cast("I")  # (the columns' bytes moved 4 at a time: ~12x a slice per entry)
        ts_bytes = bytearray(len(raw) // 12 * 8)
        ts_words = memoryview(ts_bytes).cast("I")
        ts_words[0::2], ts_words[1::2] = words[0::3], words[1::3]
        ts, rel = be_array("q", ts_bytes), be_array("i", words[2::3].tobytes())
        if ts and not (increasing(ts, strictly=False) and increasing(rel, strictly=False)):
            raise CorruptIndexException(f"{self._where} has entries whose timestamps or offsets go down")
        self.ts, self.rel = (ts, rel) if ts else ((), ())
        self.check_offsets(next_offset)
        return True

    @property
    def _where(self) -> str:
        return f"Corrupt time index found, time index file ({self.path})"

    def check_offsets(self, next_offset: int | None) -> None:
        """CorruptIndexException when an entry's offset is outside [base, next_offset) (the sanity check of `load`,
        for a caller that learns the segment's end after loading: an active segment's, active_segment.py)."""
        if self.rel and (self.rel[0] < 0 or (next_offset is not None and self.base + self.rel[-1] >= next_offset)):
            raise CorruptIndexException(f"{self._where} has an offset outside the segment's "
                                        f"[{self.base}, {next_offset})")

    def to_bytes(self) -> bytes:
        if not self.ts:
            return b""
        ts_words, rel_words = memoryview(be_bytes(self.ts)).cast("I"), memoryview(be_bytes(self.rel)).cast("I")
        out = bytearray(12 * len(self.ts))
        words = memoryview(out).cast("I")
        words[0::3], words[1::3], words[2::3] = ts_words[0::2], ts_words[1::2], rel_words
        return bytes(out)
