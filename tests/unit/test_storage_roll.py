"""Rolling without waiting for the disk: a rolled segment's fsync and index files come from the
next flush run (LogSegment.finish_roll in a worker), and LogLoader checks a closed segment whose
index files are missing, ending the log at a torn one."""
from __future__ import annotations

import os

from kafkite.storage.batch import decode_records
from kafkite.storage.log_cleaner import LogCleaner
from kafkite.storage.log_config import LogConfig
from kafkite.storage.unified_log import FileLog

from test_storage_deferred import batch
from test_storage_flush_compression import fsyncs  # noqa: F401 (fixture)


def index_files(seg):
    return seg.offset_index.path.exists(), seg.time_index.path.exists()


def fill_until_rolled(lg, **kw):
    i = 0
    while len(lg.segments) < 2:
        lg.append(batch(i), now_ms=0, **kw)
        i += 1
    return i


def test_a_roll_leaves_fsync_and_indexes_to_the_flush_scheduler(tmp_path, fsyncs):
    lg = FileLog(tmp_path / "t-0", LogConfig(segment_bytes=300, flush_messages=1_000_000))
    fill_until_rolled(lg)
    rolled = lg.segments[0]
    assert fsyncs == [] and rolled.closing and index_files(rolled) == (False, False)
    assert os.path.getsize(rolled.log_path) == rolled.size  # written, not yet fsynced
    assert not list(tmp_path.glob("t-0/*.snapshot"))  # the roll's producer snapshot waits for the segment
    target, run = lg.scheduled_flush(0)  # a roll to finish: due whatever flush.ms says
    run()
    lg.mark_flushed(target)
    # the .log, then its two index files, then the producer snapshot at the roll and the directory (their names)
    assert len(fsyncs) == 5 and fsyncs[0] == rolled.fd
    assert [p.name for p in tmp_path.glob("t-0/*.snapshot")] == [f"{lg.active.base:020d}.snapshot"]
    assert not rolled.closing and index_files(rolled) == (True, True)
    assert lg.scheduled_flush(0) is None


def test_deferred_appends_finish_the_roll_before_they_are_durable(tmp_path, fsyncs):
    lg = FileLog(tmp_path / "t-0", LogConfig(segment_bytes=300))
    n = fill_until_rolled(lg, defer_flush=True)
    assert fsyncs == [] and lg.high_watermark == 0
    target, run = lg.deferred_flush()
    run()
    lg.mark_flushed(target)
    assert lg.high_watermark == 2 * n and not lg.segments[0].closing
    assert index_files(lg.segments[0]) == (True, True)
    assert fsyncs and fsyncs[0] == lg.segments[0].fd  # the rolled segment first


def test_inline_flush_and_close_finish_rolls(tmp_path):
    lg = FileLog(tmp_path / "t-0", LogConfig(segment_bytes=300, flush_messages=1_000_000))
    fill_until_rolled(lg)
    lg.close()
    assert index_files(lg.segments[0]) == (True, True)
    lg = FileLog(tmp_path / "t-1", LogConfig(segment_bytes=300))  # flush.messages=1
    fill_until_rolled(lg)
    assert not lg.segments[0].closing  # the append's inline flush finished the roll


def test_the_cleaner_waits_for_a_roll_to_finish(tmp_path):
    lg = FileLog(tmp_path / "t-0", LogConfig(segment_bytes=300, flush_messages=1_000_000,
                                               cleanup_policy="compact"))
    fill_until_rolled(lg)
    assert LogCleaner().plan(lg, 0) is None
    target, run = lg.scheduled_flush(0)
    run()
    assert LogCleaner().plan(lg, 0) is not None


def test_recovery_of_an_unfinished_roll(tmp_path):
    cfg = LogConfig(segment_bytes=300, flush_messages=1_000_000)
    lg = FileLog(tmp_path / "t-0", cfg)
    fill_until_rolled(lg)
    lg.append(batch(50), now_ms=0)
    end = lg.log_end_offset
    # a crash: the rolled segment's index files were never written; its bytes are whole
    again = FileLog(tmp_path / "t-0", cfg)
    assert again.log_end_offset == end and len(again.segments) == 2
    assert len(decode_records(again.read(0, 1 << 20))) == again.segments[1].base
    assert index_files(again.segments[0]) == (True, True)


def test_a_torn_unfinished_roll_ends_the_log(tmp_path):
    cfg = LogConfig(segment_bytes=300, flush_messages=1_000_000)
    lg = FileLog(tmp_path / "t-0", cfg)
    fill_until_rolled(lg)
    lg.append(batch(50), now_ms=0)
    first = lg.segments[0]
    with open(first.log_path, "r+b") as f:  # the power went before the rolled segment's fsync
        f.truncate(first.size - 7)
    again = FileLog(tmp_path / "t-0", cfg)
    assert len(again.segments) == 1 and again.log_end_offset < first.next_offset
    offsets = [r.offset for r in decode_records(again.read(0, 1 << 20))]
    assert offsets == list(range(again.log_end_offset))
    assert again.append(batch(60), now_ms=0).base_offset == again.log_end_offset - 2
