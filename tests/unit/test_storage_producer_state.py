"""storage.producer_state: Kafka's idempotent producer rules."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from kafkite.storage.batch import INT32_MAX, BatchHeader
from kafkite.storage.producer_state import ProducerStateManager

OUT_OF_ORDER, INVALID_EPOCH = 45, 47


def hdr(pid, epoch, seq, n, base_offset, ts=0):
    return BatchHeader(base_offset, 100, 0, 2, 0, 0, n - 1, ts, ts, pid, epoch, seq, n)


def test_rules():
    ps = ProducerStateManager()
    assert ps.check(1, 0, 5, 7).ok  # unknown producer: any sequence (KIP-360)
    ps.update(hdr(1, 0, 0, 3, base_offset=10))
    dup = ps.check(1, 0, 0, 2)
    assert dup.duplicate and dup.error == "duplicate" and (dup.base_offset, dup.last_offset) == (10, 12)
    assert ps.check(1, 0, 3, 4).ok
    bad = ps.check(1, 0, 5, 6)
    assert bad.error == "error" and bad.code == OUT_OF_ORDER and "Out of order" in bad.message
    assert ps.check(1, 0, 2, 2).code == OUT_OF_ORDER  # overlapping, not an exact retry
    ps.update(hdr(1, 2, 0, 1, base_offset=20))  # a newer epoch
    assert ps.check(1, 1, 3, 3).code == INVALID_EPOCH
    assert ps.check(1, 3, 4, 4).code == OUT_OF_ORDER  # a new epoch starts at 0
    assert ps.check(1, 3, 0, 0).ok
    assert ps.check(-1, 0, -1, -1).ok  # not idempotent


def test_last_five_batches_are_remembered():
    ps = ProducerStateManager()
    for i in range(7):
        ps.update(hdr(9, 0, i, 1, base_offset=100 + i))
    assert ps.check(9, 0, 1, 1).code == OUT_OF_ORDER  # fell out of the window
    for i in range(2, 7):
        c = ps.check(9, 0, i, i)
        assert c.duplicate and c.base_offset == 100 + i


def test_sequence_wraps_at_int32_max():
    ps = ProducerStateManager()
    h = hdr(4, 0, INT32_MAX - 1, 3, base_offset=0)
    assert h.last_sequence == 0
    ps.update(h)
    assert ps.check(4, 0, 1, 1).ok
    ps2 = ProducerStateManager()
    ps2.update(hdr(4, 0, INT32_MAX - 1, 2, base_offset=0))
    assert ps2.check(4, 0, 0, 0).ok


def test_the_log_head_moving_keeps_producers_until_they_expire():
    """As Kafka (2.4+, KIP-360: onLogStartOffsetIncremented): a producer whose batches all lie below the new log start
    keeps its state (a retried batch is still a duplicate, an older epoch still fenced) until producer.id.expiration.ms."""
    ps = ProducerStateManager()
    ps.update(hdr(1, 0, 0, 2, base_offset=0, ts=100))
    ps.update(hdr(2, 0, 0, 2, base_offset=2, ts=5000))
    ps.truncate_head(4)
    assert set(ps.producers) == {1, 2}
    assert ps.check(1, 0, 0, 1).duplicate and not ps.check(1, 0, 9, 9).ok  # (a gap: out of order)
    assert ps.remove_expired(now_ms=100 + 86_400_000) == 1 and set(ps.producers) == {2}
    assert ps.check(1, 0, 9, 9).ok  # expired: unknown again, any sequence
    assert ps.remove_expired(now_ms=5000 + 86_400_000) == 1 and not ps.producers


def test_rebuild_from_headers():
    hs = [hdr(1, 0, 0, 2, 0), hdr(2, 0, 0, 1, 2), hdr(1, 0, 2, 2, 3), hdr(-1, -1, -1, 1, 5)]
    ps = ProducerStateManager()
    ps.rebuild(hs)
    assert ps.check(1, 0, 2, 3).duplicate and ps.check(1, 0, 4, 4).ok and ps.check(2, 0, 1, 1).ok
    assert set(ps.producers) == {1, 2}


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=20), st.integers(0, 30))
def test_in_order_stream_and_any_retry(sizes, pick):
    """A producer sending batches in order is always accepted; resending any of the last five
    is a duplicate with its original offsets."""
    ps = ProducerStateManager()
    seq, off, sent = 0, 0, []
    for n in sizes:
        h = hdr(5, 0, seq, n, off)
        assert ps.check(5, 0, h.base_sequence, h.last_sequence).ok
        ps.update(h)
        sent.append(h)
        seq, off = seq + n, off + n
    h = sent[-1 - pick % min(5, len(sent))]
    c = ps.check(5, 0, h.base_sequence, h.last_sequence)
    assert c.duplicate and (c.base_offset, c.last_offset) == (h.base_offset, h.last_offset)
