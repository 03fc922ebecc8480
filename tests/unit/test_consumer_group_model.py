"""KIP-848's model without sockets: the assignors, the reconciliation of one member (KIP-848's rules), and
whole heartbeats on a coordinator whose records are replayed -- live and, after a "restart", from the log.
Cases and data are our own."""
from __future__ import annotations

import uuid

import pytest

from kafkite.coordinator import consumer_group_records as CR
from kafkite.coordinator.assignors import normalize, range_assign, uniform_assign
from kafkite.coordinator.consumer_group import ConsumerGroupMember, MemberState
from kafkite.coordinator.consumer_group_manager import HeartbeatRequest
from kafkite.coordinator.consumer_group_records import TopicMetadata
from kafkite.coordinator.coordinator import Config, GroupCoordinator
from kafkite.coordinator.reconciliation import FencedMemberEpoch, next_state
from kafkite.coordinator.result import finish_write, start_write
from kafkite.wire.errors import E

ORDERS, PAYMENTS = uuid.UUID(int=0xA1), uuid.UUID(int=0xB2)


def fz(d):
    return {t: frozenset(ps) for t, ps in d.items()}


def counts(assignment):
    return sorted(sum(len(ps) for ps in a.values()) for a in assignment.values())


# -- assignors -------------------------------------------------------------------------------------------
def test_uniform_spreads_evenly_and_covers_every_partition_once():
    subs = {m: frozenset({ORDERS, PAYMENTS}) for m in ("m-a", "m-b", "m-c")}
    out = uniform_assign(subs, {ORDERS: 7, PAYMENTS: 4})
    assert counts(out) == [3, 4, 4]
    every = [(t, p) for a in out.values() for t, ps in a.items() for p in ps]
    assert sorted(every) == sorted([(ORDERS, p) for p in range(7)] + [(PAYMENTS, p) for p in range(4)])


def test_uniform_is_sticky_when_a_member_joins():
    subs = {"m-a": frozenset({ORDERS}), "m-b": frozenset({ORDERS})}
    before = uniform_assign(subs, {ORDERS: 6})
    after = uniform_assign({**subs, "m-c": frozenset({ORDERS})}, {ORDERS: 6}, before)
    assert counts(after) == [2, 2, 2]
    # the old members only lose partitions; each keeps two of its three
    for m in ("m-a", "m-b"):
        assert after[m][ORDERS] < before[m][ORDERS] and len(after[m][ORDERS]) == 2


def test_uniform_moves_only_what_a_new_member_needs_at_scale():
    topics = [uuid.UUID(int=i + 1) for i in range(20)]
    subs = {f"m{i:02d}": frozenset(topics) for i in range(10)}
    before = uniform_assign(subs, {t: 100 for t in topics})
    after = uniform_assign({**subs, "m10": frozenset(topics)}, {t: 100 for t in topics}, before)
    assert counts(after) == [181] * 2 + [182] * 9
    moved = sum(len(before[m][t] - after[m].get(t, frozenset())) for m in before for t in before[m])
    assert moved == sum(len(ps) for ps in after["m10"].values()) == 181


def test_uniform_with_different_subscriptions_gives_a_topic_only_to_its_subscribers():
    subs = {"m-a": frozenset({ORDERS}), "m-b": frozenset({ORDERS, PAYMENTS}), "m-c": frozenset({PAYMENTS})}
    out = uniform_assign(subs, {ORDERS: 2, PAYMENTS: 4})
    assert PAYMENTS not in out["m-a"] and ORDERS not in out["m-c"]
    assert counts(out) == [2, 2, 2]


def test_uniform_drops_partitions_of_a_shrunk_or_unsubscribed_topic():
    prev = {"m-a": fz({ORDERS: {0, 1, 2, 3}, PAYMENTS: {0}})}
    out = uniform_assign({"m-a": frozenset({ORDERS})}, {ORDERS: 2, PAYMENTS: 1}, prev)
    assert out == {"m-a": fz({ORDERS: {0, 1}})}


def test_range_gives_consecutive_ranges_and_copartitions():
    subs = {m: frozenset({ORDERS, PAYMENTS}) for m in ("m-c", "m-a", "m-b")}
    out = range_assign(subs, {ORDERS: 7, PAYMENTS: 7})
    assert out["m-a"] == fz({ORDERS: {0, 1, 2}, PAYMENTS: {0, 1, 2}})
    assert out["m-b"] == fz({ORDERS: {3, 4}, PAYMENTS: {3, 4}})
    assert out["m-c"] == fz({ORDERS: {5, 6}, PAYMENTS: {5, 6}})


def test_range_with_more_members_than_partitions_leaves_the_last_ones_empty():
    out = range_assign({m: frozenset({ORDERS}) for m in ("a", "b", "c")}, {ORDERS: 2})
    assert out == {"a": fz({ORDERS: {0}}), "b": fz({ORDERS: {1}}), "c": {}}


def test_assignor_names_accept_kafkas_class_names():
    assert normalize(["org.apache.kafka.coordinator.group.assignor.RangeAssignor", "uniform"]) == ["range",
                                                                                                  "uniform"]
    with pytest.raises(ValueError):
        normalize(["sticky"])


# -- reconciliation ---------------------------------------------------------------------------------------
def member(epoch, assigned, state=MemberState.STABLE, pending=None):
    return ConsumerGroupMember("m", member_epoch=epoch, previous_member_epoch=epoch - 1, state=state,
                               assigned=fz(assigned), pending_revocation=fz(pending or {}))


def free(t, p):
    return -1


def test_a_member_with_only_new_partitions_gets_them_and_the_new_epoch():
    m = next_state(member(3, {ORDERS: {0}}), 4, fz({ORDERS: {0, 1}}), free, [(ORDERS, [0])])
    assert (m.state, m.member_epoch, m.previous_member_epoch, m.assigned) == (
        MemberState.STABLE, 4, 3, fz({ORDERS: {0, 1}}))


def test_a_member_that_must_give_up_a_partition_stays_at_its_epoch_until_it_did():
    m = next_state(member(3, {ORDERS: {0, 1}}), 4, fz({ORDERS: {1, 2}}), free, [(ORDERS, [0, 1])])
    assert (m.state, m.member_epoch, m.assigned, m.pending_revocation) == (
        MemberState.UNREVOKED_PARTITIONS, 3, fz({ORDERS: {1}}), fz({ORDERS: {0}}))
    # still reporting partition 0: nothing changes
    assert next_state(m, 4, fz({ORDERS: {1, 2}}), free, [(ORDERS, [0, 1])]) is m
    # not reporting it at all (the field left out): it may still own it
    assert next_state(m, 4, fz({ORDERS: {1, 2}}), free, None) is m
    # revoked: the next epoch, and partition 2 with it
    m2 = next_state(m, 4, fz({ORDERS: {1, 2}}), free, [(ORDERS, [1])])
    assert (m2.state, m2.member_epoch, m2.assigned, m2.pending_revocation) == (
        MemberState.STABLE, 4, fz({ORDERS: {1, 2}}), {})


def test_a_partition_another_member_still_owns_is_not_given_yet():
    owned_by_other = {(ORDERS, 2): 3}
    m = next_state(member(3, {ORDERS: {1}}), 4, fz({ORDERS: {1, 2}}),
                   lambda t, p: owned_by_other.get((t, p), -1), [(ORDERS, [1])])
    assert (m.state, m.member_epoch, m.assigned) == (MemberState.UNRELEASED_PARTITIONS, 4, fz({ORDERS: {1}}))
    # released later: the member gets it on its next heartbeat
    m2 = next_state(m, 4, fz({ORDERS: {1, 2}}), free, [(ORDERS, [1])])
    assert (m2.state, m2.assigned) == (MemberState.STABLE, fz({ORDERS: {1, 2}}))


def test_revocation_of_partitions_the_member_no_longer_reports_is_immediate():
    m = next_state(member(3, {ORDERS: {0, 1}}), 4, fz({ORDERS: {1}}), free, [(ORDERS, [1])])
    assert (m.state, m.member_epoch, m.assigned) == (MemberState.STABLE, 4, fz({ORDERS: {1}}))


def test_an_unknown_state_fences_a_member_that_owns_partitions():
    with pytest.raises(FencedMemberEpoch):
        next_state(member(3, {ORDERS: {0}}, MemberState.UNKNOWN), 4, fz({ORDERS: {0}}), free, [(ORDERS, [0])])


# -- heartbeats on the coordinator, records replayed --------------------------------------------------------
class Topics:
    """A TopicsImage whose version moves when the set of names does."""

    def __init__(self, *tms):
        self.topics, self.version = {tm.name: tm for tm in tms}, 1

    def __call__(self, name):
        return self.topics.get(name)

    def names(self):
        return list(self.topics)

    def add(self, tm):
        self.topics[tm.name] = tm
        self.version += 1

    def delete(self, name):
        del self.topics[name]
        self.version += 1


class Runtime:
    """The runtime's steps without Trio: a log per partition, every write durable at once."""

    def __init__(self, cfg=None, logs=None):
        self.coordinator = GroupCoordinator(cfg or Config(num_partitions=1))
        self.logs = logs if logs is not None else {0: []}
        self.coordinator.begin_loading(0, 0)
        for offset, (k, v) in enumerate(self.logs[0]):
            self.coordinator.loading[0].replay(k, v, offset)
        self.coordinator.finish_loading(0, 0)
        self.topics = {"orders": TopicMetadata(ORDERS, "orders", 6)}

    def hb(self, member_id, epoch, now=0, topics=("orders",), owned=(), **kw):
        req = HeartbeatRequest(group_id="g", member_id=member_id, member_epoch=epoch,
                               rebalance_timeout_ms=kw.pop("rebalance_timeout_ms", 1000 if epoch == 0 else -1),
                               subscribed_topic_names=list(topics) if topics is not None else None,
                               owned=None if owned is None else [(ORDERS, list(owned))] if owned else [], **kw)
        topics = self.topics if callable(self.topics) else self.topics.get  # a TopicsImage, or a plain dict
        shard, result = self.coordinator.consumer_group_heartbeat(req, topics, now)
        return finish_write(result, start_write(result, shard.replay, self.logs[0].extend) if shard else 0)

    @property
    def group(self):
        return self.coordinator.consumer_group("g")

    def poll(self, now):
        for shard, r in self.coordinator.poll(now):
            start_write(r, shard.replay, self.logs[0].extend)


def test_join_rebalance_leave_and_every_record_type_replays_to_the_same_group():
    rt = Runtime()
    a = rt.hb("a", 0)
    assert (a.error, a.member_epoch, sorted(a.assignment[ORDERS])) == (0, 1, list(range(6)))
    b = rt.hb("b", 0)
    assert (b.member_epoch, b.assignment) == (2, {})
    a = rt.hb("a", 1, topics=None, owned=range(6))
    assert a.member_epoch == 1 and len(a.assignment[ORDERS]) == 3
    a = rt.hb("a", 1, topics=None, owned=sorted(a.assignment[ORDERS]))
    b = rt.hb("b", 2, topics=None, owned=[])
    assert len(b.assignment[ORDERS]) == 3 and rt.group.state.value == "Stable"
    versions = {int.from_bytes(k[:2], "big") for k, _ in rt.logs[0]}
    assert versions == {3, 4, 5, 6, 7, 8}
    # a restart: the same records build the same group
    again = Runtime(logs=rt.logs)
    g1, g2 = rt.group, again.group
    assert (g2.group_epoch, g2.assignment_epoch, g2.target, g2.subscription_metadata) == (
        g1.group_epoch, g1.assignment_epoch, g1.target, g1.subscription_metadata)
    assert {m: (x.member_epoch, x.state, x.assigned, x.subscribed_topic_names) for m, x in g2.members.items()} == \
        {m: (x.member_epoch, x.state, x.assigned, x.subscribed_topic_names) for m, x in g1.members.items()}
    # b leaves: tombstones remove it, in the live group and in a replayed one
    r = rt.hb("b", -1, topics=None, owned=None)
    assert (r.error, r.member_epoch) == (0, -1) and set(rt.group.members) == {"a"}
    assert [v for k, v in rt.logs[0][-4:-1]] == [None, None, None]
    assert set(Runtime(logs=rt.logs).group.members) == {"a"}


def test_a_member_one_epoch_behind_with_a_subset_is_accepted_else_fenced():
    rt = Runtime()
    rt.hb("a", 0)
    rt.topics["orders"] = TopicMetadata(ORDERS, "orders", 8)  # more partitions: a new group epoch
    r = rt.hb("a", 1, topics=None, owned=range(6))
    assert r.member_epoch == 2 and len(r.assignment[ORDERS]) == 8
    # its answer was lost: it comes back with epoch 1 and what it owned then -- accepted
    assert rt.hb("a", 1, topics=None, owned=range(6)).error == 0
    # with a partition it never had at epoch 1 and is not assigned now either: fenced
    r = rt.hb("a", 1, topics=None, owned=[9])
    assert r.error == E.FENCED_MEMBER_EPOCH


def test_session_timeout_and_rebalance_timeout_fence_members():
    rt = Runtime(Config(num_partitions=1, consumer_session_timeout_ms=45000))
    rt.hb("a", 0, now=0)
    rt.hb("b", 0, now=0)
    rt.hb("a", 1, now=1000, topics=None, owned=range(6))  # asked to revoke 3, rebalance timeout 1000 ms
    assert rt.group.members["a"].state == MemberState.UNREVOKED_PARTITIONS
    rt.poll(2001)  # a never revoked: fenced, its partitions free for b
    assert set(rt.group.members) == {"b"}
    assert rt.hb("a", 1, now=2100, topics=None, owned=range(6)).error == E.UNKNOWN_MEMBER_ID
    rt.hb("b", 2, now=2100, topics=None, owned=[])
    rt.poll(2100 + 45000)  # b's session ends
    assert rt.group.members == {} and rt.group.state.value == "Empty"


def test_offsets_of_a_consumer_group_with_members_do_not_expire():
    week = 7 * 24 * 3600 * 1000
    rt = Runtime(Config(num_partitions=1, offsets_retention_ms=week))
    a = rt.hb("a", 0)
    shard, result = rt.coordinator.commit_offsets(group_id="g", offsets=[("orders", 0, 5, -1, "")], now_ms=0,
                                                  generation_id=a.member_epoch, member_id="a",
                                                  group_instance_id=None, api_version=9)
    assert finish_write(result, start_write(result, shard.replay, rt.logs[0].extend)) == [("orders", 0, 0)]
    rt.coordinator.shards[0].next_expiry_check = 0
    rt.poll(2 * week)  # no commit for two weeks, but the group has a member
    err, rows = rt.coordinator.fetch_offsets(group_id="g", partitions=[("orders", 0)])
    assert rows[0][2].offset == 5
    rt.hb("a", -1, now=2 * week, topics=None, owned=None)
    rt.coordinator.shards[0].next_expiry_check = 0
    rt.poll(2 * week + 1)  # empty now: they expire as a simple group's do
    err, rows = rt.coordinator.fetch_offsets(group_id="g", partitions=[("orders", 0)])
    assert rows[0][2] is None


@pytest.mark.parametrize("static,message", [
    ({"group.consumer.session.timeout.ms": "30000"},
     "group.consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"),
    ({"group.consumer.session.timeout.ms": "70000"},
     "group.consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
    ({"group.consumer.heartbeat.interval.ms": "20000"},
     "group.consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms"),
    ({"group.consumer.min.session.timeout.ms": "1000", "group.consumer.session.timeout.ms": "4000"},
     "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms"),
    ({"group.consumer.max.size": "0"}, "Invalid value 0 for configuration group.consumer.max.size: "
                                       "Value must be at least 1"),
    ({"group.consumer.assignors": "uniform,sticky"}, "Invalid value sticky for configuration "
                                                     "group.consumer.assignors: the consumer group assignors are "
                                                     "uniform and range"),
])
def test_group_consumer_config_bounds_as_kafka_checks_them(static, message):
    from kafkite.config import BrokerConfig, ConfigError
    with pytest.raises(ConfigError) as exc:
        BrokerConfig(static=static)
    assert str(exc.value) == message


def test_group_consumer_configs_reach_the_coordinator():
    from kafkite.config import BrokerConfig
    cfg = BrokerConfig(static={"group.consumer.session.timeout.ms": "50000", "group.consumer.max.size": "3",
                               "group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor",
                               "group.coordinator.rebalance.protocols": "classic"})
    keys = ["group.min.session.timeout.ms", "group.max.session.timeout.ms", "group.initial.rebalance.delay.ms",
            "group.max.size", "offsets.retention.minutes", "offsets.retention.check.interval.ms",
            "offset.metadata.max.bytes", "offsets.topic.num.partitions", "group.coordinator.rebalance.protocols",
            "group.consumer.session.timeout.ms", "group.consumer.heartbeat.interval.ms", "group.consumer.max.size",
            "group.consumer.assignors"]
    c = Config.from_kafka({k: cfg.get(k) for k in keys})
    assert (c.consumer_session_timeout_ms, c.consumer_max_size, c.consumer_assignors, c.consumer_enabled) == (
        50000, 3, ["range"], False)


def test_members_fenced_in_one_poll_are_removed_in_one_write_with_one_new_epoch():
    rt = Runtime(Config(num_partitions=1, consumer_session_timeout_ms=45000))
    rt.hb("a", 0, now=0)
    rt.hb("b", 0, now=0)
    rt.hb("c", 0, now=10000)
    epoch = rt.group.group_epoch
    n = len(rt.logs[0])
    rt.poll(45000)  # a and b expire together
    assert set(rt.group.members) == {"c"} and rt.group.group_epoch == epoch + 1
    new = rt.logs[0][n:]
    assert sum(1 for k, v in new if int.from_bytes(k[:2], "big") == CR.GROUP_METADATA) == 1
    assert sum(1 for k, v in new if v is None) == 6


def test_a_join_whose_write_fails_leaves_nothing_behind():
    rt = Runtime()
    req = HeartbeatRequest(group_id="g", member_id="a", member_epoch=0, rebalance_timeout_ms=1000,
                           subscribed_topic_names=["orders"], owned=[])
    shard, result = rt.coordinator.consumer_group_heartbeat(req, rt.topics.get, 0)
    r = finish_write(result, start_write(result, shard.replay, lambda records: int(E.NOT_LEADER_OR_FOLLOWER)))
    assert r.error == E.NOT_COORDINATOR and rt.group is None and rt.logs[0] == []
    assert rt.coordinator.next_deadline_ms() == rt.coordinator.shards[0].next_expiry_check
