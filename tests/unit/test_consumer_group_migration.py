"""Online upgrade and downgrade of groups with members (KIP-848's upgrade path), without sockets: a
classic group (loaded from its GroupMetadata record) taken over by a ConsumerGroupHeartbeat, its classic
members served by JoinGroup/SyncGroup/Heartbeat/LeaveGroup inside the consumer group, the downgrade when
the consumer-protocol member leaves, the records of each step replayed after a "restart", and the
refusals of group.consumer.migration.policy and the size limits. Cases and data are our own."""
from __future__ import annotations

from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as A
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as S

from kafkite.coordinator import records as R
from kafkite.coordinator.consumer_group_records import TopicMetadata
from kafkite.coordinator.consumer_protocol import decode_assignment
from kafkite.coordinator.coordinator import Config
from kafkite.coordinator.group import GroupState
from kafkite.coordinator.result import finish_write, start_write
from kafkite.wire.errors import E

from test_consumer_group_model import ORDERS, Runtime


def sub(version=1, owned=()):
    kw = {"owned_partitions": [S.TopicPartition(topic="orders", partitions=list(owned))] if owned else []}
    return S(version=version, topics=["orders"], user_data=None, **(kw if version >= 1 else {})).encode()


def asg(*ps):
    return A(version=1, assigned_partitions=[A.TopicPartition(topic="orders", partitions=list(ps))],
             user_data=None).encode()


def classic_log(generation=3, protocol_type="consumer"):
    """A Stable classic group "g" of members a (orders 0,1) and b (orders 2,3), as its record."""
    v = R.GroupValue(protocol_type, generation, "range", "a", 0, [
        R.MemberValue("a", None, "ca", "/h", 20000, 10000, sub(), asg(0, 1)),
        R.MemberValue("b", None, "cb", "/h", 20000, 10000, sub(), asg(2, 3))])
    return {0: [(R.group_key("g"), R.group_value(v))]}


def make(cfg=None, **kw):
    rt = Runtime(cfg or Config(num_partitions=1, initial_rebalance_delay_ms=0), logs=classic_log(**kw))
    rt.topics = {"orders": TopicMetadata(ORDERS, "orders", 4)}
    return rt


def write(rt, shard, result):
    return finish_write(result, start_write(result, shard.replay, rt.logs[0].extend) if shard else 0)


def join(rt, member_id, protocols=None, now=0, **kw):
    shard, result = rt.coordinator.join_group(
        group_id="g", member_id=member_id, group_instance_id=kw.pop("instance_id", None), protocol_type="consumer",
        protocols=protocols or [("range", sub())], session_timeout_ms=10000, rebalance_timeout_ms=20000,
        client_id="c", client_host="/h", require_known_member_id=True, now_ms=now, topics=rt.topics.get, **kw)
    return write(rt, shard, result)


def sync(rt, member_id, generation, now=0):
    shard, result = rt.coordinator.sync_group(group_id="g", generation_id=generation, member_id=member_id,
                                              group_instance_id=None, protocol_type="consumer",
                                              protocol_name="range", assignments={}, now_ms=now)
    return write(rt, shard, result)


def heartbeat(rt, member_id, generation, now=0):
    shard, result = rt.coordinator.heartbeat(group_id="g", generation_id=generation, member_id=member_id,
                                             group_instance_id=None, now_ms=now)
    return write(rt, shard, result)


def commit(rt, member_id, generation, offset):
    shard, result = rt.coordinator.commit_offsets(group_id="g", offsets=[("orders", 0, offset, -1, "")],
                                                  now_ms=0, api_version=8, generation_id=generation,
                                                  member_id=member_id, group_instance_id=None)
    return write(rt, shard, result)


def parts(sync_result):
    return sorted(p for _, ps in decode_assignment(sync_result.assignment) for p in ps)


def rejoin(rt, member_id, now=0):
    """A classic (eager) member told to rejoin: JoinGroup owning nothing, then SyncGroup."""
    j = join(rt, member_id, now=now)
    assert (j.error, j.protocol_type, j.protocol_name, j.leader, j.members) == (0, "consumer", "range", "", [])
    s = sync(rt, member_id, j.generation_id, now=now)
    assert s.error == 0
    return j.generation_id, parts(s)


def test_a_consumer_member_upgrades_the_group_and_classic_members_rebalance_through_joingroup():
    rt = make()
    c = rt.hb("c", 0)
    # the classic members became members at the generation's epoch; the new one bumped it
    g = rt.group
    assert (c.error, c.member_epoch, c.assignment) == (0, 4, {})  # everything is still owned by a and b
    assert {m: (x.member_epoch, x.uses_classic) for m, x in g.members.items()} == \
        {"a": (3, True), "b": (3, True), "c": (4, False)}
    assert g.members["a"].classic.session_timeout_ms == 10000 and g.members["a"].rebalance_timeout_ms == 20000
    assert rt.coordinator.group("g") is None  # the classic group is gone (its tombstone)
    assert rt.logs[0][1] == (R.group_key("g"), None)
    # the classic members learn of the rebalance by their heartbeat
    assert heartbeat(rt, "a", 3) == E.REBALANCE_IN_PROGRESS
    assert heartbeat(rt, "a", 2) == E.ILLEGAL_GENERATION
    assert heartbeat(rt, "c", 4) == E.UNKNOWN_MEMBER_ID  # not a classic member
    assert commit(rt, "a", 3, 10) == [("orders", 0, 0)]  # its generation is its member epoch
    assert commit(rt, "a", 2, 10) == [("orders", 0, E.ILLEGAL_GENERATION)]
    ga, pa = rejoin(rt, "a")
    gb, pb = rejoin(rt, "b")
    c = rt.hb("c", 4, topics=None, owned=[])
    assert ga == gb == 4 and len(pa) + len(pb) + len(c.assignment.get(ORDERS, ())) == 4
    assert sorted(pa + pb + sorted(c.assignment[ORDERS])) == [0, 1, 2, 3]
    assert heartbeat(rt, "a", 4) == 0 and rt.group.state.value == "Stable"
    # a restart: the same records build the same group, classic members included
    again = Runtime(logs=rt.logs).group
    assert {m: (x.member_epoch, x.assigned, x.classic) for m, x in again.members.items()} == \
        {m: (x.member_epoch, x.assigned, x.classic) for m, x in rt.group.members.items()}
    assert Runtime(logs=rt.logs).coordinator.group("g").offsets[("orders", 0)].offset == 10


def test_the_last_consumer_member_leaving_downgrades_the_group_to_classic():
    rt = make()
    rt.hb("c", 0)
    rejoin(rt, "a")
    rejoin(rt, "b")
    rt.hb("c", 4, topics=None, owned=[])
    epoch = rt.group.group_epoch
    targets = {m: sorted(rt.group.target[m].get(ORDERS, ())) for m in "ab"}
    assert sorted(targets["a"] + targets["b"]) != [0, 1, 2, 3]  # c has its share
    r = rt.hb("c", -1, topics=None, owned=None)
    assert (r.error, r.member_epoch) == (0, -1)
    assert rt.group is None
    cg = rt.coordinator.group("g")
    assert cg.state == GroupState.PREPARING_REBALANCE and set(cg.members) == {"a", "b"}
    assert (cg.generation, cg.protocol_type, cg.protocol_name) == (epoch, "consumer", "range")
    # the members rejoin the classic way
    assert heartbeat(rt, "a", epoch) == E.REBALANCE_IN_PROGRESS
    # the records: the consumer group's tombstones, then the classic group with the target assignment
    k, v = rt.logs[0][-1]
    assert k == R.group_key("g")
    # 3 members x (current assignment, target, subscription) + target epoch, partition metadata, group epoch
    assert [v for _, v in rt.logs[0][-13:-1]] == [None] * 12 and rt.logs[0][-14][1] is not None
    _, loaded = R.decode_record(k, v)
    assert {m.member_id: sorted(p for _, ps in decode_assignment(m.assignment) for p in ps)
            for m in loaded.members} == targets
    again = Runtime(logs=rt.logs)
    assert again.group is None and set(again.coordinator.group("g").members) == {"a", "b"}


def test_refusals_follow_the_migration_policy_and_the_sizes():
    for policy in ("disabled", "downgrade"):
        rt = make(Config(num_partitions=1, consumer_migration_policy=policy))
        r = rt.hb("c", 0)
        assert (r.error, r.message) == (E.GROUP_ID_NOT_FOUND, "Group g is not a consumer group.")
        assert rt.group is None and set(rt.coordinator.group("g").members) == {"a", "b"}
    rt = make(Config(num_partitions=1, consumer_max_size=1))  # 2 classic members > 1
    assert rt.hb("c", 0).error == E.GROUP_ID_NOT_FOUND
    rt = make(Config(num_partitions=1, consumer_max_size=2))  # converted, but full for a third member
    assert rt.hb("c", 0).error == E.GROUP_MAX_SIZE_REACHED and rt.group is None
    rt = make(protocol_type="connect")  # not the consumer embedded protocol
    assert rt.hb("c", 0).error == E.GROUP_ID_NOT_FOUND
    # no downgrade: the policy, or a classic group too small for the remaining members
    for cfg in (Config(num_partitions=1, consumer_migration_policy="upgrade"), Config(num_partitions=1, max_size=1)):
        rt = make(cfg)
        rt.hb("c", 0)
        rt.hb("c", -1, topics=None, owned=None)
        assert set(rt.group.members) == {"a", "b"} and rt.coordinator.group("g") is None


def test_classic_joins_need_a_common_protocol_and_timers_fence_classic_members():
    rt = make()
    rt.hb("c", 0)
    assert join(rt, "x", protocols=[("roundrobin", sub())]).error == E.INCONSISTENT_GROUP_PROTOCOL
    r = join(rt, "")
    assert r.error == E.MEMBER_ID_REQUIRED and r.member_id
    d = join(rt, r.member_id, protocols=[("roundrobin", sub()), ("range", sub())])  # a new classic member
    assert d.error == 0 and d.protocol_name == "roundrobin" and rt.group.members[r.member_id].uses_classic
    assert sync(rt, r.member_id, d.generation_id + 1).error == E.ILLEGAL_GENERATION
    # told to rejoin at 1 s, a does not within its rebalance timeout (20 s): fenced; so is the new member,
    # which joined at 0 and never synced; b, told at 5 s, is still in time
    assert heartbeat(rt, "a", 3, now=1000) == E.REBALANCE_IN_PROGRESS
    for now in (5000, 9000, 13000, 17000):
        assert heartbeat(rt, "b", 3, now=now) == E.REBALANCE_IN_PROGRESS
        rt.hb("c", rt.group.members["c"].member_epoch, now=now, topics=None, owned=None)
    rt.poll(21001)
    assert set(rt.group.members) == {"b", "c"}
    # a classic member leaving: the group epoch moves, it stays a consumer group
    epoch = rt.group.group_epoch
    shard, result = rt.coordinator.leave_group(group_id="g", members=[("b", None), ("c", None)], now_ms=30000)
    assert write(rt, shard, result) == (0, [("b", None, 0), ("c", None, E.UNKNOWN_MEMBER_ID)])
    assert set(rt.group.members) == {"c"} and rt.group.group_epoch == epoch + 1


def test_a_classic_static_member_replacing_the_last_consumer_one_downgrades_with_its_assignment():
    rt = make()
    rt.hb("c", 0, instance_id="i1")
    rejoin(rt, "a")
    rejoin(rt, "b")
    rt.hb("c", 4, topics=None, owned=[], instance_id="i1")
    target_c = sorted(rt.group.target["c"][ORDERS])
    epoch = rt.group.group_epoch
    # the same instance restarts as a classic consumer: it takes c's place, and the group is classic again
    j = join(rt, "k", instance_id="i1")
    assert j.error == 0 and rt.group is None
    cg = rt.coordinator.group("g")
    assert cg.state == GroupState.STABLE and set(cg.members) == {"a", "b", "k"} and cg.generation == epoch
    assert cg.static_members == {"i1": "k"}
    assert sorted(p for _, ps in decode_assignment(cg.members["k"].assignment) for p in ps) == target_c
    s = sync(rt, "k", cg.generation)
    assert s.error == 0 and parts(s) == target_c
    again = Runtime(logs=rt.logs)
    assert again.group is None and set(again.coordinator.group("g").members) == {"a", "b", "k"}


def test_a_cooperative_classic_member_revokes_before_the_consumer_member_gets_its_partition():
    """Members that report what they own (subscription v1+, as the cooperative assignors do) keep it while
    they revoke: UNREVOKED_PARTITIONS at their old generation, told to rejoin until they let go."""
    def coop(owned):  # as a consumer with both assignors; the first is the one its answers name
        return [("cooperative-sticky", sub(owned=owned)), ("range", sub(owned=owned))]
    rt = make()
    rt.hb("c", 0)
    g = rt.group
    giver = next(m for m in ("a", "b") if g.target[m][ORDERS] != g.members[m].assigned[ORDERS])
    keeper = "b" if giver == "a" else "a"
    owned = {m: sorted(g.members[m].assigned[ORDERS]) for m in ("a", "b")}
    kept = sorted(g.target[giver][ORDERS])
    j = join(rt, giver, protocols=coop(owned[giver]))
    assert (j.error, j.generation_id) == (0, 3)  # still at its epoch: it must revoke first
    assert rt.group.members[giver].state.name == "UNREVOKED_PARTITIONS"
    s = sync(rt, giver, 3)
    assert s.error == E.INCONSISTENT_GROUP_PROTOCOL  # SyncGroup names the protocol its JoinGroup was given
    shard, result = rt.coordinator.sync_group(group_id="g", generation_id=3, member_id=giver, group_instance_id=None,
                                              protocol_type="consumer", protocol_name="cooperative-sticky",
                                              assignments={}, now_ms=0)
    assert parts(write(rt, shard, result)) == kept
    assert heartbeat(rt, giver, 3) == E.REBALANCE_IN_PROGRESS
    assert not (rt.hb("c", 4, topics=None, owned=[]).assignment or {}).get(ORDERS)  # not yet: still owned
    j = join(rt, keeper, protocols=coop(owned[keeper]))
    assert (j.error, j.generation_id) == (0, 4)  # nothing to give up
    j = join(rt, giver, protocols=coop(kept))
    assert (j.error, j.generation_id) == (0, 4) and rt.group.members[giver].state.name == "STABLE"
    freed = set(owned[giver]) - set(kept)
    assert rt.hb("c", 4, topics=None, owned=[]).assignment[ORDERS] == frozenset(freed)


def test_members_waiting_in_a_classic_rebalance_are_told_to_rejoin_when_the_group_upgrades():
    rt = make()
    shard, result = rt.coordinator.join_group(
        group_id="g", member_id="a", group_instance_id=None, protocol_type="consumer", protocols=[("range", sub())],
        session_timeout_ms=10000, rebalance_timeout_ms=20000, client_id="ca", client_host="/h",
        require_known_member_id=True, now_ms=0, topics=rt.topics.get)
    token = write(rt, shard, result)  # the leader rejoins: a rebalance, its JoinGroup waits for b
    assert rt.coordinator.group("g").state == GroupState.PREPARING_REBALANCE
    rt.coordinator.drain_completions()
    assert rt.hb("c", 0).error == 0 and rt.group is not None
    done = dict(rt.coordinator.drain_completions())
    assert done[token].error == E.REBALANCE_IN_PROGRESS
    # it rejoins: now a classic member of the consumer group
    assert join(rt, "a").error == 0 and rt.group.members["a"].uses_classic
