"""The active segment's reopening after a clean shutdown, from its index files (Kafka's LogSegment.readNextOffset).

`ActiveSegmentLoad` is a part of FileLogSegment (file_log_segment.py). A clean close writes the active segment's
`.index` and `.timeindex` -- the time index with its final entry, the largest timestamp (Kafka's LogSegment.close)
-- and fsyncs them before the log directory's clean-shutdown marker is written (log_manager.py). After a clean
shutdown LogLoader loads them (`load_active`) and walks only the batch headers from the last offset-index entry's
position on, to find the segment's end; the segment's largest timestamp is the time index's last entry or a larger
one in that tail (Kafka's maxTimestampSoFar is TimeIndex.lastEntry). A 102 MB active segment of 100,000 batches
opened in 0.33-0.46 s when every header was walked, 0.009-0.010 s this way (cold cache, benchmarks/open_time.py).

The state equals what a walk of every batch header gives (`recover`): the same index entries (the close's final
time-index entry is dropped again: the segment is active), end offset, size, largest timestamp and its offset, first
batch timestamp and bytes since the last index entry. Files that do not fit the .log -- missing, the batch at the
last entry's position starting above the offset the entry names, or the .log ending before that offset (the .log
shorter or rewritten) -- make `load_active` return None and the loader walks the whole segment; a file failing the
sanity check raises CorruptIndexException (the loader's WARN, then the walk). An entry naming a later batch's offset
at an earlier batch's position is Kafka's for an append of several batches (a follower's): taken as it is. After a
crash the active segment is recovered whole, its index files never read.
"""
from __future__ import annotations

import os

from .batch import HEADER_SIZE, MIN_BATCH_LENGTH, BatchHeader, read_header
from .offset_index import OffsetIndex
from .time_index import TimeIndex


class ActiveSegmentLoad:
    """FileLogSegment's reopening from its index files (see the module comment)."""
    base: int
    size: int
    fd: int
    next_offset: int
    max_ts: int
    max_ts_offset: int
    first_batch_ts: int
    bytes_since_index: int
    offset_index: OffsetIndex
    time_index: TimeIndex
    _index_from_file: bool

    # (and FileLogSegment's _reset_indexes and _walk, recover's walk from a position)

    def _batch_at(self, pos: int, size: int) -> BatchHeader | None:
        if size - pos < HEADER_SIZE:
            return None
        h = read_header(os.pread(self.fd, HEADER_SIZE, pos))
        ok = h.magic == 2 and h.batch_length >= MIN_BATCH_LENGTH and pos + h.size <= size and h.base_offset >= self.base
        return h if ok else None

    def load_active(self) -> int | None:
        """Load the index files and walk the batch headers after the last offset-index entry (no CRC): the length of
        the valid prefix, as `recover`'s; None when a file is missing or does not fit the .log (then `recover`).
        CorruptIndexException when one fails its sanity check."""
        self._reset_indexes()
        size = self.size
        idx, tix = self.offset_index, self.time_index
        if not idx.load(size):
            return None
        partial = bool(idx.rel)
        if partial:
            if not tix.load():
                self._reset_indexes()
                return None
            pos, last = idx.pos[-1], idx.base + idx.rel[-1]
            h = self._batch_at(pos, size)
            first = self._batch_at(0, size)
            if h is None or h.base_offset > last or first is None:  # (Kafka's entry for an append of several
                self._reset_indexes()                               # batches: the first's position, the last's offset)
                return None
            # The close's final entry, the largest timestamp when in the tail, is dropped (a walk adds time-index
            # entries with the offset index's only): the tail walk finds it again. The entry left is the largest
            # timestamp up to the last indexed batch (a full time index that refused entries: its final entry, the
            # largest of all, is kept when at or below that batch, else the tail holds it).
            while tix.rel and tix.base + tix.rel[-1] > last:
                tix.ts.pop()
                tix.rel.pop()
            if not tix.rel:
                tix.reset()
            self.max_ts, self.max_ts_offset = tix.last or (-1, -1)
            self.first_batch_ts = first.max_timestamp
        else:  # a segment shorter than index.interval.bytes (plus a batch): walked whole, its time index unread
            pos = 0
        self.next_offset = self.base
        valid = self._walk(pos, check_crc=False)
        if partial and last >= self.next_offset:  # (the .log shorter than the entry says)
            self._reset_indexes()
            return None
        tix.check_offsets(self.next_offset)
        self._index_from_file = partial
        return valid
