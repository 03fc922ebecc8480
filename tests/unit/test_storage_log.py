"""storage (UnifiedLog): MemoryLog and FileLog pass the same behaviour tests (parametrized)."""
from __future__ import annotations


import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkite.storage.batch import build_batch, crc_ok, decode_records, iter_batches, read_header
from kafkite.storage.log_config import LogConfig
from kafkite.storage.unified_log import FileLog, MemoryLog, OffsetOutOfRange


def batch(n=2, ts=1000, size=10, codec=0, pid=-1, epoch=-1, seq=-1, keys=None, values=None):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=1 << 30)
    for i in range(n):
        k = keys[i] if keys else b"k%d" % i
        v = values[i] if values else b"v" * size
        b.append(i, timestamp=ts + i, key=k, value=v, headers=[])
    return bytearray(b.build())


@pytest.fixture(params=["memory", "file"])
def kind(request):
    return request.param


@pytest.fixture
def make_log(kind, tmp_path):
    counter = iter(range(1000))

    def make(now_ms=0, **cfg):
        config = LogConfig(**cfg)
        if kind == "memory":
            return MemoryLog(config, now_ms=now_ms)
        return FileLog(tmp_path / f"t-{next(counter)}", config, now_ms=now_ms)
    return make


def offsets(data):
    return [r.offset for r in decode_records(data)]


def test_append_assigns_offsets_and_leader_epoch(make_log):
    lg = make_log()
    assert (lg.log_start_offset, lg.log_end_offset, lg.high_watermark) == (0, 0, 0)
    r1 = lg.append(batch(3), now_ms=0, leader_epoch=4)
    r2 = lg.append(batch(2), now_ms=0, leader_epoch=4)
    assert (r1.base_offset, r1.last_offset, r2.base_offset, r2.last_offset) == (0, 2, 3, 4)
    assert (r1.log_append_time_ms, r1.log_start_offset) == (-1, 0)
    assert (lg.log_end_offset, lg.high_watermark) == (5, 5)
    data = lg.read(0, 1 << 20)
    hs = [h for _, h in iter_batches(data)]
    assert [(h.base_offset, h.partition_leader_epoch) for h in hs] == [(0, 4), (3, 4)]
    assert all(crc_ok(data, p, h) for p, h in iter_batches(data))
    assert offsets(data) == [0, 1, 2, 3, 4]


def test_read_whole_batch_containing_offset_and_range(make_log):
    lg = make_log()
    lg.append(batch(3), now_ms=0)
    lg.append(batch(2), now_ms=0)
    assert offsets(lg.read(4, 1 << 20)) == [3, 4]
    assert offsets(lg.read(1, 1 << 20)) == [0, 1, 2, 3, 4]
    assert lg.read(5, 100) == b""  # at the log end offset
    for bad in (6, -1):
        with pytest.raises(OffsetOutOfRange):
            lg.read(bad, 100)


def test_max_bytes_and_at_least_one_batch(make_log):
    lg = make_log()
    for _ in range(3):
        lg.append(batch(1, size=500), now_ms=0)
    size = len(lg.read(0, 1))
    assert len(list(iter_batches(lg.read(0, 10)))) == 1  # min_one: one whole batch though bigger
    assert lg.read(0, 10, min_one=False) == b""
    assert len(list(iter_batches(lg.read(0, 2 * size + 1)))) == 2
    assert len(list(iter_batches(lg.read(0, 2 * size)))) == 2
    assert len(list(iter_batches(lg.read(0, 2 * size - 1)))) == 1


def test_read_stops_at_max_offset(make_log):
    lg = make_log()
    for _ in range(4):
        lg.append(batch(2), now_ms=0)
    assert offsets(lg.read(0, 1 << 20, max_offset=4)) == [0, 1, 2, 3]
    assert offsets(lg.read(0, 1 << 20, max_offset=5)) == [0, 1, 2, 3, 4, 5]
    assert lg.read(6, 1 << 20, max_offset=6) == b""


def test_many_segments_read_every_offset(make_log):
    lg = make_log(segment_bytes=1000, index_interval_bytes=300)
    for i in range(150):
        lg.append(batch(2, ts=i * 10), now_ms=0)
    assert len(lg.segments) > 10
    assert [s.base for s in lg.segments] == sorted(s.base for s in lg.segments)
    for off in range(0, 300, 7):
        first = decode_records(lg.read(off, 1))[0]
        assert first.offset <= off <= first.offset + 1
    # a large read stays within one segment and ends at a batch boundary
    data = lg.read(0, 1 << 20)
    assert 0 < len(data) <= 1000 and sum(h.size for _, h in iter_batches(data)) == len(data)


def test_segments_roll_on_size(make_log):
    lg = make_log(segment_bytes=1000)
    sizes = [len(batch(2))] * 30
    for _ in sizes:
        lg.append(batch(2), now_ms=0)
    assert all(s.size <= 1000 for s in lg.segments)
    assert [s.base for s in lg.segments][1:] == [s.next_offset for s in lg.segments][:-1]


def test_segments_roll_on_time(make_log):
    lg = make_log(segment_ms=1000)
    lg.append(batch(1, ts=0), now_ms=0)
    lg.append(batch(1, ts=500), now_ms=500)
    assert len(lg.segments) == 1
    lg.append(batch(1, ts=1001), now_ms=1001)
    assert len(lg.segments) == 2 and lg.active.base == 2


def test_log_append_time(make_log):
    lg = make_log(message_timestamp_type="LogAppendTime")
    r = lg.append(batch(2, ts=5), now_ms=777)
    assert r.log_append_time_ms == 777
    data = lg.read(0, 1 << 20)
    h = read_header(data)
    assert h.log_append_time and h.max_timestamp == 777 and crc_ok(data, 0, h)
    assert [x.timestamp for x in decode_records(data)] == [777, 777]


def test_timestamp_lookup(make_log):
    lg = make_log(segment_bytes=1000, index_interval_bytes=100)
    for i in range(50):
        lg.append(batch(2, ts=1000 + i * 100), now_ms=0)
    assert lg.offset_for_timestamp(0)[:2] == (0, 1000)
    assert lg.offset_for_timestamp(1101)[:2] == (3, 1101)
    assert lg.offset_for_timestamp(1150)[:2] == (4, 1200)
    assert lg.offset_for_timestamp(5901)[:2] == (99, 5901)
    assert lg.offset_for_timestamp(10**9) is None
    for ts in range(1000, 6000, 37):  # against a linear scan
        want = next((r for r in decode_records(b"".join(_all(lg))) if r.timestamp >= ts), None)
        got = lg.offset_for_timestamp(ts)
        assert (got and got[:2]) == (want and (want.offset, want.timestamp))
    assert lg.max_timestamp_entry()[:2] == (99, 1000 + 49 * 100 + 1)


def _all(lg):
    off, out = lg.log_start_offset, []
    while off < lg.log_end_offset:
        data = lg.read(off, 1 << 20)
        out.append(data)
        off = [h for _, h in iter_batches(data)][-1].next_offset
    return out


def test_max_timestamp_entry_with_out_of_order_timestamps(make_log):
    lg = make_log(segment_bytes=300)
    assert lg.max_timestamp_entry() is None
    for ts in (100, 900, 300, 900, 50):
        lg.append(batch(1, ts=ts), now_ms=0, leader_epoch=2)
    assert lg.max_timestamp_entry() == (1, 900, 2)
    assert lg.offset_for_timestamp(200)[:2] == (1, 900)


def test_retention_by_bytes(make_log):
    lg = make_log(segment_bytes=600, retention_bytes=900, retention_ms=-1)
    for i in range(20):
        lg.append(batch(1, ts=i), now_ms=0)
    n_before = len(lg.segments)
    deleted = lg.enforce_retention(10**12)
    assert deleted == n_before - len(lg.segments) > 0
    assert lg.size_bytes - lg.segments[0].size < 900 <= lg.size_bytes or len(lg.segments) == 1
    assert lg.log_start_offset == lg.segments[0].base > 0
    with pytest.raises(OffsetOutOfRange):
        lg.read(0, 100)
    assert offsets(lg.read(lg.log_start_offset, 1))[0] == lg.log_start_offset


def test_retention_by_time_deletes_the_active_segment_too_after_a_roll(make_log):
    """As Kafka's deletableSegments/deleteSegments: segments past retention.ms go from the oldest, each wholly below
    the high watermark; a non-empty active segment past it goes too, after the log rolls a new (empty) one, which
    retention never deletes; the log start is then the log end, and appends go on from there."""
    lg = make_log(segment_bytes=300, retention_ms=1000)
    for i in range(12):
        lg.append(batch(1, ts=0 if i < 6 else 10_000), now_ms=0)
    segs = [(s.base, s.max_ts) for s in lg.segments]
    expired = [b for b, ts in segs[:-1] if ts < 4000]
    assert lg.enforce_retention(5_000) == len(expired) > 0
    assert lg.log_start_offset == lg.segments[0].base
    lg.high_watermark = 11  # the last record not yet replicated: its (active) segment stays
    assert lg.enforce_retention(10**9) == len(segs) - len(expired) - 1
    assert len(lg.segments) == 1 and lg.log_start_offset == lg.segments[0].base < 11
    lg.high_watermark = 12
    assert lg.enforce_retention(10**9) == 1
    assert len(lg.segments) == 1 and lg.log_start_offset == lg.log_end_offset == lg.segments[0].base == 12
    assert lg.segments[0].size == 0 and lg.enforce_retention(10**12) == 0  # an empty active segment stays
    lg.append(batch(1, ts=10**9), now_ms=0)
    assert lg.log_end_offset == 13 and offsets(lg.read(12, 100)) == [12]


def test_retention_by_bytes_deletes_the_active_segment_when_the_log_is_still_over(make_log):
    """retention.bytes counts the active segment as Kafka does: a log over it by at least the active segment's size
    loses that too (after a roll)."""
    lg = make_log(segment_bytes=10**6, retention_bytes=0, retention_ms=-1)
    for _ in range(3):
        lg.append(batch(1), now_ms=0)
    assert len(lg.segments) == 1 and lg.enforce_retention(0) == 1
    assert lg.log_start_offset == lg.log_end_offset == 3 and lg.size_bytes == 0


def test_delete_records(make_log):
    lg = make_log(segment_bytes=500)
    for _ in range(10):
        lg.append(batch(1), now_ms=0)
    assert lg.delete_records_before(4) == 4
    assert lg.delete_records_before(2) == 4  # never moves back
    with pytest.raises(OffsetOutOfRange):
        lg.delete_records_before(11)
    with pytest.raises(OffsetOutOfRange):
        lg.read(3, 100)
    assert offsets(lg.read(4, 1))[0] == 4
    assert lg.segments[0].base <= 4 < lg.segments[0].next_offset
    assert lg.offset_for_timestamp(0)[0] == 4
    assert lg.delete_records_before(10) == 10 and lg.read(10, 100) == b""


def test_high_watermark_bounds(make_log):
    lg = make_log()
    lg.append(batch(5), now_ms=0)
    lg.high_watermark = 2
    assert lg.high_watermark == 2
    with pytest.raises(OffsetOutOfRange):
        lg.delete_records_before(3)
    lg.high_watermark = 99
    assert lg.high_watermark == 5


def test_leader_epochs(make_log):
    lg = make_log()
    lg.append(batch(2), now_ms=0, leader_epoch=1)
    lg.append(batch(3), now_ms=0, leader_epoch=3)
    lg.append(batch(1), now_ms=0, leader_epoch=3)
    lg.append(batch(1), now_ms=0, leader_epoch=5)
    assert lg.epochs.entries == [(1, 0), (3, 2), (5, 6)]
    assert lg.end_offset_for_epoch(5) == (5, 7)   # latest epoch: the log end offset
    assert lg.end_offset_for_epoch(3) == (3, 6)
    assert lg.end_offset_for_epoch(4) == (3, 6)   # unknown epoch in between: the one before
    assert lg.end_offset_for_epoch(0) == (0, 0)   # below every epoch: first start offset
    assert lg.end_offset_for_epoch(6) == (-1, -1)
    assert lg.end_offset_for_epoch(-1) == (-1, -1)


def test_truncate_to(make_log):
    lg = make_log(segment_bytes=400)
    for i in range(10):
        lg.append(batch(2, pid=1, epoch=0, seq=2 * i), now_ms=0, leader_epoch=i // 5)
    lg.truncate_to(9)  # inside batch [8, 9]: the whole batch goes
    assert lg.log_end_offset == 8 and lg.high_watermark == 8
    assert offsets(b"".join(_all(lg)))[-1] == 7
    assert lg.end_offset_for_epoch(0) == (0, 8) and lg.epochs.entries == [(0, 0)]
    assert lg.producer_state.producers[1].last_seq == 7
    r = lg.append(batch(1), now_ms=0)
    assert r.base_offset == 8
    lg.truncate_to(0)
    assert (lg.log_start_offset, lg.log_end_offset) == (0, 0) and lg.read(0, 100) == b""


def test_compaction_keeps_latest_per_key(make_log):
    lg = make_log(segment_bytes=400, cleanup_policy="compact", delete_retention_ms=1000)
    expected = {}
    off = 0
    for i in range(30):
        k = b"key%d" % (i % 4)
        v = None if i == 13 else b"val%d" % i
        lg.append(batch(1, ts=i, keys=[k], values=[v]), now_ms=0)
        expected[k] = (off, v)
        off += 1
    assert lg.config.compacted and len(lg.segments) > 3
    before = offsets(b"".join(_all(lg)))
    removed = lg.compact(now_ms=10)  # tombstones are young: kept
    after = decode_records(b"".join(_all(lg)))
    assert removed == len(before) - len(after) > 0
    latest = {}
    for r in after:
        latest[r.key] = (r.offset, r.value)
    assert latest == expected
    # every key appears once outside the active segment; offsets preserved and increasing
    active_base = lg.active.base
    old = [r.key for r in after if r.offset < active_base]
    assert len(old) == len(set(old))
    assert [r.offset for r in after] == sorted(r.offset for r in after)
    assert lg.log_end_offset == 30
    assert offsets(lg.read(0, 1 << 20))[0] >= 0  # reading from the start still works


def test_compaction_drops_old_tombstones_and_keyless(make_log):
    lg = make_log(segment_bytes=200, cleanup_policy="compact", delete_retention_ms=100)
    lg.append(batch(1, ts=0, keys=[b"a"], values=[b"1"]), now_ms=0)
    lg.append(batch(1, ts=0, keys=[b"a"], values=[None]), now_ms=0)
    lg.append(batch(1, ts=0, keys=[b"b"], values=[b"2"]), now_ms=0)
    for i in range(4):
        lg.append(batch(1, ts=0, keys=[b"c"], values=[b"x"]), now_ms=0)
    lg.compact(now_ms=50)
    keys = [(r.key, r.value) for r in decode_records(b"".join(_all(lg)))]
    assert (b"a", None) in keys and (b"a", b"1") not in keys
    lg.compact(now_ms=10_000)
    keys = [(r.key, r.value) for r in decode_records(b"".join(_all(lg)))]
    assert all(k != b"a" for k, _ in keys) and (b"b", b"2") in keys


def test_compaction_respects_min_lag(make_log):
    lg = make_log(segment_bytes=200, cleanup_policy="compact", min_compaction_lag_ms=1000)
    for i in range(6):
        lg.append(batch(1, ts=500, keys=[b"a"], values=[b"%d" % i]), now_ms=0)
    assert lg.compact(now_ms=1000) == 0
    assert lg.compact(now_ms=1500) > 0


def test_producer_state_is_kept_by_the_log(make_log):
    lg = make_log()
    lg.append(batch(3, pid=7, epoch=0, seq=0), now_ms=0)
    ps = lg.producer_state
    dup = ps.check(7, 0, 0, 2)
    assert dup.duplicate and (dup.base_offset, dup.last_offset) == (0, 2)
    assert ps.check(7, 0, 3, 5).ok
    assert ps.check(7, 0, 4, 5).code == 45


def test_internal_batches_and_config_names(make_log):
    lg = make_log()
    lg.append(bytearray(build_batch([(b"k", b"v", [])], timestamp_ms=5)), now_ms=5)
    assert [(r.key, r.value, r.timestamp) for r in decode_records(lg.read(0, 100))] == [(b"k", b"v", 5)]
    c = LogConfig.from_topic_configs({"segment.bytes": "1000", "retention.ms": "-1", "cleanup.policy": "compact,delete",
                                      "message.timestamp.type": "LogAppendTime", "flush.messages": "",
                                      "unknown.thing": "x", "max.message.bytes": "77"})
    assert (c.segment_bytes, c.retention_ms, c.cleanup_policy, c.message_timestamp_type) == \
        (1000, -1, ("compact", "delete"), "LogAppendTime")
    assert (c.flush_interval_messages, c.max_message_bytes, c.retention_bytes) == (1, 77, -1)


def test_append_ignores_trailing_partial_bytes(make_log):
    lg = make_log()
    data = batch(2)
    lg.append(data + data[:30], now_ms=0)
    lg.append(batch(1), now_ms=0)
    assert offsets(lg.read(0, 1 << 20)) == [0, 1, 2]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(0, 300), st.integers(0, 10_000)), min_size=1, max_size=25),
       st.lists(st.tuples(st.integers(0, 80), st.integers(0, 2000), st.booleans()), max_size=15),
       st.integers(150, 1500), st.integers(0, 600))
def test_memory_and_file_logs_agree(tmp_path_factory, appends, reads, segment_bytes, interval):
    """Property: the same appends give byte-identical reads, lookups and segment layout."""
    cfg = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=interval)
    mem = MemoryLog(cfg)
    fil = FileLog(tmp_path_factory.mktemp("p") / "t-0", cfg)
    for n, size, ts in appends:
        assert mem.append(batch(n, size=size, ts=ts), now_ms=0) == fil.append(batch(n, size=size, ts=ts), now_ms=0)
    assert [(s.base, s.size, s.next_offset, s.max_ts) for s in mem.segments] == \
        [(s.base, s.size, s.next_offset, s.max_ts) for s in fil.segments]
    for off, max_bytes, min_one in reads:
        if off > mem.log_end_offset:
            continue
        assert mem.read(off, max_bytes, min_one=min_one) == fil.read(off, max_bytes, min_one=min_one)
    for ts in (0, 2500, 5000, 9999, 20_000):
        assert mem.offset_for_timestamp(ts) == fil.offset_for_timestamp(ts)
    assert mem.max_timestamp_entry() == fil.max_timestamp_entry()
    fil.close()
    again = FileLog(fil.dir, cfg)
    assert again.log_end_offset == mem.log_end_offset
    for off, max_bytes, min_one in reads:
        if off <= mem.log_end_offset:
            assert again.read(off, max_bytes, min_one=min_one) == mem.read(off, max_bytes, min_one=min_one)
    again.close()


class _NoLock:
    def __enter__(self):
        raise AssertionError("the log's lock was taken")

    def __exit__(self, *exc):
        return False


def test_retention_tells_a_lone_segment_within_retention_without_the_lock(make_log):
    """The retention check of a log with only its active segment, not past retention.ms nor retention.bytes 0 (most
    logs, each pass), takes no lock and walks nothing (2.5 -> 0.5 us a log); one past it still goes."""
    lg = make_log(retention_ms=1000, retention_bytes=10)
    lg.append(batch(1, ts=0), now_ms=0)
    lock, lg.lock = lg.lock, _NoLock()
    assert lg.enforce_retention(1000) == 0
    lg.lock = lock
    assert lg.enforce_retention(1001) == 1 and lg.log_start_offset == 1


@pytest.mark.parametrize("delete", [True, False])
def test_retention_deletes_the_segments_below_the_log_start_whatever_the_policy(make_log, delete):
    """Kafka's deleteLogStartOffsetBreachedSegments (run whether cleanup.policy has delete or not): segments wholly
    below the log start offset go -- a log start loaded from its checkpoint past segments a crash left (the
    checkpoint written, the segments' renames not yet done)."""
    lg = make_log(segment_bytes=300, retention_ms=-1, retention_bytes=-1)
    for i in range(12):
        lg.append(batch(1), now_ms=0)
    segs = list(lg.segments)
    assert len(segs) > 3
    lg.log_start_offset = segs[2].base + 1  # (as the loader sets it from the checkpoint)
    assert lg.enforce_retention(0, delete=delete) == 2
    assert lg.segments == segs[2:] and lg.log_start_offset == segs[2].base + 1
    assert lg.enforce_retention(0, delete=delete) == 0


def test_the_retention_service_deletes_a_compacted_logs_segments_below_its_log_start():
    """The retention service runs the log start's deletion on a cleanup.policy=compact log too (Kafka's
    deleteOldSegments without config.delete), and nothing else of it (retention.ms is not applied)."""
    import trio
    from types import SimpleNamespace
    from kafkite import services
    compacted = MemoryLog(LogConfig(cleanup_policy="compact", segment_bytes=300, retention_ms=1))
    for i in range(12):
        compacted.append(batch(1, ts=0), now_ms=0)
    segs = list(compacted.segments)
    compacted.log_start_offset = segs[1].base  # (as the loader sets it from the checkpoint)
    state = SimpleNamespace(config={"log.retention.check.interval.ms": 1},
                            replicas=SimpleNamespace(logs={("c", 0): compacted}, log_now_ms=lambda: 10**9))

    async def main():
        with trio.move_on_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(services.retention, state)
                while compacted.segments[0] is segs[0]:
                    await trio.sleep(0.005)
                await trio.sleep(0.05)  # (a few more passes: retention.ms 1 must not apply)
                nursery.cancel_scope.cancel()
    trio.run(main)
    assert compacted.segments == segs[1:]


def test_a_memory_log_keeps_the_buffer_it_is_handed_and_copies_a_followers():
    """UnifiedLog.append owns the bytearray it patches: a memory segment keeps that one object (the produced batch
    is copied once, out of the request), not a copy of it; a follower's fetched bytes are not the log's, and are
    copied. What is read back is the patched batch either way."""
    lg = MemoryLog(LogConfig())
    buf = batch(3)
    lg.append(buf, now_ms=0, leader_epoch=2)
    assert lg.active.batches[-1] is buf
    assert read_header(buf).partition_leader_epoch == 2 and offsets(bytes(lg.read(0, 1 << 20))) == [0, 1, 2]
    follower = MemoryLog(LogConfig())
    fetched = bytearray(lg.read(0, 1 << 20))
    follower.append_as_follower(fetched, now_ms=0)
    assert follower.active.batches[-1] is not fetched and follower.active.batches[-1] == fetched
    fetched[:] = bytes(len(fetched))  # the fetcher reusing its buffer changes nothing in the follower's log
    assert offsets(bytes(follower.read(0, 1 << 20))) == [0, 1, 2]
