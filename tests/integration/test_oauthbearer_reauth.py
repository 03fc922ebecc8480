"""SASL OAUTHBEARER with Kafka's unsecured validator and KIP-368 re-authentication (issue "Security as Kafka has it",
item 3): librdkafka's built-in unsecured token and kafka-python's token provider authenticate; a bad token is answered
with Kafka's error JSON; connections.max.reauth.ms and a token's expiry bound the session (SaslAuthenticate v1+'s
session_lifetime_ms); a connection that does not re-authenticate in time is closed at its next request; a
re-authentication must keep the principal and mechanism; librdkafka re-authenticates and keeps its connection."""
from __future__ import annotations

import base64
import json
import time

import pytest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from kafkite.config import BrokerConfig, ConfigError
from kafkite.security.oauthbearer import OAuthBearerExchange, UnsecuredValidator
from kafkite.security.sasl import AuthenticationFailed, sasl_config
from kafkite.testing.runner import BrokerThread
from kafkite.testing.wire_client import WireClient
from kafkite.wire.errors import E

OAUTH_JAAS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
              'unsecuredLoginStringClaim_sub="admin";')
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


def broker_config(**extra):
    return {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "OAUTHBEARER,PLAIN",
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS, **extra}


def jws(claims: dict, alg: str = "none") -> str:
    def part(d):
        return base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()
    return f"{part({'alg': alg})}.{part(claims)}."


def first_message(token: str, authzid: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01\x01".encode()


def test_unsecured_validator_as_kafka():
    now = int(time.time() * 1000)
    ok = jws({"sub": "alice", "iat": now / 1000, "exp": now / 1000 + 60})

    def run(token, options=None, authzid=""):
        x = OAuthBearerExchange(UnsecuredValidator(options or {}))
        return x, x.step(first_message(token, authzid), now)
    x, answer = run(ok)
    assert answer == b"" and x.done and x.user == "alice" and abs(x.expires_ms - (now + 60_000)) <= 1
    for bad in (jws({"sub": "alice", "exp": now / 1000 - 1}), jws({"sub": "alice"}), jws({"exp": now / 1000 + 60}),
                jws({"sub": "alice", "exp": now / 1000 + 60}, alg="HS256"), "abc.def", ok + "sig",
                jws({"sub": "alice", "iat": now / 1000 + 600, "exp": now / 1000 + 900})):
        x, answer = run(bad)
        assert answer == b'{"status":"invalid_token"}' and not x.done, bad
        with pytest.raises(AuthenticationFailed) as exc:  # the client's ^A answer ends it with that JSON
            x.step(b"\x01", now)
        assert exc.value.message == '{"status":"invalid_token"}'
    x, answer = run(ok, {"unsecuredValidatorRequiredScope": "write read"})
    assert answer == b'{"status":"insufficient_scope", "scope":"[write, read]"}'
    x, answer = run(jws({"sub": "alice", "exp": now / 1000 + 60, "scope": "read write"}),
                    {"unsecuredValidatorRequiredScope": "write"})
    assert answer == b"" and x.user == "alice"
    x, answer = run(jws({"uid": "bob", "exp": now / 1000 + 60}), {"unsecuredValidatorPrincipalClaimName": "uid"})
    assert x.user == "bob"
    with pytest.raises(AuthenticationFailed) as exc:
        run(ok, authzid="bob")
    assert exc.value.message == ("Authentication failed: Client requested an authorization id (bob) that is "
                                 "different from the token's principal name (alice)")
    with pytest.raises(AuthenticationFailed) as exc:  # not RFC 7628's framing: Kafka's generic answer
        OAuthBearerExchange(UnsecuredValidator({})).step(b"n,,auth=Bearer x", now)
    assert exc.value.message.endswith("invalid credentials with SASL mechanism OAUTHBEARER")
    with pytest.raises(ConfigError, match="OAuthBearerLoginModule"):
        sasl_config(BrokerConfig(static=broker_config(**{
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": PLAIN_JAAS})), "SASL_PLAINTEXT")


@pytest.fixture(scope="module")
def oauth_broker():
    with BrokerThread(overrides=broker_config()) as b:
        yield b


def test_confluent_and_kafka_python_with_unsecured_tokens(oauth_broker):
    from confluent_kafka import Producer
    from kafka import KafkaConsumer
    from kafka.net.sasl.oauth import AbstractTokenProvider
    bs = oauth_broker.bootstrap_servers
    p = Producer({"bootstrap.servers": bs, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "OAUTHBEARER",
                  "enable.sasl.oauthbearer.unsecure.jwt": True, "sasl.oauthbearer.config": "principal=alice"})
    for i in range(5):
        p.produce("oauth", value=b"v%d" % i)
    assert p.flush(30) == 0
    assert "User:alice" in {c.principal for c in list(oauth_broker.broker.client_connections)}

    class Unsecured(AbstractTokenProvider):
        def token(self):
            return jws({"sub": "bob", "iat": int(time.time()), "exp": int(time.time()) + 3600})
    kc = KafkaConsumer("oauth", bootstrap_servers=bs, security_protocol="SASL_PLAINTEXT",
                       sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=Unsecured(),
                       auto_offset_reset="earliest", consumer_timeout_ms=20000)
    got = []
    for m in kc:
        got.append(m.value)
        if len(got) == 5:
            break
    assert "User:bob" in {c.principal for c in list(oauth_broker.broker.client_connections)}
    kc.close()
    assert sorted(got) == [b"v%d" % i for i in range(5)]


def test_a_bad_token_gets_kafkas_error_json(oauth_broker):
    with WireClient.connect(oauth_broker.bootstrap_servers) as w:
        assert w.request(SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1).error_code == 0
        r = w.request(SaslAuthenticateRequest(auth_bytes=first_message(jws({"sub": "a", "exp": 1}))), 1)
        assert r.error_code == 0 and r.auth_bytes == b'{"status":"invalid_token"}'
        r = w.request(SaslAuthenticateRequest(auth_bytes=b"\x01"), 1)
        assert (r.error_code, r.error_message) == (E.SASL_AUTHENTICATION_FAILED, '{"status":"invalid_token"}')
        assert w.is_closed()


def _plain(w, user, password, version=1):
    h = w.request(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert h.error_code == 0
    return w.request(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()), version)


def test_reauthentication_raw(oauth_broker):
    with BrokerThread(overrides=broker_config(**{"connections.max.reauth.ms": "1500"})) as b:
        bs = b.bootstrap_servers
        # a session that is not renewed: the first request after its end closes the connection
        with WireClient.connect(bs) as w:
            r = _plain(w, "alice", "alice-secret")
            assert r.error_code == 0 and r.session_lifetime_ms == 1500
            assert w.request(MetadataRequest(topics=None), 1).brokers
            time.sleep(1.7)
            w.send_raw(w.encode(MetadataRequest(topics=None), 1)[0])
            assert w.is_closed()
        # re-authenticated in time, same principal: the connection lives past the first session's end
        with WireClient.connect(bs) as w:
            assert _plain(w, "alice", "alice-secret").session_lifetime_ms == 1500
            time.sleep(1.0)
            r = _plain(w, "alice", "alice-secret")
            assert r.error_code == 0 and r.session_lifetime_ms == 1500
            time.sleep(0.8)  # past the first session's end, within the second
            assert w.request(MetadataRequest(topics=None), 1).brokers
        # another principal: refused with Kafka's message, connection closed
        with WireClient.connect(bs) as w:
            assert _plain(w, "alice", "alice-secret").error_code == 0
            r = _plain(w, "admin", "admin-secret")
            assert (r.error_code, r.error_message) == (E.SASL_AUTHENTICATION_FAILED, "Cannot change principals "
                                                       "during re-authentication from User.alice: User.admin")
            assert w.is_closed()
        # another mechanism: refused
        with WireClient.connect(bs) as w:
            assert _plain(w, "alice", "alice-secret").error_code == 0
            assert w.request(SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1).error_code == 0
            r = w.request(SaslAuthenticateRequest(auth_bytes=first_message(jws({"sub": "alice",
                                                                                  "exp": time.time() + 60}))), 1)
            assert r.error_code == E.SASL_AUTHENTICATION_FAILED
            assert r.error_message == ("SASL mechanism 'OAUTHBEARER' requested by client is not supported for "
                                       "re-authentication of mechanism 'PLAIN'")
    # without a session end (the default), a second SaslHandshake is ILLEGAL_SASL_STATE, as before
    with WireClient.connect(oauth_broker.bootstrap_servers) as w:
        assert _plain(w, "alice", "alice-secret").session_lifetime_ms == 0
        assert w.request(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == E.ILLEGAL_SASL_STATE


def test_a_token_bounds_the_session(oauth_broker):
    with WireClient.connect(oauth_broker.bootstrap_servers) as w:
        assert w.request(SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1).error_code == 0
        r = w.request(SaslAuthenticateRequest(auth_bytes=first_message(jws({"sub": "alice",
                                                                              "exp": time.time() + 30}))), 2)
        assert r.error_code == 0 and 28_000 <= r.session_lifetime_ms <= 30_000


def test_librdkafka_reauthenticates_and_keeps_its_connection():
    from confluent_kafka import Producer
    with BrokerThread(overrides=broker_config(**{"connections.max.reauth.ms": "2000"})) as b:
        p = Producer({"bootstrap.servers": b.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                      "sasl.mechanisms": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret",
                      "linger.ms": 0})
        p.produce("reauth", value=b"first")
        assert p.flush(30) == 0
        first = set(b.broker.client_connections)
        assert first and {c.principal for c in first} == {"User:alice"}
        deadline = time.monotonic() + 5.5
        n = 0
        while time.monotonic() < deadline:  # requests keep coming on the connection across two session ends
            p.produce("reauth", value=b"m%d" % n)
            p.flush(10)
            n += 1
            time.sleep(0.1)
        assert p.flush(30) == 0
        # the connection that took the first record is still open: it re-authenticated, else the broker closed it
        assert first & set(b.broker.client_connections)


def _run_java_with_jackson(*args) -> list[dict]:
    """The Java driver with Jackson on its class path: Kafka's unsecured OAUTHBEARER login module parses its token
    with it (kafka-clients declares it as an optional dependency); pyspark's jars carry it."""
    import os
    from pathlib import Path
    from clients import drivers
    drivers.need("java")
    pyspark = pytest.importorskip("pyspark")
    jackson = sorted((Path(pyspark.__file__).parent / "jars").glob("jackson-*-2.*.jar"))
    if not jackson:
        pytest.skip("no Jackson jars for Kafka's OAUTHBEARER login module")
    argv = drivers.java_argv(*map(str, args))
    i = argv.index("-cp") + 1
    argv[i] = os.pathsep.join([argv[i], *map(str, jackson)])
    return drivers._run(argv, 180, check=True)


@pytest.mark.usefixtures("java_client")
def test_java_client_with_kafkas_unsecured_login_module_and_reauthentication():
    """Java kafka-clients 3.9 and 4.3 with Kafka's own OAuthBearerLoginModule (unsecuredLoginStringClaim_sub)
    produces and consumes over a listener whose sessions last 1.5 s; producing for 6 s, it re-authenticates
    (KIP-368): one of its connections lives across two session ends (the broker would have closed it at its first
    request after the end)."""
    import threading
    props = ["--prop", "security.protocol=SASL_PLAINTEXT", "--prop", "sasl.mechanism=OAUTHBEARER",
             "--prop", "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                       'required unsecuredLoginStringClaim_sub="carol";']
    with BrokerThread(overrides=broker_config(**{"connections.max.reauth.ms": "1500"})) as b:
        bs = b.bootstrap_servers
        seen: dict[int, list] = {}  # connection -> [first seen, requests then, last time its requests grew]
        done = threading.Event()

        def watch():
            while not done.is_set():
                now = time.monotonic()
                for c in list(b.broker.client_connections):
                    if c.principal == "User:carol":
                        entry = seen.setdefault(id(c), [now, c.requests, now])
                        if c.requests > entry[1]:
                            entry[1], entry[2] = c.requests, now
                time.sleep(0.05)
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            out = _run_java_with_jackson("produce-log", bs, "java-oauth", 60, "--rate", 10, *props)
        finally:
            done.set()
            watcher.join()
        assert out[-1]["acked"] == 60 and out[-1]["failed"] == 0, out[-1]
        # a connection that still took requests more than two sessions after it was opened
        assert max(grew - first for first, _, grew in seen.values()) > 3.0, seen
        got = _run_java_with_jackson("consume-assign", bs, "java-oauth", 60, "--timeout-ms", 30000, *props)
        assert got[-1]["consumed"] == 60, got[-1]
