"""The control plane's topology and data controls (issue "Fault injection and inspection from any language"): a
broker stopped and started over HTTP (`kafkite control stop|start`, POST /v1/brokers/stop|start) on a one-process
cluster while an acks=all producer runs, nothing lost; compaction and retention run now (POST /v1/compact,
/v1/retention) with a consumer seeing the compacted / retained log, on `kafkite serve` and an in-process cluster."""
from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from helpers import kp_group_consumer, wait_until
from kafkite.testing.cluster import KafkiteCluster
from kafkite.testing.process import BrokerProcess
from test_control_model import consume, control, ok, topic_name
from test_control_plane import http


def _create(bs: str, topic: str, partitions: int = 1, replication: int = 1, **configs) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, partitions, replication, config=configs)])[topic].result(30)


class Traffic:
    """An acks=all confluent-kafka producer sending numbered records until stopped; what was acknowledged."""

    def __init__(self, bs: str, topic: str) -> None:
        self.p = Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                           "retry.backoff.ms": 50, "message.timeout.ms": 60000})
        self.topic, self.acked, self.failed, self.sent = topic, [], [], 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err, msg) -> None:
        (self.failed if err else self.acked).append(err or msg.value())

    def _run(self) -> None:
        while not self._stop.is_set():
            self.p.produce(self.topic, value=b"%06d" % self.sent, on_delivery=self._delivered)
            self.sent += 1
            self.p.poll(0.005)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)
        assert self.p.flush(60) == 0


def test_a_broker_stopped_and_started_over_http_with_acks_all_traffic_nothing_lost():
    """`kafkite control stop 2` / `start 2` on a 3-broker one-process cluster: the leader of the topic moves off the
    stopped broker, the acks=all idempotent producer goes on, every acknowledged record is read back once; the broker
    comes back on its port and rejoins the ISR. Bad input answers 400 and changes nothing."""
    with KafkiteCluster(brokers=3, control=True) as cluster:
        bs, url = cluster.bootstrap_servers, cluster.control_url
        topic = topic_name("stopped")
        _create(bs, topic, 1, 3, **{"min.insync.replicas": "2"})
        wait_until(lambda: len(cluster.isr(topic, 0)) == 3, 30, what="a full ISR")
        victim = cluster.leader(topic, 0)
        with Traffic(bs, topic) as t:
            wait_until(lambda: len(t.acked) >= 50, 30, what="traffic")
            view = ok(control(url, "stop", str(victim)))
            assert {b["id"]: b["live"] for b in view["brokers"]} == {i: i != victim for i in (1, 2, 3)}
            assert cluster.leader(topic, 0) != victim and victim not in cluster.live_brokers
            n = len(t.acked)
            wait_until(lambda: len(t.acked) >= n + 50, 30, what="traffic after the stop")
            port = cluster.ports[victim]
            view = ok(control(url, "start", str(victim)))
            assert all(b["live"] for b in view["brokers"]) and cluster.ports[victim] == port
            wait_until(lambda: len(cluster.isr(topic, 0)) == 3, 30, what="the started broker back in the ISR")
            n = len(t.acked)
            wait_until(lambda: len(t.acked) >= n + 50, 30, what="traffic after the start")
        assert t.failed == []
        got = [v for _, v in consume(bs, topic, [0], len(t.acked), timeout=60)]
        assert sorted(got) == sorted(t.acked) and len(set(got)) == len(got)
        # bad input: nothing changes
        assert control(url, "stop", "9") == (1, {"error": "unknown broker 9: this process runs brokers [1, 2, 3]"})
        code, out = control(url, "start", "1")
        assert code == 1 and "broker 1 is running" in out["error"]
        assert http(url, "POST", "/v1/brokers/stop", {"broker": "1"})[0] == 400
        assert http(url, "POST", "/v1/brokers/stop", {})[0] == 400
        assert cluster.live_brokers == [1, 2, 3]


def test_a_broker_stopped_twice_is_refused():
    with KafkiteCluster(brokers=2, control=True) as cluster:
        url = cluster.control_url
        code, out = control(url, "stop", "2", "--clean")  # a controlled shutdown: ZooKeeper mode's (zk_restart.py)
        assert code == 1 and "clean is served in ZooKeeper mode" in out["error"] and cluster.live_brokers == [1, 2]
        ok(control(url, "stop", "2"))
        code, out = control(url, "stop", "2")
        assert code == 1 and "broker 2 is not running" in out["error"]
        assert ok(control(url, "brokers"))["brokers"][1] == {"id": 2, "live": False, "port": cluster.ports[2], "rack": None}


@pytest.fixture(scope="module")
def served():
    with BrokerProcess(control=True) as b:
        yield b


@pytest.fixture(params=["serve", "in-process"])
def where(request):
    """(bootstrap servers, control URL, compact(), apply_retention(advance_ms)) of `kafkite serve` (over the CLI)
    or an in-process KafkiteCluster (its methods)."""
    if request.param == "serve":
        b = request.getfixturevalue("served")
        url = b.control_url
        yield (b.bootstrap_servers, url,
               lambda topic: ok(control(url, "compact", "--topic", topic))["compacted"],
               lambda topic, ms: ok(control(url, "retention", "--topic", topic, "--advance-ms", str(ms)))["retention"])
    else:
        with KafkiteCluster(brokers=1, control=True) as c:
            yield (c.bootstrap_servers, c.control_url, lambda topic: c.compact(topic),
                   lambda topic, ms: c.apply_retention(topic, advance_ms=ms))


def _produce(bs: str, topic: str, pairs) -> None:
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0})
    for k, v in pairs:
        p.produce(topic, key=k, value=v)
    assert p.flush(30) == 0


def test_compaction_now_and_a_consumer_sees_the_compacted_log(where):
    bs, url, compact, _ = where
    topic = topic_name("compact-now")
    _create(bs, topic, **{"cleanup.policy": "compact"})
    _produce(bs, topic, [(b"k%d" % (i % 3), b"v%d" % i) for i in range(12)])
    [row] = compact(topic)
    assert row["records_removed"] == 9 and row["swapped"] and row["log_end_offset"] == 12, row
    c = Consumer({"bootstrap.servers": bs, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got, deadline = [], time.monotonic() + 30
    while len(got) < 3 and time.monotonic() < deadline:
        got += [(m.offset(), m.key(), m.value()) for m in c.consume(10, timeout=0.3) if not m.error()]
    c.close()
    assert got == [(9, b"k0", b"v9"), (10, b"k1", b"v10"), (11, b"k2", b"v11")]
    _produce(bs, topic, [(b"k0", b"v12")])  # the log goes on after the roll
    [row] = compact(topic)
    assert row["records_removed"] == 1 and row["log_end_offset"] == 13


def test_retention_now_as_if_later_and_the_log_start_moves(where):
    bs, url, _, retention = where
    topic = topic_name("retention-now")
    _create(bs, topic, **{"retention.ms": "600000"})
    _produce(bs, topic, [(None, b"old%d" % i) for i in range(5)])
    [row] = retention(topic, 0)  # nothing is 10 minutes old yet
    assert row["log_start_offset"] == 0 and row["log_end_offset"] == 5
    [row] = retention(topic, 600_001)
    assert row["log_start_offset"] == 5, row
    _produce(bs, topic, [(None, b"new")])
    assert [v for _, v in consume(bs, topic, [0], 1)] == [b"new"]
    c = Consumer({"bootstrap.servers": bs, "group.id": "unused"})
    assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (5, 6)
    c.close()


def test_data_control_bad_input(where):
    bs, url, _, _ = where
    assert http(url, "POST", "/v1/compact", {"partition": 0})[0] == 400
    assert http(url, "POST", "/v1/retention", {"advance_ms": -1})[0] == 400
    assert http(url, "POST", "/v1/retention", {"topic": 3})[0] == 400
    assert ok(control(url, "compact", "--topic", "no-such-topic"))["compacted"] == []


def test_a_single_broker_serve_process_stops_and_starts_its_broker_over_http(served):
    """`kafkite serve` (one broker, no ZooKeeper) can stop and start its broker over HTTP: the control listener
    lives on in the process."""
    url = served.control_url
    ok(control(url, "stop", "1"))
    assert ok(control(url, "brokers"))["brokers"][0]["live"] is False
    ok(control(url, "start", "1"))
    assert ok(control(url, "brokers"))["brokers"][0]["live"] is True
    _produce(served.bootstrap_servers, topic_name("after-restart"), [(None, b"x")])


def test_reset_to_empty(where):
    """POST /v1/reset {"data": true} (`kafkite control reset --data`): 20 topics with records, a group with committed
    offsets and its own configs, a SCRAM user and the controls go; the broker answers on its port at once, a topic of a used name comes
    back empty. The broker's own figure (took_ms) is printed; benchmarks/metadata_writes.py measures it."""
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    bs, url, _, _ = where
    topics = [topic_name("full") for _ in range(20)]
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(t, 2, 1) for t in topics]).values():
        f.result(30)
    _produce(bs, topics[0], [(None, b"r%d" % i) for i in range(10)])
    c = kp_group_consumer(topics[0], bootstrap_servers=bs, group_id="resetg", auto_offset_reset="earliest",
                      enable_auto_commit=False)
    got, deadline = 0, time.monotonic() + 30
    while got < 10 and time.monotonic() < deadline:
        got += sum(len(v) for v in c.poll(timeout_ms=200).values())
    c.commit()
    c.close()
    upsert = UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw")
    for f in admin.alter_user_scram_credentials([upsert]).values():
        f.result(30)
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    group_res = ConfigResource(ResourceType.GROUP, "resetg", incremental_configs=[
        ConfigEntry("consumer.heartbeat.interval.ms", "6000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([group_res])[group_res].result(30)
    ok(control(url, "error", "Produce", "NOT_LEADER_OR_FOLLOWER", "--count", "-1"))
    before = sorted(t for t in admin.list_topics(timeout=10).topics if not t.startswith("__"))  # earlier tests' too
    assert set(topics) <= set(before)
    t0, sent_ms = time.perf_counter(), int(time.time() * 1000)
    code, out = http(url, "POST", "/v1/reset", {"data": True})
    round_trip_ms = (time.perf_counter() - t0) * 1000
    # the figure only: the 100 ms target is measured by benchmarks/metadata_writes.py, not asserted in a timed test
    print(f"reset to empty: broker {out.get('took_ms')} ms, HTTP round trip {round_trip_ms:.1f} ms")
    assert code == 200, out
    assert isinstance(out["took_ms"], (int, float)) and out["took_ms"] >= 0, out
    emptied = out["emptied"]
    assert emptied["topics_deleted"] == before and emptied["groups_deleted"] == ["resetg"]
    assert emptied["users_deleted"] == ["alice"] and emptied["groups_kept"] == {}
    assert emptied["group_configs_deleted"] == ["resetg"]
    # the request log starts over: what stays is only what a live client (the admin's metadata refresh) sent since
    assert out["errors"] == []
    assert [r for r in ok(control(url, "requests"))["requests"] if r["time_ms"] < sent_ms] == []
    md = admin.list_topics(timeout=10)
    assert [t for t in md.topics if not t.startswith("__")] == []
    assert admin.list_consumer_groups().result(10).valid == []
    assert admin.describe_user_scram_credentials().result(10) == {}
    group_res = ConfigResource(ResourceType.GROUP, "resetg")
    assert admin.describe_configs([group_res])[group_res].result(10)["consumer.heartbeat.interval.ms"].value == "5000"
    _create(bs, topics[0])
    assert consume(bs, topics[0], [0], 0, timeout=1) == []
    _produce(bs, topics[0], [(None, b"fresh")])
    assert [v for _, v in consume(bs, topics[0], [0], 1)] == [b"fresh"]
    assert ok(control(url, "reset", "--data"))["emptied"]["topics_deleted"] == [topics[0]]


def test_reset_to_empty_keeps_a_group_with_members_and_says_so():
    with KafkiteCluster(brokers=1, control=True) as cluster:
        bs = cluster.bootstrap_servers
        topic = topic_name("busy")
        _create(bs, topic)
        c = kp_group_consumer(topic, bootstrap_servers=bs, group_id="busyg")
        wait_until(lambda: (c.poll(timeout_ms=100) or True) and bool(c.assignment()), 30, what="an assignment")
        try:
            out = cluster.empty()
            assert out["topics_deleted"] == [topic] and out["groups_kept"] == {"busyg": "NON_EMPTY_GROUP"}
        finally:
            c.close()


@pytest.fixture(params=["serve --brokers 3", "zookeeper"])
def three(request):
    """(bootstrap servers, leader(topic), isr(topic), the control URL that moves leaders, a listener that cannot)
    of `kafkite serve --brokers 3 --control-port 0` or a 3-broker ZooKeeper process cluster (the controller's)."""
    if request.param == "zookeeper":
        import uuid
        from kafkite.testing.process_cluster import ProcessCluster
        zk = request.getfixturevalue("kafkite_zookeeper")
        with ProcessCluster(3, zookeeper_connect=zk.connect_string, control=True,
                            chroot=f"/kafkite-move-{uuid.uuid4().hex[:8]}") as c:
            def isr(topic):
                return list(c.metadata_view(c.controller_id)["topics"][topic][0][2])
            ctl = c.wait_until(lambda: c.controller_id > 0 and c.controller_id, 30, "a controller")
            other = next(b for b in (1, 2, 3) if b != ctl)
            yield c.bootstrap_servers, lambda t: c.leader(t, 0), isr, c.control_url(ctl), c.control_url(other), c
    else:
        with BrokerProcess(brokers=3, control=True) as b:
            url = b.control_url

            def part(topic):
                return ok(control(url, "partitions", "--topic", topic))["partitions"][0]
            yield (b.bootstrap_servers, lambda t: part(t)["leader"], lambda t: part(t)["isr"], url, None, None)


def test_a_leader_moved_with_acks_all_traffic_running_loses_nothing(three):
    """`kafkite control leader T 0 B` while an idempotent acks=all producer runs: the leader moves (its epoch up),
    the producer follows it without an error; `leaderless T 0` takes the leader away for half a second and
    `restore-leader T 0` brings one back; every acknowledged record is read back exactly once."""
    bs, leader, isr, url, not_controller, cluster = three
    topic = topic_name("moving")
    _create(bs, topic, 1, 3, **{"min.insync.replicas": "2"})
    wait_until(lambda: leader(topic) > 0 and len(isr(topic)) == 3, 30, what="a leader and a full ISR")
    with Traffic(bs, topic) as t:
        wait_until(lambda: len(t.acked) >= 50, 30, what="traffic")
        for _ in range(2):  # away and on again
            old = leader(topic)
            wait_until(lambda: len(isr(topic)) == 3, 30, what="a full ISR")
            new = next(b for b in (1, 2, 3) if b != old)
            part = ok(control(url, "leader", topic, "0", str(new)))["partitions"][0]
            assert part["leader"] == new or cluster is not None  # ZooKeeper: the controller's view follows
            wait_until(lambda: leader(topic) == new, 30, what=f"broker {new} leads")
            n = len(t.acked)
            wait_until(lambda: len(t.acked) >= n + 50, 30, what="traffic after the move")
        # leaderless for half a second (the producer's requests answered NOT_LEADER_OR_FOLLOWER, its records
        # waiting), then restored: a live ISR member leads and the traffic goes on
        ok(control(url, "leaderless", topic, "0"))
        wait_until(lambda: leader(topic) == -1, 30, what="no leader")
        time.sleep(0.5)
        assert ok(control(url, "leaderless"))["leaderless"] == [{"topic": topic, "partition": 0}]
        ok(control(url, "restore-leader", topic, "0"))
        wait_until(lambda: leader(topic) > 0, 30, what="a leader again")
        n = len(t.acked)
        wait_until(lambda: len(t.acked) >= n + 50, 30, what="traffic after the restore")
    assert t.failed == []
    got = [v for _, v in consume(bs, topic, [0], len(t.acked), timeout=60)]
    assert sorted(got) == sorted(t.acked) and len(set(got)) == len(got)
    code, out = control(url, "leader", topic, "0", "9")
    assert code == 1 and ("not a live replica" in out["error"] or "unknown broker 9" in out["error"])
    if cluster is not None:  # the Python door (the controller's listener), and another broker's refusal
        cur = leader(topic)
        new = next(b for b in (1, 2, 3) if b != cur)
        wait_until(lambda: len(isr(topic)) == 3, 30, what="a full ISR")
        assert cluster.move_leader(topic, 0, new)["partition"] == 0
        wait_until(lambda: leader(topic) == new, 30, what=f"broker {new} leads")
        code, out = control(not_controller, "leader", topic, "0", str(cur))
        assert code == 1 and "not the controller" in out["error"]
        code, out = control(not_controller, "leaderless", topic, "0")
        assert code == 1 and "not the controller" in out["error"] and leader(topic) == new
        assert cluster.make_leaderless(topic, 0)["leaderless"] == [{"topic": topic, "partition": 0}]
        wait_until(lambda: leader(topic) == -1, 30, what="no leader")
        assert cluster.restore_leader()["leaderless"] == []
        wait_until(lambda: leader(topic) > 0, 30, what="a leader again")


def test_fetch_capped_and_join_group_held_on_a_zookeeper_process_cluster(kafkite_zookeeper):
    """The acceptance script's version cap and hold on a 3-broker ZooKeeper process cluster, each control sent to
    every broker's control listener (each process has its own model): Fetch capped to v4, a confluent-kafka
    consumer still reads (its Fetch requests are v4); JoinGroup held 2 s, nothing joins meanwhile, and the group
    forms after the release (the hold removed)."""
    import uuid
    from kafkite.testing.process_cluster import ProcessCluster
    with ProcessCluster(3, zookeeper_connect=kafkite_zookeeper.connect_string, control=True,
                        chroot=f"/kafkite-acc-{uuid.uuid4().hex[:8]}") as c:
        bs, urls = c.bootstrap_servers, [c.control_url(b) for b in (1, 2, 3)]
        topic = topic_name("capped")
        _create(bs, topic, 1, 3)
        _produce(bs, topic, [(None, b"a"), (None, b"b")])
        for url in urls:
            ok(control(url, "versions", "Fetch", "--max", "4"))
            ok(control(url, "requests", "--clear"))
        assert sorted(v for _, v in consume(bs, topic, [0], 2)) == [b"a", b"b"]
        fetches = [r for url in urls for r in ok(control(url, "requests", "--api", "Fetch"))["requests"]]
        assert fetches and {r["version"] for r in fetches} == {4}, fetches
        for url in urls:
            assert http(url, "DELETE", "/v1/versions")[0] == 200  # uncapped
            ok(control(url, "hold", "JoinGroup"))
        cons = Consumer({"bootstrap.servers": bs, "group.id": topic_name("held"), "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
        cons.subscribe([topic])
        try:
            t0 = time.monotonic()
            held = []
            while time.monotonic() - t0 < 2:
                assert cons.poll(0.1) is None  # nothing read while the join is held
                held = [h for url in urls for h in ok(control(url, "holds"))["held"]]
            assert [h["api"] for h in held] == ["JoinGroup"] and cons.assignment() == []
            for url in urls:
                ok(control(url, "unhold"))
            got, deadline = [], time.monotonic() + 30
            while len(got) < 2 and time.monotonic() < deadline:
                m = cons.poll(0.2)
                if m is not None and not m.error():
                    got.append(m.value())
            assert got == [b"a", b"b"] and time.monotonic() - t0 >= 2
        finally:
            cons.close()


def test_a_coordinator_moved_and_an_isr_shrunk_over_http():
    """`kafkite control coordinator GROUP B`: B leads the group's __consumer_offsets partition, a member commits on
    through it (NOT_COORDINATOR from the old one, FindCoordinator again) and /v1/groups shows the group there;
    `pause-replication B` takes B out of the ISR (replica.lag.time.max.ms), `resume-replication B` brings it back;
    bad input answers 400. The member is confluent-kafka's: kafka-python 3.0.12 can stay REBALANCING after a
    coordinator change with its finished join task unread (helpers.kp_group_consumer)."""
    overrides = {"offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "3",
                 "replica.lag.time.max.ms": "600", "replica.fetch.backoff.ms": "100"}
    with KafkiteCluster(brokers=3, control=True, overrides=overrides) as cluster:
        bs, url = cluster.bootstrap_servers, cluster.control_url
        topic, group = topic_name("coord"), topic_name("cg")
        _create(bs, topic, 1, 3)
        _produce(bs, topic, [(None, b"r%d" % i) for i in range(4)])
        c = Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                      "enable.auto.commit": False})
        c.subscribe([topic])

        def read(want: int, what: str) -> None:
            got, deadline = 0, time.monotonic() + 60  # each phase its own deadline
            while got < want and time.monotonic() < deadline:
                m = c.poll(0.2)
                if m is not None and m.error() is None:
                    got += 1
            assert got == want, f"the member read {got} of {want} records {what}"

        try:
            read(2, "before the move")
            c.commit(asynchronous=False)
            old = cluster.coordinator(group)
            wait_until(lambda: len(cluster.isr("__consumer_offsets", 0)) == 3, 30, what="full offsets ISRs")
            new = next(b for b in (1, 2, 3) if b != old)
            ok(control(url, "coordinator", group, str(new)))
            assert cluster.coordinator(group) == new
            read(2, "across the move")
            c.commit(asynchronous=False)  # through the new coordinator
            [g] = ok(control(url, "groups", "--group", group))["groups"]
            assert g["coordinator"] == new and g["offsets"] == {f"{topic}-0": 4}, g
        finally:
            c.close()
        code, out = control(url, "coordinator", group, "9")
        assert code == 1 and "unknown broker 9" in out["error"]
        assert http(url, "POST", "/v1/coordinators", {"broker": 1})[0] == 400
        # an ISR shrunk: the follower paused, then back
        leader = cluster.leader(topic, 0)
        follower = next(b for b in (1, 2, 3) if b != leader)
        ok(control(url, "pause-replication", str(follower)))
        _produce(bs, topic, [(None, b"while-paused")])
        wait_until(lambda: follower not in cluster.isr(topic, 0), 15, what=f"broker {follower} out of the ISR")
        [part] = ok(control(url, "partitions", "--topic", topic))["partitions"]
        assert follower not in part["isr"] and part["local_replicas"][str(follower)]["log_end_offset"] == 4
        ok(control(url, "resume-replication", str(follower)))
        wait_until(lambda: follower in cluster.isr(topic, 0), 15, what=f"broker {follower} back in the ISR")
        assert http(url, "POST", "/v1/replication/pause", {"broker": 9})[0] == 400


def test_a_coordinator_moved_and_an_isr_shrunk_on_a_zookeeper_process_cluster(kafkite_zookeeper):
    """ZooKeeper mode: the controller's control listener moves a group's coordinator; a follower's own listener
    pauses its replication (it leaves the ISR in the controller's metadata) and resumes it, the other follower's cuts
    its link to the leader and heals it."""
    import uuid
    from kafkite.testing.process_cluster import ProcessCluster
    overrides = {"offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "3",
                 "replica.lag.time.max.ms": "1000"}
    with ProcessCluster(3, zookeeper_connect=kafkite_zookeeper.connect_string, control=True, overrides=overrides,
                        chroot=f"/kafkite-coord-{uuid.uuid4().hex[:8]}") as c:
        bs = c.bootstrap_servers
        topic, group = topic_name("zkcoord"), topic_name("zg")
        _create(bs, topic, 1, 3)
        _produce(bs, topic, [(None, b"a")])
        k = kp_group_consumer(topic, bootstrap_servers=bs, group_id=group, auto_offset_reset="earliest",
                          enable_auto_commit=False)
        try:
            deadline = time.monotonic() + 30
            while not k.assignment() and time.monotonic() < deadline:
                k.poll(timeout_ms=200)
            k.commit()
            from kafkite.coordinator.hashing import partition_for
            part = partition_for(group, 3)
            c.wait_until(lambda: len(c.metadata_view(c.controller_id)["topics"]["__consumer_offsets"][part][2]) == 3,
                         30, "a full offsets ISR")
            old = c.leader("__consumer_offsets", part)
            new = next(b for b in (1, 2, 3) if b != old)
            ok(control(c.control_url(c.controller_id), "coordinator", group, str(new)))
            c.wait_until(lambda: c.leader("__consumer_offsets", part) == new, 30, f"broker {new} coordinates")
            k.commit()  # through the new coordinator
            c.wait_until(lambda: [g["coordinator"] for g in ok(control(c.control_url(new), "groups", "--group",
                                                                           group))["groups"]] == [new], 30,
                         "the group loaded on the new coordinator")
        finally:
            k.close()
        leader = c.leader(topic, 0)
        follower = next(b for b in (1, 2, 3) if b != leader)

        def isr():
            return c.metadata_view(c.controller_id)["topics"][topic][0][2]
        other = next(b for b in (1, 2, 3) if b not in (leader, follower))  # its link to the leader cut meanwhile
        ok(control(c.control_url(follower), "pause-replication", str(follower)))
        out = ok(control(c.control_url(other), "cut-replication", str(other), str(leader)))
        assert out["replication"] == [{"broker": other, "paused": False, "cut_from": [leader]}]
        _produce(bs, topic, [(None, b"b")])
        c.wait_until(lambda: follower not in isr() and other not in isr(), 20, f"brokers {follower}, {other} out of "
                     "the ISR")
        ok(control(c.control_url(follower), "resume-replication", str(follower)))
        ok(control(c.control_url(other), "heal-replication", str(other), str(leader)))
        c.wait_until(lambda: follower in isr() and other in isr(), 20, f"brokers {follower}, {other} back in the ISR")
        code, out = control(c.control_url(follower), "pause-replication", str(leader))  # another process's broker
        assert code == 1 and f"unknown broker {leader}" in out["error"]
