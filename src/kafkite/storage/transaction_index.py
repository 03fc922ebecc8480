"""Aborted transactions of a log (Kafka's TransactionIndex and AbortedTxn), and their `.txnindex` files.

Each segment of a file log that holds an abort marker has a `<base offset>.txnindex` beside its
`.log`: 34-byte entries, Kafka's format, so Kafka's DumpLogSegments reads them::

    version int16 (0) | producerId int64 | firstOffset int64 | lastOffset int64 | lastStableOffset int64

`lastOffset` is the marker's offset, `firstOffset` the transaction's first in this partition. An entry
goes to the file of the segment holding its marker. The log keeps every entry in memory too
(`AbortedTxns`), rebuilt from the log's batches when it opens, which also rewrites a file that
disagrees with the log (after recovery or truncation): the files are the log's, never trusted over it.
"""
from __future__ import annotations

import bisect
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from .checkpoint_file import write_tmp

ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
SUFFIX = ".txnindex"


@dataclass(frozen=True, order=True)
class AbortedTxn:
    last_offset: int
    producer_id: int
    first_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return ENTRY.pack(0, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)


def decode_entries(data: bytes) -> list[AbortedTxn]:
    out = []
    for pos in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
        version, pid, first, last, lso = ENTRY.unpack_from(data, pos)
        if version != 0:
            raise ValueError(f"unknown transaction index entry version {version}")
        out.append(AbortedTxn(last, pid, first, lso))
    return out


def index_path(directory: Path, base: int) -> Path:
    return directory / f"{base:020d}{SUFFIX}"


class AbortedTxns:
    """A log's aborted transactions in marker order."""

    def __init__(self) -> None:
        # (a tuple while empty, as in most logs: one object fewer for the garbage collector, log_segment.MadeOnce)
        self.entries: list[AbortedTxn] | tuple = ()

    def add(self, txn: AbortedTxn) -> None:
        if not self.entries:
            self.entries = []
        if self.entries and txn.last_offset < self.entries[-1].last_offset:
            bisect.insort(self.entries, txn)
        else:
            self.entries.append(txn)

    def clear(self) -> None:
        self.entries = ()

    def collect(self, fetch_offset: int, upper_bound: int) -> list[tuple[int, int]]:
        """Kafka's collectAbortedTransactions: (producer id, first offset) of each aborted transaction that overlaps
        [fetch_offset, upper_bound): its marker at or after fetch_offset, its first offset below upper_bound."""
        i = bisect.bisect_left(self.entries, AbortedTxn(fetch_offset, -1 << 63, 0, 0))
        return [(t.producer_id, t.first_offset) for t in self.entries[i:] if t.first_offset < upper_bound]

    def drop_below(self, offset: int) -> None:
        """The log start moved: entries whose marker is below it are gone with their segments."""
        i = bisect.bisect_left(self.entries, AbortedTxn(offset, -1 << 63, 0, 0))
        if i:
            del self.entries[:i]

    def in_range(self, lo: int, hi: int | None) -> list[AbortedTxn]:
        """Entries whose marker lies in [lo, hi) (hi None: no bound): one segment's file."""
        i = bisect.bisect_left(self.entries, AbortedTxn(lo, -1 << 63, 0, 0))
        j = len(self.entries) if hi is None else bisect.bisect_left(self.entries, AbortedTxn(hi, -1 << 63, 0, 0))
        return list(self.entries[i:j])


def sync_files(directory: Path, bases: list[int], txns: AbortedTxns, *, sync: bool = False) -> bool:
    """Make each segment's .txnindex hold exactly its entries (a file without entries is removed); with `sync` a
    rewritten file is fsynced before its rename (the caller fsyncs the directory). True when a file was rewritten or
    removed."""
    changed = False
    for i, base in enumerate(bases):
        nxt = bases[i + 1] if i + 1 < len(bases) else None
        want = b"".join(t.encode() for t in txns.in_range(base, nxt))
        path = index_path(directory, base)
        try:
            have = path.read_bytes()
        except FileNotFoundError:
            have = None
        if want and have != want:
            os.replace(write_tmp(path, want, sync=sync), path)
            changed = True
        elif not want and have is not None:
            path.unlink(missing_ok=True)
            changed = True
    return changed


def append_entry(directory: Path, base: int, txn: AbortedTxn) -> None:
    with open(index_path(directory, base), "ab") as f:
        f.write(txn.encode())
