"""A file segment's offset lookup through its `.index`, checked, and the rebuild of a damaged index.

`OffsetIndexCheck` is a part of FileLogSegment (file_log_segment.py): `find_position`, Kafka's
LogSegment.translateOffset, finds the batch holding an offset from the nearest offset-index entry
(offset_index.py) at or below it and a short scan of batch headers.

A damaged `.index` (Kafka's LogSegment.translateOffset trusts it; here it is checked): an index
file failing its sanity check at start-up is rebuilt by LogLoader. An entry that passes it but
does not point at the start of a batch (the header there is not a batch's, or its base offset is
above the entry's offset) is found by the read path, which checks the batch header at every
position the index gives: the read goes on from the entry before it (or the segment's start), a
WARN line names the index file and the entry, and the index is rebuilt from the .log in a worker
thread (`index_rebuild`, never on the caller's thread: it reads every batch header), then put in
place of the damaged one, in memory and on disk. A scan that meets a batch header no batch has
(the .log damaged after a clean stop) raises CorruptRecordException (Kafka's, answered
CORRUPT_MESSAGE) rather than reading garbage lengths as batches.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Callable

import structlog

from .batch import HEADER_SIZE, MIN_BATCH_LENGTH, BatchHeader, read_header
from .log_segment import CorruptRecordException
from .offset_index import OffsetIndex

log = structlog.get_logger("kafkite.log_segment")


def start_worker(work: Callable[[], None], name: str) -> threading.Thread:
    """Run `work` in a thread of its own, off the caller's thread (the event loop's, for a read)."""
    t = threading.Thread(target=work, name=name, daemon=True)
    t.start()
    return t


class OffsetIndexCheck:
    """FileLogSegment's index lookup, checked, and its damaged-index rebuild (see the module comment). It
    uses the segment's files and state: `_header_at`, `readable_size`, and the attributes below."""
    base: int
    size: int
    fd: int
    log_path: Path
    index_interval: int
    offset_index: OffsetIndex
    _index_from_file: bool                  # the offset index is the one loaded from the .index
    _index_lock: threading.Lock             # putting a rebuilt index in place vs swap_in
    _rebuilding: OffsetIndex | None         # the damaged index whose rebuild was started
    index_rebuild: threading.Thread | None  # the last rebuild's thread (tests join it)

    def find_position(self, offset: int) -> int:
        """Position of the batch containing offset (or the first batch after it): the .index
        gives the nearest indexed batch at or below, then a short header scan (never into bytes
        a deferred write has not put in the file yet). Every position the index gives is checked to
        be a batch start: a damaged entry is passed over (see the module comment)."""
        return self._find(offset, self.readable_size)

    def _find(self, offset: int, limit: int) -> int:
        idx = self.offset_index  # one object throughout: a rebuild may put another in place meanwhile
        damaged: list[tuple[int, int]] = []
        i, failed_at = idx.slot(offset), None
        try:
            while True:
                i, start, h = self._entry_start(idx, i, limit, damaged)
                if start >= limit:
                    return limit
                try:
                    pos = self._scan(start, offset, limit, h)
                except CorruptRecordException as exc:
                    # an entry at a position that looked like a batch start but was not, or the .log's
                    # batch itself damaged: the second when a scan from an earlier start meets it too
                    if i < 0 or exc.position == failed_at:
                        raise
                    failed_at, suspect = exc.position, idx.entry(i)
                    i -= 1
                    continue
                if failed_at is not None:
                    damaged.append(suspect)
                return pos
        finally:
            if damaged:
                self._index_damaged(idx, *damaged[0])

    def _is_batch(self, h: BatchHeader, pos: int, limit: int) -> bool:
        """Whether the header read at `pos` can be a batch of this segment: what FileLogSegment.recover
        checks of a header (a length, magic 2, offsets from the base), within the first `limit` bytes."""
        return h.magic == 2 and h.batch_length >= MIN_BATCH_LENGTH and pos + h.size <= limit \
            and h.base_offset >= self.base and h.last_offset_delta >= 0

    def _entry_start(self, idx: OffsetIndex, i: int, limit: int,
                     damaged: list[tuple[int, int]]) -> tuple[int, int, BatchHeader | None]:
        """(entry number, position, header there) to scan from: entry i if its position is a batch start
        whose base offset is at most the entry's offset, else the nearest such entry before it (the
        segment's start, -1, when none: no header read); the entries passed over go to `damaged` as
        (offset, position). A position at or past `limit` (bytes a deferred write has not put in the file
        yet) is returned as it is."""
        while i >= 0:
            entry, pos = idx.entry(i)
            if pos >= limit:
                return i, pos, None
            if pos >= 0 and limit - pos >= HEADER_SIZE:
                h = self._header_at(pos)
                if self._is_batch(h, pos, limit) and h.base_offset <= entry:
                    return i, pos, h
            damaged.append((entry, pos))
            i -= 1
        return -1, 0, None

    def _scan(self, pos: int, offset: int, limit: int, h: BatchHeader | None = None) -> int:
        """From the batch starting at pos (its header `h` when already read), the position of the first
        batch whose last offset is at least `offset` (`limit` when none is in the first `limit` bytes).
        CorruptRecordException at a header no batch has."""
        expected = self.base
        while pos < limit:
            if limit - pos < HEADER_SIZE:
                raise CorruptRecordException(f"{limit - pos} bytes at position {pos} of log segment "
                                             f"{self.log_path}: less than a batch header", pos)
            if h is None:
                h = self._header_at(pos)
            if not self._is_batch(h, pos, limit) or h.base_offset < expected:
                raise CorruptRecordException(
                    f"Found an invalid batch header at position {pos} of log segment {self.log_path} (base offset "
                    f"{h.base_offset}, length {h.batch_length}, magic {h.magic})", pos)
            if h.last_offset >= offset:
                return pos
            expected = h.next_offset
            pos += h.size
            h = None
        return limit

    def _index_damaged(self, idx: OffsetIndex, entry: int, pos: int) -> None:
        """A read found an .index entry that is not a batch start: say so, and rebuild that index in a
        worker thread (once per damaged index)."""
        if self._rebuilding is idx:
            return
        self._rebuilding = idx
        rebuild = self._index_from_file and self.offset_index is idx
        log.warning("log_segment.index_corrupt", file=str(idx.path), segment=self.base, entry_offset=entry,
                    position=pos, rebuilding=rebuild,
                    message=f"Found a corrupt entry in offset index {idx.path}: offset {entry} at position {pos} "
                            f"is not the start of a batch of log segment {self.log_path}; reading from an earlier "
                            f"entry{', rebuilding the index' if rebuild else ''}")
        if rebuild:
            self.index_rebuild = start_worker(lambda: self._rebuild_offset_index(idx),
                                              f"kafkite-index-rebuild-{self.base}")

    def _rebuild_offset_index(self, damaged: OffsetIndex) -> None:
        """In a worker thread: the offset index from the .log's batch headers (as recover() builds it), put in
        place of `damaged` in memory and on disk unless the segment changed meanwhile. A .log with a damaged
        batch keeps, instead, the entries of `damaged` that do point at a batch start."""
        limit = self.size
        fresh = OffsetIndex(damaged.path, self.base)
        try:
            with open(self.log_path, "rb") as f:
                fd = f.fileno()
                pos, since, expected = 0, 0, self.base
                while limit - pos >= HEADER_SIZE:
                    h = read_header(os.pread(fd, HEADER_SIZE, pos))
                    if not self._is_batch(h, pos, limit) or h.base_offset < expected:
                        break
                    if since > self.index_interval:
                        fresh.append(h.last_offset, pos)
                        since = 0
                    since += h.size
                    expected = h.next_offset
                    pos += h.size
                if pos != limit:
                    log.warning("log_segment.index_rebuild_partial", file=str(damaged.path), byte_offset=pos,
                                message=f"Log segment {self.log_path} has an invalid batch at byte offset {pos}: "
                                        f"keeping the entries of {damaged.path} that point at a batch start")
                    fresh = OffsetIndex(damaged.path, self.base)
                    for i in range(len(damaged.rel)):
                        entry, p = damaged.entry(i)
                        if 0 <= p and limit - p >= HEADER_SIZE:
                            h = read_header(os.pread(fd, HEADER_SIZE, p))
                            if self._is_batch(h, p, limit) and h.base_offset <= entry and \
                                    (not fresh.rel or (entry > fresh.base + fresh.rel[-1] and p > fresh.pos[-1])):
                                fresh.append(entry, p)  # increasing: the file passes the sanity check
            with self._index_lock:
                if self.offset_index is not damaged or not self._index_from_file or self.fd < 0 \
                        or damaged.path != fresh.path:
                    return  # replaced (the cleaner), truncated, appended to, closed or deleted meanwhile
                fresh.write()
                self.offset_index = fresh
            log.info("log_segment.index_rebuilt", file=str(fresh.path), entries=len(fresh.rel),
                     message=f"Rebuilt offset index {fresh.path} of log segment {self.log_path}")
        except OSError as exc:  # e.g. the partition was deleted meanwhile: reads go on scanning past the damage
            log.warning("log_segment.index_rebuild_failed", file=str(damaged.path), error=str(exc))
