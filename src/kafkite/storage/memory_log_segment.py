"""The memory variant of LogSegment (--in-memory brokers and tests): the segment's batches as a
list of bytes objects (or the bytearray a produced batch was validated and patched in, kept as it is: nothing
changes it after the append), found by bisecting their last offsets.

It has no index files, but counts the entries a file segment's offset and time indexes would hold
(one every index.interval.bytes, as FileLogSegment._index_batch adds them), so that
segment.index.bytes rolls memory and file logs at the same offsets."""
from __future__ import annotations

import bisect
from typing import Iterator

from .batch import LOG_OVERHEAD, BatchHeader, iter_batches, read_header
from .log_segment import BatchSource, LogSegment


class MemoryLogSegment(LogSegment):
    index_interval = 0

    def __init__(self, base: int, created_ms: int):
        self.base, self.created_ms = base, created_ms
        self.modified_ms = created_ms
        self._clear()

    def _clear(self) -> None:
        self.batches: list[bytes] = []
        self.lasts: list[int] = []  # last offset of each batch, for bisect
        self.size, self.next_offset = 0, self.base
        self._reset_stats()
        # the entries a file segment's indexes would hold (segment.index.bytes)
        self.index_entries = self.time_entries = self.bytes_since_index = 0
        self._last_time_entry = -1

    def append(self, buf, headers: list[tuple[int, BatchHeader]], index_interval: int, *,
               defer_write: bool = False, sync: bool = False, max_index_bytes: int | None = None,
               owned: bool = False) -> None:
        # one whole batch is kept as it is when nothing else may change it: an immutable bytes (a coordinator's,
        # just built), or a buffer the log owns (`owned`: a produced batch, copied out of the request once and
        # patched in place by UnifiedLog.append); else each batch is copied out
        if len(headers) == 1 and (owned or type(buf) is bytes) and \
                headers[0][1].batch_length + LOG_OVERHEAD == len(buf):
            self.append_whole(buf, headers[0][1], len(buf), index_interval, max_index_bytes)
            return
        mv = memoryview(buf)
        for pos, h in headers:
            size = h.batch_length + LOG_OVERHEAD  # (h.size)
            self.append_whole(bytes(mv[pos:pos + size]), h, size, index_interval, max_index_bytes)

    def append_whole(self, buf, h: BatchHeader, size: int, index_interval: int, max_index_bytes: int | None) -> None:
        """One whole batch of `size` bytes (its header h), kept as it is: nothing else may change it (append's rule);
        a coordinator's write comes here whole, a batch of several each copied out."""
        self.index_interval = index_interval
        last = h.base_offset + h.last_offset_delta
        if self.size == 0:
            self.first_batch_ts = h.max_timestamp
        if h.max_timestamp > self.max_ts:
            self.max_ts, self.max_ts_offset = h.max_timestamp, last
        self.next_offset = last + 1
        self.batches.append(buf)
        self.lasts.append(last)
        self.size += size
        if self.bytes_since_index > index_interval:
            self._count_index_entry(max_index_bytes)
        self.bytes_since_index += size

    def _count_index_entry(self, max_index_bytes: int | None) -> None:
        """The entries FileLogSegment._index_batch would add (one every index.interval.bytes), counted."""
        if max_index_bytes is None or self.index_entries < max_index_bytes // 8:
            self.index_entries += 1
            if self.max_ts >= 0 and self.max_ts > self._last_time_entry and \
                    (max_index_bytes is None or self.time_entries < max_index_bytes // 12 - 1):
                self.time_entries += 1
                self._last_time_entry = self.max_ts
            self.bytes_since_index = 0

    def index_full(self, max_index_bytes: int) -> bool:
        return self.index_entries >= max_index_bytes // 8 or self.time_entries >= max_index_bytes // 12 - 1

    def iter_batches(self, from_offset: int | None = None) -> Iterator[tuple[BatchHeader, bytes]]:
        i = 0 if from_offset is None else bisect.bisect_left(self.lasts, from_offset)
        for b in self.batches[i:]:
            yield read_header(b), b

    def iter_headers(self) -> Iterator[BatchHeader]:
        return (read_header(b) for b in self.batches)

    def read_parts(self, offset: int, max_bytes: int, min_one: bool, max_offset: int | None) -> list | None:
        """Whole batches from the one containing offset, as the stored batch objects themselves
        (nothing copied); None when no batch reaches offset."""
        out, size = [], 0
        start = bisect.bisect_left(self.lasts, offset)
        if start >= len(self.batches):
            return None
        for i in range(start, len(self.batches)):
            b = self.batches[i]
            if max_offset is not None and self.lasts[i] - read_header(b).last_offset_delta >= max_offset:
                break
            if size + len(b) > max_bytes and not (min_one and not out):
                break
            out.append(b)
            size += len(b)
        return out

    def timestamp_search_start(self, ts: int) -> int:
        return self.base

    def batch_source(self) -> BatchSource:
        batches = list(self.batches)
        return lambda: ((read_header(b), b) for b in batches)

    def scratch(self) -> "MemoryLogSegment":
        return MemoryLogSegment(self.base, self.created_ms)

    def swap_in(self, prepared: "MemoryLogSegment") -> None:
        self.batches, self.lasts = prepared.batches, prepared.lasts
        self._adopt(prepared)

    def truncate_to(self, offset: int) -> None:
        i = bisect.bisect_left(self.lasts, offset)  # first batch reaching offset: dropped whole
        data = b"".join(self.batches[:i])
        self._clear()
        self.append(data, list(iter_batches(data)), self.index_interval)

    def delete(self) -> None:
        self.batches, self.lasts = [], []


MemorySegment = MemoryLogSegment  # older name
