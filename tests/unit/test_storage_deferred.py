"""Deferred writes and fsyncs of FileLog (the Produce path's group commit): appended records stay
above the high watermark and out of reach until `deferred_flush`'s function has written and fsynced
them; every other file operation completes pending writes first, in order."""
from __future__ import annotations

import os
import threading

from kafkite.storage.batch import build_batch, decode_records
from kafkite.storage.log_config import LogConfig
from kafkite.storage.unified_log import FileLog, MemoryLog


def batch(i: int, n: int = 2) -> bytes:
    return build_batch([(b"k%d" % i, b"v%d-%d" % (i, j), []) for j in range(n)], timestamp_ms=1000 + i)


def log_file_size(lg: FileLog) -> int:
    return os.path.getsize(lg.active.log_path)


def test_deferred_append_is_invisible_until_written_and_synced(tmp_path):
    lg = FileLog(tmp_path / "t-0", LogConfig())
    lg.append(batch(0), now_ms=0)  # inline: written and fsynced
    assert lg.high_watermark == 2 and log_file_size(lg) > 0
    written = log_file_size(lg)
    r = lg.append(batch(1), now_ms=0, defer_flush=True)
    assert (r.base_offset, lg.log_end_offset) == (2, 4)
    assert lg.flush_pending(3) and not lg.flush_pending(1)
    assert lg.high_watermark == 2                       # consumers stop before it
    assert log_file_size(lg) == written                 # not even written yet
    assert lg.read_parts(2, 1 << 20) == []              # nothing past what the file holds
    target, run = lg.deferred_flush()
    assert target == 4
    run()
    lg.mark_flushed(target)
    assert lg.high_watermark == 4 and not lg.flush_pending(3)
    assert [r.offset for r in decode_records(lg.read(0, 1 << 20))] == [0, 1, 2, 3]
    lg.close()


def test_appends_during_a_running_flush_wait_for_the_next(tmp_path):
    lg = FileLog(tmp_path / "t-0", LogConfig())
    lg.append(batch(0), now_ms=0, defer_flush=True)
    target, run = lg.deferred_flush()
    t = threading.Thread(target=run)
    t.start()
    t.join(10)
    lg.append(batch(1), now_ms=0, defer_flush=True)  # after the run took its writes
    lg.mark_flushed(target)
    assert lg.high_watermark == 2 and lg.flush_pending(2)
    target2, run2 = lg.deferred_flush()
    run2()
    lg.mark_flushed(target2)
    assert lg.high_watermark == 4
    assert [r.value for r in decode_records(lg.read(0, 1 << 20))] == [b"v0-0", b"v0-1", b"v1-0", b"v1-1"]
    lg.close()


def test_inline_append_and_reads_complete_pending_writes_in_order(tmp_path):
    lg = FileLog(tmp_path / "t-0", LogConfig())
    for i in range(3):
        lg.append(batch(i), now_ms=0, defer_flush=True)
    lg.append(batch(3), now_ms=0)  # an internal append: fsync inline, after the pending writes
    assert lg.high_watermark == 8 and not lg.flush_pending(7)
    assert [r.offset for r in decode_records(lg.read(0, 1 << 20))] == list(range(8))
    # the pending writes' run, if it still comes, finds nothing left and only fsyncs
    target, run = lg.deferred_flush()
    run()
    lg.mark_flushed(target)
    lg.close()
    reopened = FileLog(tmp_path / "t-0", LogConfig())
    assert reopened.log_end_offset == 8
    assert [r.value for r in decode_records(reopened.read(0, 1 << 20))][-2:] == [b"v3-0", b"v3-1"]
    reopened.close()


def test_roll_and_close_write_what_is_pending(tmp_path):
    lg = FileLog(tmp_path / "t-0", LogConfig(segment_bytes=300))
    for i in range(6):
        lg.append(batch(i), now_ms=0, defer_flush=True)
    assert len(lg.segments) > 1
    # rolled segments were completed and fsynced by the roll; only the active one is pending
    assert all(os.path.getsize(s.log_path) == s.size for s in lg.segments[:-1])
    lg.close()  # no run ever came: close writes the rest
    reopened = FileLog(tmp_path / "t-0", LogConfig(segment_bytes=300))
    assert reopened.log_end_offset == 12
    assert [r.offset for s in reopened.segments for _, b in s.iter_batches() for r in decode_records(b)] == \
        list(range(12))
    reopened.close()


def test_page_cache_policy_defers_the_write_without_an_fsync(tmp_path, monkeypatch):
    """flush.messages above 1 (Kafka's default policy): the worker writes the records, without an
    fsync until flush.messages records have gathered; they are visible once written."""
    lg = FileLog(tmp_path / "t-0", LogConfig(flush_interval_messages=5))
    syncs = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: syncs.append(fd) or real_fsync(fd))
    lg.append(batch(0), now_ms=0, defer_flush=True)
    assert lg.high_watermark == 0 and log_file_size(lg) == 0
    target, run = lg.deferred_flush()
    run()
    lg.mark_flushed(target)
    assert lg.high_watermark == 2 and log_file_size(lg) > 0 and syncs == []
    lg.append(batch(1), now_ms=0, defer_flush=True)
    lg.append(batch(2), now_ms=0, defer_flush=True)  # 6 records since the last fsync: one is due
    target, run = lg.deferred_flush()
    run()
    lg.mark_flushed(target)
    assert lg.high_watermark == 6 and len(syncs) == 1
    lg.close()


def test_memory_log_never_defers():
    lg = MemoryLog(LogConfig())
    lg.append(batch(0), now_ms=0, defer_flush=True)
    assert lg.high_watermark == 2 and not lg.flush_pending(1)


def test_a_failed_write_is_never_retried_and_fail_cuts_what_was_not_acknowledged(tmp_path, monkeypatch):
    """A full disk: the batches whose write failed were answered with an error, so they must never
    reach the file later (no retry once space returns); fail() cuts what was not acknowledged."""
    lg = FileLog(tmp_path / "t-0", LogConfig())
    lg.append(batch(0), now_ms=0, defer_flush=True)
    target, run = lg.deferred_flush()
    run()
    lg.mark_flushed(target)  # offsets 0, 1 acknowledged
    acked_size = log_file_size(lg)
    lg.append(batch(1), now_ms=0, defer_flush=True)
    lg.append(batch(2), now_ms=0, defer_flush=True)
    real = os.pwrite
    calls = []

    def failing(fd, data, pos):
        calls.append(pos)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(fd, data, pos)
    monkeypatch.setattr(os, "pwrite", failing)
    target, run = lg.deferred_flush()
    try:
        run()
        raise AssertionError("the failure must reach the caller")
    except OSError as exc:
        assert exc.errno == 28
    assert lg.high_watermark == 2 and lg.flush_pending(2)  # no mark_flushed: nothing acknowledged
    assert log_file_size(lg) > acked_size  # batch 1 reached the file before the failure
    monkeypatch.setattr(os, "pwrite", real)  # space returns
    target, run = lg.deferred_flush()
    try:
        run()  # nothing is written again
        raise AssertionError("a failed segment takes no more writes")
    except OSError:
        pass
    lg.fail()()  # the log dir goes offline: batch 1 is cut from the file, batch 2 never written
    assert log_file_size(lg) == acked_size and lg.active.fd == -1
    reopened = FileLog(tmp_path / "t-0", LogConfig())
    assert [r.offset for r in decode_records(reopened.read(0, 1 << 20))] == [0, 1]
    assert reopened.log_end_offset == 2
    reopened.close()


def test_fail_after_a_failed_fsync_deletes_the_segments_rolled_since(tmp_path, monkeypatch):
    """The fsync fails after the write: the bytes are in the page cache, where the kernel could still
    write them; fail() deletes the segments rolled after the last acknowledged record."""
    lg = FileLog(tmp_path / "t-0", LogConfig(segment_bytes=1))  # every append rolls
    lg.append(batch(0), now_ms=0)  # inline: written and fsynced, acknowledged
    lg.append(batch(1), now_ms=0, defer_flush=True)
    lg.append(batch(2), now_ms=0, defer_flush=True)
    assert [s.base for s in lg.segments] == [0, 2, 4]

    def failing(fd):
        raise OSError(5, "Input/output error")
    target, run = lg.deferred_flush()
    monkeypatch.setattr(os, "fsync", failing)
    try:
        run()
        raise AssertionError("the failure must reach the caller")
    except OSError as exc:
        assert exc.errno == 5
    monkeypatch.undo()
    lg.fail()()
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.log*")) == ["00000000000000000000.log"]
    reopened = FileLog(tmp_path / "t-0", LogConfig())
    assert [r.offset for r in decode_records(reopened.read(0, 1 << 20))] == [0, 1]
    assert reopened.log_end_offset == 2
    reopened.close()
