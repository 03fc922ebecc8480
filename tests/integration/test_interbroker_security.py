"""The inter-broker listener's security (server/interbroker.py): Kafka's config rules, checked at start with Kafka's
messages, and an in-process cluster whose brokers replicate over a SASL_SSL (PLAIN) inter-broker listener, where an
authorizer lets only a principal with CLUSTER_ACTION (or a super user) in, as Kafka does. The ZooKeeper process
cluster over SASL_SSL/SCRAM is tests/integration/test_zk_interbroker_security.py."""
from __future__ import annotations

import pytest
from kafka.admin import ACL, ACLOperation, ACLPermissionType, KafkaAdminClient, NewTopic, ResourcePattern, ResourceType

from helpers import wait_until
from kafkite.config import BrokerConfig, ConfigError
from kafkite.server.interbroker import inter_broker_listener_name, inter_broker_security
from kafkite.network.listeners import listeners_of
from kafkite.testing.cluster import KafkiteCluster
from kafkite.testing.wire_client import WireClient
from test_data_versions import batch, produce

trustme = pytest.importorskip("trustme", reason="trustme is not installed (pip install -e '.[test]')")
pytestmark = pytest.mark.timeout(120)

PLAIN = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="{pw}" '
         'user_broker="broker-pw";')


def _cfg(**kv) -> BrokerConfig:
    return BrokerConfig(static={k.replace("_", "."): v for k, v in kv.items()})


def test_kafkas_rules_for_the_inter_broker_listener(tmp_path):
    base = {"listeners": "CLIENT://127.0.0.1:0,BROKER://127.0.0.1:0",
            "listener.security.protocol.map": "CLIENT:PLAINTEXT,BROKER:SASL_SSL"}
    with pytest.raises(ConfigError, match=r"^Only one of inter.broker.listener.name and "
                                          r"security.inter.broker.protocol should be set.$"):
        inter_broker_listener_name(BrokerConfig(static={**base, "inter.broker.listener.name": "BROKER",
                                                        "security.inter.broker.protocol": "SASL_SSL"}))
    with pytest.raises(ConfigError, match="Listener with name NOPE defined in inter.broker.listener.name not found in "
                                          "listener.security.protocol.map."):
        inter_broker_listener_name(BrokerConfig(static={**base, "inter.broker.listener.name": "nope"}))
    assert inter_broker_listener_name(BrokerConfig(static={**base, "inter.broker.listener.name": "broker"})) == (
        "BROKER", "SASL_SSL")
    # security.inter.broker.protocol: the listener of that name
    ssl_only = BrokerConfig(static={"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                                    "security.inter.broker.protocol": "SSL"})
    assert inter_broker_listener_name(ssl_only) == ("SSL", "SSL")
    assert listeners_of(ssl_only).inter_broker.listener == "SSL"
    # neither: Kafkite's INTERNAL (PLAINTEXT, a free port when `listeners` has none)
    assert inter_broker_listener_name(BrokerConfig(static={})) == ("INTERNAL", None)
    # a secured inter-broker listener must be one of the listeners
    with pytest.raises(ConfigError, match="inter.broker.listener.name must be a listener name defined in "
                                          "advertised.listeners"):
        listeners_of(BrokerConfig(static={"listeners": "PLAINTEXT://127.0.0.1:0",
                                          "security.inter.broker.protocol": "SASL_SSL"}))
    sasl = {**base, "inter.broker.listener.name": "BROKER", "ssl.keystore.type": "PEM",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512"}
    # Kafka's default mechanism, GSSAPI, is refused with what works
    with pytest.raises(ConfigError, match="sasl.mechanism.inter.broker.protocol.*GSSAPI.*SCRAM-SHA-512"):
        inter_broker_security(BrokerConfig(static=sasl))
    with pytest.raises(ConfigError, match="^sasl.mechanism.inter.broker.protocol must be included in "
                                          "sasl.enabled.mechanisms when SASL is used for inter-broker communication$"):
        inter_broker_security(BrokerConfig(static={**sasl, "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"}))
    with pytest.raises(ConfigError, match="listener.name.broker.scram-sha-512.sasl.jaas.config"):
        inter_broker_security(BrokerConfig(static={**sasl, "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"}))
    sec = inter_broker_security(BrokerConfig(static={
        **sasl, "sasl.mechanism.inter.broker.protocol": "PLAIN", "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.broker.plain.sasl.jaas.config": PLAIN.format(pw="broker-pw")}))
    assert (sec.listener, sec.protocol, sec.mechanism, sec.username, sec.password) == (
        "BROKER", "SASL_SSL", "PLAIN", "broker", "broker-pw")
    assert sec.ssl_context is not None and sec.ssl_context.check_hostname
    assert not inter_broker_security(BrokerConfig(static={**sasl, "sasl.mechanism.inter.broker.protocol": "PLAIN",
                                                          "sasl.enabled.mechanisms": "PLAIN",
                                                          "ssl.endpoint.identification.algorithm": "",
                                                          "sasl.jaas.config": PLAIN.format(pw="x")})
                                     ).ssl_context.check_hostname


def _secured(tmp_path, **extra) -> dict[str, str]:
    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    keystore, ca_file = tmp_path / "broker.pem", tmp_path / "ca.pem"
    keystore.write_bytes(cert.private_key_pem.bytes() + b"".join(c.bytes() for c in cert.cert_chain_pems))
    ca.cert_pem.write_to_path(str(ca_file))
    return {"listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
            "listener.name.internal.ssl.keystore.type": "PEM",
            "listener.name.internal.ssl.keystore.location": str(keystore),
            "listener.name.internal.ssl.truststore.type": "PEM",
            "listener.name.internal.ssl.truststore.location": str(ca_file),
            "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.internal.plain.sasl.jaas.config": PLAIN.format(pw="broker-pw"),
            "replica.fetch.backoff.ms": "100", **extra}


def _create_and_produce(cluster, name: str) -> int:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        admin.create_topics([NewTopic(name, 1, 3)])
    finally:
        admin.close()
    wait_until(lambda: cluster.leader(name, 0) > 0, timeout=30, what="a leader")
    leader = cluster.leader(name, 0)
    with WireClient.connect(cluster.bootstrap_of(leader)) as w:
        assert produce(w, name, batch(5), acks=1).error_code == 0
    return leader


def test_in_process_cluster_replicates_over_sasl_ssl(tmp_path):
    with KafkiteCluster(brokers=3, overrides=_secured(tmp_path)) as cluster:
        _create_and_produce(cluster, "ib")
        wait_until(lambda: cluster.log_end_offsets("ib", 0) == {1: 5, 2: 5, 3: 5}, timeout=15,
                   what="followers copy over SASL_SSL")
        assert sorted(cluster.isr("ib", 0)) == [1, 2, 3]


def test_the_brokers_principal_needs_cluster_action(tmp_path):
    """With an authorizer, the inter-broker listener takes User:broker's requests only once it has CLUSTER_ACTION
    (here the clients' User:ANONYMOUS is the super user that grants it)."""
    overrides = _secured(tmp_path, **{"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                                      "super.users": "User:ANONYMOUS"})
    with KafkiteCluster(brokers=3, overrides=overrides) as cluster:
        leader = _create_and_produce(cluster, "ib-acl")
        followers = [b for b in (1, 2, 3) if b != leader]
        import time
        time.sleep(1.0)  # several fetch attempts (backoff 100 ms): none gets through
        assert all(cluster.log_end_offsets("ib-acl", 0)[f] == 0 for f in followers)
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        try:
            acl = ACL("User:broker", "*", ACLOperation.CLUSTER_ACTION, ACLPermissionType.ALLOW,
                      ResourcePattern(ResourceType.CLUSTER, "kafka-cluster"))
            result = admin.create_acls([acl])
            assert not result["failed"], result
        finally:
            admin.close()
        wait_until(lambda: cluster.log_end_offsets("ib-acl", 0) == {1: 5, 2: 5, 3: 5}, timeout=15,
                   what="followers copy once User:broker has CLUSTER_ACTION")


def test_an_inter_broker_listener_shared_with_clients_is_refused_with_what_to_do():
    """Kafka lets clients and brokers share the inter-broker listener; Kafkite serves the brokers' requests on a
    listener of their own, and says so at start rather than failing to bind."""
    with pytest.raises(Exception) as info:
        with KafkiteCluster(brokers=2, overrides={"listeners": "PLAINTEXT://127.0.0.1:0",
                                                  "security.inter.broker.protocol": "PLAINTEXT"}):
            pass
    seen, todo = [], [info.value]
    while todo:  # the cause, through the start's exception groups
        e = todo.pop()
        seen.append(str(e))
        todo += [x for x in (e.__cause__, e.__context__, *getattr(e, "exceptions", ())) if x is not None]
    assert any("is the only listener" in m and "inter.broker.listener.name" in m for m in seen), seen
