"""Partition logs: MemoryLog and FileLog behave alike; FileLog recovers from torn writes.

The finer rules are in test_storage_{batch,log,producer_state,recovery,validate}.py."""
from __future__ import annotations

import os

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkite.storage.batch import build_batch, crc_ok, decode_records, iter_batches, read_header
from kafkite.storage.log_config import LogConfig
from kafkite.storage.unified_log import FileLog, MemoryLog, OffsetOutOfRange


def batch(n=3, ts=1000, size=10, codec=0, pid=-1, epoch=-1, seq=-1):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=1 << 30)
    for i in range(n):
        b.append(i, timestamp=ts + i, key=b"k%d" % i, value=b"v" * size, headers=[("h", b"x")])
    return bytearray(b.build())


@pytest.fixture(params=["memory", "file"])
def make_log(request, tmp_path):
    def make(**cfg):
        config = LogConfig(**cfg)
        if request.param == "memory":
            return MemoryLog(config)
        return FileLog(tmp_path / "t-0", config)
    return make


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_batch_header_and_records(codec):
    data = batch(5, codec=codec)
    (pos, h), = list(iter_batches(data))
    assert (h.magic, h.record_count, h.last_offset_delta, h.compression) == (2, 5, 4, codec)
    assert crc_ok(data, 0, h)
    recs = decode_records(data)
    assert [r.key for r in recs] == [b"k%d" % i for i in range(5)]
    data[-1] ^= 1
    assert not crc_ok(data, 0, read_header(data))


def test_append_read_offsets(make_log):
    lg = make_log()
    r1 = lg.append(batch(3), now_ms=0)
    r2 = lg.append(batch(2), now_ms=0)
    assert (r1.base_offset, r2.base_offset, lg.log_end_offset) == (0, 3, 5)
    assert [r.offset for r in decode_records(lg.read(0, 1 << 20))] == [0, 1, 2, 3, 4]
    assert [r.offset for r in decode_records(lg.read(4, 1 << 20))] == [3, 4]  # whole batch containing 4
    assert lg.read(5, 100) == b""
    with pytest.raises(OffsetOutOfRange):
        lg.read(6, 100)


def test_max_bytes_at_least_one_batch(make_log):
    lg = make_log()
    for _ in range(3):
        lg.append(batch(1, size=500), now_ms=0)
    assert len(list(iter_batches(lg.read(0, 10)))) == 1
    assert len(list(iter_batches(lg.read(0, 10, min_one=False)))) == 0
    assert len(list(iter_batches(lg.read(0, 1200)))) == 2


def test_timestamp_lookup(make_log):
    lg = make_log(segment_bytes=1000)
    for i in range(50):
        lg.append(batch(2, ts=1000 + i * 100), now_ms=0)
    assert lg.offset_for_timestamp(0)[0] == 0
    assert lg.offset_for_timestamp(1101)[:2] == (3, 1101)
    assert lg.offset_for_timestamp(1150)[:2] == (4, 1200)
    assert lg.offset_for_timestamp(10**9) is None
    assert lg.max_timestamp_entry()[:2] == (99, 1000 + 49 * 100 + 1)


def test_delete_records(make_log):
    lg = make_log(segment_bytes=500)
    for _ in range(10):
        lg.append(batch(1), now_ms=0)
    assert lg.delete_records_before(4) == 4
    with pytest.raises(OffsetOutOfRange):
        lg.delete_records_before(11)
    with pytest.raises(OffsetOutOfRange):
        lg.read(3, 100)
    assert decode_records(lg.read(4, 1))[0].offset == 4


def test_leader_epochs(make_log):
    lg = make_log()
    lg.append(batch(2), now_ms=0, leader_epoch=0)
    lg.append(batch(3), now_ms=0, leader_epoch=2)
    assert lg.end_offset_for_epoch(0) == (0, 2)
    assert lg.end_offset_for_epoch(1) == (0, 2)
    assert lg.end_offset_for_epoch(2) == (2, 5)


def test_file_log_recovers_torn_tail(tmp_path):
    lg = FileLog(tmp_path / "p-0", LogConfig())
    for _ in range(5):
        lg.append(batch(2), now_ms=0)
    lg.close()
    seg = tmp_path / "p-0" / ("0" * 20 + ".log")
    size = seg.stat().st_size
    with open(seg, "r+b") as f:
        f.truncate(size - 7)  # a torn last batch
    lg = FileLog(tmp_path / "p-0", LogConfig())
    assert lg.log_end_offset == 8
    r = lg.append(batch(1), now_ms=0)
    assert r.base_offset == 8  # continues without a gap
    lg.close()
    # a corrupted (bad CRC) tail is cut too
    with open(seg, "r+b") as f:
        f.seek(-3, os.SEEK_END)
        f.write(b"\xff\xff\xff")
    lg = FileLog(tmp_path / "p-0", LogConfig())
    assert lg.log_end_offset == 8
    lg.close()


def test_file_log_rebuilds_missing_index_and_restores_state(tmp_path):
    cfg = LogConfig(segment_bytes=1500, index_interval_bytes=200)
    lg = FileLog(tmp_path / "p-0", cfg)
    for i in range(60):
        lg.append(batch(2, ts=i, pid=7, epoch=0, seq=2 * i), now_ms=0)
    lg.close()
    for p in (tmp_path / "p-0").glob("*.index"):
        p.unlink()
    lg = FileLog(tmp_path / "p-0", cfg)
    assert lg.log_end_offset == 120
    assert decode_records(lg.read(77, 1))[0].offset in (76, 77)
    # producer state rebuilt from the log: a retry of the last batch is a duplicate
    chk = lg.producer_state.check(7, 0, 118, 119)
    assert chk.error == "duplicate" and chk.base_offset == 118


def test_build_batch_for_internal_writes():
    data = build_batch([(b"k", b"v", []), (b"k2", None, [])], timestamp_ms=5, base_offset=10)
    recs = decode_records(data)
    assert [(r.offset, r.key, r.value) for r in recs] == [(10, b"k", b"v"), (11, b"k2", None)]


def read_all(lg):
    out, off = [], lg.log_start_offset
    while off < lg.log_end_offset:
        recs = decode_records(lg.read(off, 1 << 20))
        if not recs:
            break
        out.extend(recs)
        off = recs[-1].offset + 1
    return out


def test_compaction_keeps_latest_per_key_and_expires_tombstones(make_log):
    lg = make_log(segment_bytes=300, delete_retention_ms=1000)
    from kafkite.storage.batch import build_batch
    writes = [(b"a", b"1"), (b"b", b"1"), (b"a", b"2"), (b"c", b"1"), (b"b", None), (b"a", b"3"), (b"d", b"1"),
              (b"e", b"1")]
    for k, v in writes:
        lg.append(bytearray(build_batch([(k, v, [])], timestamp_ms=0)), now_ms=0)
    removed = lg.compact(now_ms=500)  # tombstone for b is younger than delete.retention.ms: kept
    assert removed >= 3
    got = [(r.offset, r.key, r.value) for r in read_all(lg)]
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(offsets)
    assert (0, b"a", b"1") not in got and (2, b"a", b"2") not in got
    assert (5, b"a", b"3") in got and (3, b"c", b"1") in got and (4, b"b", None) in got
    for k in (b"f", b"g", b"h", b"i", b"j"):  # roll past the tombstone's segment (the active one is never cleaned)
        lg.append(bytearray(build_batch([(k, b"1", [])], timestamp_ms=0)), now_ms=0)
    lg.compact(now_ms=10_000)  # now the tombstone goes too
    got = [(r.offset, r.key, r.value) for r in read_all(lg)]
    assert all(k != b"b" for _, k, _ in got)
    assert lg.log_end_offset == 13
    assert lg.append(bytearray(build_batch([(b"z", b"1", [])], timestamp_ms=0)), now_ms=0).base_offset == 13


def test_compaction_rewrites_partly_superseded_batches(make_log):
    from kafkite.storage.batch import build_batch
    lg = make_log(segment_bytes=200)
    lg.append(bytearray(build_batch([(b"a", b"1", []), (b"b", b"1", []), (b"c", b"1", [])], timestamp_ms=0)),
              now_ms=0)
    lg.append(bytearray(build_batch([(b"b", b"2", [])], timestamp_ms=0)), now_ms=0)
    lg.append(bytearray(build_batch([(b"z", b"1", [])], timestamp_ms=0)), now_ms=0)
    assert lg.compact(now_ms=0) == 1
    got = [(r.offset, r.key, r.value) for r in read_all(lg)]
    assert got == [(0, b"a", b"1"), (2, b"c", b"1"), (3, b"b", b"2"), (4, b"z", b"1")]
