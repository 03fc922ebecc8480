"""Comparing the replicas of a partition on disk: do the brokers hold the same batches at the same offsets?

    from kafkite.testing.replicas import compare_replicas, partition_dirs
    diff = compare_replicas(partition_dirs(cluster, "t", 0), below=hw, reference=leader)
    assert diff.same, diff          # str(diff) names the first difference: offset, brokers, bytes

A partition's replica is its directory `<data dir>/<topic>-<partition>/` of Kafka segment files
(`<20-digit base offset>.log`, v2 record batches exactly as on the wire). A follower stores the
leader's batches byte for byte (baseOffset and partitionLeaderEpoch included), so replicas that agree
hold the same sequence of batches -- however each broker happened to cut it into segments.

`read_batches` reads the segments in base-offset order and stops at the first batch that is not whole
(a torn tail: a crash mid-write, or a live broker's write in progress), as Kafka's log recovery keeps a
log up to its last whole batch; with `check_crc` a batch whose CRC32C is wrong stops it too. The files
are read as they are, without the broker: run it on a stopped broker, or below a high watermark that
every replica had reached (a live broker may be writing past it, never before it).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, NamedTuple

from ..storage.batch import HEADER_SIZE, crc_ok, iter_batches, read_header

SEGMENT_FILE = re.compile(r"^(\d{20})\.log$")

# the v2 header's fields by byte position (batch.py's table), to name where two batches differ
_FIELDS = [(0, "baseOffset"), (8, "batchLength"), (12, "partitionLeaderEpoch"), (16, "magic"), (17, "crc"),
           (21, "attributes"), (23, "lastOffsetDelta"), (27, "baseTimestamp"), (35, "maxTimestamp"),
           (43, "producerId"), (51, "producerEpoch"), (53, "baseSequence"), (57, "recordsCount"),
           (HEADER_SIZE, "records")]


class Batch(NamedTuple):
    """One whole batch of a replica: its offsets and its bytes (header included)."""
    base_offset: int
    last_offset: int
    data: bytes

    @property
    def leader_epoch(self) -> int:
        return read_header(self.data).partition_leader_epoch

    def describe(self) -> str:
        h = read_header(self.data)
        return (f"batch {self.base_offset}..{self.last_offset} ({len(self.data)} B, leader epoch "
                f"{h.partition_leader_epoch}, crc {h.crc:#010x}, producer {h.producer_id}/{h.producer_epoch} "
                f"seq {h.base_sequence})")


@dataclass
class Replica:
    """What `read_replica` found in one partition directory."""
    batches: list[Batch]
    segments: list[Path]
    # where reading stopped early, e.g. "00000000000000000000.log: 37 bytes after position 1024 are not a
    # whole batch" (None: every segment was read to its end)
    torn: str | None = None

    @property
    def log_end_offset(self) -> int | None:
        """One past the last whole batch's last offset (None: no batch at all)."""
        return self.batches[-1].last_offset + 1 if self.batches else None


def segment_files(partition_dir: str | Path) -> list[Path]:
    """The `<base offset>.log` files of a partition directory in base-offset order (`.cleaned`, `.swap`,
    `.deleted` and other files are left out)."""
    d = Path(partition_dir)
    found = [(int(m.group(1)), p) for p in d.iterdir() if (m := SEGMENT_FILE.match(p.name)) and p.is_file()]
    return [p for _, p in sorted(found)]


def read_replica(partition_dir: str | Path, *, check_crc: bool = False) -> Replica:
    """Every whole batch of the partition's segments, in order, up to the first torn one (see the module
    comment). A missing directory reads as an empty replica."""
    d = Path(partition_dir)
    if not d.is_dir():
        return Replica([], [], None)
    files = segment_files(d)
    out: list[Batch] = []
    for path in files:
        buf = path.read_bytes()
        pos = 0
        for p, h in iter_batches(buf):
            if check_crc and not crc_ok(buf, p, h):
                return Replica(out, files, f"{path.name}: batch at position {p} (offset {h.base_offset}) "
                                           "fails its CRC")
            out.append(Batch(h.base_offset, h.last_offset, bytes(buf[p:p + h.size])))
            pos = p + h.size
        if pos < len(buf):
            return Replica(out, files, f"{path.name}: {len(buf) - pos} bytes after position {pos} are not a "
                                       "whole batch")
    return Replica(out, files, None)


def read_batches(partition_dir: str | Path, *, check_crc: bool = False) -> list[Batch]:
    """[(base_offset, last_offset, bytes of the whole batch)] of a partition directory: `read_replica`'s
    batches."""
    return read_replica(partition_dir, check_crc=check_crc).batches


@dataclass
class ReplicaDiff:
    """The outcome of `compare_replicas`.

    same: every replica holds the same batches at the same offsets, byte for byte (within the range
    compared). Otherwise `offset` is the first offset where they part, `kind` says how ("bytes": same
    offsets, other bytes; "offsets": batches with other offset ranges; "missing": the broker has no
    batch there, its log ends sooner), `brokers` are those that differ there from `reference` (when
    the reference is the one without a batch: all the others), `missing` those without a batch there,
    and `detail` shows each broker's batch at that point."""
    same: bool
    reference: int
    offset: int | None = None
    kind: str | None = None
    brokers: tuple[int, ...] = ()
    missing: tuple[int, ...] = ()
    detail: str = ""
    batches: dict[int, int] = field(default_factory=dict)            # broker -> batches compared
    log_end_offsets: dict[int, int | None] = field(default_factory=dict)  # broker -> end of its whole batches
    torn: dict[int, str] = field(default_factory=dict)               # broker -> where its reading stopped early
    below: int | None = None
    start: int | None = None

    def __str__(self) -> str:
        scope = []
        if self.start is not None:
            scope.append(f"from offset {self.start}")
        if self.below is not None:
            scope.append(f"below offset {self.below}")
        where = f" ({', '.join(scope)})" if scope else ""
        ends = ", ".join(f"{b}: {e}" for b, e in sorted(self.log_end_offsets.items()))
        torn = "".join(f"\n  broker {b} stopped early: {t}" for b, t in sorted(self.torn.items()))
        if self.same:
            n = next(iter(self.batches.values()), 0)
            return f"replicas {sorted(self.batches)} agree{where}: {n} batches (log end offsets {ends}){torn}"
        return (f"replicas differ{where} at offset {self.offset} ({self.kind}): broker(s) "
                f"{list(self.brokers)} vs reference broker {self.reference}\n{self.detail}\n"
                f"  log end offsets: {ends}{torn}")


def _first_byte_difference(a: bytes, b: bytes) -> str:
    n = min(len(a), len(b))
    i = next((i for i in range(n) if a[i] != b[i]), n)
    name = [f for pos, f in _FIELDS if pos <= i][-1]
    return f"first differing byte at position {i} of the batch ({name})"


def compare_replicas(dirs: Mapping[int, str | Path | list], *, below: int | None = None,
                     start: int | None = None, reference: int | None = None,
                     check_crc: bool = False) -> ReplicaDiff:
    """Compare the replicas of one partition: {broker id: its partition directory} (or a list of
    batches already read). Only batches holding an offset in [start, below) are compared: `below` is
    typically the high watermark (what every in-sync replica must have), `start` the log start offset
    when retention may have deleted segments unevenly. The first difference is reported against
    `reference` (default: the lowest broker id), e.g. the leader."""
    if not dirs:
        raise ValueError("no replicas to compare")
    ref = min(dirs) if reference is None else reference
    if ref not in dirs:
        raise ValueError(f"reference broker {ref} is not among {sorted(dirs)}")
    replicas: dict[int, Replica] = {}
    for b, d in dirs.items():
        replicas[b] = Replica([Batch(*x) for x in d], [], None) if isinstance(d, list) else \
            read_replica(d, check_crc=check_crc)

    def in_range(x: Batch) -> bool:
        return (below is None or x.base_offset < below) and (start is None or x.last_offset >= start)

    chosen = {b: [x for x in r.batches if in_range(x)] for b, r in replicas.items()}
    diff = ReplicaDiff(same=True, reference=ref, batches={b: len(v) for b, v in chosen.items()},
                       log_end_offsets={b: r.log_end_offset for b, r in replicas.items()},
                       torn={b: r.torn for b, r in replicas.items() if r.torn}, below=below, start=start)
    order = [ref] + sorted(b for b in chosen if b != ref)
    for i in range(max(len(v) for v in chosen.values())):
        at: dict[int, Batch | None] = {b: chosen[b][i] if i < len(chosen[b]) else None for b in order}
        if len({at[b] for b in order}) == 1:
            continue
        mine = at[ref]
        differing = tuple(b for b in order if at[b] != mine)
        present = [x for x in at.values() if x is not None]
        offset = min(x.base_offset for x in present)
        if any(x is None for x in at.values()):
            kind = "missing"
        elif len({(x.base_offset, x.last_offset) for x in present}) > 1:
            kind = "offsets"
        else:
            kind = "bytes"
        lines = []
        for b in order:
            x = at[b]
            tag = " (reference)" if b == ref else ""
            if x is None:
                end = replicas[b].log_end_offset
                lines.append(f"  broker {b}{tag}: no batch here (its log " +
                             ("is empty)" if end is None else f"ends at offset {end})"))
            else:
                extra = ""
                if mine is not None and x != mine and kind == "bytes":
                    extra = "; " + _first_byte_difference(mine.data, x.data)
                lines.append(f"  broker {b}{tag}: {x.describe()}{extra}")
        diff.same = False
        diff.offset, diff.kind, diff.brokers, diff.detail = offset, kind, differing, "\n".join(lines)
        diff.missing = tuple(b for b in order if at[b] is None)
        return diff
    return diff


def partition_dirs(cluster: Any, topic: str, partition: int, brokers: list[int] | None = None) -> dict[int, Path]:
    """{broker id: its directory for topic-partition} in a ProcessCluster (`<cluster data dir>/broker-<id>/
    <topic>-<partition>`), for every broker or the ones given (a directory may not exist: an empty replica)."""
    ids = list(cluster.node_ids) if brokers is None else list(brokers)
    return {b: _broker_data_dir(cluster, b) / f"{topic}-{partition}" for b in ids}


def _broker_data_dir(cluster: Any, broker_id: int) -> Path:
    known = getattr(cluster, "_brokers", {}).get(broker_id)
    if known is not None:
        return Path(known.data_dir)
    return Path(cluster.data_dir) / f"broker-{broker_id}"


def assert_replicas_equal(dirs: Mapping[int, str | Path | list], **kw: Any) -> ReplicaDiff:
    """compare_replicas, raising AssertionError(str(diff)) when they differ; the diff otherwise."""
    diff = compare_replicas(dirs, **kw)
    if not diff.same:
        raise AssertionError(str(diff))
    return diff
