"""storage (UnifiedLog) as a follower: appends of the leader's batches as they are, the replicated high
watermark, truncation to a common epoch and to a new start. Memory and file logs alike."""
from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkite.storage.batch import iter_batches, read_header
from kafkite.storage.log_config import LogConfig
from kafkite.storage.unified_log import FileLog, MemoryLog, UnexpectedAppend


def batch(n=2, ts=1000, value=b"v" * 10, pid=-1, epoch=-1, seq=-1):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=1 << 30)
    for i in range(n):
        b.append(i, timestamp=ts + i, key=b"k%d" % i, value=value, headers=[])
    return bytearray(b.build())


@pytest.fixture(params=["memory", "file"])
def make_log(request, tmp_path):
    counter = iter(range(1000))

    def make(**cfg):
        config = LogConfig(**cfg)
        if request.param == "memory":
            return MemoryLog(config)
        return FileLog(tmp_path / f"t-{next(counter)}", config)
    return make


def all_bytes(lg) -> bytes:
    return lg.read(lg.log_start_offset, 1 << 30, max_offset=None) if lg.log_end_offset > lg.log_start_offset else b""


def test_follower_keeps_offsets_epochs_and_bytes(make_log):
    leader, follower = make_log(), make_log()
    leader.append(batch(3), now_ms=5, leader_epoch=0)
    leader.append(batch(2, pid=7, epoch=0, seq=0), now_ms=6, leader_epoch=4)
    res = follower.append_as_follower(leader.read(0, 1 << 20), now_ms=99)
    assert (res.base_offset, res.last_offset) == (0, 4)
    assert follower.log_end_offset == leader.log_end_offset == 5
    assert all_bytes(follower) == all_bytes(leader)  # byte for byte: nothing rewritten
    assert follower.epochs.entries == leader.epochs.entries == [(0, 0), (4, 3)]
    assert follower.producer_state.producers[7].last_seq == 1  # idempotence state follows too


def test_follower_refuses_batches_that_do_not_follow_or_are_corrupt(make_log):
    leader, follower = make_log(), make_log()
    leader.append(batch(3), now_ms=0)
    data = leader.read(0, 1 << 20)
    follower.append_as_follower(data, now_ms=0)
    with pytest.raises(UnexpectedAppend):  # offsets 0-2 again
        follower.append_as_follower(data, now_ms=0)
    leader.append(batch(1), now_ms=0)
    bad = bytearray(leader.read(3, 1 << 20))
    bad[-1] ^= 0xFF  # a flipped bit in the record body: the CRC no longer holds
    with pytest.raises(UnexpectedAppend):
        follower.append_as_follower(bad, now_ms=0)
    assert follower.log_end_offset == 3  # nothing of a refused append went in


def test_follower_accepts_gaps_left_by_compaction(make_log):
    follower = make_log()
    b = batch(1)
    b[0:8] = (10).to_bytes(8, "big")  # base offset 10: outside the CRC, as a compacted leader may send
    follower.append_as_follower(b, now_ms=0)
    assert follower.log_end_offset == 11


def test_replicated_high_watermark_is_kept_as_given(make_log):
    lg = make_log()
    lg.append(batch(3), now_ms=0)
    assert lg.high_watermark == 3  # a single copy: follows the log end offset
    lg.set_replicated_high_watermark(1)
    lg.append(batch(2), now_ms=0)
    assert lg.high_watermark == 1  # an append no longer moves it
    lg.set_replicated_high_watermark(5)
    assert lg.high_watermark == 5
    lg.append(batch(1), now_ms=0)
    assert lg.high_watermark == 5  # even when it had reached the log end offset
    lg.set_replicated_high_watermark(100)
    assert lg.high_watermark == 6  # never above the log end offset
    lg.follow_log_end()
    lg.append(batch(1), now_ms=0)
    assert lg.high_watermark == 7
    assert lg.read(0, 1 << 20, max_offset=lg.high_watermark)


def test_divergent_suffix_truncated_to_the_common_epoch(make_log):
    """The follower was leader in epoch 1 and wrote offsets 3-4 nobody copied; the new leader (epoch 2)
    started at offset 3. The follower truncates to the end of its epoch 1 as the leader knows it."""
    old, new = make_log(), make_log()
    old.append(batch(3), now_ms=0, leader_epoch=1)
    new.append_as_follower(old.read(0, 1 << 20), now_ms=0)
    old.append(batch(2, value=b"lost"), now_ms=0, leader_epoch=1)  # never replicated
    new.append(batch(4, value=b"new"), now_ms=0, leader_epoch=2)
    epoch, end = new.end_offset_for_epoch(old.epochs.latest_epoch)
    assert (epoch, end) == (1, 3)
    mine = old.end_offset_for_epoch(epoch)
    old.truncate_to(min(end, mine[1]))
    assert old.log_end_offset == 3
    old.append_as_follower(new.read(3, 1 << 20), now_ms=0)
    assert all_bytes(old) == all_bytes(new)
    assert old.epochs.entries == [(1, 0), (2, 3)]


def test_truncate_fully_and_start_at(make_log):
    lg = make_log()
    lg.append(batch(3), now_ms=0, leader_epoch=1)
    lg.truncate_fully_and_start_at(50)
    assert (lg.log_start_offset, lg.log_end_offset, lg.epochs.entries) == (50, 50, [])
    b = batch(1)
    b[0:8] = (50).to_bytes(8, "big")
    lg.append_as_follower(b, now_ms=0)
    assert lg.log_end_offset == 51
    assert [read_header(lg.read(50, 1 << 20), p).base_offset for p, _ in iter_batches(lg.read(50, 1 << 20))] == [50]
