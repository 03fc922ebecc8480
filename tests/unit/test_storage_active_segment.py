"""The active segment after a clean shutdown (active_segment.py): its index files, written and fsynced at the close,
are loaded and only the batch headers after the last offset-index entry are walked. The state it opens with equals a
walk of every batch (a crash's recovery of the same files); files that do not fit the .log fall back to that walk."""
from __future__ import annotations

import os
import shutil
import struct

import structlog
from hypothesis import HealthCheck, example, given, settings, strategies as st

from kafkite.storage.batch import iter_batches
from kafkite.storage.log_config import LogConfig
from kafkite.storage.unified_log import FileLog

from test_storage_log import batch

SEG0 = "00000000000000000000"


def state(seg, active=True):
    """What a segment holds (an inactive one loaded from its index files: no first batch timestamp nor byte count)."""
    return {"index": seg.index, "timeindex": seg.timeindex, "next_offset": seg.next_offset, "size": seg.size,
            "max_ts": (seg.max_ts, seg.max_ts_offset),
            **({"first_batch_ts": seg.first_batch_ts, "bytes_since_index": seg.bytes_since_index} if active else {})}


def states(lg):
    return [state(s, s is lg.active) for s in lg.segments]


def clean(d, cfg):
    return FileLog(d, cfg, had_clean_shutdown=True, recovery_point=1 << 40)


def walked(d, cfg):
    """The same files opened as after a crash (every batch walked, CRCs checked), from a copy."""
    copy = d.with_name(d.name + "-walked")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(d, copy)
    return FileLog(copy, cfg)


def write(d, cfg, batches):
    lg = FileLog(d, cfg)
    for b in batches:
        lg.append(b, now_ms=0)
    lg.close()


batches_st = st.lists(st.tuples(st.integers(1, 3), st.integers(0, 10_000), st.integers(0, 200)), min_size=0,
                      max_size=50)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=batches_st, more=batches_st, interval=st.integers(1, 400))
@example(first=[(2, ts, 10) for ts in (1000, 5000, 3000, 2000, 1000, 1000, 1000, 1000, 1000, 7000)],  # the largest
         more=[(2, ts, 10) for ts in (1000, 8000, 1000, 1000, 1000, 9000)], interval=100)  # timestamp in the tail
def test_the_clean_load_equals_a_walk_of_every_batch_and_keeps_agreeing(tmp_path_factory, first, more, interval):
    d = tmp_path_factory.mktemp("log") / "t-0"
    cfg = LogConfig(index_interval_bytes=interval)
    write(d, cfg, [batch(n, ts=ts, size=size) for n, ts, size in first])
    with structlog.testing.capture_logs() as logs:
        a, b = clean(d, cfg), walked(d, cfg)
    assert not [e for e in logs if e["event"] in ("log.index_rebuilt", "log_segment.invalid_messages")]
    assert state(a.active) == state(b.active)
    assert not os.path.exists(a.active.offset_index.path) and not os.path.exists(a.active.time_index.path)
    for lg in (a, b):  # appends after the load, then a roll: both logs still agree, and after a clean reopen
        for n, ts, size in more:
            lg.append(batch(n, ts=ts, size=size), now_ms=0)
        lg.roll_if_due(1 << 50)
        lg.append(batch(1, ts=5), now_ms=0)
    want = states(b)
    assert states(a) == want
    a.close()
    b.close()
    a = clean(d, cfg)
    assert states(a) == want
    a.close()


def filled(tmp_path, n=40, cfg=LogConfig(index_interval_bytes=100)):
    d = tmp_path / "t-0"
    write(d, cfg, [batch(2, ts=(i * 37) % 50 + 1000, size=10 + i % 9) for i in range(n)])
    return d, cfg


def load_with_warnings(d, cfg):
    with structlog.testing.capture_logs() as logs:
        lg = clean(d, cfg)
    return lg, [e for e in logs if e["log_level"] == "warning"]


def test_only_the_tail_after_the_last_index_entry_is_walked(tmp_path, monkeypatch):
    d, cfg = filled(tmp_path)
    size = (d / f"{SEG0}.log").stat().st_size
    reads = []
    real = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, pos: (reads.append(pos), real(fd, n, pos))[1])
    lg = clean(d, cfg)
    last_entry_pos = lg.active.index[-1][1]
    assert reads and min(reads) == 0 and sorted(reads)[1] == last_entry_pos  # the first batch's header, then the tail
    assert lg.active.size == size and len(reads) < 8
    monkeypatch.undo()
    assert state(lg.active) == state(walked(d, cfg).active)


def test_missing_or_stale_index_files_fall_back_to_the_whole_walk(tmp_path):
    d, cfg = filled(tmp_path)
    log_path = d / f"{SEG0}.log"
    (d / f"{SEG0}.index").unlink()  # missing
    lg, warnings = load_with_warnings(d, cfg)
    [w] = warnings
    assert w["event"] == "log.index_rebuilt" and w["reason"] == "missing or stale"
    assert state(lg.active) == state(walked(d, cfg).active)
    lg.close()
    # the .log rewritten below the last entry (the batch at its position is another one): stale
    data = bytearray(log_path.read_bytes())
    starts = [p for p, _ in iter_batches(bytes(data))]
    pos = (d / f"{SEG0}.index").read_bytes()[-4:]
    pos = int.from_bytes(pos, "big")
    k = starts.index(pos)
    log_path.write_bytes(data[:starts[k - 1]] + data[starts[k]:])  # a batch before it taken out
    lg, warnings = load_with_warnings(d, cfg)
    assert [w["reason"] for w in warnings if w["event"] == "log.index_rebuilt"] == ["missing or stale"]
    assert state(lg.active) == state(walked(d, cfg).active)
    lg.close()


def test_a_log_cut_short_in_its_tail_is_truncated_as_before(tmp_path):
    """The .log shorter than at the close, inside the tail: the torn batch is cut (Kafka's "Found invalid
    messages"), the time index's final entry past the new end makes the load fall back to the whole walk."""
    d, cfg = filled(tmp_path)
    log_path = d / f"{SEG0}.log"
    size = log_path.stat().st_size
    with open(log_path, "r+b") as f:
        f.truncate(size - 5)
    lg, warnings = load_with_warnings(d, cfg)
    assert "log_segment.invalid_messages" in [w["event"] for w in warnings]
    ref = walked(d, cfg)
    assert state(lg.active) == state(ref.active) and lg.log_end_offset == ref.log_end_offset == 78
    lg.close()


def test_a_log_grown_past_its_index_files_is_walked_to_its_end(tmp_path):
    d, cfg = filled(tmp_path)
    extra = FileLog(tmp_path / "other", cfg)
    extra.append(batch(2, ts=9999), now_ms=0)
    extra.close()
    raw = bytearray((tmp_path / "other" / f"{SEG0}.log").read_bytes())
    raw[0:8] = (80).to_bytes(8, "big")  # its base offset: the next one (the CRC does not cover it)
    with open(d / f"{SEG0}.log", "ab") as f:
        f.write(raw)
    lg, warnings = load_with_warnings(d, cfg)
    assert not warnings and lg.log_end_offset == 82
    assert state(lg.active) == state(walked(d, cfg).active) and lg.active.max_ts == 10000


def test_a_corrupt_active_time_index_is_rebuilt_with_a_warning(tmp_path):
    d, cfg = filled(tmp_path)
    path = d / f"{SEG0}.timeindex"
    raw = path.read_bytes()
    path.write_bytes(raw[:-12] + (1000).to_bytes(8, "big") + (500).to_bytes(4, "big"))  # an offset past the end
    lg, warnings = load_with_warnings(d, cfg)
    [w] = warnings
    assert w["event"] == "log.index_rebuilt" and "Corrupt time index found" in w["reason"]
    assert w["message"].startswith(f"Found a corrupted index file corresponding to log file {d / SEG0}.log")
    assert state(lg.active) == state(walked(d, cfg).active)


def test_a_full_time_index_keeps_the_largest_timestamp_and_still_rolls(tmp_path):
    d = tmp_path / "t-0"
    cfg = LogConfig(index_interval_bytes=1, segment_index_bytes=36)  # 3 time-index entries: full at 2
    lg = FileLog(d, cfg)
    for ts in (1000, 2000, 1500, 3000):
        lg.append(batch(1, ts=ts), now_ms=0)
    assert len(lg.segments) == 1 and lg.active.index_full(36)
    lg.close()
    a = clean(d, cfg)
    b = walked(d, cfg)
    assert (a.active.max_ts, a.active.max_ts_offset) == (b.active.max_ts, b.active.max_ts_offset) == (3000, 3)
    assert a.active.next_offset == 4 and a.active.index_full(36)
    a.append(batch(1, ts=4000), now_ms=0)
    assert len(a.segments) == 2  # rolled before the append, as before the restart
    a.close()


def test_a_preallocated_segment_closed_cleanly_opens_from_its_index_files(tmp_path):
    d = tmp_path / "t-0"
    cfg = LogConfig(index_interval_bytes=100, preallocate=True, segment_bytes=1 << 20)
    write(d, cfg, [batch(2, ts=1000 + i, size=30) for i in range(30)])
    log_path = d / f"{SEG0}.log"
    assert log_path.stat().st_size < 1 << 20  # trimmed at the close
    lg, warnings = load_with_warnings(d, cfg)
    assert not warnings and state(lg.active) == state(walked(d, cfg).active)
    lg.close()
    size = log_path.stat().st_size
    os.truncate(log_path, 1 << 20)  # as if the trim had not reached the disk: a zero tail
    lg, warnings = load_with_warnings(d, cfg)
    assert "log_segment.invalid_messages" in [w["event"] for w in warnings]
    assert lg.active.size == size == log_path.stat().st_size and lg.log_end_offset == 60


def test_a_clean_close_fsyncs_the_active_index_files_the_snapshot_and_the_directory(tmp_path, monkeypatch):
    d, cfg = filled(tmp_path, n=5)
    lg = clean(d, cfg)
    lg.append(batch(2, pid=7, epoch=0, seq=0), now_ms=0)
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real(fd))[1])
    lg.close()
    names = [os.path.basename(p) for p in synced]
    assert {f"{SEG0}.log", f"{SEG0}.index", f"{SEG0}.timeindex", f"{lg.log_end_offset:020d}.snapshot.tmp",
            "t-0"} <= set(names)
    assert names[-1] == "t-0"  # the directory last: the index files' and the snapshot's names


def test_kafkas_entry_for_an_append_of_several_batches_is_taken_as_it_is(tmp_path):
    """Kafka indexes an append of several batches (a follower's) at the first one's position with the last one's
    offset: such an entry loads without a warning, the segment's end and largest timestamp found as a walk finds them."""
    d, cfg = filled(tmp_path, cfg=LogConfig(index_interval_bytes=400))
    path = d / f"{SEG0}.index"
    raw = path.read_bytes()
    rel, pos = struct.unpack(">ii", raw[-8:])
    assert rel + 2 < 80  # (batches after the entry's)
    path.write_bytes(raw[:-8] + struct.pack(">ii", rel + 2, pos))  # (the next batch's last offset: 2 records each)
    lg, warnings = load_with_warnings(d, cfg)
    ref = walked(d, cfg)
    assert not warnings and lg.active.index[-1] == (rel + 2, pos)
    keys = ("next_offset", "size", "max_ts", "first_batch_ts")
    assert {k: state(lg.active)[k] for k in keys} == {k: state(ref.active)[k] for k in keys}
    assert lg.read(rel + 1, 1)  # the read path finds the batch the entry points at, and the one after it
    lg.close()
    path.write_bytes(raw[:-8] + struct.pack(">ii", rel + 200, pos))  # an offset past the segment's end: not used
    lg, warnings = load_with_warnings(d, cfg)
    assert [w["reason"] for w in warnings] == ["missing or stale"] and state(lg.active) == state(walked(d, cfg).active)
