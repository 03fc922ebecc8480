"""Replication inside the in-process cluster: each broker keeps its own copy of a partition, followers fetch from
the leader over the brokers' inter-broker listeners, the ISR follows them, acks=all waits for the ISR, and a
failover loses no acknowledged record (the issue "Replication between brokers", point 6).

The same rules as between processes (tests/integration/test_replication.py), with faults a test can drive
directly: `KafkiteCluster.pause_replication` stops a broker's fetchers while it keeps serving clients.
"""
from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from helpers import kp_read, wait_until
from kafkite.testing.cluster import KafkiteCluster
from kafkite.testing.replicas import compare_replicas, partition_dirs
from kafkite.testing.wire_client import WireClient
from kafkite.wire.errors import E
from test_data_versions import batch, fetch, produce

pytestmark = pytest.mark.timeout(120)
LAG = {"replica.lag.time.max.ms": "600", "replica.fetch.backoff.ms": "100"}


def _create(cluster, name, partitions=1, rf=3, **configs):
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        admin.create_topics([NewTopic(name, partitions, rf, topic_configs=configs)])
    finally:
        admin.close()
    wait_until(lambda: all(cluster.leader(name, p) > 0 for p in range(partitions)), timeout=30,
               what=f"leaders of {name}")


def _caught_up(cluster, topic, p=0):
    ends = cluster.log_end_offsets(topic, p)
    return len(ends) == 3 and len(set(ends.values())) == 1


def test_each_broker_has_its_own_copy_byte_for_byte(tmp_path):
    with KafkiteCluster(brokers=3, data_dir=tmp_path) as cluster:
        _create(cluster, "copies", partitions=2)
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", linger_ms=5)
        for i in range(300):
            producer.send("copies", key=str(i % 7).encode(), value=b"v%d" % i)
        producer.flush()
        producer.close()
        for p in range(2):
            wait_until(lambda p=p: _caught_up(cluster, "copies", p), timeout=20, what=f"followers of copies-{p}")
            logs = [cluster.replica_log(b, "copies", p) for b in (1, 2, 3)]
            assert len({id(lg) for lg in logs}) == 3  # three logs, not one shared
            assert sum(lg.log_end_offset for lg in logs) == 3 * logs[0].log_end_offset
            wait_until(lambda: all(lg.high_watermark == logs[0].log_end_offset for lg in logs), timeout=30,
                       what="the followers' high watermark")  # learnt from the next fetch response
            leader = cluster.leader("copies", p)
            dirs = partition_dirs(cluster, "copies", p)
            assert set(dirs) == {1, 2, 3} and all(str(tmp_path / f"broker-{b}") in str(d) for b, d in dirs.items())
            diff = compare_replicas(dirs, reference=leader)
            assert diff.same, diff
            assert all(n > 0 for n in diff.batches.values())


def test_paused_follower_leaves_the_isr_and_rejoins():
    with KafkiteCluster(brokers=3, overrides=LAG) as cluster:
        _create(cluster, "lag", **{"min.insync.replicas": "2"})
        leader = cluster.leader("lag", 0)
        f1, f2 = [b for b in (1, 2, 3) if b != leader]
        assert sorted(cluster.isr("lag", 0)) == [1, 2, 3]
        cluster.pause_replication(f1)
        with WireClient.connect(cluster.bootstrap_of(leader)) as w:
            assert produce(w, "lag", batch(5), acks=1).error_code == 0
            wait_until(lambda: f1 not in cluster.isr("lag", 0), timeout=30, what=f"broker {f1} out of the ISR")
            assert sorted(cluster.isr("lag", 0)) == sorted([leader, f2])
            # every broker's view says so (the controller told them all)
            assert all(sorted(v["topics"][0]["partitions"][0]["isr"]) == sorted([leader, f2])
                       for v in cluster.metadata_views().values())
            assert produce(w, "lag", batch(2)).error_code == 0  # acks=all: the ISR of two is enough
            cluster.pause_replication(f2)
            wait_until(lambda: cluster.isr("lag", 0) == [leader], timeout=30, what="the ISR down to the leader")
            r = produce(w, "lag", batch(1))
            assert r.error_code == E.NOT_ENOUGH_REPLICAS, r
            assert produce(w, "lag", batch(1), acks=1).error_code == 0
            # the high watermark is the ISR's: the leader alone, so the acks=1 record is visible
            assert fetch(w, "lag", 0).high_watermark == 8
            cluster.resume_replication(f1)
            cluster.resume_replication(f2)
            wait_until(lambda: sorted(cluster.isr("lag", 0)) == [1, 2, 3], timeout=15, what="both back in the ISR")
            assert cluster.log_end_offsets("lag", 0) == {1: 8, 2: 8, 3: 8}
            assert produce(w, "lag", batch(1)).error_code == 0


def test_acks_all_waits_for_the_isr():
    """A follower that holds the ISR back holds acks=all back too (until it is dropped from the ISR)."""
    with KafkiteCluster(brokers=3, overrides={"replica.lag.time.max.ms": "3000"}) as cluster:
        _create(cluster, "wait")
        leader = cluster.leader("wait", 0)
        follower = next(b for b in (1, 2, 3) if b != leader)
        cluster.pause_replication(follower)
        with WireClient.connect(cluster.bootstrap_of(leader)) as w:
            import time
            t0 = time.monotonic()
            r = produce(w, "wait", batch(1))  # answered once the follower is out of the ISR
            waited = time.monotonic() - t0
            assert r.error_code == 0
            assert waited > 1.0, waited
            assert follower not in cluster.isr("wait", 0)
        cluster.resume_replication(follower)
        wait_until(lambda: follower in cluster.isr("wait", 0), timeout=15, what="the follower back")


def test_leader_stopped_no_acknowledged_record_lost():
    with KafkiteCluster(brokers=3) as cluster:
        _create(cluster, "safe", **{"min.insync.replicas": "2"})
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", retries=20,
                                 max_in_flight_requests_per_connection=1, linger_ms=2)
        acked = []
        for i in range(200):
            producer.send("safe", value=b"a%d" % i).add_callback(lambda md, i=i: acked.append(i))
        producer.flush()
        assert len(acked) == 200
        old = cluster.leader("safe", 0)
        epoch = cluster.leader_epoch("safe", 0)
        cluster.stop_broker(old)
        new = cluster.leader("safe", 0)
        assert new not in (old, -1) and cluster.leader_epoch("safe", 0) == epoch + 1
        assert old not in cluster.isr("safe", 0)
        for i in range(200, 300):
            producer.send("safe", value=b"a%d" % i).add_callback(lambda md, i=i: acked.append(i))
        producer.flush()
        producer.close()
        assert len(acked) == 300
        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest")
        consumer.assign([TopicPartition("safe", 0)])
        values = [m.value for m in kp_read(consumer, 300)]
        consumer.close()
        assert values == [b"a%d" % i for i in range(300)]
        # the old leader comes back as a follower, copies what it missed and rejoins the ISR
        cluster.start_broker(old)
        wait_until(lambda: sorted(cluster.isr("safe", 0)) == [1, 2, 3], timeout=15, what="the old leader back")
        assert cluster.log_end_offsets("safe", 0)[old] == 300


def test_deposed_leader_truncates_what_was_never_replicated(tmp_path):
    with KafkiteCluster(brokers=3, data_dir=tmp_path) as cluster:
        _create(cluster, "div")
        old = cluster.leader("div", 0)
        f1, f2 = [b for b in (1, 2, 3) if b != old]
        with WireClient.connect(cluster.bootstrap_of(old)) as w:
            assert produce(w, "div", batch(3)).error_code == 0  # acks=all: on all three
            cluster.pause_replication(f1)
            cluster.pause_replication(f2)
            assert produce(w, "div", batch(5), acks=1).error_code == 0  # the leader's alone
        assert cluster.log_end_offsets("div", 0) == {old: 8, f1: 3, f2: 3}
        cluster.stop_broker(old)  # still in the ISR (replica.lag.time.max.ms is 30 s): a clean election
        new = cluster.leader("div", 0)
        assert new in (f1, f2)
        cluster.resume_replication(f1)
        cluster.resume_replication(f2)
        with WireClient.connect(cluster.bootstrap_of(new)) as w:
            assert produce(w, "div", batch(2)).error_code == 0  # offsets 3 and 4, leader epoch 1
        cluster.start_broker(old)
        wait_until(lambda: sorted(cluster.isr("div", 0)) == [1, 2, 3], timeout=15, what="the deposed leader back")
        assert cluster.log_end_offsets("div", 0) == {1: 5, 2: 5, 3: 5}
        diff = compare_replicas(partition_dirs(cluster, "div", 0), reference=new)
        assert diff.same, diff
        with WireClient.connect(cluster.bootstrap_of(new)) as w:
            got = fetch(w, "div", 0)
            assert got.high_watermark == 5


RACK_AWARE = {"replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"}
RACKS = {1: "az-1", 2: "az-2", 3: "az-3"}


def _fetch_v11(w, topic, offset, rack, version=11):
    from kafka.protocol.consumer import FetchRequest
    T = FetchRequest.FetchTopic
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                       session_id=0, session_epoch=-1, topics=[T(topic=topic, partitions=[T.FetchPartition(
                           partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                           log_start_offset=-1, partition_max_bytes=1 << 20)])],
                       forgotten_topics_data=[], rack_id=rack)
    return w.request(req, version).responses[0].partitions[0]


def test_follower_fetching_by_rack_over_the_wire():
    """KIP-392: the leader sends a consumer of another rack to the in-sync replica of its rack; a follower
    answers consumers (v11+) from its own copy, up to its high watermark."""
    with KafkiteCluster(brokers=3, racks=RACKS, overrides=RACK_AWARE) as cluster:
        _create(cluster, "near")
        leader = cluster.leader("near", 0)
        follower = next(b for b in (1, 2, 3) if b != leader)
        with WireClient.connect(cluster.bootstrap_of(leader)) as w:
            assert produce(w, "near", batch(4)).error_code == 0
            wait_until(lambda: _caught_up(cluster, "near"), timeout=30, what="followers")
            wait_until(lambda: cluster.replica_log(follower, "near", 0).high_watermark == 4, timeout=30,
                       what="the follower's high watermark")
            r = _fetch_v11(w, "near", 0, RACKS[follower])
            assert (r.error_code, r.preferred_read_replica, r.high_watermark) == (0, follower, 4)
            assert not r.records
            r = _fetch_v11(w, "near", 0, RACKS[leader])  # the leader is in the consumer's rack: it answers
            assert (r.error_code, r.preferred_read_replica) == (0, -1) and r.records
            r = _fetch_v11(w, "near", 0, "elsewhere")  # no replica in that rack: the leader answers
            assert (r.error_code, r.preferred_read_replica) == (0, -1) and r.records
        with WireClient.connect(cluster.bootstrap_of(follower)) as w:
            r = _fetch_v11(w, "near", 0, RACKS[follower])
            assert (r.error_code, r.high_watermark) == (0, 4) and r.records
            assert _fetch_v11(w, "near", 5, "").error_code == E.OFFSET_OUT_OF_RANGE
            assert _fetch_v11(w, "near", 0, "", version=10).error_code == E.NOT_LEADER_OR_FOLLOWER  # before KIP-392
        assert cluster.brokers[follower].replicas.consumer_reads_as_follower >= 1


def test_confluent_consumer_with_client_rack_reads_from_its_rack():
    import confluent_kafka as ck
    with KafkiteCluster(brokers=3, racks=RACKS, overrides=RACK_AWARE) as cluster:
        _create(cluster, "nearby")
        leader = cluster.leader("nearby", 0)
        follower = next(b for b in (1, 2, 3) if b != leader)
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all", linger_ms=5)
        for i in range(500):
            producer.send("nearby", value=b"n%d" % i)
        producer.flush()
        producer.close()
        consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "nearby",
                                "client.rack": RACKS[follower], "enable.auto.commit": False,
                                "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 1000})
        try:
            consumer.assign([ck.TopicPartition("nearby", 0, 0)])
            values = []
            deadline = __import__("time").monotonic() + 30
            while len(values) < 500 and __import__("time").monotonic() < deadline:
                m = consumer.poll(0.5)
                if m is not None and m.error() is None:
                    values.append(m.value())
        finally:
            consumer.close()
        assert values == [b"n%d" % i for i in range(500)]
        assert cluster.brokers[follower].replicas.consumer_reads_as_follower >= 1


def test_unclean_leader_election_when_the_isr_is_gone():
    """unclean.leader.election.enable (Kafka's OfflinePartitionLeaderElectionStrategy): with every ISR member down a
    partition stays offline unless the topic (or the broker) allows an out-of-sync replica to lead; turning the topic
    config on elects one at once (Kafka's TopicUncleanLeaderElectionEnable), losing what it never got."""
    with KafkiteCluster(brokers=3, overrides=LAG) as cluster:
        _create(cluster, "unclean", rf=2)
        leader = cluster.leader("unclean", 0)
        follower = next(b for b in cluster.state.metadata.partition("unclean", 0).replicas if b != leader)
        cluster.pause_replication(follower)
        with WireClient.connect(cluster.bootstrap_of(leader)) as w:
            assert produce(w, "unclean", batch(4), acks=1).error_code == 0
            wait_until(lambda: cluster.isr("unclean", 0) == [leader], timeout=30, what="the follower out of the ISR")
            assert produce(w, "unclean", batch(2), acks=1).error_code == 0
        behind = cluster.log_end_offsets("unclean", 0)[follower]
        assert behind < 6
        cluster.stop_broker(leader)
        wait_until(lambda: cluster.leader("unclean", 0) == -1, timeout=30, what="the partition offline")
        cluster.resume_replication(follower)
        assert cluster.leader("unclean", 0) == -1  # clean election only: it stays offline
        other = next(b for b in (1, 2, 3) if b not in (leader, follower))
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_of(other))
        try:
            from kafka.admin import ConfigResource, ConfigResourceType
            admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "unclean",
                                                configs={"unclean.leader.election.enable": "true"})])
        finally:
            admin.close()
        wait_until(lambda: cluster.leader("unclean", 0) == follower, timeout=30, what="the unclean leader")
        assert cluster.isr("unclean", 0) == [follower]
        with WireClient.connect(cluster.bootstrap_of(follower)) as w:
            assert fetch(w, "unclean", 0).high_watermark == behind  # what it never got is gone
            assert produce(w, "unclean", batch(1), acks=-1).error_code == 0


def test_unclean_leader_election_by_the_broker_default():
    with KafkiteCluster(brokers=3, overrides={**LAG, "unclean.leader.election.enable": "true"}) as cluster:
        _create(cluster, "unclean-default", rf=2)
        leader = cluster.leader("unclean-default", 0)
        follower = next(b for b in cluster.state.metadata.partition("unclean-default", 0).replicas if b != leader)
        cluster.pause_replication(follower)
        wait_until(lambda: cluster.isr("unclean-default", 0) == [leader], timeout=30, what="the follower out")
        cluster.stop_broker(leader)
        wait_until(lambda: cluster.leader("unclean-default", 0) == follower, timeout=30, what="the unclean leader")


def test_followers_fetch_in_incremental_fetch_sessions():
    """Followers fetch as Kafka's do, in an incremental fetch session (KIP-227): after a first full fetch, an idle
    follower's fetches name no partition (the leader reads the session's); an acks=all record is answered once the
    follower's next fetch names the one partition that moved; and when its leader loses the session
    (FETCH_SESSION_ID_NOT_FOUND, as after a restart) the follower starts over with a full fetch and goes on in a new
    session."""
    with KafkiteCluster(brokers=2, overrides={"replica.fetch.wait.max.ms": "50"}) as c:
        _create(c, "sess", partitions=10, rf=2)
        wait_until(lambda: all(len(c.isr("sess", p)) == 2 for p in range(10)), timeout=30, what="the ISRs")
        named = []  # (leader, session epoch, partitions named) of each follower fetch from now on
        for b in c.node_ids:
            sessions = c.brokers[b].fetch_sessions

            def recording(version, sid, epoch, follower, data, forget, name, now, real=sessions.new_context, b=b):
                if follower:
                    named.append((b, epoch, len(data)))
                return real(version, sid, epoch, follower, data, forget, name, now)
            sessions.new_context = recording
        wait_until(lambda: sum(1 for _, e, n in named if e > 0 and n == 0) >= 6, timeout=15,
                   what="idle incremental fetches")
        assert all(n == 0 for _, e, n in named[-4:] if e > 0), named[-4:]  # (nothing changed: nothing named)
        leader = c.leader("sess", 3)
        follower = 3 - leader
        before = len(named)
        with WireClient.connect(c.bootstrap_of(leader), timeout=10) as w:
            assert produce(w, "sess", batch(2), partition=3).error_code == 0  # acks=all: the follower has it
        assert c.log_end_offsets("sess", 3) == {leader: 2, follower: 2}
        assert any(b == leader and e > 0 and n == 1 for b, e, n in named[before:]), named[before:]
        stats = c.brokers[leader].fetch_sessions.stats
        lost = stats["FETCH_SESSION_ID_NOT_FOUND"]
        c.call(lambda: c.brokers[leader].fetch_sessions.sessions.clear())
        before = len(named)
        wait_until(lambda: stats["FETCH_SESSION_ID_NOT_FOUND"] > lost, timeout=15, what="the lost session")

        def restarted():
            fresh = [(e, n) for b, e, n in named[before:] if b == leader]
            full = next((i for i, (e, _) in enumerate(fresh) if e == 0), None)
            return full is not None and any(e > 0 for e, _ in fresh[full:]) and fresh[full:]
        fresh = wait_until(restarted, timeout=15, what="a full fetch, then a new session")
        assert fresh[0] == (0, len([p for p in range(10) if c.leader("sess", p) == leader])), fresh[:3]
        with WireClient.connect(c.bootstrap_of(leader), timeout=10) as w:
            assert produce(w, "sess", batch(1), partition=3).error_code == 0
        assert c.log_end_offsets("sess", 3) == {leader: 3, follower: 3}


def test_a_fetch_answer_not_applied_is_fetched_again_in_full():
    """A follower that drops a fetch answer (its replication paused while the fetch waited) starts its fetch session
    over, as Kafka's FetchSessionHandler does after an error: the leader's session records what each answer carried,
    so an incremental fetch would never send again the high watermark the dropped answer moved, and the follower's
    would stay behind."""
    with KafkiteCluster(brokers=2, overrides={"replica.fetch.wait.max.ms": "50"}) as c:
        _create(c, "dropped", partitions=1, rf=2)
        wait_until(lambda: len(c.isr("dropped", 0)) == 2, timeout=30, what="the ISR")
        leader = c.leader("dropped", 0)
        follower = 3 - leader
        replication = c.brokers[follower].replicas.replication
        fetcher = wait_until(lambda: next((f for f in replication.fetchers.values()
                                           if f.leader == leader and f.client is not None), None),
                             timeout=15, what="the follower's fetcher")
        real, armed = fetcher.client.request, [True]

        async def request(endpoint, req, **kwargs):  # the first answer moving the high watermark alone is dropped
            resp = await real(endpoint, req, **kwargs)
            if armed and any(rp.high_watermark == 1 and not rp.records
                             for rt in getattr(resp, "responses", ()) for rp in rt.partitions):
                replication.pause()
                armed.clear()
            return resp
        c.call(lambda: setattr(fetcher.client, "request", request))
        with WireClient.connect(c.bootstrap_of(leader), timeout=10) as w:
            assert produce(w, "dropped", batch(1)).error_code == 0
        wait_until(lambda: not armed, timeout=15, what="the dropped answer")
        c.resume_replication(follower)
        wait_until(lambda: c.call(lambda: c.replica_log(follower, "dropped", 0).high_watermark) == 1, timeout=10,
                   what="the follower's high watermark")
