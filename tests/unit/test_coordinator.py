"""The group coordinator, sans-IO: deterministic time, an in-memory __consumer_offsets."""
from __future__ import annotations

import pytest

from kafkite.coordinator import records as R
from kafkite.coordinator.coordinator import Config, GroupCoordinator, JoinResult, Pending
from kafkite.coordinator.group import Group, GroupState, IllegalStateTransition
from kafkite.coordinator.hashing import java_string_hashcode, partition_for
from kafkite.coordinator.result import finish_write, start_write
from kafkite.wire.errors import E

PROTO = [("range", b"md")]


class Runtime:
    """The coordinator runtime's steps without Trio: a list per __consumer_offsets partition for a log,
    every write durable at once (server/coordinator_runtime.py does the same with the ReplicaManager)."""

    def __init__(self, cfg, logs=None):
        self.coordinator = GroupCoordinator(cfg)
        self.cfg = self.coordinator.cfg
        self.logs = logs if logs is not None else {p: [] for p in range(cfg.num_partitions)}
        self.fail = 0  # an error code every append answers

    def load(self, p, now=0):
        shard = self.coordinator.begin_loading(p, now)
        for offset, (key, value) in enumerate(self.logs[p]):
            shard.replay(key, value, offset)
        self.coordinator.finish_loading(p, now)

    def _append(self, p):
        def append(records):
            if self.fail:
                return self.fail
            self.logs[p].extend(records)
            return 0
        return append

    def run(self, shard_and_result):
        shard, result = shard_and_result
        err = start_write(result, shard.replay, self._append(shard.partition)) if shard is not None else 0
        return finish_write(result, err)

    def __getattr__(self, name):  # the coordinator's operations, each run as the runtime runs it
        op = getattr(self.coordinator, name)
        if name in ("join_group", "sync_group", "heartbeat", "leave_group", "commit_offsets", "delete_offsets",
                    "delete_group"):
            return lambda *a, now_ms=None, **kw: self.run(
                op(*a, **kw) if name in ("delete_offsets", "delete_group") else op(*a, now_ms=now_ms, **kw))
        return op

    def fetch_offsets(self, *, group_id, partitions, now_ms=None):
        return self.coordinator.fetch_offsets(group_id=group_id, partitions=partitions)

    def poll(self, now):
        for shard, result in self.coordinator.poll(now):
            self.run((shard, result))

    @property
    def groups(self):
        return {g: grp for s in self.coordinator.shards.values() for g, grp in s.groups.items()}


def make(delay=0, n=1, **kw):
    cfg = Config(initial_rebalance_delay_ms=delay, num_partitions=n, min_session_timeout_ms=1000, **kw)
    c = Runtime(cfg)
    for p in range(n):
        c.load(p)
    return c, c


def join(c, now, member="", group="g", instance=None, protocols=PROTO, session=10000):
    r = c.join_group(group_id=group, member_id=member, group_instance_id=instance, protocol_type="consumer",
                     protocols=protocols, session_timeout_ms=session, rebalance_timeout_ms=30000, client_id="cli",
                     client_host="/h", require_known_member_id=True, now_ms=now)
    if isinstance(r, JoinResult) and r.error == E.MEMBER_ID_REQUIRED:
        return join(c, now, r.member_id, group, instance, protocols, session)
    return r


def done(c):
    return dict(c.drain_completions())


def test_java_hashcode_and_partition():
    assert java_string_hashcode("group") == 98629247
    assert java_string_hashcode("") == 0
    assert java_string_hashcode("polygenelubricants") == -2147483648  # Integer.MIN_VALUE
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) = 0
    assert partition_for("group", 50) == 98629247 % 50


def test_state_table_rejects_illegal_transitions():
    g = Group("x")
    with pytest.raises(IllegalStateTransition):
        g.transition(GroupState.STABLE, 0)


def test_single_member_join_sync():
    c, store = make()
    tok = join(c, 0)
    assert isinstance(tok, Pending)
    res = done(c)[tok]
    assert res.error == 0 and res.generation_id == 1 and res.leader == res.member_id
    s = c.sync_group(group_id="g", generation_id=1, member_id=res.member_id, group_instance_id=None,
                     protocol_type="consumer", protocol_name="range", assignments={res.member_id: b"A"}, now_ms=1)
    assert isinstance(s, Pending) and done(c)[s].assignment == b"A"
    assert c.groups["g"].state == GroupState.STABLE
    keys = [R.decode_key(k) for k, _ in store.logs[c.partition_of("g")]]
    assert R.GroupKey("g") in keys  # group metadata persisted


def test_initial_rebalance_delay_gathers_members():
    c, _ = make(delay=3000)
    t1 = join(c, 0)
    t2 = join(c, 1000)
    assert not done(c)
    c.poll(2999)
    assert not done(c)  # extended by the second join
    c.poll(4000)
    res = done(c)
    assert {res[t1].generation_id, res[t2].generation_id} == {1}
    assert len(res[t1].members) + len(res[t2].members) == 2  # only the leader gets the member list


def test_leave_triggers_rebalance_and_generation_bump():
    c, _ = make()
    t1 = join(c, 0)
    r1 = done(c)[t1]
    c.sync_group(group_id="g", generation_id=1, member_id=r1.member_id, group_instance_id=None, protocol_type=None,
                 protocol_name=None, assignments={}, now_ms=0)
    done(c)
    t2 = join(c, 10)  # second member: rebalance, member 1 must rejoin
    assert c.heartbeat(group_id="g", generation_id=1, member_id=r1.member_id, group_instance_id=None,
                       now_ms=20) == E.REBALANCE_IN_PROGRESS
    t1b = join(c, 30, member=r1.member_id)
    res = done(c)
    assert res[t1b].generation_id == res[t2].generation_id == 2
    err, out = c.leave_group(group_id="g", members=[(res[t2].member_id, None)], now_ms=40)
    assert out[0][2] == 0
    assert c.groups["g"].state == GroupState.PREPARING_REBALANCE
    t1c = join(c, 50, member=r1.member_id)
    assert done(c)[t1c].generation_id == 3


def test_crashed_member_expires_after_session_timeout():
    c, _ = make()
    t1 = join(c, 0, session=5000)
    r1 = done(c)[t1]
    c.sync_group(group_id="g", generation_id=1, member_id=r1.member_id, group_instance_id=None, protocol_type=None,
                 protocol_name=None, assignments={}, now_ms=0)
    c.poll(4999)
    assert r1.member_id in c.groups["g"].members
    assert c.next_deadline_ms() == 5000
    c.poll(5000)
    assert not c.groups["g"].members and c.groups["g"].state == GroupState.EMPTY


def test_errors_unknown_member_illegal_generation_session_timeout():
    c, _ = make()
    assert c.heartbeat(group_id="g", generation_id=1, member_id="x", group_instance_id=None,
                       now_ms=0) == E.UNKNOWN_MEMBER_ID
    r = c.join_group(group_id="g", member_id="", group_instance_id=None, protocol_type="consumer", protocols=PROTO,
                     session_timeout_ms=10, rebalance_timeout_ms=100, client_id="c", client_host="h",
                     require_known_member_id=True, now_ms=0)
    assert r.error == E.INVALID_SESSION_TIMEOUT
    r = c.join_group(group_id="", member_id="", group_instance_id=None, protocol_type="consumer", protocols=PROTO,
                     session_timeout_ms=10000, rebalance_timeout_ms=100, client_id="c", client_host="h",
                     require_known_member_id=True, now_ms=0)
    assert r.error == E.INVALID_GROUP_ID
    t = join(c, 0)
    m = done(c)[t].member_id
    assert c.heartbeat(group_id="g", generation_id=7, member_id=m, group_instance_id=None,
                       now_ms=1) == E.ILLEGAL_GENERATION


def test_protocol_selection_and_inconsistency():
    c, _ = make(delay=100)
    t1 = join(c, 0, protocols=[("sticky", b""), ("range", b"")])
    join(c, 0, protocols=[("range", b""), ("sticky", b"")])
    join(c, 0, protocols=[("sticky", b"")])
    bad = join(c, 0, protocols=[("roundrobin", b"")])
    assert bad.error == E.INCONSISTENT_GROUP_PROTOCOL
    c.poll(200)
    res = done(c)
    assert res[t1].protocol_name == "sticky"  # 2 votes vs 1


def test_static_member_rejoin_and_fencing():
    c, _ = make()
    t = join(c, 0, instance="i1")
    r = done(c)[t]
    c.sync_group(group_id="g", generation_id=1, member_id=r.member_id, group_instance_id="i1", protocol_type=None,
                 protocol_name=None, assignments={r.member_id: b"A"}, now_ms=0)
    done(c)
    r2 = join(c, 10, instance="i1")  # restarted with the same instance id, no member id
    assert isinstance(r2, JoinResult) and r2.error == 0 and r2.generation_id == 1
    assert r2.member_id != r.member_id
    assert c.heartbeat(group_id="g", generation_id=1, member_id=r.member_id, group_instance_id="i1",
                       now_ms=20) == E.FENCED_INSTANCE_ID
    s = c.sync_group(group_id="g", generation_id=1, member_id=r2.member_id, group_instance_id="i1",
                     protocol_type=None, protocol_name=None, assignments={}, now_ms=30)
    assert s.assignment == b"A"


def test_group_max_size():
    c, _ = make(delay=1000, max_size=2)
    join(c, 0)
    join(c, 0)
    assert join(c, 0).error == E.GROUP_MAX_SIZE_REACHED


def test_commit_fetch_simple_consumer_and_metadata_limit():
    c, store = make(offset_metadata_max_bytes=5)
    out = c.commit_offsets(group_id="simple", generation_id=-1, member_id="", group_instance_id=None,
                           offsets=[("t", 0, 10, 3, "ok"), ("t", 1, 5, -1, "toolong")], now_ms=100)
    assert out == [("t", 0, 0), ("t", 1, E.OFFSET_METADATA_TOO_LARGE)]
    err, rows = c.fetch_offsets(group_id="simple", partitions=[("t", 0), ("t", 1)], now_ms=101)
    assert rows[0][2].offset == 10 and rows[0][2].leader_epoch == 3 and rows[1][2] is None
    assert c.commit_offsets(group_id="nogroup", generation_id=2, member_id="m", group_instance_id=None,
                            offsets=[("t", 0, 1, -1, "")], now_ms=0) == [("t", 0, E.ILLEGAL_GENERATION)]


def test_failed_append_does_not_reach_the_cache():
    c, store = make()
    store.fail = E.NOT_ENOUGH_REPLICAS  # a failed append: Kafka's coordinator answers COORDINATOR_NOT_AVAILABLE
    out = c.commit_offsets(group_id="g", generation_id=-1, member_id="", group_instance_id=None,
                           offsets=[("t", 0, 10, -1, "")], now_ms=0)
    assert out == [("t", 0, E.COORDINATOR_NOT_AVAILABLE)]
    assert c.fetch_offsets(group_id="g", partitions=[("t", 0)], now_ms=0)[1][0][2] is None


def test_load_in_progress_reload_and_unload():
    c, store = make()
    for i in range(2500):
        c.commit_offsets(group_id="g", generation_id=-1, member_id="", group_instance_id=None,
                         offsets=[("t", i % 3, i, -1, "")], now_ms=i)
    c.commit_offsets(group_id="g", generation_id=-1, member_id="", group_instance_id=None,
                     offsets=[("t", 0, 5, -1, "")], now_ms=9999)  # the newest commit for t-0 is an older offset
    # a new coordinator (restart or leadership move) loads the partition by replaying it
    c2 = Runtime(c.cfg, store.logs)
    shard = c2.coordinator.begin_loading(0, 0)
    for key, value in store.logs[0][:1000]:
        shard.replay(key, value)
    assert c2.fetch_offsets(group_id="g", partitions=None, now_ms=0)[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    assert join(c2, 0).error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert c2.commit_offsets(group_id="g", generation_id=-1, member_id="", group_instance_id=None,
                             offsets=[("t", 0, 1, -1, "")], now_ms=0) == [("t", 0, E.COORDINATOR_LOAD_IN_PROGRESS)]
    for key, value in store.logs[0][1000:]:
        shard.replay(key, value)
    c2.coordinator.finish_loading(0, 0)
    err, rows = c2.fetch_offsets(group_id="g", partitions=None, now_ms=0)
    assert {(t, p): e.offset for t, p, e, _ in rows} == {("t", 0): 5, ("t", 1): 2497, ("t", 2): 2498}
    c2.unload(0)
    assert c2.fetch_offsets(group_id="g", partitions=None, now_ms=0)[0] == E.NOT_COORDINATOR
    assert join(c2, 0).error == E.NOT_COORDINATOR


def test_group_metadata_survives_reload():
    c, store = make()
    t = join(c, 0)
    r = done(c)[t]
    c.sync_group(group_id="g", generation_id=1, member_id=r.member_id, group_instance_id=None, protocol_type=None,
                 protocol_name=None, assignments={r.member_id: b"A"}, now_ms=0)
    c2 = Runtime(c.cfg, store.logs)
    c2.load(0, 100)
    g = c2.groups["g"]
    assert (g.generation, g.protocol_name, g.leader_id, g.state) == (1, "range", r.member_id, GroupState.STABLE)
    assert g.members[r.member_id].assignment == b"A"


def test_offsets_expire_after_retention_with_tombstones():
    c, store = make(offsets_retention_ms=1000, retention_check_interval_ms=100)
    c.commit_offsets(group_id="g", generation_id=-1, member_id="", group_instance_id=None,
                     offsets=[("t", 0, 1, -1, "")], now_ms=0)
    c.poll(500)
    assert c.fetch_offsets(group_id="g", partitions=[("t", 0)], now_ms=500)[1][0][2] is not None
    c.poll(1200)
    assert c.fetch_offsets(group_id="g", partitions=[("t", 0)], now_ms=1200)[1][0][2] is None
    tombstones = [(R.decode_key(k), v) for k, v in store.logs[0] if v is None]
    assert (R.OffsetKey("g", "t", 0), None) in tombstones


def test_delete_group_and_offsets():
    c, store = make()
    c.commit_offsets(group_id="g", generation_id=-1, member_id="", group_instance_id=None,
                     offsets=[("t", 0, 1, -1, ""), ("t", 1, 2, -1, "")], now_ms=0)
    err, out = c.delete_offsets("g", [("t", 0)])
    assert out == [("t", 0, 0)]
    assert c.delete_group("g") == 0
    assert c.delete_group("g") == E.GROUP_ID_NOT_FOUND


def test_record_formats_round_trip():
    k = R.offset_key("grp", "topic", 7)
    assert k == b"\x00\x01\x00\x03grp\x00\x05topic\x00\x00\x00\x07"
    v = R.offset_value(R.OffsetValue(42, 3, "md", 1000))
    assert v[:2] == b"\x00\x03"
    assert R.decode_record(k, v) == (R.OffsetKey("grp", "topic", 7), R.OffsetValue(42, 3, "md", 1000))
    # Kafka's byte layouts: OffsetCommitValue v3 (offset, leader epoch, metadata, commit timestamp) and v1 (offset,
    # metadata, commit timestamp, expire timestamp), strings as int16 length + UTF-8
    assert v == b"\x00\x03" + (42).to_bytes(8, "big") + (3).to_bytes(4, "big") + b"\x00\x02md" + (1000).to_bytes(8, "big")
    v1 = R.offset_value(R.OffsetValue(42, 3, "é", 1000, 2000))
    assert v1 == b"\x00\x01" + (42).to_bytes(8, "big") + b"\x00\x02\xc3\xa9" + (1000).to_bytes(8, "big") + \
        (2000).to_bytes(8, "big")
    assert R.decode_record(k, v1)[1] == R.OffsetValue(42, -1, "é", 1000, 2000)
    assert R.offset_key("é", "t", -1) == b"\x00\x01\x00\x02\xc3\xa9\x00\x01t\xff\xff\xff\xff"
    gv = R.GroupValue("consumer", 5, "range", "m1", 99, [R.MemberValue("m1", "i1", "c", "/h", 300, 100, b"s", b"a")])
    key, val = R.decode_record(R.group_key("grp"), R.group_value(gv))
    assert key == R.GroupKey("grp") and val == gv


def test_group_id_validity_like_kafka():
    c, _ = make()
    assert c.heartbeat(group_id=None, generation_id=1, member_id="m", group_instance_id=None,
                       now_ms=0) == E.INVALID_GROUP_ID
    assert c.heartbeat(group_id="", generation_id=1, member_id="m", group_instance_id=None,
                       now_ms=0) == E.INVALID_GROUP_ID
    assert c.fetch_offsets(group_id=None, partitions=None, now_ms=0)[0] == E.INVALID_GROUP_ID
    # the offset APIs accept an empty group id, like Kafka's isValidGroupId
    assert c.commit_offsets(group_id="", generation_id=-1, member_id="", group_instance_id=None,
                            offsets=[("t", 0, 1, -1, "")], now_ms=0) == [("t", 0, 0)]


def test_operations_change_nothing_until_their_records_are_applied():
    c, _ = make()
    shard, result = c.coordinator.commit_offsets(group_id="g", generation_id=-1, member_id="", group_instance_id=None,
                                                 offsets=[("t", 0, 7, -1, "")], now_ms=0)
    assert result.response == [("t", 0, 0)] and len(result.records) == 1
    assert c.fetch_offsets(group_id="g", partitions=[("t", 0)])[1][0][2] is None  # not applied yet
    c.run((shard, result))
    assert c.fetch_offsets(group_id="g", partitions=[("t", 0)])[1][0][2].offset == 7


def test_sync_assignment_propagates_only_after_its_write():
    c, store = make()
    t = join(c, 0)
    m = done(c)[t].member_id
    shard, result = c.coordinator.sync_group(group_id="g", generation_id=1, member_id=m, group_instance_id=None,
                                             protocol_type=None, protocol_name=None, assignments={m: b"A"}, now_ms=1)
    assert result.records and not result.replay
    assert c.groups["g"].state == GroupState.COMPLETING_REBALANCE and not done(c)
    c.run((shard, result))
    assert done(c)[result.response].assignment == b"A" and c.groups["g"].state == GroupState.STABLE


# Kafka: NOT_LEADER_OR_FOLLOWER -> NOT_COORDINATOR; a group record too large (issue 14, item 8) -> UNKNOWN_SERVER_ERROR,
# as Kafka 4 (apache/kafka 1eb7644): CoordinatorOperationExceptionHelper, appendGroupMetadataErrorToResponseError
@pytest.mark.parametrize("append_error,answer", [
    (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR), (E.MESSAGE_TOO_LARGE, E.UNKNOWN_SERVER_ERROR),
    (E.RECORD_LIST_TOO_LARGE, E.UNKNOWN_SERVER_ERROR), (E.INVALID_FETCH_SIZE, E.UNKNOWN_SERVER_ERROR)])
def test_failed_sync_write_answers_every_member_and_rebalances(append_error, answer):
    c, store = make(delay=100)
    join(c, 0), join(c, 0)
    c.poll(100)
    res = done(c)
    leader = next(r for r in res.values() if r.members)
    follower = next(r for r in res.values() if not r.members)
    tf = c.sync_group(group_id="g", generation_id=1, member_id=follower.member_id, group_instance_id=None,
                      protocol_type=None, protocol_name=None, assignments={}, now_ms=1)
    store.fail = append_error
    tl = c.sync_group(group_id="g", generation_id=1, member_id=leader.member_id, group_instance_id=None,
                      protocol_type=None, protocol_name=None,
                      assignments={leader.member_id: b"A", follower.member_id: b"B"}, now_ms=2)
    out = done(c)
    assert out[tl].error == out[tf].error == answer
    assert E.UNKNOWN_SERVER_ERROR == -1  # the code kafka-python calls UNKNOWN
    g = c.groups["g"]
    assert g.state == GroupState.PREPARING_REBALANCE and all(x.assignment == b"" for x in g.members.values())
    assert store.logs[0] == []  # nothing was written


def test_live_state_equals_state_loaded_from_the_same_records():
    c, store = make(offsets_retention_ms=1000, retention_check_interval_ms=100)
    t = join(c, 0, group="members")
    m = done(c)[t].member_id
    c.sync_group(group_id="members", generation_id=1, member_id=m, group_instance_id=None, protocol_type=None,
                 protocol_name=None, assignments={m: b"A"}, now_ms=1)
    for i in range(20):
        c.commit_offsets(group_id=f"g{i % 4}", generation_id=-1, member_id="", group_instance_id=None,
                         offsets=[("t", i % 3, i, -1, f"m{i}")], now_ms=i)
    c.commit_offsets(group_id="members", generation_id=1, member_id=m, group_instance_id=None,
                     offsets=[("t", 0, 99, 2, "")], now_ms=30)
    c.delete_offsets("g1", [("t", 1)])
    c.delete_group("g2")
    c.commit_offsets(group_id="short", generation_id=-1, member_id="", group_instance_id=None,
                     offsets=[("t", 0, 1, -1, "")], now_ms=500, retention_ms=100)
    c.poll(700)  # expires short's offset (tombstones, then the empty group)

    def view(groups):
        return {gid: (g.state, g.generation, g.protocol_name, g.leader_id,
                      {mid: x.assignment for mid, x in g.members.items()},
                      {k: (e.offset, e.leader_epoch, e.metadata) for k, e in g.offsets.items()})
                for gid, g in groups.items()}
    c2 = Runtime(c.cfg, store.logs)
    c2.load(0, 700)
    assert view(c2.groups) == view(c.groups)
    assert "g2" not in c2.groups and "short" not in c2.groups and ("t", 1) not in c2.groups["g1"].offsets


# -- records that cannot be read (issue 14, item 7) ----------------------------------------------------------
def _sub(topics, version=3):
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription
    return ConsumerProtocolSubscription(version=version, topics=list(topics), user_data=b"u", owned_partitions=[],
                                        generation_id=1, rack_id=None).encode(version=version)


def test_undecodable_records_are_logged_and_skipped_at_load():
    from structlog.testing import capture_logs
    c, store = make()
    for i, t in enumerate(["a", "b"]):
        c.commit_offsets(group_id="ok", generation_id=-1, member_id="", group_instance_id=None,
                         offsets=[(t, 0, 10 + i, -1, "")], now_ms=0)
    log = store.logs[0]
    bad = [(b"\x00\x01\x00", b"\x00\x03"),                                  # truncated key
           (R.offset_key("ok", "a", 0), b"\x00\x09" + b"\x00" * 20),        # unknown OffsetCommitValue version
           (R.offset_key("ok", "a", 0), b"\x00\x03\x00\x00"),                # truncated value
           (R.group_key("grp"), b"\x00\x07junk"),                          # unknown GroupMetadataValue version
           (b"\xff\xff\x00\x01x", b""),                                     # negative key version
           (R.offset_key("ok", "c", 0), b"\x00\x03" + b"\x00" * 8 + b"\x00\x00\x00\x00\x00\x05ab")]  # string past the end
    log[1:1] = bad
    log.insert(3, (b"\x00\x05\x00\x01g", b"\x00\x00"))  # a truncated KIP-848 ConsumerGroupMemberMetadata key
    log.insert(3, (b"\x00\x0b\x00\x01g", None))           # a share-group tombstone: ignored
    c2 = Runtime(c.cfg, store.logs)
    with capture_logs() as logs:
        c2.load(0)
    skipped = [e for e in logs if e["event"] == "offsets.undecodable_record"]
    assert [(e["partition"], e["offset"]) for e in skipped] == [(0, 1), (0, 2), (0, 4), (0, 5), (0, 6), (0, 7),
                                                                (0, 8)]
    assert all(e["log_level"] == "warning" and e["error"] for e in skipped)
    err, rows = c2.fetch_offsets(group_id="ok", partitions=None)
    assert err == 0 and {(t, p): e.offset for t, p, e, _ in rows} == {("a", 0): 10, ("b", 0): 11}
    assert c2.coordinator.shards[0].ignored == {11: 1}
    assert "grp" not in c2.groups


def test_replay_batches_skips_an_undecodable_batch():
    import struct
    import crc32c
    from structlog.testing import capture_logs
    from kafkite.server.coordinator_runtime import replay_batches
    from kafkite.storage.batch import build_batch

    def commit(group, offset, at):
        return build_batch([(R.offset_key(group, "t", 0), R.offset_value(R.OffsetValue(offset, -1, "", 0)), [])],
                           base_offset=at, timestamp_ms=0)
    broken = bytearray(build_batch([(b"k1", b"v", []), (b"k2", b"v", [])], base_offset=1, timestamp_ms=0))
    broken[61:] = b"\xff" * (len(broken) - 61)  # records that do not parse, under a valid CRC
    struct.pack_into(">I", broken, 17, crc32c.crc32c(bytes(broken[21:])))
    data = commit("g", 5, 0) + bytes(broken) + commit("g", 7, 3) + commit("h", 1, 4)
    c, _ = make()
    shard = c.coordinator.begin_loading(0, 0)
    with capture_logs() as logs:
        assert replay_batches(shard, data, 0, "__consumer_offsets") == (5, 1)
    c.coordinator.finish_loading(0, 0)
    e = next(e for e in logs if e["event"] == "coordinator.undecodable_batch")
    assert (e["partition"], e["base_offset"], e["last_offset"]) == (0, 1, 2)
    assert c.fetch_offsets(group_id="g", partitions=[("t", 0)])[1][0][2].offset == 7
    assert c.fetch_offsets(group_id="h", partitions=[("t", 0)])[1][0][2].offset == 1
    # from an offset inside the data: the batches before it are not replayed again
    shard = c.coordinator.begin_loading(0, 0)
    assert replay_batches(shard, data, 4, "__consumer_offsets") == (5, 0)
    assert set(shard.groups) == {"h"}
    assert replay_batches(shard, data[:10], 0, "__consumer_offsets") == (0, 0)  # no complete batch


# -- OffsetDelete on a group with members (issue 14, item 8) ---------------------------------------------------
def _stable_group(c, protocols, protocol_type="consumer", group="g", now=0):
    t = c.join_group(group_id=group, member_id="", group_instance_id=None, protocol_type=protocol_type,
                     protocols=protocols, session_timeout_ms=10000, rebalance_timeout_ms=30000, client_id="cli",
                     client_host="/h", require_known_member_id=False, now_ms=now)
    m = done(c)[t].member_id
    c.sync_group(group_id=group, generation_id=1, member_id=m, group_instance_id=None, protocol_type=None,
                 protocol_name=None, assignments={m: b""}, now_ms=now)
    done(c)
    return m


def _commit(c, group, m, gen, parts):
    return c.commit_offsets(group_id=group, generation_id=gen, member_id=m, group_instance_id=None,
                            offsets=[(t, p, 5, -1, "") for t, p in parts], now_ms=1)


def test_subscribed_topics_of_every_consumer_protocol_version():
    for v in range(4):
        assert R.subscribed_topics(_sub(["a", "b"], v)) == ["a", "b"]
    assert R.subscribed_topics(b"\x00\x09" + _sub(["x"], 0)[2:] + b"future fields") == ["x"]  # v0 prefix
    for bad in (b"", b"\x00\x00", b"\x00\x00\x00\x00\x00\x01\x00\x05ab", b"\x00\x00\xff\xff\xff\xff",
                b"\x00\x00\x00\x00\x00\x01\x00\x01a"):  # no user data
        with pytest.raises(ValueError):
            R.subscribed_topics(bad)


def test_offset_delete_answers_group_subscribed_to_topic_for_subscribed_topics_only():
    c, store = make()
    m = _stable_group(c, [("range", _sub(["a"])), ("roundrobin", _sub(["a"], 0))])
    parts = [("a", 0), ("a", 1), ("b", 0)]
    assert _commit(c, "g", m, 1, parts) == [(t, p, 0) for t, p in parts]
    n = len(store.logs[0])
    err, out = c.delete_offsets("g", parts + [("c", 0)])
    assert err == 0 and out == [("a", 0, E.GROUP_SUBSCRIBED_TO_TOPIC), ("a", 1, E.GROUP_SUBSCRIBED_TO_TOPIC),
                                ("b", 0, 0), ("c", 0, 0)]
    assert store.logs[0][n:] == [(R.offset_key("g", "b", 0), None)]  # one tombstone: c had no offset
    rows = c.fetch_offsets(group_id="g", partitions=parts)[1]
    assert [e is not None for _, _, e, _ in rows] == [True, True, False]
    # the same after a reload: the subscription comes from the group's record
    c2 = Runtime(c.cfg, store.logs)
    c2.load(0)
    assert c2.delete_offsets("g", [("a", 0)])[1] == [("a", 0, E.GROUP_SUBSCRIBED_TO_TOPIC)]
    # once the member left, the group is empty and subscribed to nothing
    c2.leave_group(group_id="g", members=[(m, None)], now_ms=2)
    assert c2.groups["g"].state == GroupState.EMPTY
    assert c2.delete_offsets("g", [("a", 0), ("a", 1)]) == (0, [("a", 0, 0), ("a", 1, 0)])
    assert c2.fetch_offsets(group_id="g", partitions=None)[1] == []


def test_offset_delete_when_the_subscription_is_unknown_or_not_a_consumer_group():
    c, _ = make()
    # a consumer group whose metadata does not decode: subscribed to every topic, as Kafka's isSubscribedToTopic
    m = _stable_group(c, [("range", b"not a subscription")])
    _commit(c, "g", m, 1, [("a", 0)])
    assert c.delete_offsets("g", [("a", 0), ("z", 3)]) == (
        0, [("a", 0, E.GROUP_SUBSCRIBED_TO_TOPIC), ("z", 3, E.GROUP_SUBSCRIBED_TO_TOPIC)])
    # another protocol type with members: the whole request is refused
    c, _ = make()
    m = _stable_group(c, [("copycat", b"anything")], protocol_type="connect")
    _commit(c, "g", m, 1, [("a", 0)])
    assert c.delete_offsets("g", [("a", 0)]) == (E.NON_EMPTY_GROUP, [])
    assert c.delete_offsets("unknown", [("a", 0)]) == (E.GROUP_ID_NOT_FOUND, [])




def test_replaying_a_commit_just_encoded_gives_what_decoding_gives():
    """The runtime replays an offset commit right after encoding it; decode_record hands back the key and value it
    kept then instead of decoding: they must be what decoding the bytes gives (a v1 value, with an expire timestamp,
    has no leader epoch; a v3 value has no expire timestamp), and a record is taken once."""
    from kafkite.coordinator import records as R
    for v in (R.OffsetValue(42, 7, "md", 1000, -1), R.OffsetValue(43, 7, "", 1000, 5000),
              R.OffsetValue(44, -1, "é" * 40, 1000, -1)):
        key, value = R.offset_commit_record("g", "t", 3, v)
        assert value == R.offset_value(v)  # (its v3 value encoded inline: the same bytes)
        kept = R.decode_record(key, value)
        assert kept == R.decode_record(key, value)  # the second time: decoded
        assert id(value) not in R._JUST_ENCODED
        assert kept[0] == R.OffsetKey("g", "t", 3)
        assert kept[1].leader_epoch == (-1 if v.expire_timestamp >= 0 else v.leader_epoch)
