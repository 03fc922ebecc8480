"""Security between brokers (issue "Security as Kafka has it", item 1 and its acceptance line): three ZooKeeper-mode
broker processes whose inter-broker listener BROKER is SASL_SSL (SCRAM-SHA-512, a trustme CA), next to a SASL_SSL
client listener SECURE, with an ACL authorizer (the brokers' principal User:broker a super user):

- every broker registers BROKER with its protocol; the controller's requests and the replica fetchers go over it
  (an RF-3 topic's ISR fills up only through it);
- a confluent-kafka idempotent acks=all producer keeps producing while the partition's leader is killed with -9:
  every acknowledged record is in the topic exactly once, at its acknowledged offset, and the restarted broker
  catches up into the ISR again;
- a SCRAM user and an ACL made through one broker work on every broker (a raw SASL_SSL login and Metadata);
- a broker started with a wrong inter-broker password does not replicate, and both sides' logs say why.
"""
from __future__ import annotations

import json
import time

import pytest
import trio

from kafkite.security import scram
from kafkite.server.interbroker import InterBrokerSecurity, client_context
from kafkite.testing.process_cluster import ProcessCluster

trustme = pytest.importorskip("trustme", reason="trustme is not installed (pip install -e '.[test]')")
pytestmark = pytest.mark.timeout(180)

TOPIC = "ib-secure"
CHROOT = "/kafkite-test-interbroker"


def _scram_jaas(user: str, password: str) -> str:
    return (f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" '
            f'password="{password}";')


def _overrides(keystore, ca_file, broker_password: str = "broker-pw") -> dict[str, str]:
    return {
        "listeners": "SECURE://127.0.0.1:0,BROKER://127.0.0.1:0",
        "listener.security.protocol.map": "SECURE:SASL_SSL,BROKER:SASL_SSL",
        "inter.broker.listener.name": "BROKER",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca_file),
        "listener.name.broker.scram-sha-512.sasl.jaas.config": _scram_jaas("broker", broker_password),
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:broker;User:admin",
        "default.replication.factor": "3", "offsets.topic.replication.factor": "3",
        "replica.fetch.backoff.ms": "200", "replica.lag.time.max.ms": "3000",
    }


def _add_users(connect: str, users: dict[str, str]) -> None:
    """The first SCRAM users, written before the brokers start as Kafka's `kafka-configs --zookeeper --alter
    --add-config SCRAM-SHA-512=[...]` writes them (/config/users/<user>)."""
    from kazoo.client import KazooClient
    zk = KazooClient(hosts=connect + CHROOT, timeout=10.0)
    zk.start(timeout=15)
    try:
        for user, password in users.items():
            cred = scram.credential_from_password("SCRAM-SHA-512", password, 4096)
            zk.create(f"/config/users/{user}", json.dumps({"version": 1, "config": {
                "SCRAM-SHA-512": cred.to_string()}}).encode(), makepath=True)
    finally:
        zk.stop()
        zk.close()


async def _login_and_describe(endpoint, ctx, user: str, password: str, topic: str):
    """A SASL_SSL SCRAM-SHA-512 login (the same client side the brokers use) and a Metadata for `topic` -> its error
    code; an AuthenticationError when the login is refused."""
    from kafka.protocol.metadata import MetadataRequest

    from kafkite.server.controller_channel import exchange
    from kafkite.wire.frame import FrameReader
    sec = InterBrokerSecurity("SECURE", "SASL_SSL", ctx, "SCRAM-SHA-512", user, password)
    with trio.fail_after(10):
        stream = await sec.connect(*endpoint, client_id="test")
        try:
            resp = await exchange(stream, FrameReader(), MetadataRequest(
                version=9, topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False), 10, "test")
        finally:
            await stream.aclose()
    return resp.topics[0].error_code


def _state(c: ProcessCluster) -> dict:
    return c.zk_get(f"/brokers/topics/{TOPIC}/partitions/0/state") or {}


def test_sasl_ssl_between_brokers_replicates_fails_over_and_shares_users_and_acls(kafkite_zookeeper, tmp_path):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic,
                                       ResourcePatternType, ResourceType, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)
    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    keystore, ca_file = tmp_path / "broker.pem", tmp_path / "ca.pem"
    keystore.write_bytes(cert.private_key_pem.bytes() + b"".join(c.bytes() for c in cert.cert_chain_pems))
    ca.cert_pem.write_to_path(str(ca_file))
    _add_users(kafkite_zookeeper.connect_string, {"broker": "broker-pw", "admin": "admin-pw"})
    admin_cfg = {"security.protocol": "SASL_SSL", "ssl.ca.location": str(ca_file), "sasl.mechanisms": "SCRAM-SHA-512",
                 "sasl.username": "admin", "sasl.password": "admin-pw"}
    test_ctx = client_context(type("Cfg", (), {
        "get": staticmethod(lambda k: {"ssl.enabled.protocols": ["TLSv1.2", "TLSv1.3"],
                                       "ssl.truststore.location": str(ca_file), "ssl.truststore.type": "PEM"}.get(k)),
        "raw": staticmethod(lambda k: None)})())
    with ProcessCluster(3, zookeeper_connect=kafkite_zookeeper.connect_string, chroot=CHROOT,
                        overrides=_overrides(keystore, ca_file)) as c:
        for b in (1, 2, 3):
            reg = c.registration(b)
            assert reg["listener_security_protocol_map"] == {"SECURE": "SASL_SSL", "BROKER": "SASL_SSL"}, reg
            assert "BROKER" in c.endpoints(b)
        bootstrap = ",".join(c.bootstrap_of(b) for b in (1, 2, 3))
        admin = AdminClient({"bootstrap.servers": bootstrap, **admin_cfg})
        admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
        c.wait_until(lambda: sorted(_state(c).get("isr", [])) == [1, 2, 3], 30,
                     "the ISR fills up over the SASL_SSL inter-broker listener")

        # acks=all through a leader's death
        acked: dict[bytes, int] = {}
        failed: list[str] = []

        def delivered(err, msg):
            if err is not None:
                failed.append(str(err))
            else:
                acked[msg.value()] = msg.offset()
        p = Producer({"bootstrap.servers": bootstrap, **admin_cfg, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 5})
        leader = _state(c)["leader"]
        for i in range(300):
            p.produce(TOPIC, value=b"r%03d" % i, on_delivery=delivered)
            p.poll(0)
            if i == 150:
                assert p.flush(30) == 0
                c.kill_broker(leader)
            time.sleep(0.002)
        assert p.flush(60) == 0 and not failed, failed
        assert len(acked) == 300
        new_leader = _state(c)["leader"]
        assert new_leader not in (leader, -1)
        con = Consumer({"bootstrap.servers": bootstrap, **admin_cfg, "group.id": "ib-check",
                        "enable.auto.commit": False})
        con.assign([TopicPartition(TOPIC, 0, 0)])
        got: dict[int, bytes] = {}
        deadline = time.monotonic() + 30
        while len(got) < 300 and time.monotonic() < deadline:
            m = con.poll(0.5)
            if m is not None and not m.error():
                got[m.offset()] = m.value()
        con.close()
        assert sorted(got.values()) == sorted(acked)  # each acknowledged record once
        assert all(got[off] == v for v, off in acked.items())  # at the offset it was acknowledged with

        # a user and an ACL made through one broker (a survivor) work on every broker
        survivor = next(b for b in (1, 2, 3) if b != leader)
        one = AdminClient({"bootstrap.servers": c.bootstrap_of(survivor), **admin_cfg})
        one.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-pw")])["alice"].result(20)
        acl = AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
        one.create_acls([acl])[acl].result(20)
        c.start_broker(leader)  # it loads them at start, and fetches again over the inter-broker listener
        live = (1, 2, 3)

        def everywhere() -> bool:
            codes = [trio.run(_login_and_describe, c.endpoints(b)["SECURE"], test_ctx, "alice", "alice-pw", TOPIC)
                     for b in live]
            return codes == [0, 0, 0]
        c.wait_until(everywhere, 30, "alice logs in and describes the topic on every broker")
        assert trio.run(_login_and_describe, c.endpoints(1)["SECURE"], test_ctx, "alice", "alice-pw",
                        "__consumer_offsets") == 29  # TOPIC_AUTHORIZATION_FAILED: no ACL there
        c.wait_until(lambda: sorted(_state(c).get("isr", [])) == [1, 2, 3], 30, "the restarted broker rejoins")

        # a wrong inter-broker password: that broker's fetchers are refused, and both logs say why
        follower = next(b for b in (1, 2, 3) if b not in (_state(c)["leader"], c.controller_id))
        c.kill_broker(follower)
        c.overrides["listener.name.broker.scram-sha-512.sasl.jaas.config"] = _scram_jaas("broker", "wrong")
        c.start_broker(follower)
        try:
            c.wait_until(lambda: "SASL_AUTHENTICATION_FAILED" in c.log_tail(follower, 200), 20,
                         "the broker with a wrong password logs its refused login")
            tail = c.log_tail(follower, 200)
            assert "replica_fetcher.connection_failed" in tail and "Authentication of 'broker' failed" in tail, tail
            leader_now = _state(c)["leader"]
            c.wait_until(lambda: "sasl.authentication_failed" in c.log_tail(leader_now, 200), 30,
                         "the leader logs the failed login")
            c.wait_until(lambda: follower not in _state(c).get("isr", []), 20, "it leaves the ISR")
        finally:
            c.kill_broker(follower)  # (its controlled shutdown could not log in either)
