"""Kafka's OffsetIndex: a segment's `.index` file.

8-byte big-endian entries (offset relative to the segment's base -- the last offset of a
batch -- and the int32 file position of that batch), one every `index.interval.bytes` of log.
Held in memory as two compact arrays; written out whole when the segment stops being active.
"""
from __future__ import annotations

import bisect
import os
import sys
from array import array
from pathlib import Path


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


class IndexFile:
    """What OffsetIndex and TimeIndex share: a file of fixed-size entries held as two arrays."""
    entry_size = 8
    columns = ("rel", "pos")
    codes = ("i", "i")

    def __init__(self, path: Path, base: int):
        self.path, self.base = path, base
        self.reset()

    def reset(self) -> None:
        for name, code in zip(self.columns, self.codes):
            setattr(self, name, array(code))

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(*(getattr(self, c) for c in self.columns)))

    def _read(self) -> bytes | None:
        """The file's bytes; None when missing or not a whole number of entries."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        return None if len(raw) % self.entry_size else raw

    def to_bytes(self) -> bytes:
        raise NotImplementedError

    def write(self, sync: bool = False) -> None:
        write_file(self.path, self.to_bytes(), sync)


class OffsetIndex(IndexFile):
    rel: array
    pos: array

    def append(self, offset: int, position: int) -> None:
        self.rel.append(offset - self.base)
        self.pos.append(position)

    def lookup(self, offset: int) -> int:
        """Position of the last indexed batch whose last offset is below or at `offset` (0 if none)."""
        i = bisect.bisect_right(self.rel, offset - self.base) - 1
        return self.pos[i] if i >= 0 else 0

    def load(self, log_size: int) -> bool:
        """Read the file; False when missing, malformed, or pointing past the log's end."""
        raw = self._read()
        if raw is None:
            return False
        pairs = be_array("i", raw)
        rel, pos = pairs[0::2], pairs[1::2]
        if any(p >= log_size for p in pos[-1:]):
            return False
        self.rel, self.pos = rel, pos
        return True

    def to_bytes(self) -> bytes:
        pairs = array("i", [0]) * (2 * len(self.rel))
        pairs[0::2], pairs[1::2] = self.rel, self.pos
        return be_bytes(pairs)
