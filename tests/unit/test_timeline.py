"""Snapshots of a coordinator shard's state and their revert (coordinator/timeline.py), sans-IO: the registry itself,
a group shard and a transaction shard reverted to exactly what they held before a write, and the runtime's
bookkeeping of writes in flight (which fail with a reverted one, which a later commit proves committed)."""
from __future__ import annotations

import copy
import uuid
from types import SimpleNamespace

import pytest

from kafkite.coordinator import consumer_group_records as CR
from kafkite.coordinator.consumer_group_manager import HeartbeatRequest
from kafkite.coordinator.consumer_group_records import TopicMetadata
from kafkite.coordinator.coordinator import Config, GroupCoordinator
from kafkite.coordinator.result import finish_write, start_write
from kafkite.coordinator.timeline import SnapshotRegistry
from kafkite.coordinator.transaction import Config as TxnConfig, TransactionCoordinator, TxnState
from kafkite.wire.errors import E

ORDERS = uuid.UUID(int=7)


def test_registry_reverts_dict_and_attribute_changes_newest_first():
    reg, d, obj = SnapshotRegistry(), {"a": 1, "b": 2}, SimpleNamespace(epoch=3, members={"m": 1})
    reg.set_item(d, "a", 100)  # no snapshot open: applied, nothing logged
    assert not reg.tracking and reg._undo == []
    reg.snapshot(10)
    reg.snapshot(10)  # idempotent for the newest
    reg.set_item(d, "a", 5)
    reg.set_item(d, "a", 6)
    reg.pop_item(d, "b")
    reg.set_item(d, "c", 7)
    assert reg.pop_item(d, "nope", "dflt") == "dflt"
    reg.set_attr(obj, "epoch", 4)
    reg.snapshot(12)
    reg.setdefault(d, "e", dict)["x"] = 1  # the new dict itself is logged, not what goes into it later
    reg.save_vars(obj)
    obj.members["n"] = 2
    obj.epoch = 9
    reg.set_item(d, "a", 8)
    assert reg.offsets() == [10, 12]
    assert reg.revert_to(12)
    assert d == {"a": 6, "c": 7} and obj.epoch == 4 and obj.members == {"m": 1} and reg.offsets() == [10, 12]
    assert reg.revert_to(10)
    assert d == {"a": 100, "b": 2} and obj.epoch == 3 and reg.offsets() == [10]
    with pytest.raises(ValueError):
        reg.snapshot(9)


def test_committed_snapshots_are_dropped_and_cannot_be_reverted_to():
    reg, d = SnapshotRegistry(), {}
    for offset in (0, 1, 2):
        reg.snapshot(offset)
        reg.set_item(d, offset, "v")
    reg.delete_up_to(2)  # offsets 0 and 1 committed
    assert reg.offsets() == [2] and len(reg._undo) == 1
    assert not reg.revert_to(1) and d == {0: "v", 1: "v", 2: "v"}
    assert reg.revert_to(2) and d == {0: "v", 1: "v"}
    reg.delete_up_to(3)
    assert not reg.tracking and reg._undo == []
    reg.set_item(d, 9, "v")
    assert reg._undo == []


class Topics:
    version = 1

    def __call__(self, name):
        return TopicMetadata(ORDERS, "orders", 4) if name == "orders" else None

    def names(self):
        return ["orders"]


class GroupShardLog:
    """The runtime's steps for one __consumer_offsets partition: append (a list), snapshot at the offset, replay."""

    def __init__(self):
        self.c = GroupCoordinator(Config(num_partitions=1, initial_rebalance_delay_ms=0))
        self.c.begin_loading(0, 0)
        self.c.finish_loading(0, 0)
        self.shard = self.c.shards[0]
        self.log: list = []

    def run(self, op):
        shard, result = op
        written = []

        def append(recs):
            self.shard.timeline.snapshot(len(self.log))
            written.append(len(self.log))
            self.log.extend(recs)
            return 0
        def replay(key, value):  # a transactional write: pending until its producer's marker
            shard.replay(key, value, -1, result.producer_id)
        err = start_write(result, replay, append) if shard is not None else 0
        return written[0] if written else None, result, err

    def state(self):
        s = self.shard
        return copy.deepcopy((s.groups, s.consumer_groups, s.offsets.pending))


def commit(rt, group, offsets, gen=-1, member=""):
    return rt.run(rt.c.commit_offsets(group_id=group, generation_id=gen, member_id=member, group_instance_id=None,
                                      offsets=[(t, p, o, -1, "") for t, p, o in offsets], now_ms=1))


def heartbeat(rt, member, epoch, topics=("orders",)):
    req = HeartbeatRequest(group_id="cg", member_id=member, member_epoch=epoch, rebalance_timeout_ms=1000,
                           subscribed_topic_names=list(topics), owned=[])
    return rt.run(rt.c.consumer_group_heartbeat(req, Topics(), 1))


def test_a_group_shard_reverts_offsets_groups_consumer_groups_and_pending_txn_offsets():
    rt = GroupShardLog()
    commit(rt, "g", [("t", 0, 5), ("t", 1, 6)])
    heartbeat(rt, "a", 0)
    rt.run(rt.c.txn_commit_offsets(group_id="g", producer_id=7, producer_epoch=0, generation_id=-1, member_id="",
                                   group_instance_id=None, offsets=[("t", 0, 9, -1, "")], now_ms=1))
    rt.shard.timeline.delete_up_to(len(rt.log))  # all committed
    before = rt.state()
    assert before[0]["g"].offsets[("t", 0)].offset == 5 and set(before[1]["cg"].members) == {"a"}

    # writes after it, each at its own offset: then the first one fails, and the revert undoes them all; each
    # answers its error (its on_failure drops what the operation itself kept in memory: the new member's timer)
    first, *_ = done = [commit(rt, "g", [("t", 0, 50), ("t", 2, 7)]),
                        commit(rt, "simple", [("u", 0, 1)]),  # a new group
                        heartbeat(rt, "b", 0),  # a second member: a new group epoch, target assignment, members
                        rt.run(rt.c.delete_offsets("g", [("t", 1)]))]
    rt.shard.replay_marker(7, True)  # the pending transactional offsets committed
    rt.shard.replay(*CR.tombstone(CR.GROUP_METADATA, "cg"))  # the consumer group's tombstone
    assert rt.state() != before
    assert rt.shard.timeline.revert_to(first[0])
    for _, result, _ in done:
        finish_write(result, int(E.COORDINATOR_NOT_AVAILABLE))
    assert rt.state() == before


def test_a_classic_group_deleted_in_a_failed_write_comes_back_as_it_was():
    rt = GroupShardLog()
    commit(rt, "g", [("t", 0, 5)])
    rt.shard.timeline.delete_up_to(len(rt.log))
    g = rt.shard.groups["g"]
    before = rt.state()
    first, result, err = rt.run(rt.c.delete_group("g"))
    assert err == 0 and "g" not in rt.shard.groups
    rt.shard.timeline.revert_to(first)
    assert rt.shard.groups["g"] is g and rt.state() == before  # the same object, as it was


def test_a_transaction_shard_reverts_to_the_state_before_the_failed_write():
    c = TransactionCoordinator(TxnConfig(num_partitions=1))
    c.begin_loading(0, 0)
    c.finish_loading(0, 0)
    shard = c.shards[0]
    log: list = []

    def run(op):
        s, result = op
        offset = len(log)

        def append(recs):
            shard.timeline.snapshot(len(log))
            log.extend(recs)
            return 0
        return offset, finish_write(result, start_write(result, s.replay, append))

    _, init = run(c.init_producer_id("t", 60000, -1, -1, 1000, 1))
    run(c.add_partitions("t", init.producer_id, init.producer_epoch, [("orders", 0)], 2))
    shard.timeline.delete_up_to(len(log))
    before = copy.deepcopy(shard.txns)
    first, err = run(c.end_txn("t", init.producer_id, init.producer_epoch, True, 3))
    assert err == 0 and shard.txns["t"].state == TxnState.PREPARE_COMMIT
    run(c.init_producer_id("u", 60000, -1, -1, 1001, 4))
    shard.timeline.revert_to(first)
    assert shard.txns == before and shard.txns["t"].state == TxnState.ONGOING
    # the client's retry writes it again
    assert run(c.end_txn("t", init.producer_id, init.producer_epoch, True, 5))[1] == 0
    assert shard.txns["t"].state == TxnState.PREPARE_COMMIT


def test_the_runtime_fails_the_writes_a_revert_undid_and_keeps_a_write_a_later_commit_proves():
    from kafkite.server.coordinator_runtime import CoordinatorRuntime
    rt = GroupShardLog()
    runtime = CoordinatorRuntime(None, "__consumer_offsets", rt.c)
    shard, d = rt.shard, rt.shard.groups

    def write(offset, key):
        w = runtime._open(shard, offset, offset)
        shard.timeline.set_item(d, key, object())
        return w
    a, b, c = write(0, "a"), write(1, "b"), write(2, "c")
    assert runtime._settle(b, int(E.COORDINATOR_NOT_AVAILABLE)) == E.COORDINATOR_NOT_AVAILABLE
    assert set(d) == {"a"} and runtime.reverted_writes == 1  # b and c undone, a not
    assert runtime._settle(c, 0) == E.COORDINATOR_NOT_AVAILABLE  # undone with b: it fails too
    e = write(3, "e")
    assert runtime._settle(e, 0) == 0 and shard.timeline.offsets() == []  # committed: offsets 0..3
    # a's snapshot went with e's commit: a is committed as well, whatever its own wait said (the ISR caught up)
    assert runtime._settle(a, int(E.NOT_ENOUGH_REPLICAS_AFTER_APPEND)) == 0 and set(d) == {"a", "e"}
    assert runtime._inflight == {} and a.done.is_set() and runtime.reverted_writes == 1


def _commit_whose_second_replay_raises(rt):
    """A commit of two offsets of group g, and the shard's replay raising at its second record (a bug in a replay):
    (the commit's result, the replay calls made)."""
    _, result = rt.c.commit_offsets(group_id="g", generation_id=-1, member_id="", group_instance_id=None,
                                    offsets=[("t", 0, 5, -1, ""), ("t", 1, 6, -1, "")], retention_ms=-1, now_ms=0)
    real_replay, calls = rt.shard.replay, []

    def replay(*a, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("a bug")
        return real_replay(*a, **kw)
    rt.shard.replay = replay
    return result, calls


def test_a_write_whose_replay_raises_is_undone_and_leaves_nothing_to_wait_for():
    """A bug in a replay must not leave the write open: every later read of the shard would wait for it forever."""
    from kafkite.server.coordinator_runtime import CoordinatorRuntime
    rt = GroupShardLog()
    runtime = CoordinatorRuntime(None, "__consumer_offsets", rt.c)
    shard = rt.shard

    def append(partition, records, result=None):
        rt.log.extend(records)
        runtime._last_write[partition] = (None, len(rt.log) - 1)
        return 0
    runtime._append = append
    result, calls = _commit_whose_second_replay_raises(rt)
    with pytest.raises(RuntimeError):
        runtime._start(shard, result)
    assert len(calls) == 2 and "g" not in shard.groups  # the first record's change undone
    assert runtime._inflight == {} and runtime._writes == {} and shard.timeline.offsets() == [0]
    assert runtime.reverted_writes == 1


def _committed_as_appended_runtime():
    """A runtime whose appends are committed at once (a memory log, an unreplicated partition)."""
    from kafkite.server.coordinator_runtime import CoordinatorRuntime
    rt = GroupShardLog()
    broker = SimpleNamespace(replicas=SimpleNamespace(replicated=lambda topic, partition: False))
    runtime = CoordinatorRuntime(broker, "__consumer_offsets", rt.c)
    memory_log = SimpleNamespace(flush_pending=lambda offset: False)

    def append(partition, records, result=None):
        rt.log.extend(records)
        runtime._last_write[partition] = (memory_log, len(rt.log) - 1)
        return 0
    runtime._append = append
    return rt, runtime


def test_a_write_committed_as_appended_leaves_no_snapshot_nor_write_to_settle():
    rt, runtime = _committed_as_appended_runtime()
    shard = rt.shard
    _, result = rt.c.commit_offsets(group_id="g", generation_id=-1, member_id="", group_instance_id=None,
                                    offsets=[("t", 0, 5, -1, "")], retention_ms=-1, now_ms=0)
    assert runtime._start(shard, result) == 0
    assert shard.groups["g"].offsets[("t", 0)].offset == 5
    assert runtime._inflight == {} and runtime._writes == {} and shard.timeline.offsets() == []
    assert shard.timeline._undo == [] and runtime.reverted_writes == 0


def test_a_write_committed_as_appended_whose_replay_raises_is_undone():
    rt, runtime = _committed_as_appended_runtime()
    shard = rt.shard
    result, calls = _commit_whose_second_replay_raises(rt)
    with pytest.raises(RuntimeError):
        runtime._start(shard, result)
    assert len(calls) == 2 and "g" not in shard.groups  # the first record's change undone
    assert runtime._inflight == {} and runtime._writes == {} and runtime.reverted_writes == 1


def test_a_marker_whose_replay_raises_is_undone_and_leaves_nothing_to_wait_for():
    import trio
    from kafkite.server.coordinator_runtime import CoordinatorRuntime
    rt = GroupShardLog()
    replicas = SimpleNamespace(write_txn_marker=lambda *a, **kw: SimpleNamespace(error=0, last_offset=0),
                               get=lambda topic, partition: None)
    runtime = CoordinatorRuntime(SimpleNamespace(replicas=replicas, metadata=None), "__consumer_offsets", rt.c)
    shard = rt.shard

    def replay_marker(producer_id, commit):
        shard.timeline.set_item(shard.groups, "changed", object())
        raise RuntimeError("a bug")
    shard.replay_marker = replay_marker
    with pytest.raises(RuntimeError):
        trio.run(lambda: runtime.complete_transaction(0, producer_id=7, producer_epoch=0, commit=True,
                                                      coordinator_epoch=0))
    assert "changed" not in shard.groups and runtime._inflight == {} and runtime.reverted_writes == 1
