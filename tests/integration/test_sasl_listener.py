"""A SASL_PLAINTEXT client listener with the PLAIN mechanism (issue "Security as Kafka has it", a slice): users from
the listener's JAAS config, real clients (confluent-kafka, kafka-python) authenticating, wrong credentials answered
SASL_AUTHENTICATION_FAILED with Kafka's message and the connection closed, no request served before authentication,
the v0 (raw token) and v1 (SaslAuthenticate v0-2) exchanges, SASL_SSL, and SaslHandshake / SaslAuthenticate answered
ILLEGAL_SASL_STATE where no exchange runs (a PLAINTEXT listener, or after authentication)."""
from __future__ import annotations

import struct

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from helpers import kp_read
from kafkite.config import BrokerConfig, ConfigError
from kafkite.security.sasl import AUTH_FAILED_MESSAGE, parse_jaas, sasl_config
from kafkite.testing.runner import BrokerThread
from kafkite.testing.wire_client import WireClient
from kafkite.wire.errors import E

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" '
        'user_admin="admin-secret" user_alice="alice \\"quoted\\" secret";')
SASL = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS}


@pytest.fixture(scope="module")
def sasl_broker():
    with BrokerThread(overrides=SASL) as b:
        yield b


def test_jaas_and_config():
    module, opts = parse_jaas(JAAS)
    assert module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert opts["user_alice"] == 'alice "quoted" secret' and opts["username"] == "admin"
    cfg = sasl_config(BrokerConfig(static=SASL), "SASL_PLAINTEXT")
    assert cfg.mechanisms == ["PLAIN"] and cfg.plain_users == {"admin": "admin-secret", "alice": 'alice "quoted" secret'}
    with pytest.raises(ConfigError, match="Kafkite serves PLAIN"):  # Kafka's default, GSSAPI
        sasl_config(BrokerConfig(static={"listeners": "SASL_PLAINTEXT://127.0.0.1:0"}), "SASL_PLAINTEXT")
    with pytest.raises(ConfigError, match="listener.name.sasl_plaintext.plain.sasl.jaas.config"):
        sasl_config(BrokerConfig(static={"sasl.enabled.mechanisms": "PLAIN"}), "SASL_PLAINTEXT")


def test_confluent_and_kafka_python_authenticate_with_plain(sasl_broker):
    from confluent_kafka import Consumer, Producer
    from kafka import KafkaConsumer, KafkaProducer
    bs = sasl_broker.bootstrap_servers
    auth = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "admin",
            "sasl.password": "admin-secret"}
    p = Producer({"bootstrap.servers": bs, **auth})
    for i in range(5):
        p.produce("plain", value=b"ck-%d" % i)
    assert p.flush(30) == 0
    kp = KafkaProducer(bootstrap_servers=bs, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                       sasl_plain_username="alice", sasl_plain_password='alice "quoted" secret')
    for i in range(5):
        kp.send("plain", b"kp-%d" % i).get(timeout=30)
    kp.close()
    c = Consumer({"bootstrap.servers": bs, **auth, "group.id": "g-plain", "auto.offset.reset": "earliest"})
    c.subscribe(["plain"])
    got = []
    while len(got) < 10:
        m = c.poll(30)
        assert m is not None and m.error() is None, (got, m and m.error())
        got.append(m.value())
    c.close()
    assert sorted(got) == sorted([b"ck-%d" % i for i in range(5)] + [b"kp-%d" % i for i in range(5)])
    kc = KafkaConsumer("plain", bootstrap_servers=bs, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                       sasl_plain_username="admin", sasl_plain_password="admin-secret",
                       auto_offset_reset="earliest")
    assert len(kp_read(kc, 10)) == 10
    kc.close()


def test_wrong_password_is_refused_with_kafkas_error(sasl_broker):
    import time
    from confluent_kafka import KafkaError, Producer
    errors = []
    p = Producer({"bootstrap.servers": sasl_broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "wrong",
                  "error_cb": errors.append, "log_level": 0})
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        p.poll(0.2)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert AUTH_FAILED_MESSAGE in errors[0].str()
    for user, password in (("admin", "nope"), ("nobody", "admin-secret")):  # the same answer, user or not
        with WireClient.connect(sasl_broker.bootstrap_servers) as w:
            assert w.request(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
            r = w.request(SaslAuthenticateRequest(auth_bytes=b"\0" + user.encode() + b"\0" + password.encode()), 2)
            assert (r.error_code, r.error_message) == (E.SASL_AUTHENTICATION_FAILED, AUTH_FAILED_MESSAGE)
            assert w.is_closed()


@pytest.mark.parametrize("version", [0, 1, 2])
def test_sasl_authenticate_every_version(sasl_broker, version):
    with WireClient.connect(sasl_broker.bootstrap_servers) as w:
        assert w.request(ApiVersionsRequest(), 0).error_code == 0  # allowed before authentication
        h = w.request(SaslHandshakeRequest(mechanism="PLAIN"), 1)
        assert (h.error_code, h.mechanisms) == (0, ["PLAIN"])
        r = w.request(SaslAuthenticateRequest(auth_bytes=b"\0admin\0admin-secret"), version)
        assert r.error_code == 0 and r.error_message is None
        if version >= 1:
            assert r.session_lifetime_ms == 0  # connections.max.reauth.ms=0 (the default): the session has no end
        assert w.request(MetadataRequest(topics=None), 9).brokers
        # authenticated: the exchange does not run again
        assert w.request(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == E.ILLEGAL_SASL_STATE
        assert w.request(SaslAuthenticateRequest(auth_bytes=b""), version).error_code == E.ILLEGAL_SASL_STATE


def test_v0_handshake_then_a_raw_token(sasl_broker):
    with WireClient.connect(sasl_broker.bootstrap_servers) as w:
        assert w.request(SaslHandshakeRequest(mechanism="PLAIN"), 0).error_code == 0
        token = b"\0admin\0admin-secret"
        w.send_raw(struct.pack(">i", len(token)) + token)
        assert w.recv_frame() == b""  # an empty frame: authenticated
        assert w.request(MetadataRequest(topics=None), 9).brokers
    with WireClient.connect(sasl_broker.bootstrap_servers) as w:
        assert w.request(SaslHandshakeRequest(mechanism="PLAIN"), 0).error_code == 0
        token = b"\0admin\0bad"
        w.send_raw(struct.pack(">i", len(token)) + token)
        assert w.is_closed()


def test_requests_before_authentication_and_unknown_mechanisms(sasl_broker):
    with WireClient.connect(sasl_broker.bootstrap_servers) as w:
        w.send_raw(w.encode(MetadataRequest(topics=None), 9)[0])
        assert w.is_closed()  # Kafka: "Unexpected Kafka request of type METADATA during SASL handshake."
    with WireClient.connect(sasl_broker.bootstrap_servers) as w:
        r = w.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1)
        assert (r.error_code, r.mechanisms) == (E.UNSUPPORTED_SASL_MECHANISM, ["PLAIN"])
        assert w.is_closed()


@pytest.mark.parametrize("version", [0, 1])
def test_sasl_apis_on_a_plaintext_listener_are_illegal_state(broker, version):
    with WireClient.connect(broker.bootstrap_servers) as w:
        assert w.request(SaslHandshakeRequest(mechanism="PLAIN"), version).error_code == E.ILLEGAL_SASL_STATE
        for v in (0, 1, 2):
            assert w.request(SaslAuthenticateRequest(auth_bytes=b"\0a\0b"), v).error_code == E.ILLEGAL_SASL_STATE


def test_sasl_ssl(tmp_path):
    trustme = pytest.importorskip("trustme", reason="trustme is not installed (pip install -e '.[test]')")
    from confluent_kafka import Producer
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    keystore = tmp_path / "broker.pem"
    keystore.write_bytes(cert.private_key_pem.bytes() + b"".join(c.bytes() for c in cert.cert_chain_pems))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    with BrokerThread(overrides={"listeners": "SASL_SSL://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
                                 "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS, "ssl.keystore.type": "PEM",
                                 "ssl.keystore.location": str(keystore)}) as b:
        p = Producer({"bootstrap.servers": b.bootstrap_servers, "security.protocol": "SASL_SSL",
                      "ssl.ca.location": str(tmp_path / "ca.pem"), "sasl.mechanism": "PLAIN",
                      "sasl.username": "admin", "sasl.password": "admin-secret"})
        p.produce("over-tls", value=b"x")
        assert p.flush(30) == 0


def test_java_client_with_plain(sasl_broker):
    """Java kafka-clients 3.9 with its own SASL/PLAIN login module produces and consumes; a wrong password is its
    SaslAuthenticationException."""
    from clients.drivers import run_java
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
            'password="alice \\"quoted\\" secret";')
    props = ["--prop", "security.protocol=SASL_PLAINTEXT", "--prop", "sasl.mechanism=PLAIN",
             "--prop", f"sasl.jaas.config={jaas}"]
    bs = sasl_broker.bootstrap_servers
    out = run_java("produce", bs, "java-plain", 20, *props)
    assert out[-1]["acked"] == 20 and out[-1]["errors"] == 0, out[-1]
    got = run_java("consume-assign", bs, "java-plain", 20, "--timeout-ms", 30000, *props)
    assert got[-1]["consumed"] == 20, got[-1]
    bad = ["--prop", "security.protocol=SASL_PLAINTEXT", "--prop", "sasl.mechanism=PLAIN", "--prop",
           'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
           'password="nope";', "--prop", "max.block.ms=5000"]
    out = run_java("produce", bs, "java-plain", 1, *bad, check=False)
    assert "SaslAuthenticationException" in str(out[-1]), out[-1]
