"""A ZooKeeper-mode broker on a real ZooKeeper: the metadata it keeps there (ZkMetadataStore, AdminZk, producer
id blocks) and the controller requests it serves on its inter-broker listener only, fenced by epochs.

The cluster of separate broker processes is tests/integration/test_zk_cluster.py; here one broker runs in a
thread of the test process (BrokerThread with zookeeper.connect), which is quick to start."""
from __future__ import annotations

import itertools
import threading
import time
import uuid

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from kafkite.controller import zk_data as z
from kafkite.controller.metadata import ClusterMetadata
from kafkite.controller.store import NodeExists
from kafkite.controller.zk_metadata import (AdminZk, ControllerMoved, ZkMetadataStore, claim_producer_id_block,
                                            topic_id_from_zk, topic_id_to_zk)
from kafkite.controller.zk_store import ZooKeeperStore
from kafkite.testing.runner import BrokerThread
from kafkite.testing.wire_client import WireClient
from kafkite.wire.errors import E
from kafkite.wire.interbroker import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest

_roots = itertools.count()


@pytest.fixture
def connect(kafkite_zookeeper) -> str:
    """A chroot of its own for each test."""
    return kafkite_zookeeper.chroot(f"zk-broker-{next(_roots)}-{uuid.uuid4().hex[:6]}")


@pytest.fixture
def store(connect):
    s = ZooKeeperStore(connect, owner=1, session_timeout_ms=6000)
    yield s
    s.close()


def test_topic_id_is_kafkas_base64_form():
    tid = uuid.UUID("0d5a3ef0-8c11-4a53-b2b4-48b2a9d5c7e1")
    assert len(topic_id_to_zk(tid)) == 22 and "=" not in topic_id_to_zk(tid)
    assert topic_id_from_zk(topic_id_to_zk(tid)) == tid


def test_metadata_store_writes_only_what_changed_and_is_fenced(store):
    admin = AdminZk(store)
    store.create(z.CONTROLLER_EPOCH, 1)
    admin.create_topic("t", [[1], [2]], {"cleanup.policy": "compact"}, uuid.UUID(int=5))
    ms = ZkMetadataStore(store, node_id=1)
    md = ClusterMetadata(ms, node_id=1)
    t = md.topic("t")
    assert t.topic_id == uuid.UUID(int=5) and t.configs == {"cleanup.policy": "compact"}
    assert [(p.leader, p.leader_epoch) for p in t.partitions] == [(-1, -1), (-1, -1)]  # never elected
    ms.epoch_zk_version = store.get(z.CONTROLLER_EPOCH)[1]
    md.controller_epoch = 1
    t.partitions[0].leader, t.partitions[0].leader_epoch, t.partitions[0].isr = 1, 0, [1]
    md.persist()
    assert store.get(z.partition_state_path("t", 0))[0] == {"version": 1, "leader": 1, "leader_epoch": 0,
                                                            "controller_epoch": 1, "isr": [1]}
    assert store.get(z.partition_state_path("t", 1)) is None  # not elected: no state node
    version = store.get(z.topic_path("t"))[1]
    md.persist()  # nothing changed: nothing written
    assert store.get(z.topic_path("t"))[1] == version
    # another controller was elected: this one's writes fail and change nothing
    store.set(z.CONTROLLER_EPOCH, 2, expected_version=-1)
    t.partitions[0].leader_epoch = 1
    with pytest.raises(ControllerMoved):
        md.persist()
    assert store.get(z.partition_state_path("t", 0))[0]["leader_epoch"] == 0
    # a fresh load sees what ZooKeeper has; deleting the topic removes its whole subtree and its config
    ms.epoch_zk_version = store.get(z.CONTROLLER_EPOCH)[1]
    md.load_snapshot(ms.load(), brokers=False)
    md.forget_topic("t")
    md.persist()
    assert store.children(z.TOPICS) == [] and store.get(z.topic_config_path("t")) is None


def test_admin_writes(store):
    admin = AdminZk(store)
    admin.create_topic("a", [[1]], {}, uuid.uuid4())
    with pytest.raises(NodeExists):
        admin.create_topic("a", [[1]], {}, uuid.uuid4())
    assert store.get(z.topic_config_path("a")) is None  # no configs: no config node
    admin.add_partitions("a", [[2], [3]])
    assert z.parse_topic_assignment(store.get(z.topic_path("a"))[0])[0] == {0: [1], 1: [2], 2: [3]}
    admin.set_topic_configs("a", {"retention.ms": "5"})
    assert admin.topic_configs("a") == {"retention.ms": "5"}
    changes = store.children(z.CONFIG_CHANGES)
    assert len(changes) == 1 and changes[0].startswith(z.CONFIG_CHANGE_PREFIX)
    assert store.get(f"{z.CONFIG_CHANGES}/{changes[0]}")[0] == {"version": 2, "entity_path": "topics/a"}
    admin.delete_topic("a")
    admin.delete_topic("a")  # marked once
    assert store.children(z.DELETE_TOPICS) == ["a"]


def test_producer_id_blocks_are_never_handed_out_twice(connect):
    stores = [ZooKeeperStore(connect, owner=i, session_timeout_ms=6000) for i in (1, 2, 3)]
    blocks: list[tuple[int, int]] = []
    try:
        def claim(s):
            for _ in range(5):
                blocks.append(claim_producer_id_block(s, s.owner))
        threads = [threading.Thread(target=claim, args=(s,)) for s in stores]
        for th in threads:
            th.start()
        for th in threads:
            th.join(30)
    finally:
        for s in stores:
            s.close()
    assert sorted(blocks) == [(i * 1000, i * 1000 + 999) for i in range(15)]


@pytest.fixture
def zk_broker(connect):
    with BrokerThread(overrides={"zookeeper.connect": connect, "broker.id": "1",
                                 "zookeeper.session.timeout.ms": "6000"}) as b:
        yield b


def wait_for(fn, timeout=20.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def internal_endpoint(connect: str, broker_id: int) -> tuple[str, int]:
    s = ZooKeeperStore(connect, owner=99, session_timeout_ms=6000)
    try:
        reg = s.get(z.broker_path(broker_id))[0]
    finally:
        s.close()
    for name, _, host, port in z.parse_endpoints(reg):
        if name == "INTERNAL":
            return host, port
    raise AssertionError(reg)


def topic_leaders(bootstrap: str, topic: str):
    with WireClient.connect(bootstrap) as w:
        r = w.request(MetadataRequest[9](topics=[MetadataRequest[9].MetadataRequestTopic(name=topic)],
                                         allow_auto_topic_creation=True), 9)
    t = r.topics[0]
    return t.error_code, sorted((p.partition_index, p.leader_id, p.leader_epoch) for p in t.partitions), r.controller_id


def test_controller_requests_are_served_on_the_inter_broker_listener_only_and_fenced(zk_broker, connect):
    b = zk_broker
    # auto-creation on a ZooKeeper-mode broker: LEADER_NOT_AVAILABLE first, then the elected leader
    assert topic_leaders(b.bootstrap_servers, "auto")[0] in (0, int(E.LEADER_NOT_AVAILABLE))
    err, parts, controller = wait_for(lambda: (lambda r: r if r[0] == 0 and r[1] else None)(
        topic_leaders(b.bootstrap_servers, "auto")), what="the auto-created topic's leader")
    assert parts == [(0, 1, 0)] and controller == 1
    lai = LeaderAndIsrRequest(
        version=7, controller_id=1, is_kraft_controller=False, controller_epoch=0, broker_epoch=-1, update_type=0,
        topic_states=[LeaderAndIsrRequest.LeaderAndIsrTopicState(
            topic_name="auto", topic_id=uuid.uuid4(), partition_states=[
                LeaderAndIsrRequest.LeaderAndIsrTopicState.LeaderAndIsrPartitionState(
                    partition_index=0, controller_epoch=0, leader=-1, leader_epoch=9, isr=[], partition_epoch=0,
                    replicas=[1], adding_replicas=[], removing_replicas=[], is_new=False,
                    leader_recovery_state=0)])],
        live_leaders=[])
    # not served to clients: the client listener closes the connection, and ApiVersions does not list it
    with WireClient.connect(b.bootstrap_servers) as w:
        keys = {k.api_key for k in w.request(ApiVersionsRequest[3](client_software_name="t",
                                                                   client_software_version="1"), 3).api_keys}
        assert not keys & {4, 5, 6, 7}
        w.send_raw(w.encode(lai, 7)[0])
        assert w.is_closed()
    # on the inter-broker listener: an older controller epoch (0 < 1) is refused and changes nothing
    with WireClient(*internal_endpoint(connect, 1)) as w:
        r = w.request(lai, 7)
        assert r.error_code == E.STALE_CONTROLLER_EPOCH
        assert [p.error_code for t in r.topics for p in t.partition_errors] == [E.STALE_CONTROLLER_EPOCH]
        um = UpdateMetadataRequest(version=8, controller_id=1, is_kraft_controller=False, update_type=0,
                                   controller_epoch=0, broker_epoch=-1, topic_states=[], live_brokers=[])
        assert w.request(um, 8).error_code == E.STALE_CONTROLLER_EPOCH
        # the current epoch but a leader epoch that is not newer: that partition is refused
        lai.controller_epoch = 1
        lai.topic_states[0].partition_states[0].leader_epoch = 0
        r = w.request(lai, 7)
        assert r.error_code == 0
        assert [p.error_code for t in r.topics for p in t.partition_errors] == [E.STALE_CONTROLLER_EPOCH]
        # meant for an older registration of this broker
        lai.broker_epoch = 1
        assert w.request(lai, 7).error_code == E.STALE_BROKER_EPOCH
        # StopReplica (with delete) from an older controller: refused whole, the replica and its log stay
        T = StopReplicaRequest.StopReplicaTopicState
        stop = StopReplicaRequest(version=4, controller_id=1, is_kraft_controller=False, controller_epoch=0,
                                  broker_epoch=-1, topic_states=[T(topic_name="auto", partition_states=[
                                      T.StopReplicaPartitionState(partition_index=0, leader_epoch=-2,
                                                                  delete_partition=True)])])
        r = w.request(stop, 4)
        assert r.error_code == E.STALE_CONTROLLER_EPOCH and r.partition_errors == []
        stop.controller_epoch, stop.broker_epoch = 1, 1  # the current controller, an older registration
        assert w.request(stop, 4).error_code == E.STALE_BROKER_EPOCH
    assert b.broker.replicas.get("auto", 0) is not None, "a stale StopReplica removed the replica"
    assert topic_leaders(b.bootstrap_servers, "auto")[1] == [(0, 1, 0)]  # nothing changed


def test_leader_and_isr_makes_new_logs_in_a_worker_thread(connect, tmp_path, monkeypatch):
    """A LeaderAndIsr naming 40 partitions new to a ZooKeeper-mode broker with a data dir: their logs are made in a
    worker thread before it applies them (as Kafka makes logs on its request handler threads), none on the event
    loop (before: 40 LogLoader.load calls there). The partitions then lead and take records."""
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic
    from kafkite.storage.log_loader import LogLoader
    from helpers import OnTheLoop
    with BrokerThread(data_dir=tmp_path / "data", overrides={
            "zookeeper.connect": connect, "broker.id": "1", "zookeeper.session.timeout.ms": "6000"}) as b:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        with OnTheLoop(monkeypatch, LogLoader, "load") as loads:
            admin.create_topics([NewTopic("lai", 40, 1)])
            wait_for(lambda: all(b.broker.replicas.get("lai", i) is not None for i in range(40)),
                     what="the 40 logs")
        admin.close()
        loads.check(0)
        p = KafkaProducer(bootstrap_servers=b.bootstrap_servers)
        for i in range(40):
            p.send("lai", b"v", partition=i)
        p.flush()
        p.close()
        assert [b.broker.replicas.get("lai", i).log_end_offset for i in range(40)] == [1] * 40
