"""The controller's view as Kafka's controller requests (controller/zk_requests.py): what each broker is told."""
from __future__ import annotations

import copy
import uuid

from kafkite.controller.zk_requests import LEADER_DURING_DELETE, RequestBuilder, inter_broker_endpoint
from kafkite.wire.interbroker import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest

TID = str(uuid.UUID(int=7))


def broker(i: int, epoch: int = 10) -> dict:
    return {"node_id": i, "host": "127.0.0.1", "port": 9090 + i, "rack": None,
            "listeners": [["INTERNAL", "127.0.0.1", 9190 + i]], "epoch": epoch}


def snapshot(partitions: list[tuple[list[int], int, int, list[int]]], brokers=(1, 2)) -> dict:
    return {"brokers": [broker(b) for b in brokers], "cluster_id": "c", "controller_epoch": 3, "topics": [
        {"name": "t", "topic_id": TID, "configs": {}, "partitions": [
            {"index": i, "replicas": r, "leader": leader, "leader_epoch": le, "isr": isr, "partition_epoch": 0}
            for i, (r, leader, le, isr) in enumerate(partitions)]}]}


def kinds(reqs) -> list[str]:
    return [type(r).__name__ for r in reqs]


def lai_partitions(req) -> list[tuple[str, int, int, int, bool]]:
    return [(t.topic_name, p.partition_index, p.leader, p.leader_epoch, p.is_new)
            for t in req.topic_states for p in t.partition_states]


def test_leader_and_isr_carries_only_what_changed_for_the_broker():
    rb = RequestBuilder()
    snap = snapshot([([1], 1, 0, [1]), ([2], 2, 0, [2])])
    reqs = rb.build(1, controller_id=2, controller_epoch=3, snapshot=snap)
    assert kinds(reqs) == ["LeaderAndIsrRequest", "UpdateMetadataRequest"]
    lai, um = reqs
    assert isinstance(lai, LeaderAndIsrRequest) and lai.API_VERSION == 7
    assert (lai.controller_id, lai.controller_epoch, lai.broker_epoch) == (2, 3, 10)
    assert lai_partitions(lai) == [("t", 0, 1, 0, True)]  # broker 1 replicates partition 0 only
    assert [(b.broker_id, b.port) for b in lai.live_leaders] == [(1, 9191)]  # the INTERNAL endpoint
    assert isinstance(um, UpdateMetadataRequest) and um.API_VERSION == 8
    assert sorted(p.partition_index for t in um.topic_states for p in t.partition_states) == [0, 1]
    assert [[(e.listener, e.port) for e in b.endpoints] for b in um.live_brokers] == [
        [("PLAINTEXT", 9091), ("INTERNAL", 9191)], [("PLAINTEXT", 9092), ("INTERNAL", 9192)]]
    # nothing changed: UpdateMetadata only
    assert kinds(rb.build(1, 2, 3, snap)) == ["UpdateMetadataRequest"]
    # partition 0's leader epoch moves: only it, no longer new
    snap2 = copy.deepcopy(snap)
    snap2["topics"][0]["partitions"][0]["leader_epoch"] = 1
    lai2 = rb.build(1, 2, 3, snap2)[0]
    assert lai_partitions(lai2) == [("t", 0, 1, 1, False)]


def test_a_restarted_broker_is_told_everything_again():
    rb = RequestBuilder()
    snap = snapshot([([1], 1, 0, [1])])
    rb.build(1, 2, 3, snap)
    again = copy.deepcopy(snap)
    again["brokers"][0]["epoch"] = 99  # registered again: a new broker epoch
    reqs = rb.build(1, 2, 3, again)
    assert kinds(reqs) == ["LeaderAndIsrRequest", "UpdateMetadataRequest"]
    assert reqs[0].broker_epoch == 99 and lai_partitions(reqs[0]) == [("t", 0, 1, 0, True)]


def test_partitions_never_elected_are_not_sent():
    rb = RequestBuilder()
    reqs = rb.build(1, 2, 3, snapshot([([3], -1, -1, [])]))
    assert kinds(reqs) == ["UpdateMetadataRequest"] and reqs[0].topic_states == []


def test_a_deleted_topic_stops_its_replicas_and_leaves_every_cache():
    rb = RequestBuilder()
    snap = snapshot([([1], 1, 0, [1]), ([2], 2, 0, [2])])
    rb.build(1, 2, 3, snap)
    rb.build(2, 2, 3, snap)
    gone = copy.deepcopy(snap)
    gone["topics"] = []
    gone["deleting"] = [{"name": "t", "pending": [(1, 0), (2, 1)]}]
    reqs = rb.build(1, 2, 3, gone)
    assert kinds(reqs) == ["StopReplicaRequest", "UpdateMetadataRequest"]
    sr, um = reqs
    assert isinstance(sr, StopReplicaRequest) and sr.API_VERSION == 4
    assert [(t.topic_name, p.partition_index, p.delete_partition) for t in sr.topic_states
            for p in t.partition_states] == [("t", 0, True)]
    assert [(t.topic_name, p.partition_index, p.leader) for t in um.topic_states for p in t.partition_states] == [
        ("t", 0, LEADER_DURING_DELETE), ("t", 1, LEADER_DURING_DELETE)]
    # told once: the next UpdateMetadata no longer mentions it, and the StopReplica is not sent twice
    assert kinds(rb.build(1, 2, 3, gone)) == ["UpdateMetadataRequest"]
    assert rb.build(1, 2, 3, gone)[0].topic_states == []
    # an error answer: the next build sends it again
    rb.stop_failed(1, [("t", 0)])
    assert kinds(rb.build(1, 2, 3, gone)) == ["StopReplicaRequest", "UpdateMetadataRequest"]


def test_a_replica_down_during_a_deletion_gets_its_stop_replica_when_it_registers_again():
    """A broker that was down (or came back with a new registration) is sent the pending StopReplica, though
    this controller never told it about the topic."""
    rb = RequestBuilder()
    deleting = {"name": "t", "pending": [(2, 1)]}
    snap = snapshot([], brokers=(1,))
    snap["topics"], snap["deleting"] = [], [deleting]
    assert kinds(rb.build(1, 2, 3, snap)) == ["UpdateMetadataRequest"]  # broker 1 holds nothing of it
    back = copy.deepcopy(snap)
    back["brokers"] = [broker(1), broker(2, epoch=20)]
    reqs = rb.build(2, 2, 3, back)
    assert kinds(reqs) == ["StopReplicaRequest", "UpdateMetadataRequest"]
    assert [(t.topic_name, p.partition_index) for t in reqs[0].topic_states for p in t.partition_states] == [("t", 1)]
    assert kinds(rb.build(2, 2, 3, back)) == ["UpdateMetadataRequest"]
    # registered again (a new broker epoch: it restarted before answering): sent again
    again = copy.deepcopy(back)
    again["brokers"] = [broker(1), broker(2, epoch=30)]
    assert kinds(rb.build(2, 2, 3, again)) == ["StopReplicaRequest", "UpdateMetadataRequest"]
    # once no replica is pending, nothing more
    done = copy.deepcopy(again)
    done["deleting"] = []
    assert kinds(rb.build(2, 2, 3, done)) == ["UpdateMetadataRequest"]


def test_inter_broker_endpoint_falls_back_to_the_client_listener():
    assert inter_broker_endpoint(broker(1)) == ("127.0.0.1", 9191)
    assert inter_broker_endpoint({"host": "h", "port": 1, "listeners": []}) == ("h", 1)


def test_an_isr_change_alone_goes_out_in_update_metadata_not_leader_and_isr():
    """AlterPartition (or a follower gone) changes the ISR under the same leader epoch: Kafka's ZooKeeper
    controller tells brokers through UpdateMetadata; a LeaderAndIsr of the same epoch would be refused anyway."""
    rb = RequestBuilder()
    snap = snapshot([([1, 2], 1, 0, [1, 2])])
    rb.build(2, 1, 3, snap)
    shrunk = copy.deepcopy(snap)
    shrunk["topics"][0]["partitions"][0]["isr"] = [1]
    reqs = rb.build(2, 1, 3, shrunk)
    assert kinds(reqs) == ["UpdateMetadataRequest"]
    assert [list(p.isr) for t in reqs[0].topic_states for p in t.partition_states] == [[1]]


def test_update_metadata_carries_only_the_partitions_that_changed():
    """Like Kafka's controller, a publish tells each broker what changed for it; a broker new to this controller
    (or registered again) gets everything. Every live broker is always listed."""
    rb = RequestBuilder()
    snap = snapshot([([1, 2], 1, 0, [1, 2]), ([2, 1], 2, 0, [2, 1]), ([1], 1, 0, [1])])

    def um_parts(reqs):
        um = reqs[-1]
        assert isinstance(um, UpdateMetadataRequest) and [b.id for b in um.live_brokers] == [1, 2]
        return [(t.topic_name, p.partition_index, p.leader, list(p.isr)) for t in um.topic_states
                for p in t.partition_states]
    assert [x[1] for x in um_parts(rb.build(1, 2, 3, snap))] == [0, 1, 2]
    assert um_parts(rb.build(1, 2, 3, snap)) == []
    shrunk = copy.deepcopy(snap)
    shrunk["topics"][0]["partitions"][1].update(isr=[2], partition_epoch=1)
    assert um_parts(rb.build(1, 2, 3, shrunk)) == [("t", 1, 2, [2])]
    # broker 2 gone: the partitions naming it get it as an offline replica
    gone = copy.deepcopy(shrunk)
    gone["brokers"] = [broker(1)]
    um = rb.build(1, 2, 3, gone)[-1]
    assert [(p.partition_index, list(p.offline_replicas)) for t in um.topic_states for p in t.partition_states] == [
        (0, [2]), (1, [2])]
    # registered again (a new broker epoch): told everything
    again = copy.deepcopy(shrunk)
    again["brokers"] = [broker(1, epoch=99), broker(2)]
    assert [x[1] for x in um_parts(rb.build(1, 2, 3, again))] == [0, 1, 2]


def test_a_replica_a_reassignment_removes_gets_stop_replica_delete_once():
    """Kafka's controller sends StopReplica (delete) to the replicas a reassignment removes; the broker still gets
    UpdateMetadata for the partition, and the StopReplica only once."""
    rb = RequestBuilder()
    rb.build(1, 2, 3, snapshot([([1, 2], 1, 0, [1, 2])]))
    reqs = rb.build(1, 2, 3, snapshot([([2], 2, 1, [2])]))
    assert kinds(reqs) == ["StopReplicaRequest", "UpdateMetadataRequest"]
    [(topic, parts)] = [(t.topic_name, [(p.partition_index, p.delete_partition) for p in t.partition_states])
                        for t in reqs[0].topic_states]
    assert (topic, parts) == ("t", [(0, True)])
    assert kinds(rb.build(1, 2, 3, snapshot([([2], 2, 1, [2])]))) == ["UpdateMetadataRequest"]
    # the replica kept is told of the new leader epoch, no StopReplica
    assert kinds(rb.build(2, 2, 3, snapshot([([2], 2, 1, [2])]))) == ["LeaderAndIsrRequest", "UpdateMetadataRequest"]
