"""A damaged .index (Kafka's OffsetIndex): what start-up finds (the sanity check, then a rebuild) and
what the read path finds (an entry that is not a batch start: passed over, rebuilt in a worker thread).
Every read below the log end returns the batch holding the offset asked for, whatever the damage."""
from __future__ import annotations

import os
import struct
import threading

import pytest
import structlog

from kafkite.storage.batch import iter_batches
from kafkite.storage.file_log_segment import FileLogSegment
from kafkite.storage.log_config import LogConfig
from kafkite.storage.log_segment import CorruptRecordException
from kafkite.storage.unified_log import FileLog

from test_storage_log import batch, offsets

CFG = LogConfig(segment_bytes=2000, index_interval_bytes=150)
SEG0 = "00000000000000000000"


def fill(d, n=30, cfg=CFG):
    """n batches of 2 records (offsets 2i, 2i+1), closed cleanly: the first segment's .index has entries."""
    lg = FileLog(d, cfg)
    for i in range(n):
        lg.append(batch(2, ts=1000 + i, size=10 + i % 7), now_ms=0)
    end = lg.log_end_offset
    lg.close()
    return end


def reopen(d, end, cfg=CFG):
    """As after a clean stop: the older segments' index files are loaded, not rebuilt."""
    return FileLog(d, cfg, had_clean_shutdown=True, recovery_point=end)


def entries(d):
    raw = (d / f"{SEG0}.index").read_bytes()
    return [struct.unpack_from(">ii", raw, i) for i in range(0, len(raw), 8)]


def write_entries(d, ents):
    (d / f"{SEG0}.index").write_bytes(b"".join(struct.pack(">ii", r, p) for r, p in ents))


def batch_starts(d):
    return {p: h for p, h in iter_batches((d / f"{SEG0}.log").read_bytes())}


def check_every_read(lg):
    """Every offset below the end: the first batch returned holds it (one batch, and up to 1 MB)."""
    for off in range(lg.log_start_offset, lg.log_end_offset):
        one = offsets(lg.read(off, 1, max_offset=lg.high_watermark))
        assert one and one[0] <= off <= one[-1], (off, one)
        many = offsets(lg.read(off, 1 << 20, max_offset=lg.high_watermark))
        assert many[0] <= off and many == list(range(many[0], many[0] + len(many))), (off, many)


def damage(kind, ents, starts, k):
    """Entry k of the .index damaged, the file still passing the sanity check (entries increasing)."""
    rel, pos = ents[k]
    if kind == "inside_batch":
        ents[k] = (rel, pos + 30)
    elif kind == "inside_header":
        ents[k] = (rel, pos + 1)
    elif kind == "next_batch":  # a batch start, but of a batch above the entry's offset
        ents[k] = (rel, pos + starts[pos].size)
    elif kind == "offset_lowered":  # the entry's offset below its batch's base offset
        ents[k] = (rel - 2, pos)
    elif kind == "all_shifted":
        ents[:] = [(r, p + 7) for r, p in ents]
    return ents


@pytest.mark.parametrize("kind", ["inside_batch", "inside_header", "next_batch", "offset_lowered", "all_shifted"])
def test_an_index_entry_off_a_batch_start_is_passed_over_and_the_index_rebuilt(tmp_path, kind):
    d = tmp_path / "t-0"
    end = fill(d)
    good = entries(d)
    good_bytes = (d / f"{SEG0}.index").read_bytes()
    assert len(good) > 5
    k = len(good) // 2
    bad = damage(kind, list(good), batch_starts(d), k)
    write_entries(d, bad)

    with structlog.testing.capture_logs() as logs:
        lg = reopen(d, end)
        seg = lg.segments[0]
        assert len(lg.segments) > 1 and seg.index == bad  # loaded as it is: it passes the sanity check
        check_every_read(lg)
        if seg.index_rebuild is not None:
            seg.index_rebuild.join(10)
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert [e["event"] for e in warnings] == ["log_segment.index_corrupt"]  # once, not once per read
    w = warnings[0]
    assert w["file"] == str(d / f"{SEG0}.index") and w["segment"] == 0 and w["rebuilding"]
    assert (w["entry_offset"], w["position"]) in bad  # the base is 0
    # rebuilt: in memory and on disk, as the segment wrote it
    assert seg.index == good and (d / f"{SEG0}.index").read_bytes() == good_bytes
    with structlog.testing.capture_logs() as logs:
        check_every_read(lg)
    assert not logs
    lg.close()
    assert entries(d) == good


def test_a_read_past_a_damaged_entry_stays_short_and_the_rebuild_is_off_the_readers_thread(tmp_path, monkeypatch):
    """The read goes on from the entry before the damaged one (a few header reads, not a scan of the
    segment), and returns while the rebuild -- which reads every batch header -- runs elsewhere."""
    d = tmp_path / "t-0"
    cfg = LogConfig(index_interval_bytes=300)
    lg = FileLog(d, cfg)
    for i in range(400):
        lg.append(batch(1, size=50), now_ms=0)
    lg.roll_if_due(now_ms=10**12)
    lg.append(batch(1), now_ms=10**12)
    end = lg.log_end_offset
    lg.close()
    ents = entries(d)
    k = len(ents) - 3
    ents[k] = (ents[k][0], ents[k][1] + 20)
    write_entries(d, ents)
    lg = reopen(d, end, cfg)
    seg = lg.segments[0]

    release, started = threading.Event(), []
    real = FileLogSegment._rebuild_offset_index

    def held(self, damaged):
        started.append(threading.current_thread())
        release.wait(10)
        real(self, damaged)
    monkeypatch.setattr(FileLogSegment, "_rebuild_offset_index", held)
    calls = []
    pread = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, pos: calls.append(pos) or pread(fd, n, pos))
    target = ents[k][0] + 1
    with structlog.testing.capture_logs():
        assert offsets(lg.read(target, 1)) == [target]
    assert 0 < len(calls) < 20  # a scan from the segment's start would take ~390
    assert seg.index_rebuild is not None and seg.index_rebuild is not threading.current_thread()
    assert seg.index == ents  # not rebuilt yet: the read did not wait for it
    release.set()
    seg.index_rebuild.join(10)
    assert started == [seg.index_rebuild] and seg.index != ents
    assert offsets(lg.read(target, 1)) == [target]
    lg.close()


def test_an_index_failing_the_sanity_check_is_rebuilt_at_start_up(tmp_path):
    """Kafka's CorruptIndexException at load: the segment is recovered and its index files rebuilt."""
    d = tmp_path / "t-0"
    end = fill(d)
    good = entries(d)
    log_size = (d / f"{SEG0}.log").stat().st_size
    cases = {
        "not above": good[:2] + [good[3], good[2]] + good[4:],
        "past the end of the log": good[:-1] + [(good[-1][0], log_size + 5)],
        "past the segment's last offset": good[:-1] + [(500, good[-1][1])],
        "below the base offset": [(-3, 0)] + good[1:],
    }
    for what, bad in cases.items():
        write_entries(d, bad)
        with structlog.testing.capture_logs() as logs:
            lg = reopen(d, end)
        [w] = [e for e in logs if e["log_level"] == "warning"]
        assert w["event"] == "log.index_rebuilt" and what in w["reason"], (what, w)
        assert w["message"].startswith(f"Found a corrupted index file corresponding to log file {d / SEG0}.log")
        assert lg.segments[0].index == good and entries(d) == good  # rebuilt and written
        check_every_read(lg)
        lg.close()
    (d / f"{SEG0}.index").write_bytes((d / f"{SEG0}.index").read_bytes()[:-3])
    with structlog.testing.capture_logs() as logs:
        lg = reopen(d, end)
    [w] = [e for e in logs if e["log_level"] == "warning"]
    assert "neither positive nor a multiple of 8" in w["reason"]
    assert lg.segments[0].index == good
    lg.close()


def test_a_time_index_failing_the_sanity_check_is_rebuilt_at_start_up(tmp_path):
    d = tmp_path / "t-0"
    end = fill(d)
    path = d / f"{SEG0}.timeindex"
    raw = path.read_bytes()
    good = [struct.unpack_from(">qi", raw, i) for i in range(0, len(raw), 12)]
    assert len(good) > 2
    good_swapped = [good[1], good[0]] + good[2:]
    path.write_bytes(b"".join(struct.pack(">qi", t, r) for t, r in good_swapped))
    with structlog.testing.capture_logs() as logs:
        lg = reopen(d, end)
    [w] = [e for e in logs if e["log_level"] == "warning"]
    assert w["event"] == "log.index_rebuilt" and "Corrupt time index found" in w["reason"]
    assert lg.segments[0].timeindex == good
    lg.close()


def test_a_damaged_batch_header_is_an_error_never_an_empty_read_or_a_hang(tmp_path):
    """After a clean stop the older segments are not rescanned: a batch whose header was damaged
    afterwards is met by the read path, which answers Kafka's CorruptRecordException (CORRUPT_MESSAGE)
    for the offsets whose read must cross it -- neither an empty read nor a loop on a garbage length --
    and serves the others, those after the next .index entry included. The .index is not touched."""
    d = tmp_path / "t-0"
    end = fill(d)
    good = entries(d)
    indexed = {p for _, p in good}
    pos, h = next((p, h) for p, h in sorted(batch_starts(d).items()) if h.base_offset >= 14 and p not in indexed)
    raw = bytearray((d / f"{SEG0}.log").read_bytes())
    raw[pos + 8:pos + 12] = struct.pack(">i", -12)  # batchLength: a batch of 0 bytes
    (d / f"{SEG0}.log").write_bytes(bytes(raw))

    def crosses(off):  # the read of `off` scans from the nearest entry below it, or the segment's start
        start = max((p for r, p in good if r <= off), default=0)
        return off >= h.base_offset and start < pos

    with structlog.testing.capture_logs() as logs:
        lg = reopen(d, end)
        for off in range(0, lg.log_end_offset):
            if crosses(off):
                with pytest.raises(CorruptRecordException) as exc:
                    lg.read(off, 1)
                assert exc.value.errno == 2 and exc.value.position == pos
            else:
                got = offsets(lg.read(off, 1))
                assert got and got[0] <= off <= got[-1], (off, got)
    assert sum(crosses(off) for off in range(end)) >= 2 and not crosses(good[-1][0] + 1)
    assert not logs and lg.segments[0].index == good and lg.segments[0].index_rebuild is None
    assert lg.log_end_offset == end
    lg.close()


def test_a_rebuild_over_a_damaged_batch_keeps_the_entries_that_point_at_batch_starts(tmp_path):
    """The .log itself damaged too (a batch header, after the clean stop): the rebuild cannot read the
    segment through, so it keeps the entries that do point at a batch start -- the reads beyond the
    damaged batch still find theirs -- and drops the damaged one."""
    d = tmp_path / "t-0"
    end = fill(d)
    good = entries(d)
    indexed = {p for _, p in good}
    starts = sorted(batch_starts(d).items())
    bad_pos = next(p for p, h in starts[len(starts) * 3 // 4:] if p not in indexed)
    raw = bytearray((d / f"{SEG0}.log").read_bytes())
    raw[bad_pos + 16] = 7  # magic
    (d / f"{SEG0}.log").write_bytes(bytes(raw))
    k = 2
    assert good[k][1] < bad_pos
    ents = list(good)
    ents[k] = (ents[k][0], ents[k][1] + 30)
    write_entries(d, ents)
    with structlog.testing.capture_logs() as logs:
        lg = reopen(d, end)
        seg = lg.segments[0]
        got = offsets(lg.read(good[k][0] + 1, 1))
        assert got[0] <= good[k][0] + 1 <= got[-1]
        seg.index_rebuild.join(10)
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == \
        ["log_segment.index_corrupt", "log_segment.index_rebuild_partial"]
    assert seg.index == good[:k] + good[k + 1:] and entries(d) == seg.index
    beyond = next(r for r, p in good if p > bad_pos) + 1
    assert offsets(lg.read(beyond, 1))[0] <= beyond
    with pytest.raises(CorruptRecordException):
        lg.read(next(h.base_offset for p, h in starts if p == bad_pos), 1)
    lg.close()
