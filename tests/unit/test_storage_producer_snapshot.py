"""Producer-state snapshots (storage/producer_snapshot.py): Kafka's .snapshot format, taken at rolls and at a clean
close, loaded at open (the log replayed only after them), deleted with their segments and on truncation; the state
they load equals a full rebuild's."""
from __future__ import annotations

import os
import random
import shutil

import pytest
from structlog.testing import capture_logs

from kafkite.storage import producer_snapshot
from kafkite.storage.batch import build_batch, build_control_batch, crc32c_of
from kafkite.storage.file_log_segment import FileLogSegment
from kafkite.storage.log_config import LogConfig
from kafkite.storage.producer_state import BatchMeta, ProducerEntry, ProducerStateManager
from kafkite.storage.unified_log import FileLog

T0 = 1_700_000_000_000


def data(pid, epoch, seq, n=1, txn=False, ts=T0):
    return build_batch([(b"k", b"v" * 20, [])] * n, timestamp_ms=ts, producer_id=pid, producer_epoch=epoch,
                       base_sequence=seq, is_transactional=txn)


def marker(pid, epoch, commit, coordinator_epoch=2):
    return build_control_batch(pid, epoch, commit=commit, coordinator_epoch=coordinator_epoch, timestamp_ms=T0)


def test_one_entry_in_kafkas_byte_layout():
    ps = ProducerStateManager()
    e = ps.producers[1000] = ProducerEntry(3, last_timestamp=T0, coordinator_epoch=7, current_txn_first_offset=100)
    e.batches.append(BatchMeta(5, 9, 100, 104, T0))
    ps.ongoing[1000] = 100
    raw = producer_snapshot.encode(ps)
    body = ("00000001"                                       # entries: int32 count
            "00000000000003e8" "0003" "00000009"             # producerId 1000, epoch 3, lastSequence 9
            "0000000000000068" "00000004"                    # lastOffset 104, offsetDelta 4
            "0000018bcfe56800" "00000007"                    # timestamp, coordinatorEpoch 7
            "0000000000000064")                              # currentTxnFirstOffset 100
    crc = crc32c_of(bytes.fromhex(body))                     # CRC32C of everything after the crc field
    assert raw.hex() == "0001" + f"{crc:08x}" + body         # version int16 1, crc uint32
    loaded = ProducerStateManager()
    producer_snapshot.restore(loaded, producer_snapshot.decode(raw))
    b = loaded.producers[1000].batches[-1]
    assert (b.first_seq, b.last_seq, b.base_offset, b.last_offset) == (5, 9, 100, 104)
    assert loaded.ongoing == {1000: 100} and loaded.producers[1000].coordinator_epoch == 7
    assert loaded.check(1000, 3, 5, 9).duplicate and loaded.check(1000, 3, 10, 10).ok
    for bad, why in ((b"\x00\x02" + raw[2:], "unknown file version 2"), (raw[:-1] + b"\x00", "CRC is no longer"),
                     (raw[:5], "schema validation")):
        with pytest.raises(producer_snapshot.CorruptSnapshot, match=why):
            producer_snapshot.decode(bad)


def _fill(lg, rng, n=160):
    """Idempotent producers 1-3, transactional 10-12 (commits, aborts, epoch bumps); one transaction left open."""
    seqs, epochs, open_txn = {}, {10: 0, 11: 0, 12: 0}, set()
    for i in range(n):
        pid = rng.choice([1, 2, 3, 10, 11, 12])
        ts = T0 + i
        if pid < 10:
            if rng.random() < 0.1:  # a new epoch (the producer reinitialised)
                epochs[pid] = epochs.get(pid, 0) + 1
                seqs[pid] = 0
            k = rng.randint(1, 3)
            lg.append(data(pid, epochs.get(pid, 0), seqs.get(pid, 0), k, ts=ts), now_ms=ts)
            seqs[pid] = seqs.get(pid, 0) + k
        elif pid in open_txn and rng.random() < 0.4:
            lg.append(marker(pid, epochs[pid], commit=rng.random() < 0.5), now_ms=ts)
            open_txn.discard(pid)
        elif pid not in open_txn and rng.random() < 0.1:  # fenced: the coordinator bumps the epoch and aborts
            epochs[pid] += 1
            lg.append(marker(pid, epochs[pid], commit=False, coordinator_epoch=3), now_ms=ts)
            seqs[pid] = 0
        else:
            k = rng.randint(1, 2)
            lg.append(data(pid, epochs[pid], seqs.get(pid, 0), k, txn=True, ts=ts), now_ms=ts)
            seqs[pid] = seqs.get(pid, 0) + k
            open_txn.add(pid)
    lg.append(data(12, epochs[12], seqs.get(12, 0), 1, txn=True), now_ms=T0 + n)  # (one open for sure)


def _state(lg):
    ps = lg.producer_state
    return ({pid: (e.epoch, e.last_seq, e.last_offset, e.coordinator_epoch, e.last_timestamp,
                   e.batches[-1].first_seq if e.batches else None) for pid, e in ps.producers.items()},
            dict(ps.ongoing), ps.first_unstable_offset(lg.high_watermark), lg.last_stable_offset,
            list(lg.aborted.entries))


def _full_rebuild(src, dst, **kw):
    shutil.copytree(src, dst)
    for p in dst.glob("*.snapshot"):
        p.unlink()
    return FileLog(dst, CFG, **kw)


CFG = LogConfig(segment_bytes=700)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_loaded_state_equals_a_full_rebuild(tmp_path, monkeypatch, seed):
    lg = FileLog(tmp_path / "t-0", CFG)
    _fill(lg, random.Random(seed))
    assert len(lg.segments) > 10
    # a crash: the directory as it is while the log is open (no close, no clean-shutdown marker)
    shutil.copytree(tmp_path / "t-0", tmp_path / "crash")
    snaps = producer_snapshot.offsets(tmp_path / "crash")
    assert snaps == [s.base for s in lg.segments[1:]]  # one at each roll, written by the flush after it
    end = lg.log_end_offset
    assert lg.close()
    assert producer_snapshot.offsets(tmp_path / "t-0") == snaps + [end]  # and one at the clean close

    scanned = []
    real = FileLogSegment.iter_headers
    monkeypatch.setattr(FileLogSegment, "iter_headers", lambda seg: scanned.append(seg.base) or real(seg))
    clean = FileLog(tmp_path / "t-0", CFG, had_clean_shutdown=True, recovery_point=end)
    assert scanned == []  # nothing replayed after a clean close
    assert producer_snapshot.offsets(tmp_path / "t-0") == snaps + [end]  # (nor a snapshot taken)
    crashed = FileLog(tmp_path / "crash", CFG)
    assert scanned == [snaps[-1]]  # only the active segment, after the last roll's snapshot
    # then a snapshot at the log end, as Kafka's load takes: a second crash replays nothing
    assert producer_snapshot.offsets(tmp_path / "crash") == snaps + [end]
    shutil.copytree(tmp_path / "crash", tmp_path / "crash2")
    again = FileLog(tmp_path / "crash2", CFG)
    assert scanned == [snaps[-1]]
    monkeypatch.undo()
    full = _full_rebuild(tmp_path / "crash", tmp_path / "full")
    want = _state(full)
    assert want[1] and want[4]  # (an open transaction and aborted ones: the case is not trivial)
    assert _state(clean) == want and _state(crashed) == want and _state(again) == want
    again.close()

    for cut in (snaps[len(snaps) // 2] + 1, snaps[2]):  # a follower's truncation reloads the same way
        for log in (clean, full):
            log.truncate_to(cut)
        assert max(producer_snapshot.offsets(tmp_path / "t-0")) <= clean.log_end_offset
        assert _state(clean) == _state(full)
    for log in (clean, crashed, full):
        log.close()


def test_retention_deleted_producer_still_answers_duplicate_after_restart(tmp_path):
    cfg = LogConfig(segment_bytes=700, retention_bytes=1000, file_delete_delay_ms=0)
    lg = FileLog(tmp_path / "t-0", cfg)
    lg.append(data(7, 0, 0, 3), now_ms=T0)  # producer 7's only batch, sequences 0-2
    for i in range(30):
        lg.append(data(8, 0, i), now_ms=T0)
    assert lg.enforce_retention(T0, defer_renames=False) > 0 and lg.log_start_offset > 2
    assert list((tmp_path / "t-0").glob("*.snapshot.deleted"))  # deleted segments take their snapshots along
    run = lg.files_to_delete(T0 + 1)
    run()
    assert not list((tmp_path / "t-0").glob("*.deleted"))
    lg.close()
    again = FileLog(tmp_path / "t-0", cfg, had_clean_shutdown=True, recovery_point=lg.log_end_offset)
    answer = again.producer_state.check(7, 0, 0, 2)
    assert answer.duplicate and (answer.base_offset, answer.last_offset) == (0, 2)
    again.close()


def test_a_corrupt_snapshot_is_deleted_and_an_older_one_used(tmp_path):
    lg = FileLog(tmp_path / "t-0", CFG)
    _fill(lg, random.Random(5), n=60)
    lg.close()
    newest, older = producer_snapshot.offsets(tmp_path / "t-0")[-1], producer_snapshot.offsets(tmp_path / "t-0")[-2]
    path = producer_snapshot.snapshot_path(tmp_path / "t-0", newest)
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF
    path.write_bytes(raw)
    want = _state(_full_rebuild(tmp_path / "t-0", tmp_path / "full"))
    d = tmp_path / "t-0"
    leftovers = [producer_snapshot.snapshot_path(d, older - 1),  # at no segment's base, below the newest
                 producer_snapshot.snapshot_path(d, lg.log_end_offset + 10),  # above the log end
                 d / f"{lg.log_end_offset:020d}.snapshot.tmp"]  # a write a crash cut short
    for p in leftovers:
        p.write_bytes(raw)
    with capture_logs() as logs:
        again = FileLog(tmp_path / "t-0", CFG, had_clean_shutdown=True, recovery_point=lg.log_end_offset)
    warned = [x for x in logs if x["event"] == "producer_snapshot.corrupt"]
    assert warned and warned[0]["log_level"] == "warning" and "CRC is no longer valid" in warned[0]["message"]
    # the corrupt one deleted, the older one loaded; after the replay a new one at the log end (Kafka's, at a load)
    assert newest == lg.log_end_offset and producer_snapshot.offsets(tmp_path / "t-0")[-2:] == [older, newest]
    assert bytes(raw) != path.read_bytes() and producer_snapshot.decode(path.read_bytes())
    assert not any(p.exists() for p in leftovers)
    assert _state(again) == want
    again.truncate_fully_and_start_at(again.log_end_offset + 5)  # every snapshot goes
    assert producer_snapshot.offsets(tmp_path / "t-0") == [] and _state(again)[0] == {}
    again.close()


def test_a_truncation_before_the_flush_run_keeps_its_stale_snapshot_off_the_disk(tmp_path):
    lg = FileLog(tmp_path / "t-0", LogConfig(segment_bytes=700, flush_messages=1_000_000))
    i = 0
    while len(lg.segments) < 3:
        lg.append(data(1, 0, i), now_ms=T0)
        i += 1
    _, run = lg.deferred_flush()  # the rolls' snapshots taken: written when run() runs, in a worker
    second = lg.segments[2].base
    lg.truncate_to(lg.segments[1].base + 1)  # meanwhile a follower's truncation cuts below the second roll
    for j in range(i):  # and the log grows past it again, with another history
        lg.append(data(2, 0, j), now_ms=T0)
    assert lg.log_end_offset > second
    run()
    assert producer_snapshot.offsets(tmp_path / "t-0") == []  # neither roll's snapshot: both made stale
    lg.append(data(1, 0, lg.producer_state.last_entry(1).last_seq + 1), now_ms=T0)
    assert lg.close()  # (then the later rolls' snapshots, and the close's)
    assert producer_snapshot.offsets(tmp_path / "t-0") == [s.base for s in lg.segments[2:]] + [lg.log_end_offset]
    again = FileLog(tmp_path / "t-0", CFG, had_clean_shutdown=True, recovery_point=lg.log_end_offset)
    assert _state(again) == _state(_full_rebuild(tmp_path / "t-0", tmp_path / "full"))
    again.close()


def test_a_recovery_fsyncs_the_txnindex_files_before_its_snapshot(tmp_path, monkeypatch):
    d = tmp_path / "t-0"
    lg = FileLog(d, CFG)
    lg.append(data(10, 0, 0, txn=True), now_ms=T0)
    lg.append(marker(10, 0, commit=False), now_ms=T0)
    lg.append(data(1, 0, 0), now_ms=T0)
    shutil.copytree(d, tmp_path / "crash")  # a crash: no close
    lg.close()
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real(fd))[1])
    crashed = FileLog(tmp_path / "crash", CFG)
    names = [p.rsplit("/", 1)[1] for p in synced]
    snap = f"{crashed.log_end_offset:020d}.snapshot.tmp"
    assert f"{0:020d}.txnindex" in names and snap in names
    assert names.index(f"{0:020d}.txnindex") < names.index(snap) and names[-1] == "crash"  # then the directory
    assert crashed.aborted.entries and producer_snapshot.offsets(tmp_path / "crash") == [crashed.log_end_offset]
    crashed.close()


def test_a_recovery_whose_snapshot_cannot_be_written_opens_all_the_same(tmp_path, monkeypatch):
    d = tmp_path / "t-0"
    lg = FileLog(d, CFG)
    for i in range(3):
        lg.append(data(1, 0, i), now_ms=T0)
    shutil.copytree(d, tmp_path / "crash")
    lg.close()

    def full(path, data, *, sync=False):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(producer_snapshot, "write_tmp", full)
    with capture_logs() as logs:
        crashed = FileLog(tmp_path / "crash", CFG)
    [w] = [x for x in logs if x["event"] == "producer_snapshot.write_failed"]
    assert w["log_level"] == "warning" and "No space left" in w["error"]
    assert crashed.log_end_offset == 3 and crashed.producer_state.check(1, 0, 2, 2).duplicate
    assert producer_snapshot.offsets(tmp_path / "crash") == []
    crashed.close()
