"""The storage topic configs Kafkite once took at their default only, honoured as Kafka's log honours them:
file.delete.delay.ms (a removed segment's files renamed `.deleted`, removed after the delay), segment.index.bytes
(a segment rolls when its offset or time index is full), segment.jitter.ms (each segment rolls at segment.ms minus
its own random jitter) and preallocate (a new .log set to segment.bytes, trimmed when it rolls)."""
from __future__ import annotations

import os
import random

import pytest
import structlog
from hypothesis import HealthCheck, given, settings, strategies as st

from kafkite.storage.batch import build_batch, decode_records, iter_batches
from kafkite.storage.log_config import LogConfig
from kafkite.storage.unified_log import FileLog, MemoryLog


def batch(i: int, n: int = 2, ts: int | None = None, key: bytes | None = None) -> bytes:
    return build_batch([(key or b"k%d" % i, b"v%d-%d" % (i, j), []) for j in range(n)],
                       timestamp_ms=1000 + i if ts is None else ts)


def names(d) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name[:20].isdigit())


def deleted(d) -> list[str]:
    return [n for n in names(d) if n.endswith(".deleted")]


def all_offsets(lg) -> list[int]:
    out, off = [], lg.log_start_offset
    while off < lg.log_end_offset:
        data = lg.read(off, 1 << 20)
        out += [r.offset for r in decode_records(data)]
        off = [h for _, h in iter_batches(data)][-1].next_offset
    return out


def filled(d, n: int = 10, **cfg) -> FileLog:
    lg = FileLog(d, LogConfig(segment_bytes=300, **cfg))
    for i in range(n):
        lg.append(batch(i), now_ms=0)
    assert len(lg.segments) > 2
    return lg


# -- file.delete.delay.ms ------------------------------------------------------------------------------------
def test_retention_renames_the_files_and_deletes_them_after_the_delay(tmp_path):
    d = tmp_path / "t-0"
    lg = filled(d, retention_bytes=1, file_delete_delay_ms=1000)
    gone = lg.segments[:-1]
    first = gone[0]
    assert lg.enforce_retention(now_ms=5000) == len(gone)
    # Kafka's changeFileSuffixes("", ".deleted"): every file of the segment, at once
    # (and its producer snapshot, taken when the segment before it rolled: the first segment has none)
    expected = sorted([f"{s.base:020d}{ext}.deleted" for s in gone for ext in (".log", ".index", ".timeindex")]
                      + [f"{s.base:020d}.snapshot.deleted" for s in gone[1:]])
    assert deleted(d) == expected
    live = [f"{lg.active.base:020d}.log", f"{lg.active.base:020d}.snapshot"]
    assert names(d) == sorted(expected + live)
    # a read that still holds the segment goes on working (the file is open until it is deleted)
    assert [r.offset for r in decode_records(first.read(0, 1 << 20, True, None))][:2] == [0, 1]
    assert lg.files_to_delete(5999) is None  # not before file.delete.delay.ms
    run = lg.files_to_delete(6000)
    assert run is not None and deleted(d) == expected  # removed by run(), in the caller's worker thread
    run()
    assert deleted(d) == [] and names(d) == live
    assert lg.files_to_delete(10_000) is None and first.fd == -1
    assert all_offsets(lg) == list(range(lg.log_start_offset, lg.log_end_offset))
    lg.close()


def test_the_delay_of_an_operation_without_a_clock_runs_from_the_first_check(tmp_path):
    d = tmp_path / "t-0"
    lg = filled(d, file_delete_delay_ms=500)
    lg.delete_records_before(lg.segments[2].base)  # DeleteRecords: no now_ms given (3 files each, 1 snapshot)
    assert len(deleted(d)) == 7 and [f.due_ms for f in lg.pending_deletions] == [None, None]
    assert lg.files_to_delete(10_000) is None  # the delay starts now
    assert [f.due_ms for f in lg.pending_deletions] == [10_500, 10_500]
    assert lg.files_to_delete(10_499) is None
    lg.files_to_delete(10_500)()
    assert deleted(d) == []
    lg.close()


def test_zero_delay_deletes_at_the_next_check(tmp_path):
    d = tmp_path / "t-0"
    lg = filled(d, retention_bytes=1, file_delete_delay_ms=0)
    lg.enforce_retention(now_ms=7)
    assert deleted(d)  # still renamed first, as Kafka's asynchronous delete
    lg.files_to_delete(7)()
    assert deleted(d) == []
    lg.close()


def test_truncation_renames_and_a_new_segment_of_the_same_base_is_never_deleted(tmp_path):
    d = tmp_path / "t-0"
    zero = d / "00000000000000000000.log.deleted"
    lg = filled(d, file_delete_delay_ms=100)
    top = lg.active.base
    lg.truncate_to(top - 1)  # the active segment goes (renamed), the one before is cut
    assert f"{top:020d}.log.deleted" in deleted(d) and f"{top:020d}.log" not in names(d)
    assert lg.files_to_delete(0) is None  # nothing due: the delay (no now_ms given) starts at this check
    # a follower starting over at offset 0 (twice): every segment renamed before the new segment 0 is made
    lg.truncate_fully_and_start_at(0)
    assert lg.files_to_delete(10) is None
    lg.append(batch(99), now_ms=0)
    lg.truncate_fully_and_start_at(0)  # segment 0's .deleted names are this newer segment's now
    assert lg.files_to_delete(20) is None
    lg.append(batch(98), now_ms=0)
    lg.files_to_delete(100)()  # the truncate_to's files
    assert f"{top:020d}.log.deleted" not in deleted(d) and zero.exists()
    lg.files_to_delete(110)()  # the first start-over's: its names were taken over, so they stay
    assert b"v99-0" in zero.read_bytes()
    lg.files_to_delete(120)()
    assert deleted(d) == [] and "00000000000000000000.log" in names(d)
    assert [r.value for r in decode_records(lg.read(0, 1 << 20))] == [b"v98-0", b"v98-1"]
    lg.close()


def test_compaction_keeps_the_replaced_files_for_the_delay(tmp_path):
    d = tmp_path / "t-0"
    lg = FileLog(d, LogConfig(segment_bytes=300, cleanup_policy="compact", file_delete_delay_ms=1000))
    for i in range(12):
        lg.append(batch(i, key=b"k%d" % (i % 3)), now_ms=0)
    before = {p: p.read_bytes() for p in d.glob("*.log") if p.stem != f"{lg.active.base:020d}"}
    assert lg.compact(now_ms=0) > 0
    kept = deleted(d)
    assert [n for n in kept if n.endswith(".log.deleted")] == sorted(p.name + ".deleted" for p in before)
    for p, data in before.items():  # the old .log as it was, a hard link kept aside
        assert (d / (p.name + ".deleted")).read_bytes() == data and p.read_bytes() != data
    assert lg.files_to_delete(0) is None  # the swap took no now_ms: the delay starts at this check
    lg.files_to_delete(1000)()
    assert deleted(d) == []
    offsets = all_offsets(lg)
    lg.close()
    assert all_offsets(FileLog(d, lg.config, had_clean_shutdown=True)) == offsets


def test_deleted_files_left_by_a_stop_or_a_crash_are_removed_at_load(tmp_path):
    d = tmp_path / "t-0"
    lg = filled(d, retention_bytes=1)
    lg.enforce_retention(now_ms=0)
    end, start = lg.log_end_offset, lg.log_start_offset
    assert deleted(d)
    lg.close()  # the delay (60 s by default) has not passed: the files stay, closed
    assert deleted(d) and lg.pending_deletions == []
    (d / "00000000000000000099.index").write_bytes(b"")  # an orphaned index file (a crash mid-rename)
    with structlog.testing.capture_logs() as logs:
        again = FileLog(d, LogConfig(segment_bytes=300), had_clean_shutdown=True)
    assert deleted(d) == [] and "00000000000000000099.index" not in names(d)
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["log.orphaned_index"]
    assert (again.log_start_offset, again.log_end_offset) == (start, end)
    again.close()


def test_a_memory_log_drops_segments_at_once():
    lg = MemoryLog(LogConfig(segment_bytes=300, retention_bytes=1))
    for i in range(10):
        lg.append(batch(i), now_ms=0)
    assert lg.enforce_retention(now_ms=0) > 0
    assert lg.pending_deletions == [] and lg.files_to_delete(10**9) is None


# -- segment.index.bytes -------------------------------------------------------------------------------------
@pytest.fixture(params=["memory", "file"])
def make_log(request, tmp_path):
    made = []

    def make(rng=None, **cfg):
        config = LogConfig(**cfg)
        lg = MemoryLog(config, rng=rng) if request.param == "memory" else \
            FileLog(tmp_path / f"t-{len(made)}", config, rng=rng)
        made.append(lg)
        return lg
    yield make
    for lg in made:
        if isinstance(lg, FileLog) and lg.active.fd >= 0:  # (not closed by the test)
            lg.close()


def test_a_full_offset_index_rolls_the_segment(make_log):
    # 40 bytes: 5 offset entries; one per batch after the first (index.interval.bytes 0); timestamps that do not
    # grow add no time-index entry after the first
    lg = make_log(segment_index_bytes=40, index_interval_bytes=0)
    for i in range(14):
        lg.append(batch(i, ts=5000), now_ms=0)
    assert [(s.base, s.next_offset) for s in lg.segments] == [(0, 12), (12, 24), (24, 28)]
    if isinstance(lg, FileLog):
        assert len(lg.segments[0].index) == 5
        lg.close()
        assert lg.segments[0].offset_index.path.stat().st_size == 40  # never past segment.index.bytes
        assert lg.segments[0].time_index.path.stat().st_size <= 36


def test_a_full_time_index_rolls_the_segment(make_log):
    # 40 bytes: 3 time entries, full at 2 (Kafka keeps the last slot for the roll's final entry)
    lg = make_log(segment_index_bytes=40, index_interval_bytes=0)
    for i in range(7):
        lg.append(batch(i), now_ms=0)  # growing timestamps: a time entry with each offset entry
    assert [(s.base, s.next_offset) for s in lg.segments] == [(0, 6), (6, 12), (12, 14)]
    if isinstance(lg, FileLog):  # (the roll's final entry, in the slot kept for it, was the last one already)
        assert len(lg.segments[0].timeindex) == 2 and len(lg.segments[0].index) == 2


def test_an_index_smaller_than_a_time_entry_rolls_every_append(make_log):
    lg = make_log(segment_index_bytes=4)  # Kafka's least value: both indexes full from the start
    for i in range(4):
        lg.append(batch(i), now_ms=0)
    assert [s.base for s in lg.segments] == [0, 2, 4, 6]


def test_many_batches_in_one_append_never_overfill_the_index(make_log):
    lg = make_log(segment_index_bytes=24, index_interval_bytes=0)  # 3 offset entries
    # a follower's append: one write of many batches (Kafka adds one index entry per append, Kafkite one per batch)
    many = b"".join(build_batch([(b"k", b"v", [])], base_offset=i, timestamp_ms=5000) for i in range(10))
    lg.append_as_follower(many, now_ms=0)
    assert len(lg.segments) == 1
    if isinstance(lg, FileLog):
        assert len(lg.active.index) == 3
    lg.append(batch(50), now_ms=0)
    assert [s.base for s in lg.segments] == [0, 10]  # the full index rolled it


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(1, 3), st.integers(0, 3000)), min_size=1, max_size=25),
       st.sampled_from([4, 16, 24, 40, 64, 100]), st.integers(0, 300))
def test_memory_and_file_logs_roll_alike_on_index_size(tmp_path_factory, appends, index_bytes, interval):
    cfg = LogConfig(segment_index_bytes=index_bytes, index_interval_bytes=interval)
    mem, fil = MemoryLog(cfg), FileLog(tmp_path_factory.mktemp("p") / "t-0", cfg)
    for i, (n, ts) in enumerate(appends):
        mem.append(batch(i, n=n, ts=ts), now_ms=0)
        fil.append(batch(i, n=n, ts=ts), now_ms=0)
    assert [(s.base, s.next_offset) for s in mem.segments] == [(s.base, s.next_offset) for s in fil.segments]
    fil.close()


# -- segment.jitter.ms ---------------------------------------------------------------------------------------
class Draws:
    """A random source that answers `randrange(n)` with n minus `below` (the largest jitter when 1), noting n."""

    def __init__(self, below: int = 1):
        self.below, self.asked = below, []

    def randrange(self, n: int) -> int:
        self.asked.append(n)
        return n - self.below


def test_a_segment_rolls_at_segment_ms_minus_its_jitter(make_log):
    def rolled_after(wait_ms: int, **cfg) -> bool:
        lg = make_log(segment_ms=1000, rng=Draws(), **cfg)
        lg.append(batch(0, ts=10_000), now_ms=0)
        lg.append(batch(1, ts=10_000 + wait_ms), now_ms=0)  # record time: Kafka's timeWaitedForRoll
        return len(lg.segments) == 2
    # jitter 600 drawn as 599: the segment rolls once more than 1000 - 599 ms have passed
    assert not rolled_after(401, segment_jitter_ms=600) and rolled_after(402, segment_jitter_ms=600)
    assert not rolled_after(1000) and rolled_after(1001)  # no jitter: segment.ms


def test_the_jitter_is_drawn_per_segment_below_min_of_jitter_and_segment_ms():
    rng = Draws(below=3)
    lg = MemoryLog(LogConfig(segment_ms=500, segment_jitter_ms=10_000, segment_bytes=200), rng=rng)
    for i in range(8):
        lg.append(batch(i), now_ms=0)
    assert len(lg.segments) > 2
    assert rng.asked == [500] * len(lg.segments)  # one draw per segment made, in [0, min(jitter, segment.ms))
    assert {s.roll_jitter_ms for s in lg.segments} == {497}


def test_a_seeded_random_source_gives_the_same_jitters(tmp_path):
    def jitters(seed: int) -> list[int]:
        lg = MemoryLog(LogConfig(segment_jitter_ms=1000, segment_bytes=200), rng=random.Random(seed))
        for i in range(12):
            lg.append(batch(i), now_ms=0)
        return [s.roll_jitter_ms for s in lg.segments]
    first = jitters(7)
    assert len(first) > 3 and all(0 <= j < 1000 for j in first) and len(set(first)) > 1
    assert jitters(7) == first
    # a loaded log's segments draw theirs too (Kafka's LogLoader opens them with randomSegmentJitter)
    lg = FileLog(tmp_path / "t-0", LogConfig(segment_jitter_ms=1000), rng=random.Random(7))
    assert lg.active.roll_jitter_ms == random.Random(7).randrange(1000)
    lg.close()


def test_no_jitter_draws_nothing():
    class Never:
        def randrange(self, n):
            raise AssertionError("segment.jitter.ms 0: no draw")
    lg = MemoryLog(LogConfig(segment_bytes=200), rng=Never())
    for i in range(8):
        lg.append(batch(i), now_ms=0)
    assert len(lg.segments) > 2 and {s.roll_jitter_ms for s in lg.segments} == {0}


def test_the_cleaners_periodic_roll_honours_the_jitter():
    lg = MemoryLog(LogConfig(segment_ms=1000, segment_jitter_ms=1000, cleanup_policy="compact"), rng=Draws(below=101))
    lg.append(batch(0), now_ms=0)  # no timestamp wait here: roll_if_due measures from the segment's creation
    lg.active.created_ms = 0
    lg.active.first_batch_ts = -1
    assert not lg.roll_if_due(101) and lg.roll_if_due(102)  # 1000 - 899 = 101 ms


# -- preallocate ---------------------------------------------------------------------------------------------
def test_preallocated_segments_are_trimmed_when_they_roll_and_on_close(tmp_path):
    d = tmp_path / "t-0"
    cfg = LogConfig(segment_bytes=1000, preallocate=True, flush_messages=1_000_000)
    lg = FileLog(d, cfg)
    assert os.path.getsize(lg.active.log_path) == 1000 and lg.active.size == 0  # the first segment too
    for i in range(14):
        lg.append(batch(i), now_ms=0)
    rolled, active = lg.segments
    assert os.path.getsize(active.log_path) == 1000 and active.size < 1000
    assert os.path.getsize(rolled.log_path) == 1000 and rolled.closing  # the trim comes with finish_roll
    target, run = lg.scheduled_flush(0)
    run()
    assert os.path.getsize(rolled.log_path) == rolled.size
    assert all_offsets(lg) == list(range(28))
    lg.close()
    assert os.path.getsize(active.log_path) == active.size  # trimmed on close: a clean start reads no zeros
    with structlog.testing.capture_logs() as logs:
        again = FileLog(d, cfg, had_clean_shutdown=True)
    assert [e for e in logs if e["log_level"] == "warning"] == []
    assert again.log_end_offset == 28 and all_offsets(again) == list(range(28))
    again.close()


def test_a_crash_with_a_preallocated_segment_recovers_every_record(tmp_path):
    d = tmp_path / "t-0"
    cfg = LogConfig(segment_bytes=1000, preallocate=True)
    lg = FileLog(d, cfg)
    for i in range(5):
        lg.append(batch(i), now_ms=0)
    assert os.path.getsize(lg.active.log_path) == 1000
    # no close: the file keeps its zero tail, which recovery cuts (Kafka's "Found invalid messages" warning)
    with structlog.testing.capture_logs() as logs:
        again = FileLog(d, cfg)
    assert "log_segment.invalid_messages" in [e["event"] for e in logs]
    assert again.log_end_offset == 10 and all_offsets(again) == list(range(10))
    assert os.path.getsize(again.active.log_path) == again.active.size
    again.append(batch(5), now_ms=0)
    assert all_offsets(again) == list(range(12))
    again.close()


def test_truncating_a_preallocated_segment(tmp_path):
    lg = FileLog(tmp_path / "t-0", LogConfig(segment_bytes=1000, preallocate=True))
    for i in range(4):
        lg.append(batch(i), now_ms=0)
    lg.truncate_to(4)
    assert os.path.getsize(lg.active.log_path) == lg.active.size  # as Kafka's FileRecords.truncateTo
    lg.append(batch(9), now_ms=0)
    assert all_offsets(lg) == list(range(6))
    lg.close()


def test_preallocate_is_nothing_for_a_memory_log():
    lg = MemoryLog(LogConfig(segment_bytes=300, preallocate=True))
    for i in range(10):
        lg.append(batch(i), now_ms=0)
    assert lg.active.size < 300 and all_offsets(lg) == list(range(20))
