"""kafkite.testing.replicas: reading a partition's segment files and comparing replicas byte for byte.
The segment files are written by Kafkite's own storage (FileLog), as a broker writes them."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from kafkite.storage.batch import build_batch, read_header
from kafkite.storage.log_config import LogConfig
from kafkite.storage.unified_log import FileLog
from kafkite.testing.replicas import (Batch, assert_replicas_equal, compare_replicas, partition_dirs,
                                      read_batches, read_replica, segment_files)

TS = 1_700_000_000_000


def batch(values: list[str], *, ts: int = TS) -> bytes:
    return build_batch([(b"k", v.encode(), []) for v in values], timestamp_ms=ts)


# (values of one batch, the leader epoch it is appended in)
HISTORY = [([f"v-{i}-{j}" for j in range(1 + i % 3)], 1 if i < 6 else 2) for i in range(10)]


def write_log(d: Path, history=HISTORY, *, segment_bytes: int = 400) -> list[tuple[int, int]]:
    """A partition directory holding `history`; returns the (base, last) offsets appended."""
    lg = FileLog(d, LogConfig(segment_bytes=segment_bytes))
    out = []
    for values, epoch in history:
        r = lg.append(batch(values), now_ms=TS, leader_epoch=epoch)
        out.append((r.base_offset, r.last_offset))
    assert lg.close()
    return out


def test_read_batches_reads_every_segment_in_order(tmp_path):
    offsets = write_log(tmp_path / "t-0", segment_bytes=300)
    files = segment_files(tmp_path / "t-0")
    assert len(files) >= 3, files                       # several segments, read in base-offset order
    got = read_batches(tmp_path / "t-0")
    assert [(b.base_offset, b.last_offset) for b in got] == offsets
    assert offsets[-1][1] == sum(len(v) for v, _ in HISTORY) - 1
    for b, (values, epoch) in zip(got, HISTORY):
        h = read_header(b.data)
        assert h.size == len(b.data) and h.record_count == len(values) and b.leader_epoch == epoch
    assert read_replica(tmp_path / "t-0").torn is None
    assert read_replica(tmp_path / "t-0").log_end_offset == offsets[-1][1] + 1


def test_segment_files_leave_out_other_files(tmp_path):
    d = tmp_path / "t-0"
    write_log(d, segment_bytes=300)
    first = segment_files(d)[0]
    (d / (first.stem + ".log.deleted")).write_bytes(first.read_bytes())
    (d / (first.stem + ".log.cleaned")).write_bytes(b"junk")
    assert all(p.suffix == ".log" and len(p.stem) == 20 for p in segment_files(d))
    assert [int(p.stem) for p in segment_files(d)] == sorted(int(p.stem) for p in segment_files(d))
    assert read_batches(tmp_path / "missing-0") == []


def test_equal_replicas_with_other_segment_boundaries(tmp_path):
    dirs = {1: tmp_path / "b1" / "t-0", 2: tmp_path / "b2" / "t-0", 3: tmp_path / "b3" / "t-0"}
    write_log(dirs[1], segment_bytes=300)
    write_log(dirs[2], segment_bytes=1 << 20)             # one segment only
    write_log(dirs[3], segment_bytes=500)
    assert len(segment_files(dirs[2])) == 1 and len(segment_files(dirs[1])) > 1
    diff = compare_replicas(dirs)
    assert diff.same and diff.offset is None and diff.brokers == ()
    assert diff.batches == {1: 10, 2: 10, 3: 10}
    end = read_replica(dirs[1]).log_end_offset
    assert diff.log_end_offsets == {1: end, 2: end, 3: end}
    assert "agree" in str(diff)
    assert assert_replicas_equal(dirs).same


def test_a_replica_written_in_another_leader_epoch_differs_in_its_bytes(tmp_path):
    """Same offsets, same records, another partitionLeaderEpoch from the 4th batch on: the bytes differ."""
    dirs = {1: tmp_path / "b1" / "t-0", 2: tmp_path / "b2" / "t-0", 3: tmp_path / "b3" / "t-0"}
    offsets = write_log(dirs[1])
    write_log(dirs[2])
    write_log(dirs[3], [(v, 1 if i < 3 else 7) for i, (v, _) in enumerate(HISTORY)])
    diff = compare_replicas(dirs)
    assert not diff.same
    assert (diff.offset, diff.kind, diff.brokers, diff.missing) == (offsets[3][0], "bytes", (3,), ())
    assert "partitionLeaderEpoch" in diff.detail and "leader epoch 7" in diff.detail
    text = str(diff)
    assert f"at offset {offsets[3][0]}" in text and "[3]" in text and "reference broker 1" in text
    # the leader (3) as the reference: the other two differ from it
    diff3 = compare_replicas(dirs, reference=3)
    assert diff3.brokers == (1, 2) and diff3.offset == offsets[3][0]
    # below the divergence they agree
    assert compare_replicas(dirs, below=offsets[3][0]).same
    assert not compare_replicas(dirs, below=offsets[3][0] + 1).same
    with pytest.raises(AssertionError, match=f"at offset {offsets[3][0]}"):
        assert_replicas_equal(dirs)


def test_a_diverging_history_is_found_at_its_first_offset(tmp_path):
    """Broker 2 took other records from the 5th batch on (a truncation that did not happen): offsets and
    bytes part there."""
    d1, d2 = tmp_path / "b1" / "t-0", tmp_path / "b2" / "t-0"
    offsets = write_log(d1)
    other = HISTORY[:4] + [(["x"] * (len(HISTORY[4][0]) + 1), 1)] + HISTORY[5:]
    write_log(d2, other)
    diff = compare_replicas({1: d1, 2: d2})
    assert (diff.same, diff.offset, diff.kind, diff.brokers) == (False, offsets[4][0], "offsets", (2,))
    assert f"batch {offsets[4][0]}..{offsets[4][1]}" in diff.detail
    assert f"batch {offsets[4][0]}..{offsets[4][1] + 1}" in diff.detail

    # the same offsets with another value: a byte difference in the records
    d3 = tmp_path / "b3" / "t-0"
    write_log(d3, HISTORY[:6] + [([v.replace("v", "w") for v in HISTORY[6][0]], 2)] + HISTORY[7:])
    diff = compare_replicas({1: d1, 3: d3})
    assert (diff.offset, diff.kind, diff.brokers) == (offsets[6][0], "bytes", (3,))
    assert "(records)" in diff.detail or "(crc)" in diff.detail


def test_a_shorter_replica(tmp_path):
    d1, d2, d3 = (tmp_path / f"b{i}" / "t-0" for i in (1, 2, 3))
    offsets = write_log(d1)
    write_log(d2, HISTORY[:7])
    write_log(d3)
    diff = compare_replicas({1: d1, 2: d2, 3: d3})
    assert (diff.same, diff.offset, diff.kind, diff.brokers, diff.missing) == (
        False, offsets[7][0], "missing", (2,), (2,))
    assert f"broker 2: no batch here (its log ends at offset {offsets[7][0]})" in diff.detail
    assert diff.log_end_offsets[2] == offsets[7][0] and diff.log_end_offsets[1] == offsets[-1][1] + 1
    # below what broker 2 has (a high watermark it reached) they agree; one offset more and they do not
    assert compare_replicas({1: d1, 2: d2, 3: d3}, below=offsets[7][0]).same
    assert not compare_replicas({1: d1, 2: d2, 3: d3}, below=offsets[7][0] + 1).same
    # the short one as the reference: the others are the ones that differ, it is the one missing
    diff2 = compare_replicas({1: d1, 2: d2, 3: d3}, reference=2)
    assert diff2.brokers == (1, 3) and diff2.missing == (2,)
    # an empty replica (no directory at all)
    diff4 = compare_replicas({1: d1, 4: tmp_path / "b4" / "t-0"})
    assert (diff4.offset, diff4.kind, diff4.brokers) == (0, "missing", (4,))
    assert "broker 4: no batch here (its log is empty)" in diff4.detail


def test_a_longer_replica_is_a_difference_too(tmp_path):
    d1, d2 = tmp_path / "b1" / "t-0", tmp_path / "b2" / "t-0"
    offsets = write_log(d1, HISTORY[:5])
    write_log(d2)
    diff = compare_replicas({1: d1, 2: d2})
    assert (diff.offset, diff.kind, diff.brokers, diff.missing) == (offsets[4][1] + 1, "missing", (2,), (1,))


def test_a_torn_tail_is_where_reading_stops(tmp_path):
    d1, d2 = tmp_path / "b1" / "t-0", tmp_path / "b2" / "t-0"
    offsets = write_log(d1)
    write_log(d2)
    last = segment_files(d2)[-1]
    whole = last.read_bytes()
    last_batch = read_batches(d2)[-1]
    last.write_bytes(whole[:-5])                          # the last batch cut short: a crash mid-write
    rep = read_replica(d2)
    assert [(b.base_offset, b.last_offset) for b in rep.batches] == offsets[:-1]
    assert rep.torn and last.name in rep.torn and f"{len(last_batch.data) - 5} bytes" in rep.torn
    diff = compare_replicas({1: d1, 2: d2})
    assert (diff.offset, diff.kind, diff.brokers) == (offsets[-1][0], "missing", (2,))
    assert 2 in diff.torn and "stopped early" in str(diff)
    assert compare_replicas({1: d1, 2: d2}, below=offsets[-1][0]).same
    # zeros after the last batch (a preallocated or half-written tail) stop it too
    last.write_bytes(whole + bytes(100))
    assert [(b.base_offset, b.last_offset) for b in read_batches(d2)] == offsets
    assert read_replica(d2).torn.endswith("are not a whole batch")
    assert compare_replicas({1: d1, 2: d2}).same


def test_check_crc_stops_at_a_corrupt_batch(tmp_path):
    d1, d2 = tmp_path / "b1" / "t-0", tmp_path / "b2" / "t-0"
    offsets = write_log(d1, segment_bytes=1 << 20)
    write_log(d2, segment_bytes=1 << 20)
    seg = segment_files(d2)[0]
    data = bytearray(seg.read_bytes())
    pos = sum(len(b.data) for b in read_batches(d2)[:2])  # the third batch
    data[pos + len(read_batches(d2)[2].data) - 1] ^= 0xFF  # its last record byte
    seg.write_bytes(bytes(data))
    diff = compare_replicas({1: d1, 2: d2})               # no CRC check: a byte difference in the records
    assert (diff.offset, diff.kind) == (offsets[2][0], "bytes") and "(records)" in diff.detail
    rep = read_replica(d2, check_crc=True)
    assert len(rep.batches) == 2 and "fails its CRC" in rep.torn
    diff = compare_replicas({1: d1, 2: d2}, check_crc=True)
    assert (diff.offset, diff.kind, diff.brokers) == (offsets[2][0], "missing", (2,))


def test_start_skips_what_retention_deleted_on_one_replica(tmp_path):
    d1, d2 = tmp_path / "b1" / "t-0", tmp_path / "b2" / "t-0"
    write_log(d1, segment_bytes=300)
    write_log(d2, segment_bytes=300)
    first, second = segment_files(d2)[:2]
    first.unlink()
    start = int(second.stem)
    diff = compare_replicas({1: d1, 2: d2})
    assert (diff.offset, diff.kind, diff.brokers) == (0, "offsets", (2,))
    assert compare_replicas({1: d1, 2: d2}, start=start).same


def test_batches_given_as_lists(tmp_path):
    d1 = tmp_path / "b1" / "t-0"
    write_log(d1)
    got = read_batches(d1)
    assert compare_replicas({1: d1, 2: list(got)}).same
    assert compare_replicas({1: d1, 2: [tuple(b) for b in got[:-1]]}).kind == "missing"
    assert isinstance(got[0], Batch) and got[0] == (got[0].base_offset, got[0].last_offset, got[0].data)
    with pytest.raises(ValueError):
        compare_replicas({})
    with pytest.raises(ValueError):
        compare_replicas({1: d1}, reference=9)


def test_partition_dirs_of_a_process_cluster_layout(tmp_path):
    cluster = SimpleNamespace(node_ids=[1, 2, 3], data_dir=tmp_path)
    assert partition_dirs(cluster, "t", 2) == {i: tmp_path / f"broker-{i}" / "t-2" for i in (1, 2, 3)}
    assert partition_dirs(cluster, "t", 0, brokers=[3]) == {3: tmp_path / "broker-3" / "t-0"}
    # a ProcessCluster's own record of each broker's data dir wins over the layout
    cluster._brokers = {1: SimpleNamespace(data_dir=tmp_path / "elsewhere")}
    assert partition_dirs(cluster, "t", 0)[1] == tmp_path / "elsewhere" / "t-0"
