"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 listeners with the credentials in the cluster metadata: a first user written
by `kafkite storage format --add-scram` before the broker starts, more added and deleted through
AlterUserScramCredentials (confluent-kafka's and kafka-python's admin clients, and `kafkite users`), real clients
producing and group-consuming over SASL_PLAINTEXT and SASL_SSL, a wrong password refused with Kafka's message,
the credentials kept across a restart; Describe/AlterUserScramCredentials v0 errors over raw requests."""
from __future__ import annotations

import logging
import subprocess
import sys
import time

import pytest
from kafka.protocol.admin import (AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest)
from kafka.protocol.metadata import ApiVersionsRequest

from kafkite.security import scram
from kafkite.testing.process import BrokerProcess
from kafkite.testing.runner import BrokerThread
from kafkite.testing.wire_client import WireClient
from kafkite.wire.errors import E
from helpers import kp_group_consumer

MECHS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" '
              'password="admin-secret";')
LISTENER = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS}


def kafkite(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafkite.cli", *args], capture_output=True, text=True, timeout=60)


def formatted(data_dir) -> None:
    out = kafkite("storage", "format", "--data-dir", str(data_dir),
                  "--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]",
                  "--add-scram", "SCRAM-SHA-256=[name=admin,password=admin-secret,iterations=8192]")
    assert out.returncode == 0 and "with SCRAM credentials for admin" in out.stdout, out.stderr


@pytest.fixture(scope="module")
def scram_broker(tmp_path_factory):
    """A process broker (confluent-kafka group consumers need one) whose only mechanisms are SCRAM's."""
    data = tmp_path_factory.mktemp("scram-data")
    formatted(data)
    with BrokerProcess(data_dir=data, overrides=LISTENER) as b:
        yield b


def ck_auth(mech: str, user: str, password: str) -> dict:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech, "sasl.username": user,
            "sasl.password": password}


def kp_auth(mech: str, user: str, password: str, protocol: str = "SASL_PLAINTEXT") -> dict:
    return {"security_protocol": protocol, "sasl_mechanism": mech, "sasl_plain_username": user,
            "sasl_plain_password": password}


def add_user(bs: str, user: str, password: str, *mechs: str, iterations: int = 4096, salt: bytes | None = None) -> None:
    """confluent-kafka's admin client, authenticated as admin (`salt`: the client's own, else librdkafka picks one)."""
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    admin = AdminClient({"bootstrap.servers": bs, **ck_auth("SCRAM-SHA-512", "admin", "admin-secret")})
    ups = [UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism[m.replace("-", "_")], iterations),
                                        password.encode(), salt) for m in mechs]
    for fut in admin.alter_user_scram_credentials(ups).values():
        fut.result(30)


def auth_error(bs: str, mech: str, user: str, password: str) -> object:
    """The error a confluent-kafka producer reports for these credentials (None: it got metadata)."""
    from confluent_kafka import KafkaException, Producer
    errors: list = []
    p = Producer({"bootstrap.servers": bs, **ck_auth(mech, user, password), "error_cb": errors.append,
                  "log_level": 0})
    last = None
    try:
        deadline = time.monotonic() + 20
        while not errors and time.monotonic() < deadline:
            try:
                p.list_topics(timeout=0.5)
                return None
            except KafkaException as exc:
                last = exc.args[0]
            p.poll(0.1)  # the error callback is served by poll
        return errors[0] if errors else last
    finally:
        p.flush(0)


@pytest.mark.parametrize("mech", MECHS)
def test_clients_produce_and_group_consume(scram_broker, mech):
    from confluent_kafka import Consumer, Producer
    from kafka import KafkaProducer
    bs = scram_broker.bootstrap_servers
    user = f"alice-{mech[-3:]}"
    add_user(bs, user, "alice-secret", mech)
    topic = f"scram-{mech[-3:]}"
    p = Producer({"bootstrap.servers": bs, **ck_auth(mech, user, "alice-secret")})
    for i in range(5):
        p.produce(topic, value=b"ck-%d" % i)
    assert p.flush(30) == 0
    kp = KafkaProducer(bootstrap_servers=bs, **kp_auth(mech, user, "alice-secret"))
    for i in range(5):
        kp.send(topic, b"kp-%d" % i).get(timeout=30)
    kp.close()
    want = sorted([b"ck-%d" % i for i in range(5)] + [b"kp-%d" % i for i in range(5)])
    c = Consumer({"bootstrap.servers": bs, **ck_auth(mech, user, "alice-secret"), "group.id": f"g-ck-{mech}",
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < 10 and time.monotonic() < deadline:
        m = c.poll(1)
        if m is not None:
            assert m.error() is None, m.error()
            got.append(m.value())
    c.close()
    assert sorted(got) == want
    kc = kp_group_consumer(topic, bootstrap_servers=bs, **kp_auth(mech, user, "alice-secret"), group_id=f"g-kp-{mech}",
                       auto_offset_reset="earliest")
    got = []
    deadline = time.monotonic() + 60
    while len(got) < 10 and time.monotonic() < deadline:
        got += [r.value for rs in kc.poll(1000).values() for r in rs]
    kc.close()
    assert sorted(got) == want


def test_wrong_password_and_unknown_user_fail_fast_with_kafkas_error(scram_broker, caplog):
    from confluent_kafka import KafkaError
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as KPError
    bs = scram_broker.bootstrap_servers
    for mech in MECHS:
        for user in ("admin", "nobody"):
            t0 = time.monotonic()
            err = auth_error(bs, mech, user, "wrong")
            assert err is not None and err.code() == KafkaError._AUTHENTICATION, err
            assert ("Authentication failed during authentication due to invalid credentials with SASL mechanism "
                    f"{mech}") in err.str()
            assert time.monotonic() - t0 < 10
    # kafka-python retries the bootstrap until its timeout, logging each refusal: Kafka's error and message
    with caplog.at_level(logging.WARNING, logger="kafka"), pytest.raises(KPError):
        KafkaProducer(bootstrap_servers=bs, **kp_auth("SCRAM-SHA-512", "admin", "wrong"), bootstrap_timeout_ms=3000)
    assert ("SaslAuthenticationFailedError: Authentication failed during authentication due to invalid credentials "
            "with SASL mechanism SCRAM-SHA-512") in caplog.text


def test_a_credential_with_a_short_salt_is_taken_and_logs_in(scram_broker):
    """Kafka takes any salt in AlterUserScramCredentials (librdkafka's own admin test sends 4 bytes); its clients log
    in with it."""
    bs = scram_broker.bootstrap_servers
    add_user(bs, "shorty", "shorty-secret", *MECHS, salt=b"salt")
    for mech in MECHS:
        assert auth_error(bs, mech, "shorty", "shorty-secret") is None
        assert auth_error(bs, mech, "shorty", "wrong") is not None


def test_added_user_logs_in_and_a_deleted_one_cannot(scram_broker):
    from kafka.admin import KafkaAdminClient, ScramMechanism, UserScramCredentialDeletion
    bs = scram_broker.bootstrap_servers
    assert auth_error(bs, "SCRAM-SHA-512", "bob", "bob-secret") is not None
    add_user(bs, "bob", "bob-secret", *MECHS)
    for mech in MECHS:
        assert auth_error(bs, mech, "bob", "bob-secret") is None
    admin = KafkaAdminClient(bootstrap_servers=bs, **kp_auth("SCRAM-SHA-256", "admin", "admin-secret"))
    try:
        got = admin.describe_user_scram_credentials(["bob"])["bob"]
        assert sorted((i["mechanism"].name, i["iterations"]) for i in got["credential_infos"]) == [
            ("SCRAM_SHA_256", 4096), ("SCRAM_SHA_512", 4096)]
        assert admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512)]) == {"bob": None}
        assert auth_error(bs, "SCRAM-SHA-512", "bob", "bob-secret") is not None  # a new connection is refused
        assert auth_error(bs, "SCRAM-SHA-256", "bob", "bob-secret") is None  # the other mechanism's stays
        admin.alter_user_scram_credentials([UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_256)])
        assert auth_error(bs, "SCRAM-SHA-256", "bob", "bob-secret") is not None
        assert "does not exist" in str(admin.describe_user_scram_credentials(["bob"])["bob"]["error"])
    finally:
        admin.close()


def test_cli_users_and_credentials_survive_a_restart(tmp_path):
    """`kafkite users` adds, describes and deletes against a running broker; a restart keeps every credential."""
    formatted(tmp_path / "data")
    props = tmp_path / "admin.properties"
    props.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config={SCRAM_JAAS}\n")
    with BrokerProcess(data_dir=tmp_path / "data", overrides=LISTENER) as b:
        bs = b.bootstrap_servers
        out = kafkite("users", "alter", "--bootstrap-server", bs, "--command-config", str(props), "--entity-name",
                      "carol", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=carol-secret],"
                                               "SCRAM-SHA-512=[password=carol-secret]")
        assert out.returncode == 0 and "Completed updating config for user carol." in out.stdout, out.stderr
        out = kafkite("users", "alter", "--bootstrap-server", bs, "--command-config", str(props), "--entity-name",
                      "dave", "--add-config", "SCRAM-SHA-512=[password=dave-secret]")
        assert out.returncode == 0, out.stderr
        out = kafkite("users", "alter", "--bootstrap-server", bs, "--command-config", str(props), "--entity-name",
                      "dave", "--delete-config", "SCRAM-SHA-512")
        assert out.returncode == 0, out.stderr
        out = kafkite("users", "alter", "--bootstrap-server", bs, "--command-config", str(props), "--entity-name",
                      "erin", "--add-config", "SCRAM-SHA-512=[iterations=20000,password=x]")
        assert out.returncode != 0 and "iterations" in out.stderr
        assert auth_error(bs, "SCRAM-SHA-256", "carol", "carol-secret") is None
    with BrokerProcess(data_dir=tmp_path / "data", overrides=LISTENER) as b:
        bs = b.bootstrap_servers
        for mech in MECHS:
            assert auth_error(bs, mech, "carol", "carol-secret") is None
            assert auth_error(bs, mech, "admin", "admin-secret") is None
        assert auth_error(bs, "SCRAM-SHA-512", "dave", "dave-secret") is not None
        out = kafkite("users", "describe", "--bootstrap-server", bs, "--command-config", str(props))
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines() == [
            "SCRAM credential configs for user-principal 'admin' are SCRAM-SHA-256=iterations=8192, "
            "SCRAM-SHA-512=iterations=4096",
            "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-256=iterations=8192, "
            "SCRAM-SHA-512=iterations=4096"]
        out = kafkite("users", "describe", "--bootstrap-server", bs, "--command-config", str(props),
                      "--entity-name", "dave")
        assert out.returncode == 1 and "does not exist" in out.stderr


def test_sasl_ssl_with_plain_and_scram(tmp_path):
    """SASL_SSL, the three mechanisms on one listener: a PLAIN admin (JAAS users) adds a SCRAM user."""
    trustme = pytest.importorskip("trustme", reason="trustme is not installed (pip install -e '.[test]')")
    from confluent_kafka import Producer
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, ScramMechanism, UserScramCredentialUpsertion
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    keystore = tmp_path / "broker.pem"
    keystore.write_bytes(cert.private_key_pem.bytes() + b"".join(c.bytes() for c in cert.cert_chain_pems))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    plain = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="root" password="root-pw" '
             'user_root="root-pw";')
    with BrokerThread(overrides={"listeners": "SASL_SSL://127.0.0.1:0",
                                 "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                                 "listener.name.sasl_ssl.plain.sasl.jaas.config": plain,
                                 "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
                                 "ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore)}) as b:
        bs = b.bootstrap_servers
        tls = {"ssl_cafile": str(tmp_path / "ca.pem")}
        admin = KafkaAdminClient(bootstrap_servers=bs, **kp_auth("PLAIN", "root", "root-pw", "SASL_SSL"), **tls)
        assert admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion("tls-user", ScramMechanism.SCRAM_SHA_256, "tls-secret", iterations=16384),
            UserScramCredentialUpsertion("tls-user", ScramMechanism.SCRAM_SHA_512, "tls-secret")]) == {
                "tls-user": None}
        admin.close()
        for mech in MECHS:
            p = Producer({"bootstrap.servers": bs, "security.protocol": "SASL_SSL",
                          "ssl.ca.location": str(tmp_path / "ca.pem"), "sasl.mechanism": mech,
                          "sasl.username": "tls-user", "sasl.password": "tls-secret"})
            p.produce("over-tls", value=mech.encode())
            assert p.flush(30) == 0
            kp = KafkaProducer(bootstrap_servers=bs, **kp_auth(mech, "tls-user", "tls-secret", "SASL_SSL"), **tls)
            kp.send("over-tls", b"kp-" + mech.encode()).get(timeout=30)
            kp.close()
        kc = kp_group_consumer("over-tls", bootstrap_servers=bs, **kp_auth("SCRAM-SHA-512", "tls-user", "tls-secret",
                                                                           "SASL_SSL"), **tls,
                               group_id="g-tls", auto_offset_reset="earliest")
        got = []
        deadline = time.monotonic() + 60
        while len(got) < 4 and time.monotonic() < deadline:
            got += [r.value for rs in kc.poll(1000).values() for r in rs]
        kc.close()
        assert sorted(got) == [b"SCRAM-SHA-256", b"SCRAM-SHA-512", b"kp-SCRAM-SHA-256", b"kp-SCRAM-SHA-512"]


def test_java_client_with_scram(scram_broker, java_client):
    """Java kafka-clients 3.9 and 4.3 with its ScramLoginModule produces and consumes; a wrong password is its
    SaslAuthenticationException."""
    from clients.drivers import run_java
    bs = scram_broker.bootstrap_servers
    topic = f"java-scram-{java_client}"  # the broker serves the module's tests
    add_user(bs, "java-user", "java-secret", "SCRAM-SHA-512")
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="java-user" password="{}";'
    props = ["--prop", "security.protocol=SASL_PLAINTEXT", "--prop", "sasl.mechanism=SCRAM-SHA-512",
             "--prop", "sasl.jaas.config=" + jaas.format("java-secret")]
    out = run_java("produce", bs, topic, 20, *props)
    assert out[-1]["acked"] == 20 and out[-1]["errors"] == 0, out[-1]
    got = run_java("consume-assign", bs, topic, 20, "--timeout-ms", 30000, *props)
    assert got[-1]["consumed"] == 20, got[-1]
    bad = ["--prop", "security.protocol=SASL_PLAINTEXT", "--prop", "sasl.mechanism=SCRAM-SHA-512",
           "--prop", "sasl.jaas.config=" + jaas.format("nope"), "--prop", "max.block.ms=5000"]
    out = run_java("produce", bs, topic, 1, *bad, check=False)
    assert "SaslAuthenticationException" in str(out[-1]), out[-1]
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in str(out[-1]), out[-1]


# -- raw requests: DescribeUserScramCredentials / AlterUserScramCredentials v0 ----------------------------------
def _alter(w, upsertions=(), deletions=(), version=0):
    R = AlterUserScramCredentialsRequest
    return w.request(R(deletions=[R.ScramCredentialDeletion(name=n, mechanism=m) for n, m in deletions],
                       upsertions=[R.ScramCredentialUpsertion(name=n, mechanism=m, iterations=i, salt=b"s" * 16,
                                                              salted_password=scram.salted_password(
                                                                  "SCRAM-SHA-512", "pw", b"s" * 16, 4096))
                                   for n, m, i in upsertions]), version)


def _describe(w, names):
    R = DescribeUserScramCredentialsRequest
    return w.request(R(users=None if names is None else [R.UserName(name=n) for n in names]), 0)


def test_describe_and_alter_errors_over_raw_requests(broker):
    with WireClient.connect(broker.bootstrap_servers) as w:
        api = {k.api_key: (k.min_version, k.max_version) for k in w.request(ApiVersionsRequest(), 0).api_keys}
        assert api[50] == (0, 0) and api[51] == (0, 0)
        r = _alter(w, upsertions=[("raw-a", 2, 4096), ("raw-b", 1, 8192), ("", 1, 4096), ("raw-c", 9, 4096),
                                  ("raw-d", 2, 1000), ("raw-e", 2, 16385), ("raw-f", 1, 4096), ("raw-f", 1, 4096)],
                   deletions=[("raw-g", 2)])
        got = {x.user: (x.error_code, x.error_message) for x in r.results}
        assert got == {"raw-a": (0, None), "raw-b": (0, None),
                       "": (E.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
                       "raw-c": (E.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
                       "raw-d": (E.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
                       "raw-e": (E.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
                       "raw-f": (E.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
                       "raw-g": (E.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")}
        d = _describe(w, None)
        assert d.error_code == 0
        mine = {x.user: [(c.mechanism, c.iterations) for c in x.credential_infos] for x in d.results
                if x.user.startswith("raw-")}
        assert mine == {"raw-a": [(2, 4096)], "raw-b": [(1, 8192)]}
        users = [x.user for x in d.results]
        assert users == sorted(users)
        d = _describe(w, ["raw-b", "raw-zz", "", "raw-a", "raw-a"])
        assert [(x.user, x.error_code) for x in d.results] == [
            ("raw-b", 0), ("raw-zz", E.RESOURCE_NOT_FOUND), ("", E.RESOURCE_NOT_FOUND), ("raw-a", E.DUPLICATE_RESOURCE)]
        r = _alter(w, deletions=[("raw-a", 2), ("raw-b", 1)])
        assert {(x.user, x.error_code) for x in r.results} == {("raw-a", 0), ("raw-b", 0)}
        assert _describe(w, ["raw-a"]).results[0].error_code == E.RESOURCE_NOT_FOUND
    with WireClient.connect(broker.bootstrap_servers) as w:  # v1 is not served: Kafka closes the connection
        w.send_raw(_v1_frame())
        assert w.is_closed()


def _v1_frame() -> bytes:
    """A DescribeUserScramCredentials v1 header with a v0 body (flexible): a version the broker does not enable."""
    import struct
    body = DescribeUserScramCredentialsRequest(users=None)
    body.API_VERSION = 0
    body.with_header(correlation_id=7, client_id="t")
    frame = bytes(body.encode(header=True, framed=True))
    return frame[:6] + struct.pack(">h", 1) + frame[8:]


PLAIN_ROOT = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="root" password="root-pw" '
              'user_root="root-pw";')
MIXED = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
         "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_ROOT}


def _plain_login(w) -> None:
    from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
    assert w.request(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
    assert w.request(SaslAuthenticateRequest(auth_bytes=b"\0root\0root-pw"), 2).error_code == 0


@pytest.mark.parametrize("mech", MECHS)
def test_scram_over_the_v0_raw_token_framing_and_every_sasl_authenticate_version(mech):
    """SaslHandshake v0: each SCRAM token goes as a bare size-prefixed frame and its answer comes back as one;
    SaslHandshake v1: SaslAuthenticate v0-2 carry them."""
    import scramp
    import struct
    from kafka.protocol.metadata import MetadataRequest
    from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
    with BrokerThread(overrides=MIXED) as b:
        with WireClient.connect(b.bootstrap_servers) as w:  # root (PLAIN) adds the SCRAM user
            _plain_login(w)
            R = AlterUserScramCredentialsRequest
            salt = b"v0-salt-v0-salt!"
            r = w.request(R(deletions=[], upsertions=[R.ScramCredentialUpsertion(
                name="v0", mechanism=scram.MECHANISM_BY_NAME[mech], iterations=4096, salt=salt,
                salted_password=scram.salted_password(mech, "v0-pw", salt, 4096))]), 0)
            assert r.results[0].error_code == 0
        with WireClient.connect(b.bootstrap_servers) as w:
            assert w.request(SaslHandshakeRequest(mechanism=mech), 0).error_code == 0
            client = scramp.ScramClient([mech], "v0", "v0-pw")
            first = client.get_client_first().encode()
            w.send_raw(struct.pack(">i", len(first)) + first)
            client.set_server_first(w.recv_frame().decode())
            final = client.get_client_final().encode()
            w.send_raw(struct.pack(">i", len(final)) + final)
            client.set_server_final(w.recv_frame().decode())  # raises unless the server proved the credential
            assert w.request(MetadataRequest(topics=None), 9).brokers
        for version in (0, 1, 2):
            with WireClient.connect(b.bootstrap_servers) as w:
                assert w.request(SaslHandshakeRequest(mechanism=mech), 1).error_code == 0
                client = scramp.ScramClient([mech], "v0", "v0-pw")
                r = w.request(SaslAuthenticateRequest(auth_bytes=client.get_client_first().encode()), version)
                assert r.error_code == 0 and r.auth_bytes.startswith(b"r=")
                client.set_server_first(r.auth_bytes.decode())
                r = w.request(SaslAuthenticateRequest(auth_bytes=client.get_client_final().encode()), version)
                assert r.error_code == 0 and r.auth_bytes.startswith(b"v=")
                client.set_server_final(r.auth_bytes.decode())
                assert w.request(MetadataRequest(topics=None), 9).brokers
        with WireClient.connect(b.bootstrap_servers) as w:  # a wrong proof on the v0 framing: the connection closes
            assert w.request(SaslHandshakeRequest(mechanism=mech), 0).error_code == 0
            client = scramp.ScramClient([mech], "v0", "wrong")
            first = client.get_client_first().encode()
            w.send_raw(struct.pack(">i", len(first)) + first)
            client.set_server_first(w.recv_frame().decode())
            final = client.get_client_final().encode()
            w.send_raw(struct.pack(">i", len(final)) + final)
            assert w.is_closed()


def test_a_user_added_through_one_broker_logs_in_on_every_broker_of_an_in_process_cluster():
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, ScramMechanism, UserScramCredentialUpsertion
    from kafkite.testing.cluster import KafkiteCluster
    with KafkiteCluster(3, overrides=MIXED) as c:
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap_of(1), **kp_auth("PLAIN", "root", "root-pw"))
        assert admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "everywhere", ScramMechanism.SCRAM_SHA_512, "pw")]) == {"everywhere": None}
        admin.close()
        for i in (1, 2, 3):
            assert auth_error(c.bootstrap_of(i), "SCRAM-SHA-512", "everywhere", "pw") is None, i
        kp = KafkaProducer(bootstrap_servers=c.bootstrap_of(3), **kp_auth("SCRAM-SHA-512", "everywhere", "pw"))
        for i in range(6):
            kp.send("everywhere", b"%d" % i, partition=None).get(timeout=30)
        kp.close()


def test_serve_add_scram_writes_the_first_user_before_serving(tmp_path):
    from kafkite.testing.process import spawn_serve
    args = ["--data-dir", str(tmp_path / "d"), "--add-scram", "SCRAM-SHA-256=[name=first,password=first-pw]"]
    for k, v in LISTENER.items():
        args += ["--override", f"{k}={v}"]
    proc, bs = spawn_serve(args)
    try:
        assert auth_error(bs, "SCRAM-SHA-256", "first", "first-pw") is None
        assert auth_error(bs, "SCRAM-SHA-256", "first", "nope") is not None
    finally:
        proc.terminate()
        proc.wait(15)
    out = kafkite("serve", "--in-memory", "--add-scram", "SCRAM-SHA-256=[name=a,password=b]")
    assert out.returncode == 2 and "--add-scram writes into the data dir" in out.stderr
    out = kafkite("storage", "format", "--data-dir", str(tmp_path / "e"), "--add-scram", "SCRAM-SHA-256=[password=b]")
    assert out.returncode == 2 and "You must supply 'name'" in out.stderr


def test_aiokafka_and_kcat_with_scram(scram_broker):
    """Two more SCRAM client implementations: aiokafka's own, and kcat's librdkafka 2.0 (which, as every librdkafka
    before 2.6.1, echoes its own nonce twice in the client-final message: taken, as Kafka 3.8.1-3.9 take it)."""
    import asyncio
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from clients.drivers import run_kcat
    bs = scram_broker.bootstrap_servers
    add_user(bs, "aio", "aio-secret", *MECHS)

    async def roundtrip(mech: str) -> list[bytes]:
        auth = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mech, "sasl_plain_username": "aio",
                "sasl_plain_password": "aio-secret"}
        p = AIOKafkaProducer(bootstrap_servers=bs, **auth)
        await p.start()
        try:
            await p.send_and_wait(f"aio-{mech}", b"hello")
        finally:
            await p.stop()
        c = AIOKafkaConsumer(f"aio-{mech}", bootstrap_servers=bs, auto_offset_reset="earliest", **auth)
        await c.start()
        try:
            return [(await asyncio.wait_for(c.getone(), 30)).value]
        finally:
            await c.stop()
    for mech in MECHS:
        assert asyncio.run(roundtrip(mech)) == [b"hello"]
        out = run_kcat("-b", bs, "-X", "security.protocol=SASL_PLAINTEXT", "-X", f"sasl.mechanisms={mech}",
                       "-X", "sasl.username=aio", "-X", "sasl.password=aio-secret", "-L", "-t", f"aio-{mech}")
        assert out.returncode == 0 and f'topic "aio-{mech}" with 1 partitions' in out.stdout.decode(), out
        bad = run_kcat("-b", bs, "-X", "security.protocol=SASL_PLAINTEXT", "-X", f"sasl.mechanisms={mech}",
                       "-X", "sasl.username=aio", "-X", "sasl.password=wrong", "-L", "-m", "2")
        assert bad.returncode != 0 and b"Authentication failed" in bad.stderr, bad


def test_a_deleted_users_open_session_ends_at_its_next_reauthentication(tmp_path):
    """KIP-368 with SCRAM: sessions last 1.5 s (connections.max.reauth.ms); librdkafka re-authenticates on its open
    connection. Once carol's credentials are deleted, her next re-authentication fails and the connection is closed:
    her producer, which delivered before, gets the authentication error and delivers nothing more."""
    from confluent_kafka import KafkaError, Producer
    formatted(tmp_path / "data")
    with BrokerProcess(data_dir=tmp_path / "data", overrides={**LISTENER, "connections.max.reauth.ms": "1500"}) as b:
        bs = b.bootstrap_servers
        add_user(bs, "carol", "carol-secret", "SCRAM-SHA-512")
        errors: list = []
        p = Producer({"bootstrap.servers": bs, **ck_auth("SCRAM-SHA-512", "carol", "carol-secret"),
                      "error_cb": errors.append, "log_level": 0, "message.timeout.ms": 8000})
        delivered: list = []

        def send(value: bytes) -> None:
            p.produce("reauth", value, on_delivery=lambda err, msg: delivered.append(err))
            p.flush(15)
        send(b"before")
        time.sleep(2.0)  # past one session end: librdkafka re-authenticated and is still connected
        send(b"after-a-reauthentication")
        assert delivered == [None, None], delivered
        from kafka.admin import KafkaAdminClient, ScramMechanism, UserScramCredentialDeletion
        admin = KafkaAdminClient(bootstrap_servers=bs, **kp_auth("SCRAM-SHA-512", "admin", "admin-secret"))
        try:
            assert admin.alter_user_scram_credentials(
                [UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)]) == {"carol": None}
        finally:
            admin.close()
        deadline = time.monotonic() + 20
        while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) and time.monotonic() < deadline:
            p.poll(0.2)
        assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
        send(b"after-the-deletion")
        assert len(delivered) == 3 and delivered[2] is not None, delivered
