"""Several client listeners at once (issue "Security as Kafka has it", item 1): `listeners` with names,
`listener.security.protocol.map`, `advertised.listeners`, per-listener `listener.name.<l>.ssl.*`; Metadata,
DescribeCluster and FindCoordinator answer each client with the brokers' endpoints of the listener it connected on,
as Kafka does; Kafka's validation messages for bad listener configs."""
from __future__ import annotations

import pytest

from kafkite.config import BrokerConfig, ConfigError
from kafkite.controller.metadata import BrokerInfo
from kafkite.network.listeners import endpoint_for, listeners_of
from kafkite.testing.cluster import KafkiteCluster
from kafkite.testing.runner import BrokerThread
from kafkite.testing.wire_client import WireClient

trustme = pytest.importorskip("trustme", reason="trustme is not installed (pip install -e '.[test]')")

TWO = {"listeners": "ADMIN://127.0.0.1:0,SECURE://127.0.0.1:0",
       "listener.security.protocol.map": "ADMIN:PLAINTEXT,SECURE:SSL"}


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    keystore = d / "broker.pem"
    keystore.write_bytes(server.private_key_pem.bytes() + b"".join(c.bytes() for c in server.cert_chain_pems))
    ca_file = d / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    return {"keystore": keystore, "ca_file": ca_file}


def two_listeners(pki, **extra):
    # the SSL settings of the SECURE listener only, by Kafka's per-listener prefix
    return {**TWO, "listener.name.secure.ssl.keystore.type": "PEM",
            "listener.name.secure.ssl.keystore.location": str(pki["keystore"]), **extra}


def test_listener_config_validation_as_kafka():
    def check(static, message):
        with pytest.raises(ConfigError, match=message):
            listeners_of(BrokerConfig(static=static))
    check({"listeners": "PLAINTEXT://127.0.0.1:9091,SSL://127.0.0.1:9091"}, "Each listener must have a different port")
    check({"listeners": "PLAINTEXT://127.0.0.1:9091,PLAINTEXT://127.0.0.1:9092"},
          "Each listener must have a different name")
    check({"listeners": "ADMIN://127.0.0.1:9091"}, "No security protocol defined for listener ADMIN")
    check({**TWO, "advertised.listeners": "OTHER://h:1", "listener.security.protocol.map": "ADMIN:PLAINTEXT,"
           "SECURE:SSL,OTHER:PLAINTEXT"}, "advertised.listeners listener names must be equal to or a subset of the "
                                          "ones defined in listeners")
    check({"listeners": "PLAINTEXT://127.0.0.1:9091", "listener.security.protocol.map": "PLAINTEXT:TLS"},
          "listener.security.protocol.map")
    spec = listeners_of(BrokerConfig(static={**TWO, "advertised.listeners": "SECURE://broker.example:19093"}))
    assert [(e.listener, e.protocol) for e in spec.client] == [("ADMIN", "PLAINTEXT"), ("SECURE", "SSL")]
    assert spec.advertised == {"SECURE": ("broker.example", 19093)}
    # several listeners, one of them the ZooKeeper cluster's inter-broker one: two ports may both be 0
    spec = listeners_of(BrokerConfig(static={"listeners": "PLAINTEXT://:0,INTERNAL://:0",
                                             "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,"
                                                                               "INTERNAL:PLAINTEXT"}))
    assert spec.inter_broker.listener == "INTERNAL" and [e.listener for e in spec.client] == ["PLAINTEXT"]


def test_a_broker_without_the_listener_is_left_out():
    with_both = BrokerInfo(1, "h1", 9092, None, [["INTERNAL", "h1", 9099], ["SECURE", "h1", 9093]], listener="ADMIN")
    admin_only = BrokerInfo(2, "h2", 9092, None, [["INTERNAL", "h2", 9099]], listener="ADMIN")
    assert endpoint_for(with_both, "SECURE") == ("h1", 9093)
    assert endpoint_for(with_both, "ADMIN") == ("h1", 9092)
    assert endpoint_for(admin_only, "SECURE") is None
    assert endpoint_for(admin_only, None) == ("h2", 9092)


def _metadata(bootstrap: str, version: int = 9, topics=None):
    from kafka.protocol.metadata import MetadataRequest
    with WireClient.connect(bootstrap) as c:
        return c.request(MetadataRequest(version=version, topics=topics, allow_auto_topic_creation=False,
                                         include_cluster_authorized_operations=False,
                                         include_topic_authorized_operations=False), version)


def test_each_client_sees_the_endpoints_of_its_listener_confluent_and_kafka_python(pki):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient, KafkaProducer
    with BrokerThread(overrides=two_listeners(pki)) as b:
        plain, secure = b.broker.bootstrap_of("ADMIN"), b.broker.bootstrap_of("SECURE")
        assert plain != secure and plain == b.bootstrap_servers
        ssl_conf = {"security.protocol": "SSL", "ssl.ca.location": str(pki["ca_file"])}
        # confluent-kafka: Metadata through each listener names that listener's port
        for bootstrap, extra in ((plain, {}), (secure, ssl_conf)):
            md = AdminClient({"bootstrap.servers": bootstrap, **extra}).list_topics(timeout=20)
            assert {(x.host, x.port) for x in md.brokers.values()} == {tuple(bootstrap.rsplit(":", 1)[:1]) +
                                                                       (int(bootstrap.rsplit(":", 1)[1]),)}
        p = Producer({"bootstrap.servers": secure, **ssl_conf})
        for i in range(5):
            p.produce("two-listeners", value=b"ssl-%d" % i)
        assert p.flush(30) == 0
        # kafka-python over each listener: its cluster view is the listener's endpoints
        for bootstrap, kw in ((plain, {}), (secure, {"security_protocol": "SSL", "ssl_cafile": str(pki["ca_file"])})):
            admin = KafkaAdminClient(bootstrap_servers=bootstrap, **kw)
            try:
                brokers = admin.describe_cluster()["brokers"]  # DescribeCluster
                assert [(x["host"], x["port"]) for x in brokers] == [(bootstrap.rsplit(":", 1)[0],
                                                                      int(bootstrap.rsplit(":", 1)[1]))]
            finally:
                admin.close()
        kp = KafkaProducer(bootstrap_servers=plain)
        for i in range(5):
            kp.send("two-listeners", b"plain-%d" % i).get(timeout=30)
        kp.close()
        # a group consumer on the SSL listener: FindCoordinator names the coordinator's SSL endpoint
        c = Consumer({"bootstrap.servers": secure, **ssl_conf, "group.id": "g-two", "auto.offset.reset": "earliest"})
        c.subscribe(["two-listeners"])
        got = []
        while len(got) < 10:
            m = c.poll(30)
            assert m is not None, got
            assert m.error() is None, m.error()
            got.append(m.value())
        c.close()
        assert sorted(got) == sorted([b"ssl-%d" % i for i in range(5)] + [b"plain-%d" % i for i in range(5)])


def test_find_coordinator_answers_the_listener_of_the_request(pki):
    from kafka.protocol.metadata import FindCoordinatorRequest
    with BrokerThread(overrides={**TWO, "listener.security.protocol.map": "ADMIN:PLAINTEXT,SECURE:PLAINTEXT"}) as b:
        for name in ("ADMIN", "SECURE"):
            bootstrap = b.broker.bootstrap_of(name)
            with WireClient.connect(bootstrap) as c:
                for _ in range(50):  # the offsets topic is made by the first request
                    r = c.request(FindCoordinatorRequest(version=1, key="g", key_type=0), 1)
                    if r.error_code == 0:
                        break
                assert r.error_code == 0
                assert f"{r.host}:{r.port}" == bootstrap


def test_an_in_process_cluster_answers_per_listener_and_keeps_ports_on_restart():
    overrides = {"listeners": "CLIENT://127.0.0.1:0,OTHER://127.0.0.1:0",
                 "listener.security.protocol.map": "CLIENT:PLAINTEXT,OTHER:PLAINTEXT"}
    with KafkiteCluster(brokers=2, overrides=overrides) as cluster:
        brokers = cluster.node.brokers
        other = {i: brokers[i].bootstrap_of("OTHER") for i in brokers}
        client = {i: brokers[i].bootstrap_of("CLIENT") for i in brokers}
        assert set(other.values()).isdisjoint(client.values())
        for listener in (client, other):
            r = _metadata(listener[1], version=9)
            assert {(x.node_id, f"{x.host}:{x.port}") for x in r.brokers} == set(listener.items())
        cluster.stop_broker(2)
        cluster.start_broker(2)
        assert cluster.node.brokers[2].bootstrap_of("OTHER") == other[2]


def test_a_broker_without_the_listener_is_left_out_and_its_partitions_answer_listener_not_found():
    """As Kafka's metadata cache: Metadata through a listener leaves out a live broker that lacks it, and a
    partition it leads answers LISTENER_NOT_FOUND (v6+; LEADER_NOT_AVAILABLE before) with no leader;
    DescribeCluster leaves it out too."""
    import dataclasses
    from kafka.protocol.admin import CreateTopicsRequest, DescribeClusterRequest
    from kafkite.wire.errors import E
    overrides = {"listeners": "CLIENT://127.0.0.1:0,OTHER://127.0.0.1:0",
                 "listener.security.protocol.map": "CLIENT:PLAINTEXT,OTHER:PLAINTEXT"}
    with KafkiteCluster(brokers=2, overrides=overrides) as cluster:
        b1 = cluster.node.brokers[1]
        with WireClient.connect(b1.bootstrap_of("CLIENT")) as w:
            T = CreateTopicsRequest.CreatableTopic
            r = w.request(CreateTopicsRequest(topics=[T(name="split", num_partitions=-1, replication_factor=-1,
                                                        assignments=[T.CreatableReplicaAssignment(partition_index=0,
                                                                                                  broker_ids=[1]),
                                                                     T.CreatableReplicaAssignment(partition_index=1,
                                                                                                  broker_ids=[2])],
                                                        configs=[])], timeout_ms=10000, validate_only=False), 5)
            assert r.topics[0].error_code == 0
        for _ in range(100):  # broker 1 knows the topic's leaders
            md = _metadata(b1.bootstrap_of("OTHER"), 9, [_topic("split")])
            if all(p.leader_id != -1 or p.error_code for p in md.topics[0].partitions) and md.topics[0].partitions:
                break

        def drop_other_of_broker_2():  # broker 2 as if it had no OTHER listener, in broker 1's view
            info = b1.cache.brokers[2]
            b1.cache.brokers[2] = dataclasses.replace(info, listeners=[x for x in info.listeners if x[0] != "OTHER"])
        cluster.call(drop_other_of_broker_2)
        md = _metadata(b1.bootstrap_of("OTHER"), 9, [_topic("split")])
        assert [x.node_id for x in md.brokers] == [1]
        parts = {p.partition_index: (p.error_code, p.leader_id) for p in md.topics[0].partitions}
        assert parts == {0: (0, 1), 1: (E.LISTENER_NOT_FOUND, -1)}
        md5 = _metadata(b1.bootstrap_of("OTHER"), 5, [_topic("split")])
        assert {p.partition_index: p.error_code for p in md5.topics[0].partitions}[1] == E.LEADER_NOT_AVAILABLE
        md = _metadata(b1.bootstrap_of("CLIENT"), 9, [_topic("split")])
        assert sorted(x.node_id for x in md.brokers) == [1, 2]
        with WireClient.connect(b1.bootstrap_of("OTHER")) as w:
            dc = w.request(DescribeClusterRequest(include_cluster_authorized_operations=False), 0)
            assert [x.broker_id for x in dc.brokers] == [1]


def _topic(name: str):
    from kafka.protocol.metadata import MetadataRequest
    return MetadataRequest.MetadataRequestTopic(name=name, topic_id=None)
