"""storage FileLog on disk: Kafka's files, recovery from torn writes, index rebuilds, reopen."""
from __future__ import annotations

import os
import struct
import uuid

from kafkite.storage.batch import decode_records, iter_batches, read_header
from kafkite.storage.log_config import LogConfig
from kafkite.storage.unified_log import FileLog

from test_storage_log import batch, offsets


def fill(d, n=20, cfg=None, **kw):
    lg = FileLog(d, cfg or LogConfig(segment_bytes=600, index_interval_bytes=150))
    for i in range(n):
        lg.append(batch(2, ts=1000 + i, **kw), now_ms=0, leader_epoch=i // 10)
    return lg


def all_offsets(lg):
    out, off = [], lg.log_start_offset
    while off < lg.log_end_offset:
        data = lg.read(off, 1 << 20)
        out += offsets(data)
        off = [h for _, h in iter_batches(data)][-1].next_offset
    return out


def test_kafka_file_layout(tmp_path):
    d = tmp_path / "t-0"
    lg = fill(d)
    lg.close()
    names = sorted(p.name for p in d.iterdir())
    logs = [n for n in names if n.endswith(".log")]
    assert logs[0] == "00000000000000000000.log" and len(logs) > 3
    for n in logs:
        base = int(n[:20])
        assert f"{n[:20]}.index" in names and f"{n[:20]}.timeindex" in names
        raw = (d / n).read_bytes()
        assert read_header(raw).base_offset == base  # batches as on the wire, first one at the base
        idx = (d / f"{n[:20]}.index").read_bytes()
        for i in range(0, len(idx), 8):  # (relative offset, position) of a batch start
            rel, pos = struct.unpack_from(">ii", idx, i)
            h = read_header(raw, pos)
            assert h.base_offset <= base + rel <= h.last_offset
        tidx = (d / f"{n[:20]}.timeindex").read_bytes()
        ts = [struct.unpack_from(">qi", tidx, i) for i in range(0, len(tidx), 12)]
        assert ts and [t for t, _ in ts] == sorted({t for t, _ in ts})  # strictly increasing
    assert (d / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n1 20\n"


def test_partition_metadata(tmp_path):
    tid = uuid.uuid4()
    lg = FileLog(tmp_path / "t-0", LogConfig(), topic_id=tid)
    text = (tmp_path / "t-0" / "partition.metadata").read_text()
    assert text.startswith("version: 0\ntopic_id: ") and "=" not in text and len(text.split()[-1]) == 22
    assert lg.topic_id == tid
    lg.close()
    assert FileLog(tmp_path / "t-0", LogConfig()).topic_id == tid


def test_reopen_keeps_everything(tmp_path):
    d = tmp_path / "t-0"
    lg = fill(d, pid=3, epoch=0, seq=0)
    lg.delete_records_before(5)
    before = (lg.log_start_offset, lg.log_end_offset, [s.base for s in lg.segments], lg.epochs.entries,
              lg.max_timestamp_entry(), lg.offset_for_timestamp(1010))
    lg.close()
    lg2 = FileLog(d, LogConfig(segment_bytes=600, index_interval_bytes=150))
    assert (lg2.log_start_offset, lg2.log_end_offset, [s.base for s in lg2.segments], lg2.epochs.entries,
            lg2.max_timestamp_entry(), lg2.offset_for_timestamp(1010)) == before
    assert all_offsets(lg2) == list(range(4, 40))  # the whole batch holding offset 5


def test_torn_write_is_truncated_and_appends_continue(tmp_path):
    d = tmp_path / "t-0"
    lg = fill(d, n=5, cfg=LogConfig())
    path = lg.active.log_path
    lg.close()
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size - 7)  # the last batch is torn
    lg2 = FileLog(d, LogConfig())
    assert lg2.log_end_offset == 8 and path.stat().st_size < size - 7
    r = lg2.append(batch(2), now_ms=0)
    assert r.base_offset == 8
    assert all_offsets(lg2) == list(range(10))


def test_garbage_tail_and_bad_crc_are_truncated(tmp_path):
    d = tmp_path / "t-0"
    lg = fill(d, n=4, cfg=LogConfig())
    path = lg.active.log_path
    lg.close()
    raw = bytearray(path.read_bytes())
    last = [p for p, _ in iter_batches(raw)][-1]
    raw[last + 70] ^= 0xFF  # corrupt the last batch's records: CRC fails
    path.write_bytes(bytes(raw) + b"\x00" * 30)
    lg2 = FileLog(d, LogConfig())
    assert lg2.log_end_offset == 6 and path.stat().st_size == last
    lg2.append(batch(1), now_ms=0)
    assert all_offsets(lg2) == list(range(7))


def test_missing_and_stale_indexes_are_rebuilt(tmp_path):
    d = tmp_path / "t-0"
    cfg = LogConfig(segment_bytes=600, index_interval_bytes=150)
    lg = fill(d, cfg=cfg)
    expected = {s.base: (s.index, s.timeindex) for s in lg.segments[:-1]}
    lg.close()
    first = sorted(d.glob("*.index"))[0]
    first.unlink()
    second = sorted(d.glob("*.timeindex"))[1]
    second.write_bytes(b"\x00" * 5)  # not a whole entry
    lg2 = FileLog(d, cfg)
    got = {s.base: (s.index, s.timeindex) for s in lg2.segments[:-1]}
    assert got == expected
    assert first.exists()
    assert all_offsets(lg2) == list(range(40))
    for off in range(0, 40, 3):
        assert offsets(lg2.read(off, 1))[0] in (off, off - 1)


def test_read_uses_index_not_a_scan(tmp_path, monkeypatch):
    """A read seeks with the .index: the header reads it does stay bounded by the index interval."""
    d = tmp_path / "t-0"
    lg = FileLog(d, LogConfig(index_interval_bytes=1000))
    for i in range(400):
        lg.append(batch(1, size=50), now_ms=0)
    assert len(lg.segments) == 1 and len(lg.active.index) > 20
    calls = []
    real = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, pos: calls.append(pos) or real(fd, n, pos))
    assert offsets(lg.read(390, 1)) == [390]
    assert len(calls) < 20  # a scan from the segment start would take ~390


def test_producer_state_rebuilt_on_open(tmp_path):
    d = tmp_path / "t-0"
    lg = FileLog(d, LogConfig(segment_bytes=500))
    for i in range(10):
        lg.append(batch(2, pid=7, epoch=1, seq=2 * i), now_ms=0)
    lg.close()
    lg2 = FileLog(d, LogConfig(segment_bytes=500))
    ps = lg2.producer_state
    dup = ps.check(7, 1, 18, 19)
    assert dup.duplicate and (dup.base_offset, dup.last_offset) == (18, 19)
    assert ps.check(7, 1, 20, 21).ok
    assert ps.check(7, 1, 22, 23).code == 45
    assert ps.check(7, 0, 20, 21).code == 47


def test_interrupted_compaction_leftover_is_ignored(tmp_path):
    d = tmp_path / "t-0"
    lg = fill(d, n=6, cfg=LogConfig())
    lg.close()
    (d / "00000000000000000000.log.cleaned").write_bytes(b"junk")
    lg2 = FileLog(d, LogConfig())
    assert lg2.log_end_offset == 12 and not (d / "00000000000000000000.log.cleaned").exists()


def test_delete_removes_directory(tmp_path):
    lg = fill(tmp_path / "t-0", n=2)
    lg.delete()
    assert not (tmp_path / "t-0").exists()


def test_compaction_survives_reopen(tmp_path):
    d = tmp_path / "t-0"
    cfg = LogConfig(segment_bytes=300, cleanup_policy="compact")
    lg = FileLog(d, cfg)
    for i in range(12):
        lg.append(batch(1, keys=[b"k%d" % (i % 2)], values=[b"%d" % i]), now_ms=0)
    lg.compact(now_ms=0)
    recs = [(r.offset, r.key, r.value) for r in decode_records(b"".join(
        lg.read(s.base, 1 << 20) or b"" for s in lg.segments if s.size))]
    lg.close()
    lg2 = FileLog(d, cfg)
    recs2 = [(r.offset, r.key, r.value) for r in decode_records(b"".join(
        lg2.read(s.base, 1 << 20) or b"" for s in lg2.segments if s.size))]
    assert recs == recs2 and lg2.log_end_offset == 12


def test_deferred_log_start_writes_keep_their_order_and_a_crash_loses_nothing(tmp_path):
    """DeleteRecords and retention with defer_renames leave the `log-start-offset` and leader-epoch-checkpoint writes
    to renames()' function (the broker runs it in a worker thread): nothing is written before it runs; an older
    function run after a newer one overwrites nothing; a flush's worker still writes the epochs before its records;
    a close writes what no worker took; and a load cuts the leader epochs below the log start (the write a crash
    lost: Kafka's LogLoader.truncateFromStart)."""
    d = tmp_path / "t-0"
    cfg = LogConfig(segment_bytes=600, index_interval_bytes=150)
    lg = fill(d, cfg=cfg)
    epochs, start = d / "leader-epoch-checkpoint", d / "log-start-offset"
    lg.delete_records_before(22, defer_renames=True)
    assert not start.exists() and epochs.read_text() == "0\n2\n0 0\n1 20\n"
    older = lg.renames()
    lg.delete_records_before(30, defer_renames=True)
    newer = lg.renames()
    newer()
    older()
    lg.schedule_renamed()
    assert (start.read_text(), epochs.read_text()) == ("30", "0\n1\n1 30\n")
    lg.append(batch(2), now_ms=0, leader_epoch=2, defer_flush=True)  # epoch 2 at 40, its write deferred
    lg.delete_records_before(34, defer_renames=True)
    lg.renames()  # taken, never run
    target, run = lg.deferred_flush()
    run()  # the flush's worker: the epochs (with the log start's cut) before the records
    lg.mark_flushed(target)
    assert epochs.read_text() == "0\n2\n1 34\n2 40\n" and start.read_text() == "30"
    lg.delete_records_before(36, defer_renames=True)  # no worker takes it: the close writes it
    lg.close()
    assert (start.read_text(), epochs.read_text()) == ("36", "0\n2\n1 36\n2 40\n")
    epochs.write_text("0\n3\n0 0\n1 20\n2 40\n")  # as a crash before the epochs' write leaves it
    again = FileLog(d, cfg)
    assert (again.log_start_offset, again.epochs.entries) == (36, [(1, 36), (2, 40)])
    assert epochs.read_text() == "0\n2\n1 36\n2 40\n"
    again.close()
