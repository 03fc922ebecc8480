"""The transaction coordinator, sans-IO: its state table, fencing, markers, timeouts, replay (records in Kafka's format)."""
from __future__ import annotations

import pytest

from kafkite.coordinator.result import finish_write, start_write
from kafkite.coordinator.transaction import (NEED_PRODUCER_ID, Config, TransactionCoordinator, TxnState as S,
                                             VALID_PREVIOUS, can_transit)
from kafkite.coordinator.txn_records import TxnValue, decode_txn_key, decode_txn_value, txn_key, txn_value
from kafkite.wire.errors import E


class Harness:
    """Runs results as the runtime does: append (kept here as the partition's log), replay, answer."""

    def __init__(self, **cfg):
        self.jobs = []
        self.c = TransactionCoordinator(Config(num_partitions=1, **cfg), send_markers=self.jobs.append)
        self.c.begin_loading(0, 0)
        self.c.finish_loading(0, 0)
        self.log: list = []
        self.next_pid = 1000

    def run(self, shard, result):
        err = start_write(result, shard.replay if shard else None, lambda recs: self.log.extend(recs) or 0) \
            if shard else 0
        return finish_write(result, err)

    def init(self, tid="t", timeout=60000, pid=-1, epoch=-1, now=1):
        shard, r = self.c.init_producer_id(tid, timeout, pid, epoch, None, now)
        if r is NEED_PRODUCER_ID:
            self.next_pid += 1
            shard, r = self.c.init_producer_id(tid, timeout, pid, epoch, self.next_pid, now)
        return self.run(shard, r)

    def add(self, pid, epoch, parts, tid="t", now=2):
        return self.run(*self.c.add_partitions(tid, pid, epoch, parts, now))

    def end(self, pid, epoch, commit, tid="t", now=3):
        return self.run(*self.c.end_txn(tid, pid, epoch, commit, now))

    def complete(self, now=4):
        job = self.jobs.pop(0)
        return job, self.run(*self.c.complete(job, now))

    def state(self, tid="t"):
        return self.c.shards[0].txns[tid]


def test_records_in_kafkas_format_round_trip():
    v = TxnValue(7, 3, 60000, int(S.ONGOING), [("b", 1), ("a", 2), ("a", 0)], 11, 10)
    data = txn_value(v)
    # version 0, producer id, epoch, timeout, status, 2 topics sorted by name
    assert data[:2] == b"\x00\x00" and data[2:10] == (7).to_bytes(8, "big") and data[16] == 1
    back = decode_txn_value(data)
    assert back.partitions == [("a", 0), ("a", 2), ("b", 1)] and (back.last_update_ms, back.start_ms) == (11, 10)
    assert decode_txn_key(txn_key("my-id")) == "my-id" and txn_key("x") == b"\x00\x00\x00\x01x"


def test_state_table():
    assert can_transit(None, S.EMPTY) and not can_transit(None, S.ONGOING)
    assert can_transit(S.ONGOING, S.PREPARE_COMMIT) and not can_transit(S.EMPTY, S.PREPARE_COMMIT)
    assert VALID_PREVIOUS[S.COMPLETE_ABORT] == {S.PREPARE_ABORT}
    assert S.PREPARE_EPOCH_FENCE.kafka_name == "PrepareEpochFence"


def test_a_transaction_commits_through_markers_and_replays_the_same():
    h = Harness()
    r = h.init()
    assert (r.error, r.producer_epoch) == (0, 0)
    pid = r.producer_id
    assert h.add(pid, 0, [("x", 0), ("x", 1)]) == 0 and h.state().state == S.ONGOING
    n = len(h.log)
    assert h.add(pid, 0, [("x", 1)]) == 0 and len(h.log) == n  # nothing new: no write
    assert h.add(pid, 0, [("y", 0)]) == 0 and ("y", 0) in h.state().partitions
    assert h.end(pid, 0, True) == 0 and h.state().state == S.PREPARE_COMMIT
    assert h.add(pid, 0, [("z", 0)]) == E.CONCURRENT_TRANSACTIONS  # markers under way
    assert h.end(pid, 0, True) == E.CONCURRENT_TRANSACTIONS and h.end(pid, 0, False) == E.INVALID_TXN_STATE
    job, err = h.complete()
    assert err == 0 and job.commit and set(job.partitions) == {("x", 0), ("x", 1), ("y", 0)}
    m = h.state()
    assert m.state == S.COMPLETE_COMMIT and not m.partitions
    assert h.end(pid, 0, True) == 0  # a retried commit
    # a new shard replaying the log ends in the same state
    c2 = TransactionCoordinator(Config(num_partitions=1))
    shard = c2.begin_loading(0, 0)
    for k, v in h.log:
        shard.replay(k, v)
    assert shard.txns["t"].state == S.COMPLETE_COMMIT and shard.txns["t"].producer_id == pid


def test_fencing_and_version_errors():
    h = Harness()
    first = h.init()
    pid = first.producer_id
    assert h.add(pid, 0, [("x", 0)]) == 0
    # a second producer with the same id: the open transaction is aborted at a bumped epoch first
    r = h.init()
    assert r.error == E.CONCURRENT_TRANSACTIONS and h.state().state == S.PREPARE_ABORT
    job, _ = h.complete()
    assert not job.commit and job.producer_epoch == 1
    r = h.init()
    assert (r.error, r.producer_id, r.producer_epoch) == (0, pid, 2)
    assert h.add(pid, 0, [("x", 0)]) == E.PRODUCER_FENCED  # the old producer
    assert h.end(pid, 0, True) == E.PRODUCER_FENCED
    assert h.add(pid + 1, 2, [("x", 0)]) == E.INVALID_PRODUCER_ID_MAPPING
    assert h.end(pid, 2, True) == E.INVALID_TXN_STATE  # Empty: nothing to end
    # KIP-360: the producer names its id and epoch; a retry of the last bump answers the same
    r = h.init(pid=pid, epoch=2)
    assert (r.error, r.producer_epoch) == (0, 3)
    r = h.init(pid=pid, epoch=2)
    assert (r.error, r.producer_epoch) == (0, 3)
    assert h.init(pid=pid, epoch=0).error == E.PRODUCER_FENCED
    assert h.init(pid=12345, epoch=0).error == E.PRODUCER_FENCED
    assert h.init(timeout=10**9).error == E.INVALID_TRANSACTION_TIMEOUT
    _, r = h.c.init_producer_id("", 1000, -1, -1, None, 0)
    assert r.response.error == E.INVALID_REQUEST


def test_a_fenced_producer_naming_its_old_epoch_stays_fenced():
    h = Harness()
    zombie = h.init()
    new = h.init()  # a new instance: epoch bumped without an expected epoch
    assert new.producer_epoch == zombie.producer_epoch + 1
    assert h.init(pid=zombie.producer_id, epoch=zombie.producer_epoch).error == E.PRODUCER_FENCED
    # a timeout's fencing abort does not make the old epoch a retry either
    h2 = Harness(abort_check_interval_ms=10)
    p = h2.init(timeout=100)
    h2.add(p.producer_id, 0, [("x", 0)], now=5)
    h2.run(*h2.c.poll(1000)[0])
    h2.complete(now=1001)
    assert h2.init(pid=p.producer_id, epoch=0).error == E.PRODUCER_FENCED


def test_exhausted_epoch_gets_a_new_producer_id():
    h = Harness()
    pid = h.init().producer_id
    h.state().producer_epoch = 32765
    r = h.init()
    assert r.error == 0 and r.producer_id != pid and r.producer_epoch == 0


def test_timeout_aborts_and_bumps_the_epoch():
    h = Harness(abort_check_interval_ms=100)
    pid = h.init(timeout=1000).producer_id
    assert h.add(pid, 0, [("x", 0)], now=10) == 0
    assert not [r for s, r in h.c.poll(500)]  # not yet
    results = h.c.poll(2000)
    assert len(results) == 1
    h.run(*results[0])
    assert h.state().state == S.PREPARE_ABORT and h.state().producer_epoch == 1
    job, _ = h.complete(now=2001)
    assert not job.commit and h.state().state == S.COMPLETE_ABORT
    assert h.end(pid, 0, True) == E.PRODUCER_FENCED  # the producer learns it was fenced


def test_loading_resends_markers_of_prepared_transactions():
    h = Harness()
    pid = h.init().producer_id
    h.add(pid, 0, [("x", 0)])
    h.end(pid, 0, False)
    h.jobs.clear()
    c2 = TransactionCoordinator(Config(num_partitions=1), send_markers=h.jobs.append)
    shard = c2.begin_loading(0, 0)
    for k, v in h.log:
        shard.replay(k, v)
    assert c2.shard_for("t")[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    c2.finish_loading(0, 5)
    assert len(h.jobs) == 1 and not h.jobs[0].commit and h.jobs[0].partitions == (("x", 0),)


def test_expired_transactional_ids_are_tombstoned():
    h = Harness(expiration_check_interval_ms=10, id_expiration_ms=1000)
    h.init(now=1)
    results = h.c.poll(5000)
    assert len(results) == 1
    shard, r = results[0]
    assert r.records == [(txn_key("t"), None)]
    h.run(shard, r)
    assert "t" not in shard.txns


@pytest.mark.parametrize("state", [S.ONGOING, S.PREPARE_COMMIT])
def test_not_expired_while_in_a_transaction(state):
    h = Harness(expiration_check_interval_ms=10, id_expiration_ms=1000)
    pid = h.init(now=1).producer_id
    h.add(pid, 0, [("x", 0)], now=1)
    if state == S.PREPARE_COMMIT:
        h.end(pid, 0, True, now=1)
    assert not [r for _, r in h.c.poll(5000) if any(v is None for _, v in r.records)]
