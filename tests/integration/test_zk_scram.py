"""SCRAM credentials in ZooKeeper mode: AlterUserScramCredentials through any broker writes Kafka 3.x's
/config/users/<sanitized user> node and a `users/<user>` /config/changes notification, and every broker's
DescribeUserScramCredentials reads ZooKeeper (as Kafka's AdminZkClient does); every broker's credential cache (what
its SASL listener reads) follows the notifications, and a broker that starts loads them all: checked by logging in
on every broker of a SASL_PLAINTEXT cluster."""
from __future__ import annotations

import time

import pytest
from kafka.protocol.admin import AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest

from helpers import kp_group_consumer
from kafkite.security import scram
from kafkite.testing.process_cluster import ProcessCluster
from kafkite.testing.wire_client import WireClient

pytestmark = pytest.mark.timeout(300)

SALT = b"0123456789abcdef"


def _alter(bootstrap: str, upsertions=(), deletions=()):
    R = AlterUserScramCredentialsRequest
    with WireClient.connect(bootstrap) as w:
        return w.request(R(
            deletions=[R.ScramCredentialDeletion(name=n, mechanism=m) for n, m in deletions],
            upsertions=[R.ScramCredentialUpsertion(
                name=n, mechanism=m, iterations=i, salt=SALT,
                salted_password=scram.salted_password(scram.MECHANISM_TYPES[m], "pw", SALT, i))
                for n, m, i in upsertions]), 0).results


def _described(bootstrap: str, user: str):
    """{mechanism: iterations} of `user` on that broker, or None when it has no credential there."""
    R = DescribeUserScramCredentialsRequest
    with WireClient.connect(bootstrap) as w:
        r = w.request(R(users=[R.UserName(name=user)]), 0).results[0]
    return {c.mechanism: c.iterations for c in r.credential_infos} if r.error_code == 0 else None


def _everywhere(cluster: ProcessCluster, user: str, want, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    got = {}
    while time.monotonic() < deadline:
        got = {i: _described(cluster.bootstrap_of(i), user) for i in cluster.live_brokers}
        if all(v == want for v in got.values()):
            return
        time.sleep(0.1)
    raise AssertionError(f"{user}: {got}, want {want} on every broker\n{cluster.log_tails(20)}")


def test_credentials_follow_zookeeper_on_every_broker(kafkite_zookeeper):
    with ProcessCluster(3, zookeeper_connect=kafkite_zookeeper.connect_string, chroot="/kafkite-test-scram") as c:
        user = "bob smith@example"  # kept under its sanitized name, as Kafka's Sanitizer writes it
        results = _alter(c.bootstrap_of(1), upsertions=[(user, 2, 4096), (user, 1, 8192), ("alice", 2, 4096)])
        assert [(r.user, r.error_code) for r in results] == [(user, 0), ("alice", 0)]
        node = c.zk_get("/config/users/bob%20smith%40example")
        assert node["version"] == 1 and set(node["config"]) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
        cred = scram.ScramCredential.from_string(node["config"]["SCRAM-SHA-512"])
        assert cred == scram.credential_from_password("SCRAM-SHA-512", "pw", 4096, salt=SALT)
        assert node["config"]["SCRAM-SHA-512"] == cred.to_string()
        changes = [c.zk_get(f"/config/changes/{n}") for n in c.zk_children("/config/changes")]
        assert {"version": 2, "entity_path": "users/bob%20smith%40example"} in changes
        _everywhere(c, user, {1: 8192, 2: 4096})
        _everywhere(c, "alice", {2: 4096})
        # a deletion through another broker reaches every one
        assert [(r.user, r.error_code) for r in _alter(c.bootstrap_of(2), deletions=[(user, 2)])] == [(user, 0)]
        _everywhere(c, user, {1: 8192})
        assert c.zk_get("/config/users/bob%20smith%40example")["config"].keys() == {"SCRAM-SHA-256"}
        # an alteration through a broker builds on what ZooKeeper holds, not on a cache that may lag
        _alter(c.bootstrap_of(3), upsertions=[(user, 2, 8192)])
        assert set(c.zk_get("/config/users/bob%20smith%40example")["config"]) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}


PLAIN_ROOT = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="root" password="root-pw" '
              'user_root="root-pw";')
SASL = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_ROOT, "default.replication.factor": "3"}


def _logs_in(bootstrap: str, user: str, password: str) -> bool:
    """A raw SCRAM-SHA-512 exchange (scramp's client) on that broker: True when it ends authenticated."""
    import scramp
    from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
    with WireClient.connect(bootstrap) as w:
        assert w.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1).error_code == 0
        client = scramp.ScramClient(["SCRAM-SHA-512"], user, password)
        r = w.request(SaslAuthenticateRequest(auth_bytes=client.get_client_first().encode()), 2)
        client.set_server_first(r.auth_bytes.decode())
        r = w.request(SaslAuthenticateRequest(auth_bytes=client.get_client_final().encode()), 2)
        return r.error_code == 0


def _until(cluster: ProcessCluster, check, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}\n{cluster.log_tails(20)}")
        time.sleep(0.1)


def test_a_user_added_through_one_broker_logs_in_on_every_broker(kafkite_zookeeper):
    """A SASL_PLAINTEXT client listener on each ZooKeeper-mode broker (the inter-broker one stays PLAINTEXT): the user
    root (PLAIN, JAAS) adds alice through broker 1; alice produces (acks=all, 3 replicas) through every broker and
    group-consumes; deleted through broker 2, she is refused by every broker."""
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, ScramMechanism, UserScramCredentialDeletion, UserScramCredentialUpsertion
    auth = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "alice",
            "sasl_plain_password": "alice-pw"}
    with ProcessCluster(3, zookeeper_connect=kafkite_zookeeper.connect_string, chroot="/kafkite-test-scram-sasl",
                        overrides=SASL) as c:
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap_of(1), security_protocol="SASL_PLAINTEXT",
                                 sasl_mechanism="PLAIN", sasl_plain_username="root", sasl_plain_password="root-pw")
        try:
            assert admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                "alice", ScramMechanism.SCRAM_SHA_512, "alice-pw")]) == {"alice": None}
            _until(c, lambda: all(_logs_in(c.bootstrap_of(i), "alice", "alice-pw") for i in (1, 2, 3)),
                   "alice cannot log in on every broker")
            assert not _logs_in(c.bootstrap_of(3), "alice", "wrong")
            for i in (1, 2, 3):
                p = KafkaProducer(bootstrap_servers=c.bootstrap_of(i), acks="all", **auth)
                for j in range(5):
                    p.send("zk-scram", b"%d-%d" % (i, j)).get(timeout=30)
                p.close()
            kc = kp_group_consumer("zk-scram", bootstrap_servers=c.bootstrap_of(2), group_id="g-zk-scram",
                                   auto_offset_reset="earliest", **auth)
            got = []
            deadline = time.monotonic() + 60
            while len(got) < 15 and time.monotonic() < deadline:
                got += [r.value for rs in kc.poll(1000).values() for r in rs]
            kc.close()
            assert sorted(got) == sorted(b"%d-%d" % (i, j) for i in (1, 2, 3) for j in range(5))
            admin2 = KafkaAdminClient(bootstrap_servers=c.bootstrap_of(2), security_protocol="SASL_PLAINTEXT",
                                      sasl_mechanism="PLAIN", sasl_plain_username="root", sasl_plain_password="root-pw")
            assert admin2.alter_user_scram_credentials([UserScramCredentialDeletion(
                "alice", ScramMechanism.SCRAM_SHA_512)]) == {"alice": None}
            admin2.close()
            _until(c, lambda: not any(_logs_in(c.bootstrap_of(i), "alice", "alice-pw") for i in (1, 2, 3)),
                   "a deleted alice still logs in somewhere")
            # a broker that was down while a user was added loads every credential when it starts
            c.stop_broker(3)
            assert admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                "carol", ScramMechanism.SCRAM_SHA_512, "carol-pw")]) == {"carol": None}
            c.start_broker(3)
            assert _logs_in(c.bootstrap_of(3), "carol", "carol-pw")
        finally:
            admin.close()
