"""Rack-aware assignment of KIP-848 consumer groups (KIP-881's rules on the server assignors): a member's rack is
the RackId of its heartbeat, a partition's racks those of its replicas' brokers; balance first, then racks, then
stickiness; without racks, or when every partition is on the same racks, the racks change nothing. Cases and data
are our own."""
from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkite.coordinator import consumer_group_records as CR
from kafkite.coordinator.assignors import Racks, range_assign, uniform_assign
from kafkite.coordinator.consumer_group_records import TopicMetadata

from test_consumer_group_model import Runtime, counts

ORDERS, PAYMENTS = uuid.UUID(int=0xA1), uuid.UUID(int=0xB2)
# member ids sort m1 < m2 < m3, their racks do not: without racks m1 would get the rack-a partitions
MEMBER_RACKS = {"m1": "c", "m2": "a", "m3": "b"}


def on_racks(n, racks="abc"):
    """n partitions, partition p with its one replica on rack racks[p % len(racks)]."""
    return [frozenset({racks[p % len(racks)]}) for p in range(n)]


def matched(assignment, racks: Racks) -> int:
    return sum(1 for m, a in assignment.items() for t, ps in a.items() for p in ps
               if racks.members.get(m) in racks.of(t, p))


def test_uniform_gives_each_member_the_partitions_of_its_rack():
    subs = {m: frozenset({ORDERS}) for m in MEMBER_RACKS}
    racks = Racks(MEMBER_RACKS, {ORDERS: on_racks(6)})
    out = uniform_assign(subs, {ORDERS: 6}, None, racks)
    assert {m: sorted(a[ORDERS]) for m, a in out.items()} == {"m1": [2, 5], "m2": [0, 3], "m3": [1, 4]}
    # the same group without racks: member-id order, two of six partitions on their member's rack
    plain = uniform_assign(subs, {ORDERS: 6})
    assert {m: sorted(a[ORDERS]) for m, a in plain.items()} == {"m1": [0, 3], "m2": [1, 4], "m3": [2, 5]}
    assert (matched(out, racks), matched(plain, racks)) == (6, 0)


def test_balance_comes_before_racks():
    """Five of six partitions on rack a: the member of rack a still gets only three, and the member of rack b the
    one partition of its rack."""
    subs = {"m1": frozenset({ORDERS}), "m2": frozenset({ORDERS})}
    racks = Racks({"m1": "a", "m2": "b"}, {ORDERS: [frozenset({"a"})] * 5 + [frozenset({"b"})]})
    for assign in (uniform_assign, range_assign):
        out = assign(subs, {ORDERS: 6}, None, racks)
        assert counts(out) == [3, 3] and 5 in out["m2"][ORDERS] and out["m1"][ORDERS] <= {0, 1, 2, 3, 4}


def test_a_member_that_joins_takes_the_partitions_of_its_rack_and_only_what_it_needs():
    racks = Racks(MEMBER_RACKS, {ORDERS: on_racks(6)})
    two = {m: frozenset({ORDERS}) for m in ("m1", "m2")}
    before = uniform_assign(two, {ORDERS: 6}, None, racks)
    assert {m: sorted(a[ORDERS]) for m, a in before.items()} == {"m1": [1, 2, 5], "m2": [0, 3, 4]}
    after = uniform_assign({**two, "m3": frozenset({ORDERS})}, {ORDERS: 6}, before, racks)
    assert {m: sorted(a[ORDERS]) for m, a in after.items()} == {"m1": [2, 5], "m2": [0, 3], "m3": [1, 4]}


def test_a_member_keeps_a_partition_of_another_rack_when_no_member_is_on_that_rack():
    racks = Racks({"m1": "a", "m2": "b"}, {ORDERS: [frozenset({"a"}), frozenset({"b"}), frozenset({"z"}),
                                                    frozenset({"z"})]})
    subs = {"m1": frozenset({ORDERS}), "m2": frozenset({ORDERS})}
    current = {"m1": {ORDERS: frozenset({0, 3})}, "m2": {ORDERS: frozenset({1, 2})}}
    assert uniform_assign(subs, {ORDERS: 4}, current, racks) == current


def test_racks_that_cannot_help_change_nothing():
    """Every partition on every rack (replicas on all three), members without racks, or racks that no partition
    is on: the assignment is the one without racks."""
    subs = {m: frozenset({ORDERS, PAYMENTS}) for m in MEMBER_RACKS}
    parts = {ORDERS: 7, PAYMENTS: 4}
    plain = uniform_assign(subs, parts), range_assign(subs, parts)
    everywhere = {t: [frozenset("abc")] * n for t, n in parts.items()}
    for racks in (Racks(MEMBER_RACKS, everywhere), Racks({}, {t: on_racks(n) for t, n in parts.items()}),
                  Racks({"m1": "x", "m2": "y"}, {t: on_racks(n) for t, n in parts.items()})):
        assert (uniform_assign(subs, parts, None, racks), range_assign(subs, parts, None, racks)) == plain


def test_range_follows_racks_within_each_members_range_quota():
    subs = {m: frozenset({ORDERS}) for m in MEMBER_RACKS}
    out = range_assign(subs, {ORDERS: 7}, None, Racks(MEMBER_RACKS, {ORDERS: on_racks(7)}))
    # quotas: 2 each, one member 3; in member-id order each takes the partitions of its rack first: m1 (rack c)
    # has two, m2 (rack a) three and with them the extra one, m3 (rack b) two
    assert {m: sorted(a[ORDERS]) for m, a in out.items()} == {"m1": [2, 5], "m2": [0, 3, 6], "m3": [1, 4]}
    plain = range_assign(subs, {ORDERS: 7})
    assert {m: sorted(a[ORDERS]) for m, a in plain.items()} == {"m1": [0, 1, 2], "m2": [3, 4], "m3": [5, 6]}


def test_range_keeps_topics_co_partitioned_with_racks():
    subs = {m: frozenset({ORDERS, PAYMENTS}) for m in MEMBER_RACKS}
    racks = Racks(MEMBER_RACKS, {ORDERS: on_racks(6), PAYMENTS: on_racks(6)})
    out = range_assign(subs, {ORDERS: 6, PAYMENTS: 6}, None, racks)
    assert {m: (sorted(a[ORDERS]), sorted(a[PAYMENTS])) for m, a in out.items()} == {
        "m1": ([2, 5], [2, 5]), "m2": ([0, 3], [0, 3]), "m3": ([1, 4], [1, 4])}


members_st = st.dictionaries(st.sampled_from([f"m{i}" for i in range(6)]), st.sampled_from(["a", "b", "c", None]),
                             min_size=1)


@settings(max_examples=150, deadline=None)
@given(members=members_st, sizes=st.lists(st.integers(0, 9), min_size=1, max_size=3),
       replica_racks=st.lists(st.frozensets(st.sampled_from("abcd"), max_size=2), min_size=30, max_size=30),
       homogeneous=st.booleans(), data=st.data())
def test_with_any_racks_every_partition_goes_once_to_a_subscriber_and_uniform_stays_balanced(
        members, sizes, replica_racks, homogeneous, data):
    topics = [uuid.UUID(int=i + 1) for i in range(len(sizes))]
    parts = dict(zip(topics, sizes))
    subs = {m: frozenset(topics) if homogeneous else frozenset(data.draw(st.sets(st.sampled_from(topics))))
            for m in members}
    racks = Racks({m: r for m, r in members.items() if r},
                  {t: [replica_racks[(i * 10 + p) % 30] for p in range(n)] for i, (t, n) in enumerate(parts.items())})
    previous = uniform_assign(subs, parts, None, racks) if data.draw(st.booleans()) else None
    for assign in (uniform_assign, range_assign):
        out = assign(subs, parts, previous, racks)
        given_out = sorted((t, p) for a in out.values() for t, ps in a.items() for p in ps)
        wanted = sorted((t, p) for t, n in parts.items() if any(t in s for s in subs.values()) for p in range(n))
        assert given_out == wanted
        assert all(t in subs[m] for m, a in out.items() for t in a)
        if assign is uniform_assign and homogeneous:
            c = counts(out)
            assert c[-1] - c[0] <= 1
        if assign is range_assign:  # per topic the range quotas: no subscriber more than one above another
            for t in topics:
                ns = [len(out[m].get(t, ())) for m in subs if t in subs[m]]
                assert not ns or max(ns) - min(ns) <= 1


# -- the group: racks from heartbeats and from the topics' metadata ------------------------------------------
def test_heartbeats_with_rack_ids_get_partitions_of_their_racks_and_a_rack_change_rebalances():
    rt = Runtime()
    rt.topics = {"orders": TopicMetadata(ORDERS, "orders", 6, tuple(on_racks(6)))}
    r = {m: rt.hb(m, 0, rack_id=rack) for m, rack in MEMBER_RACKS.items()}
    g = rt.group
    assert {m: sorted(t[ORDERS]) for m, t in g.target.items()} == {"m1": [2, 5], "m2": [0, 3], "m3": [1, 4]}
    assert g.subscription_metadata["orders"].racks == tuple(on_racks(6))
    # a restart: the racks come back with the partition metadata, and the same metadata bumps nothing
    again = Runtime(logs=rt.logs)
    again.topics = rt.topics
    assert again.group.subscription_metadata == g.subscription_metadata
    epoch = again.group.group_epoch
    again.hb("m3", r["m3"].member_epoch, topics=None, owned=None)
    assert again.group.group_epoch == epoch
    # the replicas move (a reassignment): partitions 1 and 4 leave rack b -- a new group epoch and target; m3,
    # now on no rack of any partition, keeps its two (balance first, then stickiness)
    epoch = rt.group.group_epoch
    rt.topics = {"orders": TopicMetadata(ORDERS, "orders", 6, tuple(on_racks(6, "acc")))}
    rt.hb("m3", r["m3"].member_epoch, topics=None, owned=None)
    assert (rt.group.group_epoch, rt.group.assignment_epoch) == (epoch + 1, epoch + 1)
    assert sorted(rt.group.target["m3"][ORDERS]) == [1, 4]
    # a member of rack c joins: it gets m3's two partitions, now on rack c, and m3 one of m1's: five of six on
    # their member's rack, the most there can be with m3 on none
    rt.hb("m4", 0, rack_id="c")
    assert {m: sorted(t[ORDERS]) for m, t in rt.group.target.items()} == {
        "m1": [2], "m2": [0, 3], "m3": [5], "m4": [1, 4]}


def test_the_partition_metadata_record_carries_racks_only_when_there_are_some():
    plain = CR.partition_metadata("g", {"orders": TopicMetadata(ORDERS, "orders", 2)})
    with_racks = CR.partition_metadata("g", {"orders": TopicMetadata(ORDERS, "orders", 2,
                                                                     (frozenset({"b", "a"}), frozenset()))})
    _, _, v = CR.decode(*plain)
    assert [list(t.partition_metadata) for t in v.topics] == [[]]
    _, _, v = CR.decode(*with_racks)
    assert [(pm.partition, list(pm.racks)) for pm in v.topics[0].partition_metadata] == [(0, ["a", "b"])]
    assert CR.topic_metadata_of(v.topics[0]).racks == (frozenset({"a", "b"}), frozenset())
