"""Transactions in the log: the last stable offset, markers, the aborted-transaction index (.txnindex)."""
from __future__ import annotations

import struct

import pytest

from kafkite.storage.batch import build_batch, build_control_batch, control_type, iter_batches, COMMIT_MARKER
from kafkite.storage.log_config import LogConfig
from kafkite.storage.transaction_index import decode_entries
from kafkite.storage.unified_log import FileLog, MemoryLog


def txn_batch(pid, epoch, seq, n=2, transactional=True):
    return build_batch([(b"k%d" % i, b"v%d" % i, []) for i in range(n)], timestamp_ms=1000, producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, is_transactional=transactional)


def marker(pid, epoch, commit):
    return build_control_batch(pid, epoch, commit=commit, coordinator_epoch=3, timestamp_ms=1000)


def test_control_batch_format():
    data = marker(7, 2, True)
    (pos, h), = iter_batches(data)
    assert h.is_control and h.is_transactional and h.producer_id == 7 and h.producer_epoch == 2
    assert h.base_sequence == -1 and h.record_count == 1
    assert control_type(data, pos, h) == COMMIT_MARKER
    assert control_type(marker(7, 2, False), 0, h) == 0
    from kafka.record.default_records import DefaultRecordBatch
    b = DefaultRecordBatch(data)
    assert b.is_control_batch and b.is_transactional
    (rec,) = list(b)
    assert rec.commit and struct.unpack(">hi", rec.value) == (0, 3)


def test_last_stable_offset_and_aborted_transactions():
    lg = MemoryLog(LogConfig())
    lg.append(txn_batch(-1, -1, -1, transactional=False), now_ms=1)        # 0-1
    lg.append(txn_batch(5, 0, 0), now_ms=1)                                # 2-3 pid 5 opens
    assert lg.last_stable_offset == 2 and lg.high_watermark == 4
    lg.append(txn_batch(6, 0, 0), now_ms=1)                                # 4-5 pid 6 opens
    lg.append(txn_batch(5, 0, 2), now_ms=1)                                # 6-7
    lg.append(marker(5, 0, commit=True), now_ms=1)                         # 8: pid 5 committed
    assert lg.last_stable_offset == 4  # pid 6 still open
    lg.append(marker(6, 0, commit=False), now_ms=1)                        # 9: pid 6 aborted
    assert lg.last_stable_offset == lg.high_watermark == 10
    assert lg.collect_aborted(0, 10) == [(6, 4)]
    assert lg.collect_aborted(10, 20) == []  # the marker is below the fetch offset
    assert lg.collect_aborted(0, 4) == []    # the transaction starts at the bound
    assert not lg.producer_state.ongoing


def test_lso_waits_for_the_marker_to_be_replicated():
    lg = MemoryLog(LogConfig())
    lg.set_replicated_high_watermark(0)
    lg.append(txn_batch(5, 0, 0), now_ms=1)  # 0-1
    lg.append(marker(5, 0, commit=True), now_ms=1)  # 2
    lg.set_replicated_high_watermark(2)
    assert lg.last_stable_offset == 0  # decided, but the marker is not below the high watermark
    lg.set_replicated_high_watermark(3)
    assert lg.last_stable_offset == 3


@pytest.mark.parametrize("replicated", [False, True])
def test_completed_transactions_are_forgotten_once_replicated_without_a_read(replicated):
    # a partition nobody fetches (__consumer_offsets, written by transactional offset commits) never has its last
    # stable offset read: it kept every completed transaction, one per transaction, for good
    lg = MemoryLog(LogConfig())
    for i in range(50):
        lg.append(txn_batch(5, 0, 2 * i), now_ms=1)
        lg.append(marker(5, 0, commit=i % 2 == 0), now_ms=1)
        if replicated:
            lg.set_replicated_high_watermark(lg.log_end_offset - 1)  # the followers have all but the marker
    # single copy: the last one (its marker is the log end); with replicas, the last two (the high watermark had not
    # passed the one before's marker when the last one completed)
    assert len(lg.producer_state.unreplicated) == (2 if replicated else 1)
    assert lg.last_stable_offset == (lg.log_end_offset - 3 if replicated else lg.log_end_offset)
    if replicated:
        lg.set_replicated_high_watermark(lg.log_end_offset)
        assert lg.last_stable_offset == lg.log_end_offset and not lg.producer_state.unreplicated


def test_txnindex_written_and_rebuilt(tmp_path):
    cfg = LogConfig(segment_bytes=300)
    lg = FileLog(tmp_path / "t-0", cfg)
    lg.append(txn_batch(5, 0, 0), now_ms=1)              # 0-1
    lg.append(marker(5, 0, commit=False), now_ms=1)      # 2 aborted
    lg.append(txn_batch(6, 0, 0), now_ms=1)              # 3-4 left open
    lg.append(txn_batch(5, 1, 0), now_ms=1)              # 5-6 new epoch, open
    lg.append(marker(5, 1, commit=False), now_ms=1)      # 7 aborted
    assert len(lg.segments) > 1
    files = sorted(tmp_path.glob("t-0/*.txnindex"))
    entries = [e for f in files for e in decode_entries(f.read_bytes())]
    assert [(e.producer_id, e.first_offset, e.last_offset) for e in entries] == [(5, 0, 2), (5, 5, 7)]
    assert entries[0].last_stable_offset == 3 and entries[1].last_stable_offset == 3  # pid 6 still open
    assert all(f.stat().st_size % 34 == 0 for f in files)
    lso = lg.last_stable_offset
    assert lso == 3
    lg.close()
    again = FileLog(tmp_path / "t-0", cfg)
    assert again.last_stable_offset == 3  # the open transaction survives the restart
    assert again.collect_aborted(0, 100) == [(5, 0), (5, 5)]
    assert sorted(tmp_path.glob("t-0/*.txnindex")) == files
    again.truncate_to(5)  # the second abort is cut: its index entry goes too
    assert again.collect_aborted(0, 100) == [(5, 0)]
    entries = [e for f in tmp_path.glob("t-0/*.txnindex") for e in decode_entries(f.read_bytes())]
    assert [(e.producer_id, e.last_offset) for e in entries] == [(5, 2)]
    again.close()


def test_compaction_removes_aborted_data_keeps_markers_and_open_transactions():
    lg = MemoryLog(LogConfig(cleanup_policy="compact", segment_bytes=200, min_cleanable_dirty_ratio=0.0))
    lg.append(txn_batch(5, 0, 0), now_ms=1)              # 0-1 committed: k0 k1
    lg.append(marker(5, 0, commit=True), now_ms=1)       # 2
    lg.append(txn_batch(6, 0, 0), now_ms=1)              # 3-4 aborted: k0 k1 (must not supersede 0-1)
    lg.append(marker(6, 0, commit=False), now_ms=1)      # 5
    lg.append(txn_batch(7, 0, 0), now_ms=1)              # 6-7 open
    lg.append(txn_batch(-1, -1, -1, n=1, transactional=False), now_ms=1)  # 8
    removed = lg.compact(now_ms=10)
    from kafkite.storage.batch import decode_batch
    kept = []
    for seg in lg.segments:
        for h, data in seg.iter_batches():
            kept.append((h.base_offset, h.is_control, [r.offset for r in decode_batch(data)] if not h.is_control else []))
    offsets = [o for _, _, rs in kept for o in rs]
    assert 3 not in offsets and 4 not in offsets  # the aborted records are gone
    assert 0 in offsets and 1 in offsets          # the committed ones stay: the aborted k0/k1 never superseded them
    assert [b for b, c, _ in kept if c] == [2, 5]  # both markers kept
    assert 6 in offsets and 7 in offsets           # the open transaction is not cleaned
    assert removed >= 2
    assert lg.last_stable_offset == 6 and lg.log_end_offset == 9


def test_a_markers_coordinator_epoch_is_kept_and_reloaded(tmp_path):
    """Kafka's appendEndTxnMarker keeps the marker's coordinator epoch per producer (a later marker of an older
    coordinator is fenced: ReplicaManager.write_txn_marker); a log loaded from its segments knows it again."""
    cfg = LogConfig()
    lg = FileLog(tmp_path / "t-0", cfg)
    lg.append(txn_batch(5, 0, 0), now_ms=1)
    lg.append(build_control_batch(5, 0, commit=True, coordinator_epoch=9, timestamp_ms=1000), now_ms=1)
    lg.append(build_control_batch(6, 1, commit=False, coordinator_epoch=2, timestamp_ms=1000), now_ms=1)
    assert lg.producer_state.last_entry(5).coordinator_epoch == 9
    assert lg.producer_state.last_entry(6).coordinator_epoch == 2
    lg.close()
    again = FileLog(tmp_path / "t-0", cfg)
    assert again.producer_state.last_entry(5).coordinator_epoch == 9
    assert again.producer_state.last_entry(6).coordinator_epoch == 2
    again.close()


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_compaction_removes_markers_whose_transaction_is_gone_after_delete_retention(tmp_path, kind):
    """Kafka's cleaner removes a commit or abort marker once no batch of its transaction is left and
    delete.retention.ms has passed; a marker whose transaction still has data stays, and so does a young one."""
    from kafkite.storage.batch import decode_batch

    def data(pid, key, transactional=True, ts=1000):
        return build_batch([(key, b"v", [])], timestamp_ms=ts, producer_id=pid if transactional else -1,
                           producer_epoch=0 if transactional else -1, base_sequence=0 if transactional else -1,
                           is_transactional=transactional)

    def mk(pid, commit, ts):
        return build_control_batch(pid, 0, commit=commit, coordinator_epoch=0, timestamp_ms=ts)

    cfg = LogConfig(cleanup_policy="compact", segment_bytes=150, min_cleanable_dirty_ratio=0.0,
                    delete_retention_ms=5000)
    lg = MemoryLog(cfg) if kind == "memory" else FileLog(tmp_path / "t-0", cfg)
    lg.append(data(5, b"a"), now_ms=1)                    # 0  P5 commits a (superseded below)
    lg.append(mk(5, True, 1000), now_ms=1)                # 1  its marker: removable once a is gone
    lg.append(data(6, b"b"), now_ms=1)                    # 2  P6 aborts b
    lg.append(mk(6, False, 1000), now_ms=1)               # 3  its marker: removable (aborted data removed)
    lg.append(data(7, b"c"), now_ms=1)                    # 4  P7 commits c (kept: newest c)
    lg.append(mk(7, True, 1000), now_ms=1)                # 5  its marker stays: its data is still there
    lg.append(data(8, b"d"), now_ms=1)                    # 6  P8 commits d, superseded, but its marker is young
    lg.append(mk(8, True, 9000), now_ms=1)                # 7
    lg.append(data(-1, b"a", transactional=False), now_ms=1)  # 8 supersedes a
    lg.append(data(-1, b"d", transactional=False), now_ms=1)  # 9 supersedes d
    lg.append(data(-1, b"x", transactional=False), now_ms=1)  # 10 (the active segment)

    def kept():
        out = []
        for seg in lg.segments:
            for h, raw in seg.iter_batches():
                out.append((h.base_offset, "marker" if h.is_control else [r.key for r in decode_batch(raw)]))
        return out

    lg.compact(now_ms=2000)  # nothing is older than delete.retention.ms yet: every marker stays
    assert [o for o, k in kept() if k == "marker"] == [1, 3, 5, 7]
    lg.compact(now_ms=10000)  # markers of 1000 are past it, the one of 9000 is not
    assert [o for o, k in kept() if k == "marker"] == [5, 7]
    assert [o for o, k in kept() if k != "marker"] == [4, 8, 9, 10]
    assert lg.last_stable_offset == lg.log_end_offset == 11  # no transaction looks open
    lg.compact(now_ms=20000)
    assert [o for o, k in kept() if k == "marker"] == [5]
    if kind == "file":  # loaded again from its segments: still no open transaction
        lg.close()
        lg = FileLog(tmp_path / "t-0", cfg)
        assert [o for o, k in kept() if k == "marker"] == [5]
        assert lg.last_stable_offset == 11 and not lg.producer_state.ongoing
        lg.close()


def test_lso_is_never_below_the_log_start_offset():
    """Kafka's maybeIncrementFirstUnstableOffset: an open transaction whose first records retention (or DeleteRecords)
    deleted makes the last stable offset the log start, not an offset below it (a read_committed ListOffsets LATEST
    would answer an offset out of range)."""
    lg = MemoryLog(LogConfig(retention_ms=1000))
    lg.append(txn_batch(5, 0, 0), now_ms=1)                                # 0-1 pid 5 opens
    lg.append(txn_batch(-1, -1, -1, transactional=False), now_ms=1)        # 2-3
    assert lg.last_stable_offset == 0
    lg.delete_records_before(2)
    assert lg.log_start_offset == 2 and lg.last_stable_offset == 2
    assert lg.enforce_retention(10_000) == 1  # the active segment, after a roll
    assert lg.log_start_offset == lg.high_watermark == 4 and lg.last_stable_offset == 4
    lg.append(marker(5, 0, commit=True), now_ms=1)                         # 4: pid 5 committed
    assert lg.last_stable_offset == lg.high_watermark == 5
