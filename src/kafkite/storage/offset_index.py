"""Kafka's OffsetIndex: a segment's `.index` file.

8-byte big-endian entries (offset relative to the segment's base -- the last offset of a
batch -- and the int32 file position of that batch), one every `index.interval.bytes` of log.
Held in memory as two compact arrays; written out whole when the segment stops being active.
At most `segment.index.bytes // 8` entries (`is_full`: the log rolls the segment, see file_log_segment.py).

A file read at start-up passes Kafka's sanity checks (OffsetIndex.sanityCheck: a whole number of
entries, offsets from the segment's base; here also offsets and positions strictly increasing and
inside the segment) or `load` raises CorruptIndexException, and LogLoader rebuilds the segment's
indexes, as Kafka does. An entry that passes them but does not point at a batch start is found
on the read path (FileLogSegment.find_position checks the batch header at the position it gives).
"""
from __future__ import annotations

import bisect
import operator
import os
import sys
from array import array
from pathlib import Path

from .log_segment import StrPath


def be_array(code: str, raw: bytes) -> array:
    """A big-endian byte string as an array of `code` items."""
    a = array(code)
    a.frombytes(raw)
    if sys.byteorder == "little":
        a.byteswap()
    return a


def be_bytes(a: array) -> bytes:
    if sys.byteorder == "little":
        a = array(a.typecode, a)
        a.byteswap()
    return a.tobytes()


def write_file(path: Path, data: bytes, sync: bool) -> None:
    with open(path, "wb") as f:
        f.write(data)
        if sync:
            f.flush()
            os.fsync(f.fileno())


def increasing(a: array, strictly: bool = True) -> bool:
    """Every item above (or, not strictly, at least) the one before it: one pass at C speed."""
    return all(map(operator.lt if strictly else operator.le, a, a[1:]))


class CorruptIndexException(Exception):
    """Kafka's CorruptIndexException: an index file that fails its sanity check (it is rebuilt)."""


class IndexFile:
    """What OffsetIndex and TimeIndex share: a file of fixed-size entries held as two arrays."""
    entry_size = 8
    columns = ("rel", "pos")
    codes = ("i", "i")

    def __init__(self, path: Path | str, base: int):
        self.path, self.base = path, base
        self.reset()

    # Empty columns are the empty tuple, an array from the first entry on, and the path is kept as a str: an index
    # of the many segments never appended to holds no object the garbage collector tracks (file_log_segment.py).
    path = StrPath()

    def reset(self) -> None:
        for name in self.columns:
            setattr(self, name, ())

    def _columns(self) -> None:
        """Arrays for the columns, before the first entry goes in."""
        for name, code in zip(self.columns, self.codes):
            setattr(self, name, array(code))

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(*(getattr(self, c) for c in self.columns)))

    kind = "Index"

    def _read(self) -> bytes | None:
        """The file's bytes; None when missing. CorruptIndexException when not a whole number of
        entries."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        if len(raw) % self.entry_size:
            raise CorruptIndexException(f"{self.kind} file {self.path} is corrupt, found {len(raw)} bytes which is "
                                        f"neither positive nor a multiple of {self.entry_size}")
        return raw

    def is_full(self, max_index_bytes: int) -> bool:
        """Kafka's AbstractIndex.isFull for an index file of at most `max_index_bytes` (segment.index.bytes):
        `max_index_bytes // entry_size` entries."""
        return len(getattr(self, self.columns[0])) >= max_index_bytes // self.entry_size

    def to_bytes(self) -> bytes:
        raise NotImplementedError

    def write(self, sync: bool = False) -> None:
        write_file(self.path, self.to_bytes(), sync)


class OffsetIndex(IndexFile):
    rel: array
    pos: array

    def append(self, offset: int, position: int) -> None:
        if not self.rel:
            self._columns()
        self.rel.append(offset - self.base)
        self.pos.append(position)

    def slot(self, offset: int) -> int:
        """Number of the last entry whose offset is below or at `offset` (-1 if none)."""
        return bisect.bisect_right(self.rel, offset - self.base) - 1

    def entry(self, i: int) -> tuple[int, int]:
        """Entry i as (absolute offset, position)."""
        return self.base + self.rel[i], self.pos[i]

    def lookup(self, offset: int) -> int:
        """Position of the last indexed batch whose last offset is below or at `offset` (0 if none).
        Unchecked: FileLogSegment.find_position checks that it is a batch start."""
        i = self.slot(offset)
        return self.pos[i] if i >= 0 else 0

    def load(self, log_size: int, next_offset: int | None = None) -> bool:
        """Read the file: False when missing; CorruptIndexException when it fails the sanity check
        (see `sanity_check`)."""
        raw = self._read()
        if raw is None:
            return False
        pairs = be_array("i", raw)
        rel, pos = pairs[0::2], pairs[1::2]
        self.sanity_check(rel, pos, log_size, next_offset)
        self.rel, self.pos = (rel, pos) if rel else ((), ())
        return True

    def sanity_check(self, rel: array, pos: array, log_size: int, next_offset: int | None) -> None:
        """Kafka's OffsetIndex.sanityCheck (no offset below the segment's base), and what an index this
        broker or Kafka writes always holds: offsets and positions strictly increasing, every position
        inside the .log and every offset below the segment's end (`next_offset`, when known)."""
        if not rel:
            return
        where = f"Corrupt index found, index file ({self.path})"
        if rel[0] < 0 or pos[0] < 0:
            raise CorruptIndexException(f"{where} has an entry (offset {self.base + rel[0]}, position {pos[0]}) "
                                        f"below the base offset {self.base} or the file start")
        if not (increasing(rel) and increasing(pos)):
            i = next(i for i in range(1, len(rel)) if rel[i] <= rel[i - 1] or pos[i] <= pos[i - 1])
            raise CorruptIndexException(
                f"{where} has entry {i} (offset {self.base + rel[i]}, position {pos[i]}) not above the "
                f"one before it (offset {self.base + rel[i - 1]}, position {pos[i - 1]})")
        if pos[-1] >= log_size:
            raise CorruptIndexException(f"{where} has a position {pos[-1]} past the end of the log "
                                        f"segment ({log_size} bytes)")
        if next_offset is not None and self.base + rel[-1] >= next_offset:
            raise CorruptIndexException(f"{where} has the offset {self.base + rel[-1]}, past the segment's last "
                                        f"offset {next_offset - 1}")

    def to_bytes(self) -> bytes:
        if not self.rel:
            return b""
        pairs = array("i", [0]) * (2 * len(self.rel))
        pairs[0::2], pairs[1::2] = self.rel, self.pos
        return be_bytes(pairs)
