"""storage.log_cleaner: Kafka's LogCleaner scheduling (dirty ratio, compaction lags, the first dirty
offset), cleaning in another thread without touching the live log, and the swap-in check."""
from __future__ import annotations

import threading

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkite.storage.batch import decode_records, read_header
from kafkite.storage.log_cleaner import MAP_ENTRY_BYTES, LogCleaner
from kafkite.storage.log_config import LogConfig
from kafkite.storage.unified_log import FileLog, MemoryLog


def kv(key, value, ts=0):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    b.append(0, timestamp=ts, key=key, value=value, headers=[])
    return bytearray(b.build())


@pytest.fixture(params=["memory", "file"])
def make_log(request, tmp_path):
    def make(**cfg):
        config = LogConfig(cleanup_policy="compact", **cfg)
        if request.param == "memory":
            return MemoryLog(config)
        return FileLog(tmp_path / "t-0", config)
    return make


def everything(lg):
    return [(r.offset, r.key, r.value) for r in decode_records(b"".join(
        lg.read(s.base, 1 << 24) or b"" for s in lg.segments if s.size and s.base >= lg.log_start_offset))]


def fill(lg, n, keys=3, ts=0):
    for i in range(n):
        lg.append(kv(b"k%d" % (i % keys), b"v%d" % i, ts), now_ms=ts)


def test_dirty_ratio_and_first_dirty_offset(make_log):
    lg = make_log(segment_bytes=300, min_cleanable_dirty_ratio=0.5)
    fill(lg, 20, keys=20)
    cleaner = LogCleaner()
    job = cleaner.plan(lg, 0)
    assert job is not None and job.dirty_ratio == 1.0 and job.first_dirty == 0
    assert job.first_uncleanable == lg.active.base  # the active segment is never cleaned
    assert cleaner.swap_in(job, job.run())
    assert cleaner.first_dirty[lg] == job.first_uncleanable
    # nothing new: not due (the same bytes are not recompacted forever)
    assert cleaner.plan(lg, 0) is None
    # a little more: below the ratio; much more: due again, from the first dirty offset
    fill(lg, 5, keys=20)
    assert cleaner.plan(lg, 0) is None
    fill(lg, 20, keys=20)
    job = cleaner.plan(lg, 0)
    assert job is not None and job.first_dirty == cleaner.first_dirty[lg] and 0.5 <= job.dirty_ratio < 1
    result = job.run()
    assert cleaner.swap_in(job, result) and result.records_removed > 0
    latest = {}
    for off, k, v in everything(lg):
        latest[k] = v
    expected = {}
    for i, n in enumerate([20, 5, 20]):
        for j in range(n):
            expected[b"k%d" % j] = b"v%d" % j
    assert latest == expected and len(everything(lg)) < 45
    assert lg.log_end_offset == 45


def test_max_compaction_lag_cleans_regardless_of_ratio(make_log):
    lg = make_log(segment_bytes=300, min_cleanable_dirty_ratio=1.0, max_compaction_lag_ms=1000)
    fill(lg, 10, ts=100)
    cleaner = LogCleaner()
    job = cleaner.plan(lg, 200)  # ratio 1.0 is >= 1.0: due anyway
    cleaner.swap_in(job, job.run())
    fill(lg, 10, ts=100)
    assert cleaner.plan(lg, 500) is None      # dirty ratio below 1.0 and not overdue
    assert cleaner.plan(lg, 1200) is not None  # a dirty record is older than max.compaction.lag.ms


def test_min_compaction_lag_keeps_recent_segments(make_log):
    lg = make_log(segment_bytes=300, min_compaction_lag_ms=1000)
    fill(lg, 10, ts=500)
    assert LogCleaner().plan(lg, 1000) is None
    assert LogCleaner().plan(lg, 1600) is not None


def test_run_leaves_the_live_log_alone_and_swap_in_checks_for_changes(make_log):
    lg = make_log(segment_bytes=300)
    fill(lg, 20)
    before = everything(lg)
    cleaner = LogCleaner()
    job = cleaner.plan(lg, 0)
    result = []
    t = threading.Thread(target=lambda: result.append(job.run()))
    t.start()
    t.join()
    assert everything(lg) == before  # nothing swapped in yet
    lg.truncate_to(lg.log_end_offset - 1)
    assert not cleaner.swap_in(job, result[0])  # the log changed underneath: result discarded
    assert everything(lg) == before[:-1]
    assert lg not in cleaner.first_dirty
    if lg.dir is not None:
        assert not list(lg.dir.glob("*.cleaned"))


def test_appends_while_cleaning_do_not_stop_the_swap_in(make_log):
    lg = make_log(segment_bytes=300)
    fill(lg, 20)
    cleaner = LogCleaner()
    job = cleaner.plan(lg, 0)
    result = job.run()
    fill(lg, 3)
    assert cleaner.swap_in(job, result)
    assert lg.log_end_offset == 23 and [o for o, _, _ in everything(lg)][-3:] == [20, 21, 22]


def test_undecodable_batch_is_kept_and_logged(make_log, monkeypatch):
    import kafkite.storage.log_cleaner as lc
    lg = make_log(segment_bytes=300)
    fill(lg, 20)
    real = lc.iter_records

    def decode(data):  # the first batch cannot be read
        if read_header(data).base_offset == 0:
            raise ValueError("corrupt")
        return real(data)
    monkeypatch.setattr(lc, "iter_records", decode)
    warnings = []
    monkeypatch.setattr(lc.log, "warning", lambda event, **kw: warnings.append(event))
    cleaner = LogCleaner()
    job = cleaner.plan(lg, 0)
    result = job.run()
    assert cleaner.swap_in(job, result) and result.batches_kept_undecodable >= 1
    assert warnings and warnings[0] == "log_cleaner.undecodable_batch"
    assert everything(lg)[0] == (0, b"k0", b"v0")  # superseded, but kept as it was


def test_periodic_check_rolls_an_old_active_segment(make_log):
    lg = make_log(segment_ms=100)
    lg.append(kv(b"a", b"1", ts=0), now_ms=0)
    lg.append(kv(b"a", b"2", ts=10), now_ms=10)
    cleaner = LogCleaner()
    assert cleaner.grab_filthiest_log([("t-0", lg)], 50) is None  # nothing closed yet
    job = cleaner.grab_filthiest_log([("t-0", lg)], 200)  # rolled
    assert len(lg.segments) == 2 and lg.active.size == 0
    if job is None:  # a file segment: cleanable once the flush scheduler finished its roll
        target, run = lg.scheduled_flush(200)
        run()
        job = cleaner.grab_filthiest_log([("t-0", lg)], 200)
    assert job is not None
    cleaner.swap_in(job, job.run())
    assert everything(lg) == [(1, b"a", b"2")]


def test_dirtiest_log_first():
    a, b = MemoryLog(LogConfig(cleanup_policy="compact", segment_bytes=300)), \
        MemoryLog(LogConfig(cleanup_policy="compact", segment_bytes=300))
    fill(a, 20, keys=20)
    fill(b, 20, keys=20)
    cleaner = LogCleaner()
    job = cleaner.plan(a, 0)
    cleaner.swap_in(job, job.run())
    fill(a, 20, keys=20)
    assert 0.5 <= cleaner.plan(a, 0).dirty_ratio < 1
    assert cleaner.grab_filthiest_log([("a", a), ("b", b)], 0).log is b


def test_a_full_offset_map_ends_the_dirty_section_there(make_log):
    lg = make_log(segment_bytes=300, min_cleanable_dirty_ratio=0.01)
    for i in range(30):
        lg.append(kv(b"k%d" % (i // 2), b"v%d" % i), now_ms=0)  # k0 k0 k1 k1 ... k14 k14
    cleaner = LogCleaner(dedupe_buffer_size=4 * MAP_ENTRY_BYTES)  # room for 4 keys
    rounds = 0
    while (job := cleaner.plan(lg, 0)) is not None:
        result = job.run()
        assert result.dirty_end <= job.first_uncleanable
        assert cleaner.swap_in(job, result) and cleaner.first_dirty[lg] == result.dirty_end
        rounds += 1
        assert rounds < 20
    assert rounds > 2  # several passes, each over as much as the map holds
    got = everything(lg)
    old = [k for o, k, v in got if o < lg.active.base]
    assert len(old) == len(set(old))  # every key once in the closed segments
    assert {k: v for _, k, v in got} == {b"k%d" % j: b"v%d" % (2 * j + 1) for j in range(15)}


def test_cleaner_offset_checkpoint_survives_a_restart(tmp_path):
    cfg = LogConfig(cleanup_policy="compact", segment_bytes=300)
    lg = FileLog(tmp_path / "my-topic-3", cfg)
    fill(lg, 20, keys=20)
    cleaner = LogCleaner()
    job = cleaner.plan(lg, 0)
    cleaner.swap_in(job, job.run())
    assert not (tmp_path / "cleaner-offset-checkpoint").exists()  # written by `checkpoint_writes`' function
    write = cleaner.checkpoint_writes()
    assert cleaner.checkpoint_writes() is None and write() == []
    text = (tmp_path / "cleaner-offset-checkpoint").read_text()
    assert text == f"0\n1\nmy-topic 3 {job.first_uncleanable}\n"  # Kafka's OffsetCheckpointFile
    lg.close()
    lg = FileLog(tmp_path / "my-topic-3", cfg)
    assert LogCleaner().plan(lg, 0) is None  # nothing dirty: not cleaned again
    fill(lg, 20, keys=20)
    job = LogCleaner().plan(lg, 0)
    assert job.first_dirty == int(text.split()[-1])


def test_checkpoint_drops_deleted_partitions_and_ignores_out_of_range(tmp_path):
    import shutil
    cfg = LogConfig(cleanup_policy="compact", segment_bytes=300)
    (tmp_path / "cleaner-offset-checkpoint").write_text("0\n2\ngone 0 5\nt 0 999\n")
    lg = FileLog(tmp_path / "t-0", cfg)
    fill(lg, 20, keys=20)
    cleaner = LogCleaner()
    job = cleaner.plan(lg, 0)
    assert job.first_dirty == 0  # 999 is past the log end: ignored
    cleaner.swap_in(job, job.run())
    gone = cleaner.checkpoint_writes()()
    assert gone == [(tmp_path, ("gone", 0), 5)]
    cleaner.forget(gone)
    assert cleaner._checkpoints[tmp_path] == {("t", 0): job.first_uncleanable}
    assert (tmp_path / "cleaner-offset-checkpoint").read_text() == f"0\n1\nt 0 {job.first_uncleanable}\n"
    shutil.rmtree(tmp_path / "t-0")


def test_a_log_directory_without_a_partition_number_has_no_checkpoint(tmp_path):
    lg = FileLog(tmp_path / "scratch", LogConfig(cleanup_policy="compact", segment_bytes=300))
    fill(lg, 20)
    assert lg.compact(0) > 0 and not (tmp_path / "cleaner-offset-checkpoint").exists()


def test_a_log_closed_while_cleaning_is_not_swapped_into(tmp_path):
    lg = FileLog(tmp_path / "t-0", LogConfig(cleanup_policy="compact", segment_bytes=300))
    fill(lg, 20)
    cleaner = LogCleaner()
    job = cleaner.plan(lg, 0)
    result = job.run()
    lg.close()  # the topic was deleted meanwhile
    assert not cleaner.swap_in(job, result)
    assert not list((tmp_path / "t-0").glob("*.cleaned"))


def test_a_cleaning_in_a_worker_gives_the_gil_up_as_it_goes(make_log, monkeypatch):
    """The cleaning's pure-Python work lets the event loop's thread have the GIL every PACE_S (here: every 64
    records), never only at Python's switch interval, with the broker's pace (services.py: kafkite.gil_pacing.Pacer);
    cleaning on the caller's own thread (clean_now) never sleeps."""
    import kafkite.gil_pacing as gp
    import kafkite.storage.log_cleaner as lc
    lg = make_log(segment_bytes=4000)
    for i in range(31):  # 30 batches of 100 records, 10 keys
        b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                      producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
        for j in range(100):
            b.append(j, timestamp=0, key=b"k%d" % (j % 10), value=b"v%d" % i, headers=[])
        lg.append(bytearray(b.build()), now_ms=0)
    yields, decoded = [], []
    real_decode = lc.decode_batch
    monkeypatch.setattr(lc, "decode_batch", lambda data, *a: decoded.append(1) or real_decode(data, *a))
    monkeypatch.setattr(gp, "PACE_S", 0.0)
    monkeypatch.setattr(gp, "yield_gil", lambda: yields.append(threading.current_thread()))
    cleaner = LogCleaner(pace=gp.Pacer)
    job = cleaner.plan(lg, 0)
    t = threading.Thread(target=lambda: cleaner.swap_in(job, job.run()))
    t.start()
    t.join()
    # 3,000 records read for the offset map, 3,000 checked while rewriting: a yield every 64
    assert len(yields) >= 2 * 3000 // 64 - 2 and set(yields) == {t}
    kept = everything(lg)  # only the active segment's records: every older one superseded by the last batch
    assert kept[0][0] == lg.active.base > 0 and kept[-10:] == [(3090 + j, b"k%d" % j, b"v30") for j in range(10)]
    # every batch dropped whole or kept whole: no record kept as an object (the garbage collector's work: see
    # the module comment); a batch keeping some records is decoded again to be rebuilt
    assert not decoded
    yields.clear()
    fill(lg, 200, keys=5)
    lg.compact(0)
    fill(lg, 200, keys=5)
    assert cleaner.clean_now(lg, 0) > 0  # (the pacing cleaner's, on this thread)
    assert not yields


def test_a_batch_keeping_some_records_is_rebuilt_with_them(make_log):
    lg = make_log(segment_bytes=1)  # a segment per batch
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for j in range(6):
        b.append(j, timestamp=0, key=b"k%d" % j, value=b"old%d" % j, headers=[])
    lg.append(bytearray(b.build()), now_ms=0)
    lg.append(kv(b"k1", b"new1"), now_ms=0)
    lg.append(kv(b"k4", b"new4"), now_ms=0)
    lg.append(kv(b"other", b"x"), now_ms=0)  # (the active segment)
    assert lg.compact(0) == 2
    assert everything(lg) == [(0, b"k0", b"old0"), (2, b"k2", b"old2"), (3, b"k3", b"old3"), (5, b"k5", b"old5"),
                              (6, b"k1", b"new1"), (7, b"k4", b"new4"), (8, b"other", b"x")]


class _Recorded:
    """A log's lock that notes the name of each function that takes it."""

    def __init__(self) -> None:
        import sys
        self._sys, self._lock, self.takers = sys, threading.RLock(), []

    def __enter__(self):
        self.takers.append(self._sys._getframe(1).f_code.co_name)
        return self._lock.__enter__()

    def __exit__(self, *exc):
        return self._lock.__exit__(*exc)


def test_the_swap_in_runs_in_a_worker_under_the_log_lock_and_a_reader_keeps_its_segment(make_log):
    """The swap-in's renames run in a worker thread (swap_work: the log's replace_segments, Kafka's
    LocalLog.replaceSegments) under the log's lock, which retention, DeleteRecords, truncation and closing take too;
    each replacement takes its segment's place in the list, and a reader holding the old segment still reads it
    whole, from its file renamed `.deleted`, until the log deletes it. A swap whose segment left the log meanwhile
    does nothing and its prepared files are dropped."""
    lg = make_log(segment_bytes=300)
    fill(lg, 20)
    lock = lg.lock = _Recorded()
    old = lg.segments[0]
    old_batches = old.read(old.base, 1 << 20, True, None)
    before = everything(lg)
    cleaner = LogCleaner()
    job = cleaner.plan(lg, 0)
    result = job.run()
    replaced = {id(seg) for seg, _ in result.replacements}
    assert id(old) in replaced
    done = []
    t = threading.Thread(target=lambda: done.append(cleaner.swap_work(job, result)()))
    t.start()
    t.join()
    assert done == [True] and lock.takers == ["replace_segments"]
    assert not replaced & {id(s) for s in lg.segments} and lg.segments[0].base == old.base
    assert cleaner.swapped(job, result, True)
    after = everything(lg)
    assert len(after) == len(before) - result.records_removed < len(before) and after[-3:] == before[-3:]
    assert old.read(old.base, 1 << 20, True, None) == old_batches  # (the old segment, as a reader holds it)
    if lg.dir is not None:
        assert sorted(p.name for p in lg.dir.glob(f"{old.base:020d}.*")) == [
            f"{old.base:020d}.{ext}" for ext in ("index", "index.deleted", "log", "log.deleted", "timeindex",
                                                 "timeindex.deleted")]
        assert lg.deletions_pending and {f.base for f in lg.pending_deletions} >= {old.base}
        assert not list(lg.dir.glob("*.cleaned"))
        lg.files_to_delete(0)
        run = lg.files_to_delete(lg.config.file_delete_delay_ms)
        run()
        assert not list(lg.dir.glob("*.deleted")) and not lg.deletions_pending  # (the periodic check skips it)
    # the log's changes of its segments take the lock
    fill(lg, 20)
    lg.enforce_retention(0)
    lg.delete_records_before(lg.segments[1].base)
    lg.truncate_to(lg.log_end_offset - 1)
    lg.truncate_to(lg.log_start_offset)
    lg.close()
    # (and the producer snapshots: a roll's renamed in place under it, a truncation's deleted under it)
    takers = [t for t in lock.takers if t not in ("write", "_snapshots_stale")]
    assert takers[1:] == ["enforce_retention", "delete_records_before", "truncate_to",
                               "truncate_fully_and_start_at", "close"]


def test_a_swap_whose_segment_left_the_log_meanwhile_does_nothing(make_log):
    """replace_segments checks, under the lock, that every segment to replace is still in the log (besides the log's
    version): else nothing is renamed or replaced, and `swapped` drops the prepared files."""
    lg = make_log(segment_bytes=300)
    fill(lg, 20)
    cleaner = LogCleaner()
    job = cleaner.plan(lg, 0)
    result = job.run()
    lg.segments.pop(0)  # (as the version were the same)
    kept = list(lg.segments)
    assert not cleaner.swapped(job, result, cleaner.swap_work(job, result)())
    assert all(a is b for a, b in zip(lg.segments, kept)) and len(lg.segments) == len(kept)
    if lg.dir is not None:
        assert not list(lg.dir.glob("*.cleaned")) and not list(lg.dir.glob("*.deleted"))


class _SwapFirst:
    """A log's lock that a worker's swap-in takes first: the swap runs as the first caller asks for the lock."""

    def __init__(self, swap) -> None:
        self._lock, self._swap = threading.RLock(), swap

    def __enter__(self):
        swap, self._swap = self._swap, None
        if swap is not None:
            swap()
        return self._lock.__enter__()

    def __exit__(self, *exc):
        return self._lock.__exit__(*exc)


def test_retention_measures_the_log_under_its_lock_after_a_swap_that_held_it(make_log):
    """retention.bytes is checked against the log's size read under the log's lock: a cleaner's swap-in that held the
    lock meanwhile (in its worker) shrank the log, and a size read before the lock would delete a segment the
    retention keeps."""
    lg = make_log(segment_bytes=300)
    fill(lg, 20)
    cleaner = LogCleaner()
    job = cleaner.plan(lg, 0)
    result = job.run()
    saved = sum(old.size - new.size for old, new in result.replacements)
    after = lg.size_bytes - saved
    lg.config.retention_bytes = after + 1  # (all of it kept, once swapped)
    first = result.replacements[0][1]
    assert lg.size_bytes - first.size > after  # (the size before the swap would delete its first segment)
    lg.lock = _SwapFirst(cleaner.swap_work(job, result))
    count = len(lg.segments)
    assert lg.enforce_retention(0) == 0
    assert len(lg.segments) == count and lg.size_bytes == after and lg.segments[0] is first


def test_a_swap_in_that_passed_its_check_as_the_log_dir_failed_is_closed_by_the_failure(tmp_path):
    """fail() (the log dir failed) runs its closing in a worker under the log's lock: a cleaner's swap-in that was
    past its version check when fail() took the segment list has put its segments in by then, and they are closed
    with the rest, as are the segments they replaced (no descriptor left open on a dead log dir)."""
    lg = FileLog(tmp_path / "t-0", LogConfig(cleanup_policy="compact", segment_bytes=300))
    fill(lg, 20)
    cleaner = LogCleaner()
    job = cleaner.plan(lg, 0)
    result = job.run()
    close_files = lg.fail()
    assert lg.replace_segments(result.replacements, lg.version)  # (the swap, as if past its check meanwhile)
    close_files()
    olds = [old for old, _ in result.replacements]
    news = [new for _, new in result.replacements]
    assert all(s.fd == -1 for s in news + olds + list(lg.segments))


def test_retention_ms_deletes_segments_the_cleaner_emptied(make_log):
    """A segment with no timestamp (a cleaning left it empty) is as old as its last append, as Kafka's
    LogSegment.largestTimestamp falls back to the file's last modification (which its cleaner carries over to the
    cleaned segment): retention.ms deletes it, and the segments after it, instead of stopping there for good."""
    lg = make_log(segment_bytes=300, retention_ms=1000, min_cleanable_dirty_ratio=0.01)
    fill(lg, 20, keys=1, ts=0)
    cleaner = LogCleaner()
    job = cleaner.plan(lg, 0)
    cleaner.swap_work(job, job.run())()
    emptied = [s for s in lg.segments if s.size == 0]
    assert emptied and all(s.max_ts < 0 for s in emptied)
    assert lg.enforce_retention(500) == 0  # (not past retention.ms yet)
    n = len(lg.segments)
    assert lg.enforce_retention(10_000) == n  # every segment, the active one after a roll
    assert lg.log_start_offset == lg.log_end_offset == 20


def test_min_compaction_lag_of_records_without_timestamps_counts_from_the_last_append(make_log):
    """min.compaction.lag.ms of a segment whose records carry no timestamp: from its last append (Kafka's
    largestTimestamp, the file's last modification), not never cleanable."""
    lg = make_log(segment_bytes=300, min_compaction_lag_ms=1000, min_cleanable_dirty_ratio=0.01)
    for i in range(20):
        lg.append(kv(b"k", b"v%d" % i, ts=-1), now_ms=0)
    assert len(lg.segments) > 2 and all(s.max_ts < 0 for s in lg.segments)
    cleaner = LogCleaner()
    assert cleaner.plan(lg, 500) is None  # (within the lag)
    job = cleaner.plan(lg, 10_000)
    assert job is not None and job.first_dirty == 0


def test_a_cleaned_segment_keeps_the_last_modification_of_the_one_it_replaces(make_log, tmp_path):
    """Kafka's cleaner gives the cleaned segment the replaced one's last modification time (its file's, so after a
    restart too): what retention.ms counts from when no record is left with a timestamp."""
    lg = make_log(segment_bytes=300, min_cleanable_dirty_ratio=0.01)
    for i in range(20):
        lg.append(kv(b"k", b"v%d" % i, ts=0), now_ms=1000 + 100 * i)  # (appended later than each was made)
    before = {s.base: s.modified_ms for s in lg.segments[:-1]}
    assert all(s.modified_ms > s.created_ms for s in lg.segments[:-1])
    cleaner = LogCleaner()
    job = cleaner.plan(lg, 0)
    cleaner.swap_work(job, job.run())()
    assert {s.base: s.modified_ms for s in lg.segments[:-1]} == before
    if lg.dir is not None:
        lg.close()
        again = FileLog(lg.dir, lg.config)
        assert {s.base: s.modified_ms for s in again.segments[:-1]} == before
        again.close()
