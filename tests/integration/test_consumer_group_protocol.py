"""KIP-848 over a real socket: ConsumerGroupHeartbeat (68) v0-1 and ConsumerGroupDescribe (69) v0-1 --
joining, epochs, the target assignment, incremental revocation, leaving, Kafka's errors for bad first
heartbeats, fencing, the group size limit, a classic group of the same id, and OffsetCommit/OffsetFetch v9
with member epochs."""
from __future__ import annotations

import time
import uuid

import pytest
from kafka.protocol.consumer import JoinGroupRequest, OffsetCommitRequest, OffsetFetchRequest

from kafkite.wire.consumer_group_api import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from kafkite.wire.errors import E

from test_data_versions import create
from test_group_versions import find

HB = ConsumerGroupHeartbeatRequest


def hb(wire, group, member_id="", epoch=0, v=1, topics=("t6",), owned=(), rebalance_timeout=30000, auto_id=True,
       **kw):
    args = dict(group_id=group, member_id=member_id, member_epoch=epoch, instance_id=None, rack_id=None,
                rebalance_timeout_ms=rebalance_timeout if epoch == 0 else -1,
                subscribed_topic_names=list(topics) if topics is not None else None, server_assignor=None,
                topic_partitions=None if owned is None else [HB.TopicPartitions(topic_id=t, partitions=list(ps))
                                                             for t, ps in owned])
    if epoch == 0 and not member_id and v >= 1 and auto_id:
        args["member_id"] = str(uuid.uuid4())  # from v1 the client makes its member id (KIP-1082)
    args.update(kw)
    for _ in range(100):
        r = wire.request(HB(**args), v)
        if r.error_code not in (E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE):
            return r
        time.sleep(0.05)
    return r


def parts(r) -> set[int]:
    return {p for tp in r.assignment.topic_partitions for p in tp.partitions} if r.assignment else set()


def owned_of(r):
    return [(tp.topic_id, list(tp.partitions)) for tp in r.assignment.topic_partitions]


def describe(wire, group, v=1):
    return wire.request(ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False),
                        v).groups[0]


@pytest.fixture
def cg(wire):
    create(wire, "t6", 6)
    find(wire, "g1")
    return wire


@pytest.mark.parametrize("v", [0, 1])
def test_join_gets_everything_then_a_second_member_takes_half_after_revocation(cg, v):
    a = hb(cg, "g1", v=v)
    assert a.error_code == 0 and a.member_epoch == 1 and a.heartbeat_interval_ms == 5000
    assert parts(a) == set(range(6))
    a_id, tid = a.member_id, a.assignment.topic_partitions[0].topic_id
    b = hb(cg, "g1", v=v)
    # b's target is half the partitions, but a still owns them: b gets epoch 2 and nothing yet
    assert b.error_code == 0 and b.member_epoch == 2 and parts(b) == set()
    d = describe(cg, "g1", v)
    assert (d.group_state, d.group_epoch, d.assignment_epoch, d.assignor_name) == ("Reconciling", 2, 2, "uniform")
    # a is asked to revoke three partitions, at its epoch
    a2 = hb(cg, "g1", a_id, 1, v=v, topics=None, owned=[(tid, range(6))])
    assert a2.member_epoch == 1 and len(parts(a2)) == 3
    keep = sorted(parts(a2))
    # while a still reports them, nothing moves
    assert hb(cg, "g1", a_id, 1, v=v, topics=None, owned=[(tid, range(6))]).member_epoch == 1
    # a revoked: it moves to epoch 2; b then gets the released partitions
    a3 = hb(cg, "g1", a_id, 1, v=v, topics=None, owned=[(tid, keep)])
    assert a3.member_epoch == 2
    b2 = hb(cg, "g1", b.member_id, 2, v=v, topics=None, owned=[])
    assert b2.member_epoch == 2 and parts(b2) == set(range(6)) - set(keep)
    d = describe(cg, "g1", v)
    assert d.group_state == "Stable"
    assert sorted(len(m.assignment.topic_partitions[0].partitions) for m in d.members) == [3, 3]
    assert {m.assignment.topic_partitions[0].topic_name for m in d.members} == {"t6"}
    if v >= 1:
        assert {m.member_type for m in d.members} == {1}
    # leaving bumps the group epoch; the one left gets everything at the next epoch
    bye = hb(cg, "g1", b.member_id, -1, v=v, topics=None, owned=None)
    assert (bye.error_code, bye.member_epoch) == (0, -1)
    a4 = hb(cg, "g1", a_id, 2, v=v, topics=None, owned=[(tid, keep)])
    assert a4.member_epoch == 3 and parts(a4) == set(range(6))


@pytest.mark.parametrize("kw,msg", [
    (dict(rebalance_timeout_ms=-1), "RebalanceTimeoutMs must be provided in first request."),
    (dict(topic_partitions=None), "TopicPartitions must be empty when (re-)joining."),
    (dict(subscribed_topic_names=None), "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null "
                                        "when (re-)joining."),
    (dict(member_epoch=-3), "MemberEpoch is invalid."),
    (dict(auto_id=False), "MemberId can't be empty."),  # v1: the client generates it
    (dict(instance_id=""), "InstanceId can't be empty."),
    (dict(rack_id=""), "RackId can't be empty."),
    (dict(member_epoch=5, auto_id=False, v=0), "MemberId can't be empty."),
])
def test_bad_first_heartbeats_answer_invalid_request_with_kafkas_messages(cg, kw, msg):
    r = hb(cg, "g1", **kw)
    assert (r.error_code, r.error_message) == (E.INVALID_REQUEST, msg)


def test_v0_join_without_member_id_gets_one_and_an_empty_regex_is_no_regex(cg):
    r = hb(cg, "g1", v=0)
    assert r.error_code == 0 and len(r.member_id) > 10 and parts(r) == set(range(6))
    r = hb(cg, "g1", subscribed_topic_regex="")  # librdkafka sends "" with its topic names
    assert r.error_code == 0 and r.member_epoch == 2


def test_errors_unknown_member_fenced_epoch_group_not_found_unsupported_assignor(cg):
    assert hb(cg, "nope", "m-x", 3, topics=None).error_code == E.GROUP_ID_NOT_FOUND
    a = hb(cg, "g1")
    r = hb(cg, "g1", "someone-else", 1, topics=None)
    assert r.error_code == E.UNKNOWN_MEMBER_ID
    assert r.error_message == "Member someone-else is not a member of group g1."
    assert hb(cg, "g1", a.member_id, 7, topics=None).error_code == E.FENCED_MEMBER_EPOCH
    r = hb(cg, "g1", server_assignor="sticky")
    assert r.error_code == E.UNSUPPORTED_ASSIGNOR
    assert r.error_message == "ServerAssignor sticky is not supported. Supported assignors: uniform, range."
    d = describe(cg, "nope")
    assert d.error_code == E.GROUP_ID_NOT_FOUND


def test_range_assignor_when_members_ask_for_it(cg):
    a = hb(cg, "g1", server_assignor="range")
    assert parts(a) == set(range(6))
    assert describe(cg, "g1").assignor_name == "range"


def test_group_max_size(broker_factory):
    from kafkite.testing.wire_client import WireClient
    b = broker_factory(overrides={"group.consumer.max.size": "1"})
    with WireClient.connect(b.bootstrap_servers) as w:
        create(w, "t6", 6)
        find(w, "g1")
        assert hb(w, "g1").error_code == 0
        r = hb(w, "g1")
        assert r.error_code == E.GROUP_MAX_SIZE_REACHED
        assert r.error_message == "The consumer group has reached its maximum capacity of 1 members."


def test_a_classic_group_whose_embedded_protocol_is_malformed_is_not_upgraded(cg):
    """Its members joined with empty protocol metadata: the online upgrade refuses it with Kafka's answer."""
    P = JoinGroupRequest.JoinGroupRequestProtocol
    r = cg.request(JoinGroupRequest(group_id="g1", session_timeout_ms=10000, rebalance_timeout_ms=10000,
                                    member_id="", group_instance_id=None, protocol_type="consumer",
                                    protocols=[P(name="range", metadata=b"")], reason=None), 5)
    assert r.error_code == E.MEMBER_ID_REQUIRED
    r = cg.request(JoinGroupRequest(group_id="g1", session_timeout_ms=10000, rebalance_timeout_ms=10000,
                                    member_id=r.member_id, group_instance_id=None, protocol_type="consumer",
                                    protocols=[P(name="range", metadata=b"")], reason=None), 5)
    assert r.error_code == 0
    h = hb(cg, "g1")
    assert (h.error_code, h.error_message) == (E.GROUP_ID_NOT_FOUND, "Cannot upgrade the classic group g1 to "
                                               "consumer group because the embedded consumer protocol is malformed.")
    assert describe(cg, "g1").error_code == E.GROUP_ID_NOT_FOUND


def test_static_member_leaves_with_minus_two_and_comes_back_with_its_partitions(cg):
    a = hb(cg, "g1", instance_id="i1")
    tid = a.assignment.topic_partitions[0].topic_id
    r = hb(cg, "g1", a.member_id, -2, topics=None, owned=None, instance_id="i1")
    assert (r.error_code, r.member_epoch) == (0, -2)
    # the instance id is held: another incarnation may take it now
    back = hb(cg, "g1", "new-incarnation", 0, instance_id="i1")
    assert back.error_code == 0 and parts(back) == set(range(6)) and back.member_epoch == 1
    assert tid == back.assignment.topic_partitions[0].topic_id
    # while it is in the group, a second joiner with the same instance id is refused
    r = hb(cg, "g1", "third", 0, instance_id="i1")
    assert r.error_code == E.UNRELEASED_INSTANCE_ID


def test_offset_commit_and_fetch_v9_check_the_member_epoch(cg):
    a = hb(cg, "g1")
    T = OffsetCommitRequest.OffsetCommitRequestTopic

    def commit(member, epoch, v=9):
        req = OffsetCommitRequest(group_id="g1", generation_id_or_member_epoch=epoch, member_id=member,
                                  group_instance_id=None, retention_time_ms=-1,
                                  topics=[T(name="t6", partitions=[T.OffsetCommitRequestPartition(
                                      partition_index=0, committed_offset=42, committed_leader_epoch=-1,
                                      committed_metadata="")])])
        return cg.request(req, v).topics[0].partitions[0].error_code
    assert commit(a.member_id, 1) == 0
    assert commit(a.member_id, 0) == E.STALE_MEMBER_EPOCH
    assert commit("stranger", 1) == E.UNKNOWN_MEMBER_ID
    assert commit(a.member_id, 1, v=8) == E.UNSUPPORTED_VERSION
    G = OffsetFetchRequest.OffsetFetchRequestGroup

    def fetch(member, epoch):
        req = OffsetFetchRequest(groups=[G(group_id="g1", member_id=member, member_epoch=epoch,
                                           topics=[G.OffsetFetchRequestTopics(name="t6", partition_indexes=[0])])],
                                 require_stable=True)
        return cg.request(req, 9).groups[0]
    g = fetch(a.member_id, 1)
    assert g.error_code == 0 and g.topics[0].partitions[0].committed_offset == 42
    assert fetch(a.member_id, 5).error_code == E.STALE_MEMBER_EPOCH
    assert fetch("stranger", 1).error_code == E.UNKNOWN_MEMBER_ID
    assert fetch(None, -1).error_code == 0  # an admin client's fetch


def test_api_versions_advertise_68_and_69(broker):
    from kafkite.server.router import supported
    assert supported()[68] == (0, 1) and supported()[69] == (0, 1)


def test_list_and_delete_a_consumer_group(cg):
    from kafka.protocol.admin import DeleteGroupsRequest, ListGroupsRequest
    a = hb(cg, "g1")
    from kafka.protocol.admin import DescribeGroupsRequest
    # the classic DescribeGroups does not describe a consumer group (Kafka: Dead)
    d = cg.request(DescribeGroupsRequest(groups=["g1"], include_authorized_operations=False), 5).groups[0]
    assert (d.error_code, d.group_state, d.members) == (0, "Dead", [])
    listed = {g.group_id: (g.protocol_type, g.group_state, g.group_type)
              for g in cg.request(ListGroupsRequest(states_filter=[], types_filter=["consumer"]), 5).groups}
    assert listed == {"g1": ("consumer", "Stable", "consumer")}
    assert cg.request(ListGroupsRequest(states_filter=[], types_filter=["classic"]), 5).groups == []
    assert cg.request(DeleteGroupsRequest(groups_names=["g1"]), 2).results[0].error_code == E.NON_EMPTY_GROUP
    hb(cg, "g1", a.member_id, -1, topics=None, owned=None)
    assert describe(cg, "g1").group_state == "Empty"
    assert cg.request(DeleteGroupsRequest(groups_names=["g1"]), 2).results[0].error_code == 0
    assert describe(cg, "g1").error_code == E.GROUP_ID_NOT_FOUND


def test_an_emptied_classic_group_is_taken_over_with_its_offsets(cg):
    from kafka.protocol.consumer import LeaveGroupRequest
    P = JoinGroupRequest.JoinGroupRequestProtocol
    kw = dict(group_id="g1", session_timeout_ms=10000, rebalance_timeout_ms=10000, group_instance_id=None,
              protocol_type="consumer", protocols=[P(name="range", metadata=b"")], reason=None)
    mid = cg.request(JoinGroupRequest(member_id="", **kw), 5).member_id
    assert cg.request(JoinGroupRequest(member_id=mid, **kw), 5).error_code == 0
    L = LeaveGroupRequest.MemberIdentity
    cg.request(LeaveGroupRequest(group_id="g1", members=[L(member_id=mid, group_instance_id=None, reason=None)]), 5)
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    r = cg.request(OffsetCommitRequest(group_id="g1", generation_id_or_member_epoch=-1, member_id="",
                                       group_instance_id=None, retention_time_ms=-1,
                                       topics=[T(name="t6", partitions=[T.OffsetCommitRequestPartition(
                                           partition_index=3, committed_offset=7, committed_leader_epoch=-1,
                                           committed_metadata="")])]), 8)
    assert r.topics[0].partitions[0].error_code == 0  # the group is empty: an admin's commit
    a = hb(cg, "g1")
    assert a.error_code == 0 and parts(a) == set(range(6))
    G = OffsetFetchRequest.OffsetFetchRequestGroup
    g = cg.request(OffsetFetchRequest(groups=[G(group_id="g1", member_id=a.member_id, member_epoch=a.member_epoch,
                                                topics=[G.OffsetFetchRequestTopics(name="t6",
                                                                                   partition_indexes=[3])])],
                                      require_stable=False), 9).groups[0]
    assert g.error_code == 0 and g.topics[0].partitions[0].committed_offset == 7


def test_without_consumer_in_rebalance_protocols_the_heartbeat_is_refused(broker_factory):
    from kafkite.testing.wire_client import WireClient
    b = broker_factory(overrides={"group.coordinator.rebalance.protocols": "classic"})
    with WireClient.connect(b.bootstrap_servers) as w:
        create(w, "t6", 6)
        find(w, "g1")
        assert hb(w, "g1").error_code == E.UNSUPPORTED_VERSION


def test_the_group_moves_with_its_coordinator_in_a_cluster():
    """The group's __consumer_offsets partition changes leader: the new coordinator loads the group from the
    replicated records (epochs, members, assignments) and its members go on at their epochs; the old one
    answers NOT_COORDINATOR."""
    from kafkite.coordinator.hashing import partition_for
    from kafkite.testing.cluster import KafkiteCluster
    from kafkite.testing.wire_client import WireClient
    with KafkiteCluster(brokers=3) as cluster:
        with WireClient.connect(cluster.bootstrap_of(1)) as w:
            from kafka.protocol.admin import CreateTopicsRequest
            CT = CreateTopicsRequest.CreatableTopic
            assert w.request(CreateTopicsRequest(topics=[CT(name="t6", num_partitions=6, replication_factor=3,
                                                            assignments=[], configs=[])], timeout_ms=5000),
                             7).topics[0].error_code == 0
            find(w, "gm")
        coord = cluster.coordinator("gm")
        with WireClient.connect(cluster.bootstrap_of(coord)) as w:
            a = hb(w, "gm")
            b = hb(w, "gm")
            tid = a.assignment.topic_partitions[0].topic_id
            a2 = hb(w, "gm", a.member_id, 1, topics=None, owned=[(tid, range(6))])
            a3 = hb(w, "gm", a.member_id, 1, topics=None, owned=[(tid, sorted(parts(a2)))])
            b2 = hb(w, "gm", b.member_id, 2, topics=None, owned=[])
            before = describe(w, "gm")
            assert before.group_state == "Stable" and a3.member_epoch == b2.member_epoch == 2
        target = next(x for x in (1, 2, 3) if x != coord)
        cluster.move_leader("__consumer_offsets", partition_for("gm", 50), target)
        assert cluster.coordinator("gm") == target
        with WireClient.connect(cluster.bootstrap_of(coord)) as w:
            assert hb(w, "gm", a.member_id, 2, topics=None).error_code == E.NOT_COORDINATOR
        with WireClient.connect(cluster.bootstrap_of(target)) as w:
            after = describe(w, "gm")
            assert (after.group_state, after.group_epoch, after.assignment_epoch) == (
                "Stable", before.group_epoch, before.assignment_epoch)
            assert {m.member_id: (m.member_epoch, sorted(m.assignment.topic_partitions[0].partitions))
                    for m in after.members} == {m.member_id: (m.member_epoch,
                                                              sorted(m.assignment.topic_partitions[0].partitions))
                                                for m in before.members}
            r = hb(w, "gm", b.member_id, 2, topics=None, owned=[(tid, sorted(parts(b2)))])
            assert (r.error_code, r.member_epoch) == (0, 2)
