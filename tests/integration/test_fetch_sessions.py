"""Incremental fetch sessions (KIP-227) over a socket: raw Fetch requests, Kafka's rules and error codes."""
from __future__ import annotations

import threading
import time
import uuid

import pytest
from kafka.protocol.admin import DeleteTopicsRequest
from kafka.protocol.consumer import FetchRequest

from kafkite.testing.runner import BrokerThread
from kafkite.testing.wire_client import WireClient
from kafkite.wire.errors import E
from test_data_versions import batch, create, produce, records_of

T = FetchRequest.FetchTopic


def fetch(w, session_id, epoch, parts=(), forget=(), version=12, max_wait=0, min_bytes=1, max_bytes=50 << 20):
    """parts: (topic, partition, offset) -- topic a name, or a topic id from v13; forget: (topic, partition)."""
    topics: dict = {}
    for topic, p, offset in parts:
        topics.setdefault(topic, []).append(T.FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=offset,
                                                             last_fetched_epoch=-1, log_start_offset=-1,
                                                             partition_max_bytes=1 << 20))
    by_id = version >= 13

    def topic_kw(t):
        return {"topic": None, "topic_id": t} if by_id else {"topic": t, "topic_id": None}
    forgotten: dict = {}
    for topic, p in forget:
        forgotten.setdefault(topic, []).append(p)
    F = FetchRequest.ForgottenTopic
    req = FetchRequest(replica_id=-1, max_wait_ms=max_wait, min_bytes=min_bytes, max_bytes=max_bytes,
                       isolation_level=0, session_id=session_id, session_epoch=epoch,
                       topics=[T(partitions=ps, **topic_kw(t)) for t, ps in topics.items()],
                       forgotten_topics_data=[F(partitions=ps, **topic_kw(t)) for t, ps in forgotten.items()],
                       rack_id="")
    return w.request(req, version)


def carried(resp, version=12):
    """{(topic or topic id, partition): partition data}"""
    return {((t.topic_id if version >= 13 else t.topic), p.partition_index): p
            for t in resp.responses for p in t.partitions}


def test_session_created_then_incremental_fetches_carry_only_changes(broker, wire):
    create(wire, "s1", partitions=3)
    produce(wire, "s1", batch(2), partition=0)
    full = fetch(wire, 0, 0, [("s1", p, 0) for p in range(3)])
    assert full.error_code == 0 and full.session_id != 0
    assert set(carried(full)) == {("s1", 0), ("s1", 1), ("s1", 2)}  # a full response: every partition
    sid = full.session_id
    # nothing new: an empty response, the same session
    inc = fetch(wire, sid, 1, [("s1", 0, 2)])
    assert (inc.error_code, inc.session_id, carried(inc)) == (0, sid, {})
    produce(wire, "s1", batch(3), partition=2)
    inc = fetch(wire, sid, 2)  # the session's partitions are read without being listed
    got = carried(inc)
    assert set(got) == {("s1", 2)} and got[("s1", 2)].high_watermark == 3
    assert [o for o, _, _ in records_of(got[("s1", 2)].records)] == [0, 1, 2]
    stats = broker.broker.fetch_sessions.stats
    assert stats["created"] == 1 and stats["incremental"] == 2


def test_session_errors_and_closing(wire):
    create(wire, "s2")
    unknown = fetch(wire, 123456, 1)
    assert (unknown.error_code, unknown.session_id, unknown.responses) == (E.FETCH_SESSION_ID_NOT_FOUND, 0, [])
    sid = fetch(wire, 0, 0, [("s2", 0, 0)]).session_id
    wrong = fetch(wire, sid, 5)
    assert (wrong.error_code, wrong.session_id, wrong.responses) == (E.INVALID_FETCH_SESSION_EPOCH, 0, [])
    assert fetch(wire, sid, 1).error_code == 0
    assert fetch(wire, sid, 1).error_code == E.INVALID_FETCH_SESSION_EPOCH  # a duplicate of epoch 1
    # a v13 request of a session created at v12 (names, not topic ids)
    assert fetch(wire, sid, 2, version=13).error_code == E.FETCH_SESSION_TOPIC_ID_ERROR
    # epoch -1 with the session's id: a full sessionless fetch that closes it
    closing = fetch(wire, sid, -1, [("s2", 0, 0)])
    assert closing.error_code == 0 and closing.session_id == 0 and set(carried(closing)) == {("s2", 0)}
    assert fetch(wire, sid, 2).error_code == E.FETCH_SESSION_ID_NOT_FOUND
    # epoch 0 with an old id: closes it and opens a new one
    sid2 = fetch(wire, 0, 0, [("s2", 0, 0)]).session_id
    sid3 = fetch(wire, sid2, 0, [("s2", 0, 0)]).session_id
    assert sid3 not in (0, sid2) and fetch(wire, sid2, 1).error_code == E.FETCH_SESSION_ID_NOT_FOUND


def test_incremental_adds_updates_and_forgets_partitions(wire):
    create(wire, "s3", partitions=3)
    for p in range(3):
        produce(wire, "s3", batch(1), partition=p)
    sid = fetch(wire, 0, 0, [("s3", 0, 1)]).session_id
    # add partition 1 (new: always carried the first time), move partition 0 back to offset 0
    inc = fetch(wire, sid, 1, [("s3", 1, 1), ("s3", 0, 0)])
    got = carried(inc)
    assert set(got) == {("s3", 0), ("s3", 1)} and records_of(got[("s3", 0)].records) and not got[("s3", 1)].records
    # forget 0 and 1, add 2: only 2 is read from now on
    inc = fetch(wire, sid, 2, [("s3", 2, 0)], forget=[("s3", 0), ("s3", 1)])
    assert set(carried(inc)) == {("s3", 2)}
    produce(wire, "s3", batch(1), partition=0)
    produce(wire, "s3", batch(1), partition=2)
    assert set(carried(fetch(wire, sid, 3, [("s3", 2, 1)]))) == {("s3", 2)}  # partition 0 is forgotten
    # forgetting the last partition closes the session: a sessionless answer
    last = fetch(wire, sid, 4, forget=[("s3", 2)])
    assert (last.error_code, last.session_id, last.responses) == (0, 0, [])
    assert fetch(wire, sid, 5).error_code == E.FETCH_SESSION_ID_NOT_FOUND


def test_topic_ids_unknown_id_and_deleted_topic_in_a_session(broker, wire):
    create(wire, "s4")
    create(wire, "s4b")
    produce(wire, "s4", batch(1))
    tid = broker.state.metadata.topic("s4").topic_id
    tid_b = broker.state.metadata.topic("s4b").topic_id
    ghost = uuid.uuid4()
    full = fetch(wire, 0, 0, [(tid, 0, 0), (ghost, 0, 0), (tid_b, 0, 0)], version=13)
    got = carried(full, 13)
    assert full.session_id != 0 and got[(ghost, 0)].error_code == E.UNKNOWN_TOPIC_ID
    assert [(t.topic_id, [p.partition_index for p in t.partitions]) for t in full.responses] == [
        (tid, [0]), (tid_b, [0]), (ghost, [0])]  # Kafka: partitions of unknown topics come last
    sid = full.session_id
    inc = fetch(wire, sid, 1, [(tid, 0, 1)], version=13)
    assert set(carried(inc, 13)) == {(ghost, 0)}  # an error is carried every time
    # the topic is deleted while the session reads it: its partition is answered with the error
    req = DeleteTopicsRequest(topic_names=["s4"], timeout_ms=5000)
    assert wire.request(req, 4).responses[0].error_code == 0
    inc = fetch(wire, sid, 2, version=13)
    got = carried(inc, 13)
    assert got[(tid, 0)].error_code == E.UNKNOWN_TOPIC_OR_PARTITION and got[(ghost, 0)].error_code
    assert (tid_b, 0) not in got
    # created again under its name: a new id; the session's old id is inconsistent with it
    create(wire, "s4")
    inc = fetch(wire, sid, 3, version=13)
    assert carried(inc, 13)[(tid, 0)].error_code == E.INCONSISTENT_TOPIC_ID


def test_long_poll_counts_only_what_the_response_carries_and_updates_the_session_once(broker, wire):
    create(wire, "s5", partitions=2)
    produce(wire, "s5", batch(1), partition=0)
    sid = fetch(wire, 0, 0, [("s5", 0, 1), ("s5", 1, 0)]).session_id
    result = {}

    def poll():
        with WireClient.connect(broker.bootstrap_servers) as w2:
            t0 = time.monotonic()
            # two small appends wake the wait; min_bytes is not reached, so it answers at max_wait_ms
            result["r"] = fetch(w2, sid, 1, max_wait=1500, min_bytes=1 << 20)
            result["elapsed"] = time.monotonic() - t0
    t = threading.Thread(target=poll)
    t.start()
    deadline = time.monotonic() + 10
    while not broker.broker.replicas.purgatory.watched and time.monotonic() < deadline:
        time.sleep(0.01)
    produce(wire, "s5", batch(1), partition=1)
    produce(wire, "s5", batch(1), partition=1)
    t.join(30)
    got = carried(result["r"])
    assert result["elapsed"] >= 1.2 and set(got) == {("s5", 1)}
    assert [o for o, _, _ in records_of(got[("s5", 1)].records)] == [0, 1]
    # the session moved on by one epoch for the request, whatever the wake-ups
    assert broker.broker.fetch_sessions.get(sid).epoch == 2
    assert fetch(wire, sid, 2, [("s5", 1, 2)]).error_code == 0


def test_long_poll_answers_when_a_carried_partition_reaches_min_bytes(broker, wire):
    create(wire, "s6")
    sid = fetch(wire, 0, 0, [("s6", 0, 0)]).session_id
    result = {}

    def poll():
        with WireClient.connect(broker.bootstrap_servers) as w2:
            t0 = time.monotonic()
            result["r"] = fetch(w2, sid, 1, max_wait=20_000, min_bytes=1)
            result["elapsed"] = time.monotonic() - t0
    t = threading.Thread(target=poll)
    t.start()
    deadline = time.monotonic() + 10
    while not broker.broker.replicas.purgatory.watched and time.monotonic() < deadline:
        time.sleep(0.01)
    produce(wire, "s6", batch(2))
    t.join(30)
    assert result["elapsed"] < 15 and records_of(carried(result["r"])[("s6", 0)].records)


def test_zero_slots_turn_sessions_off():
    with BrokerThread(overrides={"max.incremental.fetch.session.cache.slots": "0"}) as b, \
            WireClient.connect(b.bootstrap_servers) as w:
        create(w, "s7")
        r = fetch(w, 0, 0, [("s7", 0, 0)])
        assert r.error_code == 0 and r.session_id == 0 and set(carried(r)) == {("s7", 0)}
        assert b.broker.fetch_sessions.stats["not_created"] == 1


def test_negative_slots_refused_and_the_key_is_known():
    from kafkite.config import BrokerConfig, ConfigError
    from kafkite.config_keys import check_broker_keys
    assert check_broker_keys({"max.incremental.fetch.session.cache.slots": "5"}) == []  # no "unused" warning
    assert BrokerConfig(static={}).get("max.incremental.fetch.session.cache.slots") == 1000
    with pytest.raises(ConfigError, match="max.incremental.fetch.session.cache.slots: Value must be at least 0"):
        BrokerConfig(static={"max.incremental.fetch.session.cache.slots": "-1"})


def test_full_cache_answers_session_id_zero():
    with BrokerThread(overrides={"max.incremental.fetch.session.cache.slots": "1"}) as b, \
            WireClient.connect(b.bootstrap_servers) as w:
        create(w, "s8", partitions=2)
        first = fetch(w, 0, 0, [("s8", 0, 0)]).session_id
        assert first != 0
        # the only slot holds a session used just now: a second one is not created (full fetches go on)
        r = fetch(w, 0, 0, [("s8", 0, 0), ("s8", 1, 0)])
        assert r.error_code == 0 and r.session_id == 0 and len(carried(r)) == 2
        assert fetch(w, first, 1).error_code == 0


def test_sessions_are_per_broker_and_lost_on_restart():
    from kafkite.testing.cluster import KafkiteCluster
    with KafkiteCluster(brokers=2) as c:
        with WireClient.connect(c.bootstrap_of(1)) as w1:
            create(w1, "s9")
            leader = c.leader("s9", 0)
        with WireClient.connect(c.bootstrap_of(leader)) as wl:
            sid = fetch(wl, 0, 0, [("s9", 0, 0)]).session_id
            assert sid != 0 and fetch(wl, sid, 1).error_code == 0
        other = 2 if leader == 1 else 1
        with WireClient.connect(c.bootstrap_of(other)) as wo:
            assert fetch(wo, sid, 2).error_code == E.FETCH_SESSION_ID_NOT_FOUND
        c.stop_broker(leader)
        c.start_broker(leader)
        with WireClient.connect(c.bootstrap_of(leader)) as wl:
            assert fetch(wl, sid, 2).error_code == E.FETCH_SESSION_ID_NOT_FOUND


def test_fetch_sessions_benchmark_runs(tmp_path):
    from test_benchmark_smoke import run_benchmark
    out = run_benchmark(tmp_path, "fetch_sessions.py", "--partitions", "30", "--records", "3", "--rounds", "3",
                        "--repeat", "1")
    rows = {tuple(line.split("|")[0].split()[:2] + [line.split("|")[0].split()[-1]]): line.split("|")[1].split()
            for line in out.splitlines() if "|" in line and not line.lstrip().startswith("broker")}
    # with sessions the follow phase's requests list a few partitions, without they list all 30
    on = rows[("kafkite", "sessions", "follow")]
    off = rows[("kafkite", "off", "follow")]
    assert int(on[1].replace(",", "")) * 3 < int(off[1].replace(",", "")), out
    assert "tansu" in out
