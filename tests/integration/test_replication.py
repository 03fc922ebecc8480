"""Replication between broker processes (ZooKeeper mode): followers copy the leader's batches, the ISR follows the
followers, acks=all waits for the ISR, and failover loses no acknowledged record.

Every test starts its own three `kafkite serve` processes (kafkite.testing.ProcessCluster) on the session's
ZooKeeper, under a chroot of its own, and compares the replicas' segment files byte for byte
(kafkite.testing.replicas) once the brokers agree.
"""
from __future__ import annotations

import itertools
import time

import pytest

from kafkite.testing.process_cluster import ProcessCluster
from kafkite.testing.replicas import compare_replicas, partition_dirs

pytestmark = pytest.mark.timeout(300)

SESSION_MS = 4000
LAG_MS = 1500
_chroots = itertools.count(1)


def _start(zk, lag_ms: int = LAG_MS, session_ms: int = SESSION_MS) -> ProcessCluster:
    c = ProcessCluster(3, zookeeper_connect=zk.connect_string, session_timeout_ms=session_ms,
                       chroot=f"/kafkite-repl-{next(_chroots)}",
                       overrides={"replica.lag.time.max.ms": str(lag_ms), "replica.fetch.backoff.ms": "200"})
    c.start()
    c.wait_until(lambda: c.live_brokers == [1, 2, 3] and c.controller_id > 0, 30, "three brokers, a controller")
    return c


@pytest.fixture
def cluster(kafkite_zookeeper):
    c = _start(kafkite_zookeeper)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def slow_cluster(kafkite_zookeeper):
    """Followers stopped for a moment stay in the ISR (replica.lag.time.max.ms 20 s)."""
    c = _start(kafkite_zookeeper, lag_ms=20000)
    try:
        yield c
    finally:
        c.stop()


def _why(c: ProcessCluster) -> str:
    return "\n" + c.log_tails(40)


def _state(c: ProcessCluster, topic: str, p: int = 0) -> dict:
    return c.zk_get(f"/brokers/topics/{topic}/partitions/{p}/state") or {}


def _create(c: ProcessCluster, topic: str, replicas: list[int], min_isr: int = 2) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic
    admin = KafkaAdminClient(bootstrap_servers=c.bootstrap_servers, request_timeout_ms=20000)
    try:
        admin.create_topics([NewTopic(topic, replica_assignments={0: replicas},
                                      topic_configs={"min.insync.replicas": str(min_isr)})])
    finally:
        admin.close()
    c.wait_until(lambda: _state(c, topic).get("leader") == replicas[0] and
                 sorted(_state(c, topic).get("isr", [])) == sorted(replicas), 30, f"{topic}: leader and full ISR")
    # every live replica has applied its LeaderAndIsr (its log exists)
    c.wait_until(lambda: all(d.exists() for b, d in partition_dirs(c, topic, 0, replicas).items()
                             if b in c.live_brokers),
                 30, f"{topic}: a log on every replica")


def _producer(c: ProcessCluster, acks="all", via: int | None = None, **kw):
    from kafka import KafkaProducer
    bootstrap = c.bootstrap_servers if via is None else c.bootstrap_of(via)
    return KafkaProducer(bootstrap_servers=bootstrap, acks=acks, linger_ms=2, request_timeout_ms=8000,
                         **kw)


def _produce(c: ProcessCluster, topic: str, values: list[bytes], acks="all", via: int | None = None
             ) -> dict[bytes, int]:
    p = _producer(c, acks=acks, via=via, retries=10)
    try:
        futures = {v: p.send(topic, value=v, partition=0) for v in values}
        return {v: f.get(timeout=60).offset for v, f in futures.items()}
    finally:
        p.close()


def _consume_all(c: ProcessCluster, topic: str, via: int | None = None) -> list[tuple[int, bytes]]:
    from kafka import KafkaConsumer, TopicPartition
    cons = KafkaConsumer(bootstrap_servers=c.bootstrap_servers if via is None else c.bootstrap_of(via), auto_offset_reset="earliest",
                         consumer_timeout_ms=30000, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        cons.assign([tp])
        end = cons.end_offsets([tp])[tp]
        out = []
        if end == 0:
            return out
        for m in cons:
            out.append((m.offset, m.value))
            if m.offset >= end - 1:
                break
        return out
    finally:
        cons.close()


def _replicas_agree(c: ProcessCluster, topic: str, brokers=(1, 2, 3)):
    diff = compare_replicas(partition_dirs(c, topic, 0, brokers=list(brokers)))
    return diff if diff.same else None


def test_followers_copy_the_leaders_batches_byte_for_byte(cluster):
    c = cluster
    _create(c, "copied", [1, 2, 3])
    acked = _produce(c, "copied", [b"v-%d" % i for i in range(300)])
    assert sorted(acked.values()) == list(range(300))
    diff = c.wait_until(lambda: _replicas_agree(c, "copied"), 20, "replicas byte-identical")
    assert all(end == 300 for end in diff.log_end_offsets.values()), diff
    assert [v for _, v in _consume_all(c, "copied")] == [b"v-%d" % i for i in range(300)]


def test_leader_killed_loses_no_acknowledged_record_and_rejoins_the_isr(cluster):
    c = cluster
    _create(c, "failover", [1, 2, 3])
    acked = _produce(c, "failover", [b"a-%d" % i for i in range(200)])
    c.kill_broker(1)
    c.wait_until(lambda: _state(c, "failover").get("leader") in (2, 3), 20, "a new leader from the ISR")
    assert 1 not in _state(c, "failover")["isr"]
    acked.update(_produce(c, "failover", [b"b-%d" % i for i in range(200)]))
    c.start_broker(1)
    c.wait_until(lambda: 1 in _state(c, "failover").get("isr", []), 30, f"broker 1 back in the ISR{_why(c)}")
    got = _consume_all(c, "failover")
    assert {v: o for o, v in got} == acked  # every acknowledged record, once, at its offset
    c.wait_until(lambda: _replicas_agree(c, "failover"), 20, "replicas byte-identical after the restart")


PATIENT_SESSION_MS = 10000


@pytest.fixture
def patient_cluster(kafkite_zookeeper):
    """ZooKeeper sessions of 10 s: a paused broker is dropped from the ISR by its leader (replica.lag.time.max.ms
    1.5 s) long before its session would expire, even on a loaded machine."""
    c = _start(kafkite_zookeeper, session_ms=PATIENT_SESSION_MS)
    try:
        yield c
    finally:
        c.stop()


def test_paused_follower_leaves_the_isr_and_rejoins(patient_cluster):
    c = patient_cluster
    ctl = c.controller_id
    leader, paused = [b for b in (1, 2, 3) if b != ctl]  # the controller (who takes AlterPartition) stays up
    _create(c, "lagging", [leader, ctl, paused])
    c.pause_broker(paused)
    try:
        # the leader drops it after replica.lag.time.max.ms, well before its ZooKeeper session expires
        c.wait_until(lambda: sorted(_state(c, "lagging").get("isr", [])) == sorted([leader, ctl]),
                     PATIENT_SESSION_MS / 1000 - 0.5, f"broker {paused} out of the ISR")
        assert paused in c.live_brokers  # (its session holds: the leader's AlterPartition took it out, by lag)
        acked = _produce(c, "lagging", [b"p-%d" % i for i in range(50)], via=leader)  # min.insync.replicas=2 holds
    finally:
        c.resume_broker(paused)
    c.wait_until(lambda: sorted(_state(c, "lagging").get("isr", [])) == [1, 2, 3], 30,
                 f"broker {paused} back in the ISR")
    assert sorted(acked.values()) == list(range(50))
    c.wait_until(lambda: _replicas_agree(c, "lagging"), 20, "the resumed follower caught up")


def test_two_of_three_down_acks_all_is_refused_acks_1_works(cluster):
    from kafka.errors import NotEnoughReplicasError
    c = cluster
    _create(c, "minisr", [1, 2, 3])
    c.kill_broker(2)
    c.kill_broker(3)
    c.wait_until(lambda: _state(c, "minisr").get("isr") == [1], 30, "the ISR down to the leader")
    p = _producer(c, acks="all", via=1, retries=0)  # (bootstrapped at the live broker)
    try:
        with pytest.raises(NotEnoughReplicasError):
            p.send("minisr", value=b"refused", partition=0).get(timeout=30)
    finally:
        p.close()
    acked = _produce(c, "minisr", [b"one"], acks=1, via=1)
    assert [v for _, v in _consume_all(c, "minisr", via=1)] == [b"one"]  # nothing of the refused write is there
    assert acked[b"one"] == 0


def test_divergent_records_of_a_deposed_leader_are_truncated(slow_cluster):
    """Broker 1 leads, takes acks=1 writes nobody copies, and dies; broker 2 or 3 leads epoch 1 and takes more
    writes; broker 1 comes back as follower and must cut its own.

    "Nobody copies": the followers are stopped (SIGSTOP) before the writes and killed with broker 1, so that the
    fetch responses carrying them, already in their sockets' buffers, are never read. Everything happens well
    within replica.lag.time.max.ms, so the ISR stays [1, 2, 3] and 2 or 3 may be elected cleanly."""
    c = slow_cluster
    _create(c, "diverge", [1, 2, 3], min_isr=1)
    base = _produce(c, "diverge", [b"common-%d" % i for i in range(10)])
    c.wait_until(lambda: _replicas_agree(c, "diverge"), 20, "replicas agree before the split")
    c.pause_broker(2)
    c.pause_broker(3)
    # straight to broker 1 over the wire: a client would also ask the stopped brokers for metadata
    from kafka.protocol.producer import ProduceRequest
    from kafkite.storage.batch import build_batch
    from kafkite.testing.wire_client import WireClient
    T = ProduceRequest.TopicProduceData
    with WireClient.connect(c.bootstrap_of(1)) as w:
        resp = w.request(ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
            T(name="diverge", topic_id=None, partition_data=[T.PartitionProduceData(
                index=0, records=build_batch([(None, b"lost-%d" % i, []) for i in range(5)],
                                               timestamp_ms=int(time.time() * 1000)))])]), 9)
    part = resp.responses[0].partition_responses[0]
    assert (part.error_code, part.base_offset) == (0, 10)
    for b in (1, 2, 3):
        c.kill_broker(b)
    assert _state(c, "diverge")["isr"] == [1, 2, 3]
    c.start_broker(2)  # (each start waits for its old ZooKeeper registration to expire)
    c.start_broker(3)
    c.wait_until(lambda: _state(c, "diverge").get("leader") in (2, 3), 30, f"a new leader{_why(c)}")
    new = _produce(c, "diverge", [b"new-%d" % i for i in range(7)])
    assert min(new.values()) == 10  # the new leader never had the lost records
    c.start_broker(1)
    c.wait_until(lambda: 1 in _state(c, "diverge").get("isr", []), 30, f"broker 1 back in the ISR{_why(c)}")
    diff = c.wait_until(lambda: _replicas_agree(c, "diverge"), 20, "no divergent record survives")
    assert set(diff.log_end_offsets.values()) == {17}
    assert {v for _, v in _consume_all(c, "diverge")} == set(base) | set(new)
    assert "replica.truncated" in c.log_tail(1, 400)


def test_alter_partition_and_follower_fetch_are_fenced(cluster):
    """The controller refuses ISR changes that do not build on the partition's current state, each with Kafka's
    error, changing nothing; a follower's Fetch at an older leader epoch gets FENCED_LEADER_EPOCH."""
    from kafka.protocol.consumer import FetchRequest
    from kafkite.testing.wire_client import WireClient
    from kafkite.wire.errors import E
    from kafkite.wire.interbroker import AlterPartitionRequest
    c = cluster
    _create(c, "fenced", [1, 2, 3])
    ctl = c.controller_id
    st = _state(c, "fenced")
    version = c.zk.exists("/brokers/topics/fenced/partitions/0/state").version
    epoch_of = {b: c.zk.exists(f"/brokers/ids/{b}").czxid for b in (1, 2, 3)}
    T, P = AlterPartitionRequest.TopicData, AlterPartitionRequest.TopicData.PartitionData

    def alter(broker: int, leader_epoch: int, isr: list[int], partition_epoch: int, broker_epoch=None):
        req = AlterPartitionRequest(broker_id=broker, broker_epoch=epoch_of[broker] if broker_epoch is None
                                    else broker_epoch, topics=[T(topic_name="fenced", partitions=[P(
                                        partition_index=0, leader_epoch=leader_epoch, new_isr=isr,
                                        leader_recovery_state=0, partition_epoch=partition_epoch)])])
        host, port = c.endpoints(ctl)["INTERNAL"]
        with WireClient(host, port) as w:
            r = w.request(req, 1)
        return r.error_code, [(p.error_code, p.leader_id, p.leader_epoch, list(p.isr), p.partition_epoch)
                              for t in r.topics for p in t.partitions]

    le = st["leader_epoch"]
    assert alter(1, le, [1, 2], version + 1)[1][0][0] == E.INVALID_UPDATE_VERSION
    assert alter(1, le - 1, [1, 2], version)[1][0][0] == E.FENCED_LEADER_EPOCH
    assert alter(2, le, [1, 2], version)[1][0][0] == E.NOT_LEADER_OR_FOLLOWER
    assert alter(1, le, [1, 2, 4], version)[1][0][0] == E.INELIGIBLE_REPLICA
    assert alter(1, le, [1, 2], version, broker_epoch=epoch_of[1] - 1)[0] == E.STALE_BROKER_EPOCH
    assert sorted(_state(c, "fenced")["isr"]) == [1, 2, 3]  # nothing changed
    assert c.zk.exists("/brokers/topics/fenced/partitions/0/state").version == version
    # a change that builds on the current state is taken: the answer carries the new partition epoch
    err, parts = alter(1, le, [1, 2], version)
    assert (err, parts) == (0, [(0, 1, le, [1, 2], version + 1)])
    assert _state(c, "fenced")["isr"] == [1, 2]

    # leadership moves on (broker 1 shuts down: controlled shutdown hands partition 0 to 2, a new leader epoch)
    c.stop_broker(1)
    c.wait_until(lambda: _state(c, "fenced").get("leader") == 2, 30, "broker 2 leads")
    le = _state(c, "fenced")["leader_epoch"]
    assert le >= 1
    FT = FetchRequest.FetchTopic

    def follower_fetch(current_leader_epoch: int) -> int:
        req = FetchRequest(replica_id=3, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                           session_id=0, session_epoch=-1, topics=[FT(topic="fenced", partitions=[FT.FetchPartition(
                               partition=0, current_leader_epoch=current_leader_epoch, fetch_offset=0,
                               last_fetched_epoch=-1, log_start_offset=0, partition_max_bytes=1 << 20)])],
                           forgotten_topics_data=[], rack_id="")
        with WireClient.connect(c.bootstrap_of(2)) as w:
            return w.request(req, 12).responses[0].partitions[0].error_code
    assert follower_fetch(le) == 0
    assert follower_fetch(le - 1) == E.FENCED_LEADER_EPOCH
    assert follower_fetch(le + 1) == E.UNKNOWN_LEADER_EPOCH


def test_unclean_leader_election_across_processes(cluster):
    """ZooKeeper mode: the partition's only in-sync replica is killed while the other replica is out of the ISR; the
    partition stays offline until unclean.leader.election.enable is set on the topic (kept in /config/topics, seen by
    the controller through /config/changes), then the out-of-sync replica leads with ISR [itself]."""
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
    c = cluster
    _create(c, "unclean", [1, 2], min_isr=1)
    c.pause_broker(2)   # its session expires: the controller drops it from the ISR
    c.wait_until(lambda: _state(c, "unclean").get("isr") == [1], 30, "broker 2 out of the ISR" + _why(c))
    p = _producer(c, acks=1, via=1)
    try:
        for i in range(3):
            p.send("unclean", b"only-on-1-%d" % i, partition=0).get(timeout=20)
    finally:
        p.close()
    c.kill_broker(1)
    c.resume_broker(2)
    c.wait_until(lambda: 2 in c.live_brokers and 1 not in c.live_brokers, 30, "broker 2 back, 1 gone")
    c.wait_until(lambda: _state(c, "unclean").get("leader") == -1, 30, "the partition offline" + _why(c))
    time.sleep(1.0)  # a clean controller leaves it offline (no event should change that)
    assert _state(c, "unclean").get("leader") == -1
    admin = KafkaAdminClient(bootstrap_servers=c.bootstrap_of(3), request_timeout_ms=20000)
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "unclean",
                                            configs={"unclean.leader.election.enable": "true"})])
    finally:
        admin.close()
    c.wait_until(lambda: _state(c, "unclean").get("leader") == 2, 30, "broker 2 leads (unclean)" + _why(c))
    assert _state(c, "unclean")["isr"] == [2]


def test_controlled_shutdown_every_version(cluster):
    """ControlledShutdown v0-3 on the controller's inter-broker listener (v0 with request header v0; no broker epoch
    before v2): leadership moves off the broker; a stale broker epoch (v2+) or an unknown broker is refused."""
    from kafkite.testing.wire_client import WireClient
    from kafkite.wire.errors import E
    from kafkite.wire.interbroker import ControlledShutdownRequest
    c = cluster
    _create(c, "cs", [1, 2, 3], min_isr=1)
    ctl = c.controller_id
    host, port = c.endpoints(ctl)["INTERNAL"]
    epochs = {b: c.zk.exists(f"/brokers/ids/{b}").czxid for b in (1, 2, 3)}

    def shutdown(v: int, broker: int, epoch: int | None = None):
        kw = {"broker_epoch": epochs[broker] if epoch is None else epoch} if v >= 2 else {}
        with WireClient(host, port) as w:
            r = w.request(ControlledShutdownRequest(broker_id=broker, **kw), v)
        return r.error_code, [(p.topic_name, p.partition_index) for p in r.remaining_partitions]

    assert shutdown(0, 1) == (0, [])
    c.wait_until(lambda: _state(c, "cs").get("leader") == 2, 30, "leader 2 after v0" + _why(c))
    assert shutdown(1, 2) == (0, [])  # to another live ISR member: 3, or 1 if it is back in the ISR already
    after = c.wait_until(lambda: _state(c, "cs").get("leader") in (1, 3) and _state(c, "cs")["leader"], 30,
                         "leadership off broker 2 after v1" + _why(c))
    assert shutdown(2, after, epoch=epochs[after] - 1)[0] == E.STALE_BROKER_EPOCH
    assert _state(c, "cs").get("leader") == after
    epochs[9] = -1
    assert shutdown(3, 9)[0] == E.BROKER_NOT_AVAILABLE
