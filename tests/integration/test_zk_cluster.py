"""ZooKeeper mode acceptance: three `kafkite serve` processes on one real ZooKeeper (kafkite.testing.ProcessCluster).

One ZooKeeper (the session fixture `kafkite_zookeeper`) serves every cluster of this file, each under a
chroot of its own. Tests that leave the cluster as they found it share a module-scoped cluster; the
destructive ones (kill -9, SIGSTOP, a coordinator's crash) get a fresh cluster each. Failover clusters
use a 4 s ZooKeeper session (our ZooKeeperServer's tickTime is 500 ms: sessions of 1-60 s are allowed).
"""
from __future__ import annotations

import base64
import itertools
import re
import time
import uuid

import pytest

from kafkite.testing.process_cluster import ProcessCluster
from helpers import kp_group_consumer

pytestmark = pytest.mark.timeout(300)

SESSION_MS = 4000                     # zookeeper.session.timeout.ms of the failover clusters
# ZooKeeper expires sessions on tick boundaries (tickTime 500 ms) and the new controller still has to
# see the deletion and win the race: "within session timeout + 1 s" plus 0.5 s of slack for that
# tick and for the 2-core test machine.
FAILOVER_SLACK_S = 1.5
_chroots = itertools.count(1)


def _cluster(zk, name: str, **kw) -> ProcessCluster:
    return ProcessCluster(3, zookeeper_connect=zk.connect_string, chroot=f"/kafkite-test-{name}-{next(_chroots)}",
                          **kw)


def _why(cluster: ProcessCluster) -> str:
    return "\n" + cluster.log_tails(25)


def _wait(cluster: ProcessCluster, predicate, timeout: float, what: str):
    try:
        return cluster.wait_until(predicate, timeout, what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}{_why(cluster)}") from None


def _views(cluster: ProcessCluster, ids) -> dict[int, dict]:
    return {i: cluster.metadata_view(i) for i in ids}


def _settled(cluster: ProcessCluster, ids=None):
    """Every given (default: every live) broker answers Metadata, all alike, naming the ZooKeeper
    controller and listing exactly the registered brokers: the views, or None."""
    ids = list(cluster.live_brokers if ids is None else ids)
    ctl = cluster.controller_id
    if ctl == -1 or not ids:
        return None
    views = _views(cluster, ids)
    first = views[ids[0]]
    registered = cluster.live_brokers
    ok = all(v == first for v in views.values()) and first["controller_id"] == ctl \
        and [b[0] for b in first["brokers"]] == registered
    return views if ok else None


def _all_led(views: dict[int, dict] | None) -> bool:
    """Every partition of every topic has a leader (in agreeing views, as _settled returns them)."""
    if not views:
        return False
    topics = next(iter(views.values()))["topics"]
    return all(s[0] != -1 for parts in topics.values() for s in parts.values())


def _admin(bootstrap: str):
    from kafka.admin import KafkaAdminClient
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000, client_id="zk-test")


def _create_topic(cluster: ProcessCluster, via: int, name: str, partitions: int = 6, configs: dict | None = None):
    """Create through the admin client bootstrapped at ONE broker; wait until every live broker lists the
    topic with a leader for each partition; returns {partition: leader}."""
    from kafka.admin import NewTopic
    admin = _admin(cluster.bootstrap_of(via))
    try:
        admin.create_topics([NewTopic(name, partitions, 1, topic_configs=configs or {})])
    finally:
        admin.close()

    def everywhere():
        views = _views(cluster, cluster.live_brokers)
        parts = [v["topics"].get(name, {}) for v in views.values()]
        if all(len(p) == partitions and all(s[0] != -1 for s in p.values()) for p in parts) \
                and all(p == parts[0] for p in parts):
            return {i: s[0] for i, s in parts[0].items()}
        return None
    return _wait(cluster, everywhere, 30, f"topic {name} on every broker with leaders")


@pytest.fixture(scope="module")
def cluster(kafkite_zookeeper):
    with _cluster(kafkite_zookeeper, "shared") as c:
        yield c


# -- 1. registration and one controller --------------------------------------------------------------
def test_three_brokers_register_and_agree_on_one_controller(cluster):
    _wait(cluster, lambda: cluster.live_brokers == [1, 2, 3], 20, "brokers 1, 2, 3 under /brokers/ids")
    ctl = _wait(cluster, lambda: cluster.controller_id if cluster.controller_id in (1, 2, 3) else None, 20,
                "a controller in /controller")
    assert cluster.controller_epoch >= 1
    views = _wait(cluster, lambda: _settled(cluster), 20, "every broker's metadata names the controller and 3 brokers")
    for i, v in views.items():
        assert v["controller_id"] == ctl, (i, v)
        assert v["brokers"] == [(b, "127.0.0.1", cluster.ports[b]) for b in (1, 2, 3)], (i, v)
    for b in (1, 2, 3):
        eps = cluster.endpoints(b)
        assert eps["PLAINTEXT"] == ("127.0.0.1", cluster.ports[b]), eps
        assert "INTERNAL" in eps and eps["INTERNAL"][1] != cluster.ports[b], eps


# -- 2. clients across the brokers through one bootstrap broker ------------------------------------------
N_MESSAGES = 300


def _expected(tag: str) -> dict[bytes, bytes]:
    return {f"{tag}-k{i}".encode(): f"{tag}-v{i}".encode() for i in range(N_MESSAGES)}


def _spread(cluster, name: str, via: int) -> None:
    leaders = _create_topic(cluster, via, name)
    assert set(leaders.values()) == {1, 2, 3}, f"leaders of {name} not on every broker: {leaders}"


def test_kafka_python_across_brokers(cluster):
    from kafka import KafkaProducer
    _spread(cluster, "spread-kp", via=1)
    want = _expected("kp")
    p = KafkaProducer(bootstrap_servers=cluster.bootstrap_of(2), acks="all", retries=5)
    try:
        futures = [p.send("spread-kp", key=k, value=v) for k, v in want.items()]
        parts = {f.get(timeout=30).partition for f in futures}
    finally:
        p.close()
    assert parts == set(range(6)), parts
    c = kp_group_consumer("spread-kp", bootstrap_servers=cluster.bootstrap_of(3), group_id="kp-group",
                      auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=1000)
    got: dict[bytes, bytes] = {}
    try:
        deadline = time.monotonic() + 60
        while len(got) < N_MESSAGES and time.monotonic() < deadline:
            for batch in c.poll(timeout_ms=500).values():
                got.update((m.key, m.value) for m in batch)
    finally:
        c.close()
    assert got == want, f"{len(got)} of {N_MESSAGES} read{_why(cluster)}"


def test_confluent_kafka_across_brokers(cluster):
    from confluent_kafka import Consumer, Producer
    _spread(cluster, "spread-ck", via=2)
    want = _expected("ck")
    errors, parts = [], set()

    def delivered(err, msg):
        if err is not None:
            errors.append(err)
        else:
            parts.add(msg.partition())
    p = Producer({"bootstrap.servers": cluster.bootstrap_of(3), "acks": "all"})
    for k, v in want.items():
        p.produce("spread-ck", key=k, value=v, on_delivery=delivered)
    assert p.flush(60) == 0
    assert not errors, errors[:3]
    assert parts == set(range(6)), parts
    c = Consumer({"bootstrap.servers": cluster.bootstrap_of(1), "group.id": "ck-group",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got: dict[bytes, bytes] = {}
    try:
        c.subscribe(["spread-ck"])
        deadline = time.monotonic() + 60
        while len(got) < N_MESSAGES and time.monotonic() < deadline:
            for m in c.consume(500, timeout=0.5):
                if m.error() is None:
                    got[m.key()] = m.value()
    finally:
        c.close()
    assert got == want, f"{len(got)} of {N_MESSAGES} read{_why(cluster)}"


def test_transaction_across_brokers_commits_atomically(cluster):
    """A transaction over partitions led by all three processes: the coordinator's markers reach the other
    brokers as WriteTxnMarkers over their inter-broker listeners; read_committed reads exactly the committed
    records, read_uncommitted the aborted ones too."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    _spread(cluster, "spread-tx", via=3)
    p = Producer({"bootstrap.servers": cluster.bootstrap_of(1), "transactional.id": "zk-tx"})
    p.init_transactions(60)
    committed = []
    for t in range(4):
        p.begin_transaction()
        vals = [b"%d-%d" % (t, i) for i in range(12)]
        for i, v in enumerate(vals):
            p.produce("spread-tx", value=v, partition=i % 6)
        assert p.flush(30) == 0
        if t == 2:
            p.abort_transaction(60)
        else:
            p.commit_transaction(60)
            committed += vals

    def read(isolation: str) -> list[bytes]:
        c = Consumer({"bootstrap.servers": cluster.bootstrap_of(2), "group.id": f"tx-{isolation}",
                      "isolation.level": isolation, "enable.partition.eof": True, "enable.auto.commit": False})
        out, eof = [], set()
        try:
            c.assign([TopicPartition("spread-tx", i, 0) for i in range(6)])
            deadline = time.monotonic() + 60
            while len(eof) < 6 and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is None:
                    continue
                if m.error():
                    if m.error().code() == -191:  # _PARTITION_EOF
                        eof.add(m.partition())
                    continue
                out.append(m.value())
        finally:
            c.close()
        return sorted(out)
    # commit_transaction returns once PrepareCommit is durable: the markers follow
    _wait(cluster, lambda: read("read_committed") == sorted(committed), 60, "the committed records, read_committed")
    assert len(read("read_uncommitted")) == 48


def test_java_client_across_brokers(cluster):
    from clients.drivers import need, run_java, summary
    need("java")
    _spread(cluster, "spread-java", via=3)
    produced = summary(run_java("produce", cluster.bootstrap_of(3), "spread-java", N_MESSAGES, "--acks", "all"))
    assert produced["acked"] == N_MESSAGES and produced["errors"] == 0, produced
    assert sorted(produced["partitions"]) == [str(p) for p in range(6)], produced
    consumed = summary(run_java("consume-group", cluster.bootstrap_of(1), "spread-java", "java-group", N_MESSAGES,
                                "--timeout-ms", "60000"))
    assert consumed["consumed"] == N_MESSAGES and consumed["timed_out"] is False, f"{consumed}{_why(cluster)}"


# -- 6. topics deleted and the ZooKeeper tree ------------------------------------------------------------
def test_delete_topic_through_admin_client(cluster):
    _create_topic(cluster, 1, "doomed", partitions=3)
    assert "doomed" in cluster.zk_children("/brokers/topics")
    admin = _admin(cluster.bootstrap_of(2))
    try:
        admin.delete_topics(["doomed"], timeout_ms=20000)
    finally:
        admin.close()

    def gone():
        return ("doomed" not in cluster.zk_children("/brokers/topics")
                and cluster.zk_children("/admin/delete_topics") == []
                and "doomed" not in cluster.zk_children("/config/topics")
                and all("doomed" not in cluster.metadata_view(i)["topics"] for i in cluster.live_brokers))
    _wait(cluster, gone, 30, "doomed gone from ZooKeeper and from every broker's metadata")



def test_create_partitions_through_any_broker(cluster):
    """CreatePartitions writes the longer assignment; the controller reads that one topic again, elects the new
    partitions' leaders and tells every broker."""
    from kafka import KafkaProducer
    from kafka.admin import NewPartitions
    _create_topic(cluster, 1, "growing", partitions=2)
    admin = _admin(cluster.bootstrap_of(3))
    try:
        admin.create_partitions({"growing": NewPartitions(5)})
    finally:
        admin.close()

    def grown():
        parts = [cluster.metadata_view(b)["topics"].get("growing", {}) for b in (1, 2, 3)]
        return all(len(p) == 5 and all(s[0] != -1 for s in p.values()) for p in parts) and parts[0] == parts[1] == parts[2]
    _wait(cluster, grown, 30, "five partitions with leaders on every broker")
    assert sorted(map(int, cluster.zk_get("/brokers/topics/growing")["partitions"])) == [0, 1, 2, 3, 4]
    p = KafkaProducer(bootstrap_servers=cluster.bootstrap_of(2), acks="all")
    try:
        assert p.send("growing", b"x", partition=4).get(timeout=30).partition == 4
    finally:
        p.close()


def test_delete_topic_while_a_replicas_broker_is_down(kafkite_zookeeper):
    """Kafka's TopicDeletionManager: the topic leaves every live broker's metadata at once, but its nodes and
    the /admin/delete_topics marker stay (and its name cannot be taken) until the broker that was down has
    come back and deleted its copy."""
    from kafka import KafkaProducer
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError
    with _cluster(kafkite_zookeeper, "delete-down", session_timeout_ms=SESSION_MS) as c:
        _wait(c, lambda: c.live_brokers == [1, 2, 3] and _settled(c), 30, "cluster up")
        leaders = _create_topic(c, 1, "doomed", partitions=6)
        p = KafkaProducer(bootstrap_servers=c.bootstrap_of(1), acks="all")
        try:
            for i in range(60):
                p.send("doomed", value=b"x", partition=i % 6)
            p.flush(30)
        finally:
            p.close()
        down = next(b for b in (1, 2, 3) if b != c.controller_id and b in leaders.values())
        live = [b for b in (1, 2, 3) if b != down]

        def dirs(broker: int) -> list[str]:
            return sorted(d.name for d in (c.data_dir / f"broker-{broker}").glob("doomed-*"))
        held = dirs(down)
        assert held and all(dirs(b) for b in live), {b: dirs(b) for b in (1, 2, 3)}

        c.stop_broker(down)
        _wait(c, lambda: down not in c.live_brokers, 30, f"broker {down} deregistered")
        admin = _admin(c.bootstrap_of(live[0]))
        try:
            admin.delete_topics(["doomed"], timeout_ms=20000)
            _wait(c, lambda: all("doomed" not in c.metadata_view(b)["topics"] for b in live)
                  and all(not dirs(b) for b in live), 30, "doomed gone from the live brokers and their disks")
            # pending: the broker that is down still holds a copy
            assert c.zk_children("/admin/delete_topics") == ["doomed"]
            assert "doomed" in c.zk_children("/brokers/topics")
            with pytest.raises(TopicAlreadyExistsError):
                admin.create_topics([NewTopic("doomed", 1, 1)])
        finally:
            admin.close()
        # the controller changes meanwhile (it held replicas too): the new one finds the marker and resumes
        old_controller, epoch = c.controller_id, c.controller_epoch
        c.stop_broker(old_controller)
        _wait(c, lambda: c.controller_id not in (-1, old_controller) and c.controller_epoch == epoch + 1, 30,
              "another controller")
        c.start_broker(down)
        c.start_broker(old_controller)

        def finished():
            return (c.live_brokers == [1, 2, 3] and c.zk_children("/admin/delete_topics") == []
                    and "doomed" not in c.zk_children("/brokers/topics")
                    and "doomed" not in c.zk_children("/config/topics") and not any(dirs(b) for b in (1, 2, 3))
                    and all("doomed" not in c.metadata_view(b)["topics"] for b in (1, 2, 3)))
        _wait(c, finished, 30, "both brokers back, their copies deleted, the deletion completed")
        # the name is free again, for a new topic with nothing of the old one's records
        _create_topic(c, 2, "doomed", partitions=6)
        from kafka import KafkaConsumer
        cons = KafkaConsumer("doomed", bootstrap_servers=c.bootstrap_of(down), auto_offset_reset="earliest",
                             consumer_timeout_ms=2000)
        try:
            assert list(cons) == []
        finally:
            cons.close()


def test_dynamic_broker_and_group_configs_are_kept_in_zookeeper(cluster):
    """AlterConfigs on a broker resource (Kafka 3.x on ZooKeeper): the empty name writes the cluster-wide default
    /config/brokers/<default>, a broker's id its own /config/brokers/<id>, each with a /config/changes
    notification every broker follows; a broker reads both when it starts. A group's own configs (the GROUP
    resource: Kafkite's /config/groups/<group>, by analogy) likewise: what every broker's group coordinator uses,
    which its DescribeConfigs shows."""
    from kafka.protocol.metadata import MetadataRequest
    from kafkite.testing.wire_client import WireClient

    from test_config_keys import _describe_broker_key, _incremental_broker
    from test_group_configs import describe as describe_group, incremental as incremental_group

    def describe(b: int):
        with WireClient.connect(cluster.bootstrap_of(b)) as w:
            return _describe_broker_key(w, b, "num.partitions")[:2]

    def group_heartbeat(b: int):
        with WireClient.connect(cluster.bootstrap_of(b)) as w:
            return describe_group(w, "zk/group", ["consumer.heartbeat.interval.ms"])[2][
                "consumer.heartbeat.interval.ms"][:2]
    with WireClient.connect(cluster.bootstrap_of(1)) as w:
        assert _incremental_broker(w, "", "num.partitions", "4") == 0
        assert incremental_group(w, "zk/group", ("consumer.heartbeat.interval.ms", 0, "6000")) == (0, None)
    with WireClient.connect(cluster.bootstrap_of(2)) as w:
        assert _incremental_broker(w, "2", "num.partitions", "6") == 0
    try:
        assert cluster.zk_get("/config/brokers/<default>") == {"version": 1, "config": {"num.partitions": "4"}}
        assert cluster.zk_get("/config/brokers/2") == {"version": 1, "config": {"num.partitions": "6"}}
        assert cluster.zk_get("/config/groups/zk%2Fgroup") == {"version": 1, "config": {
            "consumer.heartbeat.interval.ms": "6000"}}
        changes = [cluster.zk_get(f"/config/changes/{c}") for c in cluster.zk_children("/config/changes")]
        assert {"version": 2, "entity_path": "brokers/<default>"} in changes
        assert {"version": 2, "entity_path": "brokers/2"} in changes
        assert {"version": 2, "entity_path": "groups/zk%2Fgroup"} in changes
        _wait(cluster, lambda: [describe(b) for b in (1, 2, 3)] == [("4", 3), ("6", 2), ("4", 3)], 20,
              "every broker follows the notifications")
        _wait(cluster, lambda: [group_heartbeat(b) for b in (1, 2, 3)] == [("6000", 8)] * 3, 20,
              "every broker follows the group's notification")
        cluster.stop_broker(3)
        cluster.start_broker(3)
        _wait(cluster, lambda: cluster.live_brokers == [1, 2, 3] and _all_led(_settled(cluster)), 30, "broker 3 back")
        assert describe(3) == ("4", 3)  # read from ZooKeeper at start-up
        assert group_heartbeat(3) == ("6000", 8)
        with WireClient.connect(cluster.bootstrap_of(3)) as w:  # what it takes effect on: auto-creation there
            _wait(cluster, lambda: len(w.request(MetadataRequest[4](topics=["dyn-auto"], allow_auto_topic_creation=True),
                                                 4).topics[0].partitions) == 4, 20, "dyn-auto created with 4 partitions")
    finally:
        with WireClient.connect(cluster.bootstrap_of(1)) as w:
            assert _incremental_broker(w, "", "num.partitions", None, op=1) == 0
        with WireClient.connect(cluster.bootstrap_of(2)) as w:
            assert _incremental_broker(w, "2", "num.partitions", None, op=1) == 0
            assert incremental_group(w, "zk/group", ("consumer.heartbeat.interval.ms", 1, None)) == (0, None)
    assert cluster.zk_get("/config/brokers/<default>") == {"version": 1, "config": {}}
    assert cluster.zk_get("/config/groups/zk%2Fgroup") == {"version": 1, "config": {}}
    _wait(cluster, lambda: [group_heartbeat(b) for b in (1, 2, 3)] == [("5000", 5)] * 3, 20,
          "every broker back to the broker's default")

# The layout the README documents (Kafka 3.x's, kafkite.controller.zk_data): the persistent parents a
# broker creates at start-up, then the nodes with values.
PERSISTENT = {"/brokers", "/brokers/ids", "/brokers/topics", "/brokers/seqid", "/config", "/config/changes",
              "/config/topics", "/config/clients", "/config/users", "/config/brokers", "/admin",
              "/admin/delete_topics", "/consumers", "/isr_change_notification", "/latest_producer_id_block",
              "/log_dir_event_notification", "/cluster"}
LAYOUT = [re.compile(p) for p in (
    r"/cluster/id", r"/controller", r"/controller_epoch", r"/brokers/ids/\d+", r"/brokers/topics/[^/]+",
    r"/brokers/topics/[^/]+/partitions", r"/brokers/topics/[^/]+/partitions/\d+",
    r"/brokers/topics/[^/]+/partitions/\d+/state", r"/config/topics/[^/]+", r"/config/brokers/(\d+|<default>)",
    r"/config/changes/config_change_\d{10}", r"/admin/delete_topics/[^/]+",
    r"/config/groups", r"/config/groups/[^/]+")]  # (Kafkite's: a group's own configs, made when first set)


def test_zookeeper_tree_has_the_documented_shape(cluster):
    from kafka import KafkaProducer
    _create_topic(cluster, 3, "configured", partitions=2, configs={"retention.ms": "3600000"})
    p = KafkaProducer(bootstrap_servers=cluster.bootstrap_of(2), enable_idempotence=True)  # a producer id block
    try:
        p.send("configured", b"x").get(timeout=20)
    finally:
        p.close()
    def agreed():
        """The brokers' views alike and the partition states in ZooKeeper equal to them: read together, as an ISR
        may still grow (a follower catching up) between one read and the next."""
        views = _settled(cluster)
        if views is None:
            return None
        meta, tree = views[cluster.controller_id], cluster.zk_tree()
        for t, parts in meta["topics"].items():
            for p, (leader, leader_epoch, isr, _replicas) in parts.items():
                state = tree.get(f"/brokers/topics/{t}/partitions/{p}/state")
                if state is None or (state["leader"], state["leader_epoch"], tuple(sorted(state["isr"]))) != (
                        leader, leader_epoch, isr):
                    return None
        return meta, tree
    meta, tree = _wait(cluster, agreed, 20, "brokers agree with ZooKeeper")
    undocumented = sorted(p for p in tree if p not in PERSISTENT and not any(r.fullmatch(p) for r in LAYOUT))
    assert not undocumented, f"znodes outside the documented layout: {undocumented}"

    assert set(tree["/cluster/id"]) == {"version", "id"} and tree["/cluster/id"]["version"] == "1"
    ctl = tree["/controller"]
    assert ctl["version"] == 1 and ctl["brokerid"] == cluster.controller_id and int(ctl["timestamp"]) > 0
    assert isinstance(tree["/controller_epoch"], int) and tree["/controller_epoch"] >= 1
    assert sorted(int(p.rsplit("/", 1)[1]) for p in tree if re.fullmatch(r"/brokers/ids/\d+", p)) == [1, 2, 3]
    for b in (1, 2, 3):
        reg = tree[f"/brokers/ids/{b}"]
        assert reg["version"] == 5 and reg["jmx_port"] == -1 and int(reg["timestamp"]) > 0, reg
        assert set(reg["listener_security_protocol_map"]) >= {"PLAINTEXT", "INTERNAL"}, reg
        assert f"PLAINTEXT://127.0.0.1:{cluster.ports[b]}" in reg["endpoints"], reg
        assert any(e.startswith("INTERNAL://") for e in reg["endpoints"]), reg
        assert (reg["host"], reg["port"]) == ("127.0.0.1", cluster.ports[b]), reg
    assert [p for p in tree if p.startswith("/admin/delete_topics/")] == []

    topics = sorted(p.rsplit("/", 1)[1] for p in tree if re.fullmatch(r"/brokers/topics/[^/]+", p))
    assert set(topics) == set(meta["topics"]), (topics, sorted(meta["topics"]))
    assert "configured" in topics
    for t in topics:
        node = tree[f"/brokers/topics/{t}"]
        assert isinstance(node["topic_id"], str) and len(node["topic_id"]) == 22, node
        assert node["version"] == 3 and node["adding_replicas"] == {} and node["removing_replicas"] == {}, node
        assert sorted(map(int, node["partitions"])) == sorted(meta["topics"][t]), (t, node)
        for p, replicas in node["partitions"].items():
            state = tree[f"/brokers/topics/{t}/partitions/{p}/state"]
            assert set(state) == {"version", "leader", "leader_epoch", "isr", "controller_epoch"}, state
            leader, leader_epoch, isr, meta_replicas = meta["topics"][t][int(p)]
            assert (state["leader"], state["leader_epoch"], tuple(sorted(state["isr"]))) == (leader, leader_epoch, isr)
            assert tuple(replicas) == meta_replicas
            assert 1 <= state["controller_epoch"] <= tree["/controller_epoch"]
    assert tree["/config/topics/configured"] == {"version": 1, "config": {"retention.ms": "3600000"}}
    for path, value in tree.items():
        if path.startswith("/config/changes/config_change_"):
            assert value["version"] == 2 and value["entity_path"].startswith(("topics/", "brokers/", "groups/")), (
                path, value)
    block = tree["/latest_producer_id_block"]
    assert set(block) == {"version", "broker", "block_start", "block_end"} and block["broker"] in (1, 2, 3), block
    assert int(block["block_end"]) - int(block["block_start"]) == 999, block


# -- 3. kill -9 of the controller ------------------------------------------------------------------------
def test_kill_controller_elects_another_within_session_timeout(kafkite_zookeeper):
    with _cluster(kafkite_zookeeper, "kill", session_timeout_ms=SESSION_MS) as c:
        _wait(c, lambda: c.live_brokers == [1, 2, 3] and _settled(c), 30, "cluster up")
        _create_topic(c, 1, "survives", partitions=6)
        old, old_epoch = c.controller_id, c.controller_epoch
        t0 = time.monotonic()
        c.kill_broker(old)
        new = _wait(c, lambda: c.controller_id if c.controller_id not in (-1, old) else None,
                    SESSION_MS / 1000 + 10, "another controller in /controller")
        elapsed = time.monotonic() - t0
        assert elapsed <= SESSION_MS / 1000 + FAILOVER_SLACK_S, \
            f"new controller {new} after {elapsed:.2f}s (session {SESSION_MS} ms){_why(c)}"
        _wait(c, lambda: c.controller_epoch > old_epoch, 30, "/controller_epoch written by the new controller")
        assert c.controller_epoch == old_epoch + 1
        survivors = [b for b in (1, 2, 3) if b != old]
        assert c.live_brokers == survivors
        views = _wait(c, lambda: _settled(c, survivors), 20, "the survivors' metadata equal")
        for v in views.values():
            assert v["controller_id"] == new
            assert old not in [b[0] for b in v["brokers"]], v["brokers"]
            # RF 1: the dead broker's partitions have no leader; the others kept theirs
            assert all(s[0] != old for s in v["topics"]["survives"].values()), v["topics"]["survives"]


# -- 4. SIGSTOP of the controller past its session: a zombie ---------------------------------------------
def _update_metadata(controller_id: int, epoch: int):
    from kafkite.wire.interbroker import UpdateMetadataRequest
    R = UpdateMetadataRequest
    T = R.UpdateMetadataTopicState
    P = T.UpdateMetadataPartitionState
    # a bogus partition on a topic nobody created, and no live brokers: applied, it would show at once
    part = P(partition_index=0, controller_epoch=epoch, leader=controller_id, leader_epoch=99, isr=[controller_id],
             zk_version=99, replicas=[controller_id], offline_replicas=[])
    return R(controller_id=controller_id, controller_epoch=epoch, broker_epoch=-1,
             topic_states=[T(topic_name="zombie-topic", topic_id=uuid.uuid4(), partition_states=[part])],
             live_brokers=[])


def _leader_and_isr(controller_id: int, epoch: int, topic: str, topic_id: uuid.UUID, partitions: list[int],
                    broker: int):
    """What a deposed controller would send `broker`: leadership of the topic's partitions moved to itself."""
    from kafkite.wire.interbroker import LeaderAndIsrRequest
    R = LeaderAndIsrRequest
    T = R.LeaderAndIsrTopicState
    P = T.LeaderAndIsrPartitionState
    parts = [P(partition_index=p, controller_epoch=epoch, leader=controller_id, leader_epoch=99,
               isr=[controller_id, broker], partition_epoch=99, replicas=[controller_id, broker], adding_replicas=[],
               removing_replicas=[], is_new=False, leader_recovery_state=0) for p in partitions]
    return R(controller_id=controller_id, is_kraft_controller=False, controller_epoch=epoch, broker_epoch=-1,
             update_type=0, topic_states=[T(topic_name=topic, topic_id=topic_id, partition_states=parts)],
             live_leaders=[])


def _kafka_uuid(s: str) -> uuid.UUID:
    """Kafka's Uuid.toString (URL-safe base64 of the 16 bytes, unpadded) as a UUID."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)))


def test_paused_controller_is_deposed_and_refused(kafkite_zookeeper):
    from kafkite.testing.wire_client import WireClient
    with _cluster(kafkite_zookeeper, "pause", session_timeout_ms=SESSION_MS) as c:
        _wait(c, lambda: c.live_brokers == [1, 2, 3] and _settled(c), 30, "cluster up")
        _create_topic(c, 2, "steady", partitions=3)
        old, old_epoch = c.controller_id, c.controller_epoch
        c.pause_broker(old)
        try:
            new = _wait(c, lambda: c.controller_id if c.controller_id not in (-1, old) else None,
                        SESSION_MS / 1000 + 10, "another controller while the old one is frozen")
            _wait(c, lambda: old not in c.live_brokers, 30, "the frozen broker's registration expired")
            new_epoch = _wait(c, lambda: c.controller_epoch if c.controller_epoch > old_epoch else None, 30,
                              "the new controller's epoch")
            assert new_epoch == old_epoch + 1
        finally:
            c.resume_broker(old)
        _wait(c, lambda: old in c.live_brokers, 20, "the resumed broker registered again")
        assert c.controller_id == new and c.controller_epoch == new_epoch, "the resumed broker took /controller back"
        views = _wait(c, lambda: _settled(c, [1, 2, 3]), 30, "every broker's metadata names the new controller")
        assert all(v["controller_id"] == new for v in views.values())

        # what the deposed controller could still send: every broker (the resumed one too: it learnt the new
        # epoch) refuses it with STALE_CONTROLLER_EPOCH and changes nothing
        steady_id = _kafka_uuid(c.zk_get("/brokers/topics/steady")["topic_id"])
        for b in (1, 2, 3):
            before = c.metadata_view(b)
            host, port = c.endpoints(b)["INTERNAL"]
            with WireClient(host, port, client_id=f"zombie-controller-{old}") as w:
                um = w.request(_update_metadata(old, old_epoch), 8)
                lai = w.request(_leader_and_isr(old, old_epoch, "steady", steady_id, [0, 1, 2], b), 7)
            assert um.error_code == 11, f"broker {b}: UpdateMetadata of epoch {old_epoch} (now {new_epoch}): {um}"
            assert lai.error_code == 11, f"broker {b}: LeaderAndIsr of epoch {old_epoch} (now {new_epoch}): {lai}"
            after = c.metadata_view(b)
            assert after == before and "zombie-topic" not in after["topics"], (before, after)
        assert c.controller_id == new and c.controller_epoch == new_epoch
        # the leaders of "steady" still lead: a record to each partition is acknowledged by all of them
        from kafka import KafkaProducer
        p = KafkaProducer(bootstrap_servers=c.bootstrap_of(new), acks="all", retries=0)
        try:
            for part in range(3):
                p.send("steady", value=b"after the zombie", partition=part).get(timeout=20)
        finally:
            p.close()


# -- 5. kill -9 of a group coordinator's broker ----------------------------------------------------------
def test_group_resumes_after_its_coordinators_broker_crashes(kafkite_zookeeper):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.protocol.metadata import FindCoordinatorRequest

    from kafkite.coordinator.hashing import partition_for
    from kafkite.testing.wire_client import WireClient
    group, topic = "crash-group", "crash-topic"
    with _cluster(kafkite_zookeeper, "coord", session_timeout_ms=SESSION_MS) as c:
        _wait(c, lambda: c.live_brokers == [1, 2, 3] and _settled(c), 30, "cluster up")
        _create_topic(c, 1, topic, partitions=6)

        def produce(tag: str, n: int, via: int) -> None:
            p = KafkaProducer(bootstrap_servers=c.bootstrap_of(via), acks="all", retries=10)
            try:
                for f in [p.send(topic, key=f"{tag}{i}".encode(), value=f"{tag}{i}".encode()) for i in range(n)]:
                    f.get(timeout=60)
            finally:
                p.close()

        def consumer(via: int) -> KafkaConsumer:
            return kp_group_consumer(topic, bootstrap_servers=c.bootstrap_of(via), group_id=group,
                                 auto_offset_reset="earliest", enable_auto_commit=False)

        def read(cons: KafkaConsumer, n: int) -> list:
            got = []
            deadline = time.monotonic() + 60
            while len(got) < n and time.monotonic() < deadline:
                for batch in cons.poll(timeout_ms=500).values():
                    got.extend(batch)
            return got

        produce("a", 120, via=2)
        first = consumer(3)
        try:
            got = read(first, 120)
            assert len(got) == 120, f"{len(got)} of 120{_why(c)}"
            first.commit()
            # a partition nothing was read from has no commit: the group starts it at the beginning
            committed = {p: first.committed(TopicPartition(topic, p)) or 0 for p in range(6)}
        finally:
            first.close()
        assert sum(committed.values()) == 120, committed

        # the coordinator: the leader of the group's __consumer_offsets partition, as FindCoordinator says
        offsets_leader = c.leader("__consumer_offsets", partition_for(group, 6))
        with WireClient.connect(c.bootstrap_of(1)) as w:
            found = w.request(FindCoordinatorRequest(key=group, key_type=0), 1)
        assert found.error_code == 0 and found.node_id == offsets_leader, (found, offsets_leader)
        coord = offsets_leader
        others = [b for b in (1, 2, 3) if b != coord]

        c.kill_broker(coord)
        # its session expired and every live broker's Metadata says so (a client bootstrapping from a broker the
        # controller's UpdateMetadata has not reached yet would still try the dead one: kafka-python's poll then
        # raises the refused connection)
        _wait(c, lambda: coord not in c.live_brokers and _settled(c), SESSION_MS / 1000 + 10,
              "the dead coordinator's session expired, every broker told")
        second = consumer(others[1])
        try:
            # no coordinator (RF 1: its __consumer_offsets partition is offline): the new member keeps asking
            # for one and reads nothing; in particular it does not fall back to auto.offset.reset
            early, window = [], time.monotonic() + 1.5
            while time.monotonic() < window:
                for batch in second.poll(timeout_ms=300).values():
                    early.extend(batch)
            assert early == [], f"{len(early)} records read without a coordinator"
            c.start_broker(coord)
            _wait(c, lambda: c.live_brokers == [1, 2, 3] and _all_led(_settled(c)), 30,
                  "the coordinator's broker back, every partition led again")
            produce("b", 60, via=others[0])
            got = read(second, 60)
        finally:
            second.close()
        values = sorted(m.value for m in got)
        assert values == sorted(f"b{i}".encode() for i in range(60)), \
            f"{len(got)} records, {sum(v.startswith(b'a') for v in values)} of them already committed{_why(c)}"
        first_offsets = {}
        for m in got:
            first_offsets[m.partition] = min(first_offsets.get(m.partition, m.offset), m.offset)
        assert all(first_offsets[p] == committed[p] for p in first_offsets), (first_offsets, committed)
