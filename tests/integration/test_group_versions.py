"""Every version of the group APIs over a real socket: FindCoordinator 0-5, JoinGroup 0-9, SyncGroup 0-5,
Heartbeat 0-4, LeaveGroup 0-5, OffsetCommit 0-9, OffsetFetch 0-9, DescribeGroups 0-5, ListGroups 0-5,
DeleteGroups 0-2, OffsetDelete 0."""
from __future__ import annotations

import time

import pytest
from kafka.protocol.admin import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import (HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest,
                                     OffsetDeleteRequest, OffsetFetchRequest, SyncGroupRequest)
from kafka.protocol.metadata import FindCoordinatorRequest

from kafkite.server.router import supported
from kafkite.wire.errors import E

from test_data_versions import create

SUP = supported()


def versions(api):
    lo, hi = SUP[api]
    return list(range(lo, hi + 1))


def find(wire, group, v=3):
    for _ in range(100):
        if v >= 4:
            r = wire.request(FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), v).coordinators[0]
        else:
            r = wire.request(FindCoordinatorRequest(key=group, key_type=0), v)
        if r.error_code != E.COORDINATOR_NOT_AVAILABLE:
            break
        time.sleep(0.05)
    # like a client, wait out COORDINATOR_LOAD_IN_PROGRESS before using the group
    for _ in range(200):
        probe = wire.request(OffsetFetchRequest(group_id=group, topics=None, require_stable=False), 5)
        if probe.error_code != E.COORDINATOR_LOAD_IN_PROGRESS:
            break
        time.sleep(0.02)
    return r


def join(wire, group, v, member_id="", instance=None, protocols=(("range", b"\x00\x01"),), session=10000):
    P = JoinGroupRequest.JoinGroupRequestProtocol
    kw = dict(group_id=group, session_timeout_ms=session, rebalance_timeout_ms=10000, member_id=member_id,
              group_instance_id=instance, protocol_type="consumer",
              protocols=[P(name=n, metadata=m) for n, m in protocols], reason="test")
    for _ in range(100):
        r = wire.request(JoinGroupRequest(**kw), v)
        if r.error_code == E.COORDINATOR_LOAD_IN_PROGRESS:
            time.sleep(0.05)
            continue
        if r.error_code == E.MEMBER_ID_REQUIRED:
            kw["member_id"] = r.member_id
            continue
        return r
    return r


def sync(wire, group, v, gen, member, assignments=None, instance=None):
    A = SyncGroupRequest.SyncGroupRequestAssignment
    return wire.request(SyncGroupRequest(group_id=group, generation_id=gen, member_id=member,
                                         group_instance_id=instance, protocol_type="consumer", protocol_name="range",
                                         assignments=[A(member_id=m, assignment=a)
                                                      for m, a in (assignments or {}).items()]), v)


def commit(wire, group, v, offsets, gen=-1, member=""):
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    topics = {}
    for t, p, o in offsets:
        topics.setdefault(t, []).append(T.OffsetCommitRequestPartition(partition_index=p, committed_offset=o,
                                                                        committed_leader_epoch=-1,
                                                                        commit_timestamp=-1,
                                                                        committed_metadata="m"))
    req = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=gen, member_id=member,
                              group_instance_id=None, retention_time_ms=-1,
                              topics=[T(name=t, partitions=ps) for t, ps in topics.items()])
    return {(t.name, p.partition_index): p.error_code for t in wire.request(req, v).topics for p in t.partitions}


def fetch_offsets(wire, group, v, parts):
    if v >= 8:
        G = OffsetFetchRequest.OffsetFetchRequestGroup
        T = G.OffsetFetchRequestTopics
        req = OffsetFetchRequest(groups=[G(group_id=group, member_id=None, member_epoch=-1,
                                           topics=[T(name=t, partition_indexes=ps) for t, ps in parts.items()])],
                                 require_stable=False)
        g = wire.request(req, v).groups[0]
        return g.error_code, {(t.name, p.partition_index): p.committed_offset for t in g.topics for p in t.partitions}
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    r = wire.request(OffsetFetchRequest(group_id=group, topics=[T(name=t, partition_indexes=ps)
                                                                for t, ps in parts.items()],
                                        require_stable=False), v)
    return (r.error_code if v >= 2 else 0), {(t.name, p.partition_index): p.committed_offset
                                             for t in r.topics for p in t.partitions}


@pytest.mark.parametrize("v", versions(10))
def test_find_coordinator_every_version(wire, broker, v):
    r = find(wire, f"fc-{v}", v)
    assert r.error_code == 0
    assert (r.node_id, r.port) == (broker.broker.node_id, broker.port)
    assert broker.state.metadata.topic("__consumer_offsets") is not None
    assert len(broker.state.metadata.topic("__consumer_offsets").partitions) == 50


@pytest.mark.parametrize("v", versions(11))
def test_join_sync_heartbeat_leave_every_version(wire, v):
    group = f"jg-{v}"
    find(wire, group)
    r = join(wire, group, v)
    assert r.error_code == 0 and r.generation_id == 1
    assert r.leader == r.member_id and len(r.members) == 1
    me, gen = r.member_id, r.generation_id
    sv = min(v, 5)
    s = sync(wire, group, sv, gen, me, {me: b"assignment"})
    assert s.error_code == 0 and bytes(s.assignment) == b"assignment"
    hv = min(v, 4)
    assert wire.request(HeartbeatRequest(group_id=group, generation_id=gen, member_id=me, group_instance_id=None),
                        hv).error_code == 0
    assert wire.request(HeartbeatRequest(group_id=group, generation_id=gen + 5, member_id=me,
                                         group_instance_id=None), hv).error_code == E.ILLEGAL_GENERATION
    assert wire.request(HeartbeatRequest(group_id=group, generation_id=gen, member_id="nobody",
                                         group_instance_id=None), hv).error_code == E.UNKNOWN_MEMBER_ID
    lv = min(v, 5)
    if lv >= 3:
        M = LeaveGroupRequest.MemberIdentity
        resp = wire.request(LeaveGroupRequest(group_id=group, members=[M(member_id=me, group_instance_id=None,
                                                                         reason="done")]), lv)
        assert resp.error_code == 0 and resp.members[0].error_code == 0
    else:
        assert wire.request(LeaveGroupRequest(group_id=group, member_id=me), lv).error_code == 0
    d = wire.request(DescribeGroupsRequest(groups=[group], include_authorized_operations=False), 5).groups[0]
    assert d.group_state == "Empty"


@pytest.mark.parametrize("v", versions(14))
def test_sync_errors_every_version(wire, v):
    group = f"sg-{v}"
    find(wire, group)
    r = join(wire, group, 5)
    assert sync(wire, group, v, r.generation_id + 1, r.member_id).error_code == E.ILLEGAL_GENERATION
    assert sync(wire, group, v, r.generation_id, "ghost").error_code == E.UNKNOWN_MEMBER_ID
    assert sync(wire, group, v, r.generation_id, r.member_id).error_code == 0


@pytest.mark.parametrize("v", versions(12))
def test_heartbeat_every_version(wire, v):
    group = f"hb-{v}"
    find(wire, group)
    r = join(wire, group, 5)
    sync(wire, group, 3, r.generation_id, r.member_id)
    ok = wire.request(HeartbeatRequest(group_id=group, generation_id=r.generation_id, member_id=r.member_id,
                                       group_instance_id=None), v)
    assert ok.error_code == 0
    bad = wire.request(HeartbeatRequest(group_id="no-such-group", generation_id=1, member_id="x",
                                        group_instance_id=None), v)
    assert bad.error_code == E.UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("v", versions(13))
def test_leave_group_every_version(wire, v):
    group = f"lg-{v}"
    find(wire, group)
    r = join(wire, group, 5)
    if v >= 3:
        M = LeaveGroupRequest.MemberIdentity
        resp = wire.request(LeaveGroupRequest(group_id=group, members=[
            M(member_id=r.member_id, group_instance_id=None), M(member_id="ghost", group_instance_id=None)]), v)
        assert [m.error_code for m in resp.members] == [0, E.UNKNOWN_MEMBER_ID]
    else:
        assert wire.request(LeaveGroupRequest(group_id=group, member_id="ghost"), v).error_code == \
            E.UNKNOWN_MEMBER_ID
        assert wire.request(LeaveGroupRequest(group_id=group, member_id=r.member_id), v).error_code == 0


@pytest.mark.parametrize("v", versions(8))
def test_offset_commit_every_version(wire, v):
    group = f"oc-{v}"
    create(wire, f"oct-{v}", partitions=2)
    find(wire, group)
    codes = commit(wire, group, v, [(f"oct-{v}", 0, 42), (f"oct-{v}", 1, 7), ("missing", 0, 1)])
    assert codes == {(f"oct-{v}", 0): 0, (f"oct-{v}", 1): 0, ("missing", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    err, got = fetch_offsets(wire, group, 5, {f"oct-{v}": [0, 1]})
    assert got == {(f"oct-{v}", 0): 42, (f"oct-{v}", 1): 7}
    if v >= 1:
        # a commit from a generation that does not exist
        assert commit(wire, f"{group}-nogen", v, [(f"oct-{v}", 0, 1)], gen=3, member="m") == \
            {(f"oct-{v}", 0): E.ILLEGAL_GENERATION}
        r = join(wire, group + "-g", 5)
        assert commit(wire, group + "-g", v, [(f"oct-{v}", 0, 5)], gen=r.generation_id, member="ghost") == \
            {(f"oct-{v}", 0): E.UNKNOWN_MEMBER_ID}
        assert commit(wire, group + "-g", v, [(f"oct-{v}", 0, 5)], gen=r.generation_id, member=r.member_id) == \
            {(f"oct-{v}", 0): E.REBALANCE_IN_PROGRESS}  # CompletingRebalance: sync first
        sync(wire, group + "-g", 3, r.generation_id, r.member_id)
        assert commit(wire, group + "-g", v, [(f"oct-{v}", 0, 5)], gen=r.generation_id, member=r.member_id) == \
            {(f"oct-{v}", 0): 0}


@pytest.mark.parametrize("v", versions(9))
def test_offset_fetch_every_version(wire, v):
    group = f"of-{v}"
    create(wire, f"oft-{v}", partitions=3)
    find(wire, group)
    commit(wire, group, 8, [(f"oft-{v}", 0, 10), (f"oft-{v}", 2, 30)])
    err, got = fetch_offsets(wire, group, v, {f"oft-{v}": [0, 1, 2]})
    assert err == 0
    assert got == {(f"oft-{v}", 0): 10, (f"oft-{v}", 1): -1, (f"oft-{v}", 2): 30}
    if v >= 2:  # all partitions of the group (topics = null)
        if v >= 8:
            G = OffsetFetchRequest.OffsetFetchRequestGroup
            req = OffsetFetchRequest(groups=[G(group_id=group, member_id=None, member_epoch=-1, topics=None),
                                             G(group_id="unknown-" + group, member_id=None, member_epoch=-1,
                                               topics=None)], require_stable=True)
            resp = wire.request(req, v)
            allp = {(t.name, p.partition_index): p.committed_offset for t in resp.groups[0].topics
                    for p in t.partitions}
            assert resp.groups[1].error_code == 0 and resp.groups[1].topics == []
        else:
            resp = wire.request(OffsetFetchRequest(group_id=group, topics=None, require_stable=False), v)
            allp = {(t.name, p.partition_index): p.committed_offset for t in resp.topics for p in t.partitions}
        assert allp == {(f"oft-{v}", 0): 10, (f"oft-{v}", 2): 30}


@pytest.mark.parametrize("v", versions(15))
def test_describe_groups_every_version(wire, v):
    group = f"dg-{v}"
    find(wire, group)
    r = join(wire, group, 5, instance="inst-1" if v >= 4 else None)
    sync(wire, group, 3, r.generation_id, r.member_id, {r.member_id: b"asg"},
         instance="inst-1" if v >= 4 else None)
    resp = wire.request(DescribeGroupsRequest(groups=[group, "missing-" + group],
                                              include_authorized_operations=True), v)
    d, missing = resp.groups
    assert (d.error_code, d.group_state, d.protocol_type, d.protocol_data) == (0, "Stable", "consumer", "range")
    assert [m.member_id for m in d.members] == [r.member_id]
    assert bytes(d.members[0].member_assignment) == b"asg"
    assert d.members[0].client_host.startswith("/127.0.0.1")
    if v >= 4:
        assert d.members[0].group_instance_id == "inst-1"
    assert missing.group_state == "Dead" and missing.error_code == 0


@pytest.mark.parametrize("v", versions(16))
def test_list_groups_every_version(wire, v):
    group = f"lsg-{v}"
    find(wire, group)
    r = join(wire, group, 5)
    sync(wire, group, 3, r.generation_id, r.member_id)
    kw = {"states_filter": ["Stable"]} if v >= 4 else {}
    resp = wire.request(ListGroupsRequest(**kw), v)
    assert resp.error_code == 0
    assert group in {g.group_id for g in resp.groups}
    if v >= 4:
        assert {g.group_state for g in resp.groups} == {"Stable"}
        empty = wire.request(ListGroupsRequest(states_filter=["Dead"]), v)
        assert group not in {g.group_id for g in empty.groups}
    if v >= 5:  # KIP-848's group types: a classic group, filtered in or out by type
        assert {g.group_id: g.group_type for g in resp.groups}[group] == "classic"
        kw["types_filter"] = ["Consumer"]
        assert group not in {g.group_id for g in wire.request(ListGroupsRequest(**kw), v).groups}
        kw["types_filter"] = ["CLASSIC"]
        assert group in {g.group_id for g in wire.request(ListGroupsRequest(**kw), v).groups}


@pytest.mark.parametrize("v", versions(42))
def test_delete_groups_every_version(wire, v):
    create(wire, f"dgt-{v}")
    find(wire, f"del-{v}")
    commit(wire, f"del-{v}", 8, [(f"dgt-{v}", 0, 3)])
    r = join(wire, f"busy-{v}", 5)
    resp = wire.request(DeleteGroupsRequest(groups_names=[f"del-{v}", f"busy-{v}", f"none-{v}"]), v)
    assert [x.error_code for x in resp.results] == [0, E.NON_EMPTY_GROUP, E.GROUP_ID_NOT_FOUND]
    assert fetch_offsets(wire, f"del-{v}", 5, {f"dgt-{v}": [0]})[1] == {(f"dgt-{v}", 0): -1}
    assert r.error_code == 0


def test_offset_delete(wire):
    create(wire, "odt", partitions=2)
    create(wire, "odt-sub")
    find(wire, "od")
    commit(wire, "od", 8, [("odt", 0, 1), ("odt", 1, 2)])
    T = OffsetDeleteRequest.OffsetDeleteRequestTopic
    req = OffsetDeleteRequest(group_id="od", topics=[T(name="odt", partitions=[
        T.OffsetDeleteRequestPartition(partition_index=0)])])
    resp = wire.request(req, 0)
    assert resp.error_code == 0 and resp.topics[0].partitions[0].error_code == 0
    assert fetch_offsets(wire, "od", 5, {"odt": [0, 1]})[1] == {("odt", 0): -1, ("odt", 1): 2}
    missing = wire.request(OffsetDeleteRequest(group_id="nope", topics=[]), 0)
    assert missing.error_code == E.GROUP_ID_NOT_FOUND and missing.topics == []
    # as Kafka's KafkaApis: an unknown topic or partition answers UNKNOWN_TOPIC_OR_PARTITION, the rest is deleted
    resp = wire.request(OffsetDeleteRequest(group_id="od", topics=[
        T(name="odt", partitions=[T.OffsetDeleteRequestPartition(partition_index=1),
                                  T.OffsetDeleteRequestPartition(partition_index=7)]),
        T(name="no-such-topic", partitions=[T.OffsetDeleteRequestPartition(partition_index=0)])]), 0)
    assert resp.error_code == 0
    assert {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions} == {
        ("odt", 1): 0, ("odt", 7): E.UNKNOWN_TOPIC_OR_PARTITION, ("no-such-topic", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert fetch_offsets(wire, "od", 5, {"odt": [0, 1]})[1] == {("odt", 0): -1, ("odt", 1): -1}
