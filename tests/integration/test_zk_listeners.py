"""Several client listeners in ZooKeeper mode (issue "Security as Kafka has it", item 1): each broker process
registers every listener in /brokers/ids/<id> with Kafka 3.x's JSON (endpoints by listener name,
listener_security_protocol_map), serves a SASL_SSL client listener next to a PLAINTEXT one, and Metadata through each
listener names every broker's endpoint of that listener (learnt through the controller's UpdateMetadata)."""
from __future__ import annotations

import pytest

from kafkite.testing.process_cluster import ProcessCluster

trustme = pytest.importorskip("trustme", reason="trustme is not installed (pip install -e '.[test]')")
pytestmark = pytest.mark.timeout(300)

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" '
        'user_admin="admin-secret";')


def test_two_listeners_registered_and_served_per_listener(kafkite_zookeeper, tmp_path):
    ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    keystore = tmp_path / "broker.pem"
    keystore.write_bytes(server.private_key_pem.bytes() + b"".join(c.bytes() for c in server.cert_chain_pems))
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    overrides = {"listeners": "CLIENT://127.0.0.1:0,SECURE://127.0.0.1:0",
                 "listener.security.protocol.map": "CLIENT:PLAINTEXT,SECURE:SASL_SSL,INTERNAL:PLAINTEXT",
                 "listener.name.secure.ssl.keystore.type": "PEM",
                 "listener.name.secure.ssl.keystore.location": str(keystore),
                 "listener.name.secure.sasl.enabled.mechanisms": "PLAIN",
                 "listener.name.secure.plain.sasl.jaas.config": JAAS,
                 "default.replication.factor": "2", "offsets.topic.replication.factor": "2"}
    with ProcessCluster(2, zookeeper_connect=kafkite_zookeeper.connect_string, chroot="/kafkite-test-listeners",
                        overrides=overrides) as c:
        reg = c.registration(1)
        assert reg["version"] == 5
        assert [e.split("://")[0] for e in reg["endpoints"]] == ["CLIENT", "INTERNAL", "SECURE"]
        assert reg["listener_security_protocol_map"] == {"CLIENT": "PLAINTEXT", "INTERNAL": "PLAINTEXT",
                                                         "SECURE": "SASL_SSL"}
        assert (reg["host"], reg["port"]) == c.endpoints(1)["CLIENT"]  # the first PLAINTEXT endpoint, as Kafka
        secure = {i: c.endpoints(i)["SECURE"] for i in (1, 2)}
        client = {i: c.endpoints(i)["CLIENT"] for i in (1, 2)}
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient
        from kafka import KafkaConsumer
        sasl_ssl = {"security.protocol": "SASL_SSL", "ssl.ca.location": str(ca_file), "sasl.mechanisms": "PLAIN",
                    "sasl.username": "admin", "sasl.password": "admin-secret"}
        sec_bootstrap = "%s:%d" % secure[1]
        for bootstrap, extra, want in ((sec_bootstrap, sasl_ssl, secure), (c.bootstrap_of(1), {}, client)):
            import time
            deadline = time.monotonic() + 30
            while True:
                md = AdminClient({"bootstrap.servers": bootstrap, **extra}).list_topics(timeout=20)
                got = {b.id: (b.host, b.port) for b in md.brokers.values()}
                if got == want or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert got == want
        p = Producer({"bootstrap.servers": sec_bootstrap, **sasl_ssl, "acks": "all"})
        for i in range(10):
            p.produce("zk-two", value=b"v%d" % i)
        assert p.flush(60) == 0
        kc = KafkaConsumer("zk-two", bootstrap_servers=c.bootstrap_of(2), auto_offset_reset="earliest",
                           consumer_timeout_ms=30000)
        got = []
        for m in kc:
            got.append(m.value)
            if len(got) == 10:
                break
        kc.close()
        assert sorted(got) == sorted(b"v%d" % i for i in range(10))
