"""What the coordinator needs from `__consumer_offsets`: append records, read them back."""
from __future__ import annotations

from typing import Iterable, Protocol


class OffsetsStore(Protocol):
    def append(self, partition: int, records: list[tuple[bytes, bytes | None]], now_ms: int) -> int:
        """Append (key, value-or-tombstone) records; returns the last offset. Raises on failure."""

    def read(self, partition: int, from_offset: int = 0) -> Iterable[tuple[int, bytes, bytes | None]]:
        """(offset, key, value) of every record from from_offset, in log order."""


class MemoryOffsetsStore:
    def __init__(self) -> None:
        self.logs: dict[int, list[tuple[int, bytes, bytes | None]]] = {}
        self.fail = False

    def append(self, partition: int, records, now_ms: int) -> int:
        if self.fail:
            raise OSError("injected append failure")
        log = self.logs.setdefault(partition, [])
        for k, v in records:
            log.append((len(log), k, v))
        return len(log) - 1

    def read(self, partition: int, from_offset: int = 0):
        return list(self.logs.get(partition, [])[from_offset:])
