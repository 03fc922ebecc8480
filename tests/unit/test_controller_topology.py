"""The in-process controller's test-control topology changes, sans-IO: a partition reassigned (its new replicas out of
the ISR until caught up, a leader not kept handing over) and leaders shuffled (kfake's ShufflePartitionLeaders)."""
from __future__ import annotations

import pytest

from kafkite.controller.controller import Controller
from kafkite.controller.metadata import BrokerInfo, ClusterMetadata, MemoryMetadataStore
from kafkite.controller.store import InProcessStore


def _cluster(n: int = 4):
    store, md, told = InProcessStore(), ClusterMetadata(MemoryMetadataStore(), node_id=1), []
    controllers = [Controller(i, store, md, lambda b, cmd: told.append(b) or 0) for i in range(1, n + 1)]
    for c in controllers:
        c.startup(BrokerInfo(c.node_id, "127.0.0.1", 9000 + c.node_id))
    active = controllers[0]
    assert active.active_controller() is active
    return active, md, told


def test_a_reassignment_adds_followers_out_of_the_isr_and_a_leader_not_kept_hands_over():
    c, md, told = _cluster()
    md.create_topic("t", [[1, 2, 3]], {})
    p = md.partition("t", 0)
    assert (p.leader, p.isr, p.leader_epoch) == (1, [1, 2, 3], 0)
    told.clear()
    c.reassign("t", 0, [1, 2, 3, 4])
    assert (p.replicas, p.leader, p.isr, p.leader_epoch) == ([1, 2, 3, 4], 1, [1, 2, 3], 1)  # 4 catches up first
    assert sorted(told) == [1, 2, 3, 4]  # every broker told, the new replica too
    p.isr = [1, 2, 3, 4]  # (the leader's AlterPartition once 4 caught up)
    c.reassign("t", 0, [4, 2, 3])
    assert (p.replicas, p.leader, p.isr, p.leader_epoch) == ([4, 2, 3], 4, [2, 3, 4], 2)
    epoch = p.partition_epoch
    c.reassign("t", 0, [4, 2, 3])  # the same: nothing changes
    assert (p.leader_epoch, p.partition_epoch) == (2, epoch)
    for bad, message in (([], "at least one"), ([2, 2], "distinct"), ([2, 9], "live broker")):
        with pytest.raises(ValueError, match=message):
            c.reassign("t", 0, bad)
    with pytest.raises(ValueError, match="no partition"):
        c.reassign("t", 1, [1])
    assert (p.replicas, p.leader, p.leader_epoch) == ([4, 2, 3], 4, 2)


def test_a_shuffle_moves_every_leader_to_another_live_isr_member():
    c, md, _ = _cluster(3)
    md.create_topic("t", [[1, 2, 3], [2, 3, 1], [3], [1, 2]], {})
    md.partition("t", 3).isr = [1]  # its follower out of the ISR: nothing to move to
    c.make_leaderless("t", 1)
    moved = c.shuffle_leaders(None, lambda candidates: candidates[-1])
    assert [(m["partition"], m["old"], m["leader"]) for m in moved] == [(0, 1, 3)]
    assert md.partition("t", 0).leader_epoch == 1 and md.partition("t", 1).leader == -1  # kept leaderless
    assert c.shuffle_leaders({"other"}, lambda candidates: candidates[0]) == []


def test_many_partition_state_changes_are_logged_in_one_line(monkeypatch):
    """A controller action changing more than 10 partitions (a failover, a broker's return) logs one line listing
    them (a line each held the event loop ~0.1 ms per partition); a few get a line each, as before."""
    import kafkite.controller.controller as controller
    logs = []
    monkeypatch.setattr(controller.log, "info", lambda event, **kw: logs.append({"event": event, **kw}))
    for n, lines in ((3, 3), (25, 1)):
        changes = controller.StateChanges("partition.isr_changed")
        for i in range(n):
            changes.add(topic="t", partition=i, old=[1], new=[1, 2], leader=1, leader_epoch=0)
        logs.clear()
        changes.log()
        mine = [e for e in logs if e["event"] == "partition.isr_changed"]
        assert len(mine) == lines
        if lines == 1:
            assert mine[0]["partitions"] == 25 and mine[0]["changes"][24] == "t-24: [1] -> [1, 2]"
        else:
            assert [e["partition"] for e in mine] == [0, 1, 2]
