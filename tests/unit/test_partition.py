"""The leader's view of a replicated partition (server/partition.py, Kafka's Partition): followers' positions,
the high watermark over the ISR, and when a follower leaves or joins the ISR. Sans-IO: times are passed in."""
from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkite.server.partition import Partition
from kafkite.storage.log_config import LogConfig
from kafkite.storage.unified_log import MemoryLog

LAG = 1000


def batch(n: int = 1) -> bytearray:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=1, key=None, value=b"v", headers=[])
    return bytearray(b.build())


def leader(isr=(1, 2, 3), records: int = 0, now: int = 0) -> Partition:
    lg = MemoryLog(LogConfig())
    if records:
        lg.append(batch(records), now_ms=0)
    p = Partition("t", 0, 1, lg)
    p.make_leader(leader_epoch=5, partition_epoch=2, replicas=[1, 2, 3], isr=list(isr), now_ms=now)
    return p


def test_high_watermark_is_the_smallest_log_end_over_the_isr():
    p = leader(records=0)
    p.log.append(batch(10), now_ms=0)
    assert p.log.high_watermark == 0  # the followers have nothing yet
    assert p.update_follower_fetch(2, 10, p.log.log_end_offset, now_ms=1) is False  # 3 still at nothing
    assert p.update_follower_fetch(3, 4, p.log.log_end_offset, now_ms=1) is True
    assert p.log.high_watermark == 4
    assert p.enough_replicas_reached(4) and not p.enough_replicas_reached(5)
    p.update_follower_fetch(3, 10, p.log.log_end_offset, now_ms=2)
    assert p.log.high_watermark == 10
    p.update_follower_fetch(3, 2, p.log.log_end_offset, now_ms=3)  # (a follower that truncated)
    assert p.log.high_watermark == 10  # never backwards


def test_a_follower_outside_the_isr_does_not_hold_the_high_watermark_back():
    p = leader(isr=(1, 2))
    p.log.append(batch(3), now_ms=0)
    p.update_follower_fetch(2, 3, p.log.log_end_offset, now_ms=1)
    assert p.log.high_watermark == 3  # broker 3 is not in the ISR


def test_a_follower_that_stops_catching_up_leaves_the_isr():
    p = leader(now=0)
    p.log.append(batch(5), now_ms=0)
    p.update_follower_fetch(2, 5, 5, now_ms=100)  # caught up at 100
    p.update_follower_fetch(3, 2, 5, now_ms=100)  # behind since the start (caught up at 0, as an ISR member)
    assert p.isr_to_shrink(now_ms=LAG, lag_ms=LAG) is None
    assert p.isr_to_shrink(now_ms=LAG + 1, lag_ms=LAG) == [1, 2]
    p.pending_isr = [1, 2]
    assert p.isr_to_shrink(now_ms=LAG * 5, lag_ms=LAG) is None  # one change in flight at a time
    assert p.maximal_isr == [1, 2, 3]  # while it is: the larger set still counts


def test_catching_up_to_the_log_end_as_it_was_at_the_previous_fetch_counts():
    """Kafka's rule: a fetch from at least the leader's log end offset of the previous fetch means the follower was
    caught up at that previous fetch's time, even if more records came in meanwhile."""
    p = leader(now=0)
    p.log.append(batch(5), now_ms=0)
    p.update_follower_fetch(2, 5, 5, now_ms=500)  # caught up at 500
    p.log.append(batch(5), now_ms=0)
    p.update_follower_fetch(2, 5, 10, now_ms=900)  # behind now, but at the previous fetch's end
    assert p.remotes[2].last_caught_up_ms == 500
    p.update_follower_fetch(2, 10, 12, now_ms=1400)  # reached the end of the fetch at 900
    assert p.remotes[2].last_caught_up_ms == 900


def test_a_follower_joins_the_isr_once_it_has_the_high_watermark_and_the_epoch_start():
    p = leader(isr=(1, 2), records=4)  # this leader epoch starts at offset 4
    p.log.append(batch(4), now_ms=0)
    p.update_follower_fetch(2, 8, 8, now_ms=1)
    assert p.log.high_watermark == 8
    p.update_follower_fetch(3, 3, 8, now_ms=1)
    assert p.isr_to_expand() is None  # below the high watermark and the epoch start
    p.update_follower_fetch(3, 8, 8, now_ms=2)
    assert p.isr_to_expand() == [1, 2, 3]


def test_the_controllers_isr_is_taken_only_when_newer():
    p = leader(isr=(1, 2, 3))
    p.pending_isr = [1, 2]
    assert p.apply_isr([1, 2, 3], partition_epoch=2) is False  # the same epoch (an UpdateMetadata): kept pending
    assert p.pending_isr == [1, 2]
    assert p.apply_isr([1, 2], partition_epoch=3) is True
    assert (p.isr, p.partition_epoch, p.pending_isr) == ((1, 2), 3, None)
    assert p.apply_isr([1], partition_epoch=1) is False  # older
