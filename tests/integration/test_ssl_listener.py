"""An SSL client listener (issue "Security as Kafka has it", first slice): Kafka's ssl.* configs with a PEM keystore
(in a file, or inline), TLS through Python's ssl and Trio's SSLStream, real clients (confluent-kafka, kafka-python)
producing and consuming over it; a failed handshake is logged with its peer and closes that connection only; a
JKS keystore is refused at start naming what works; passwords are never shown by DescribeConfigs."""
from __future__ import annotations

import socket
import ssl
import subprocess
import sys

import pytest
import structlog

from helpers import kp_read
from kafkite.config import BrokerConfig, ConfigError
from kafkite.testing.runner import BrokerThread

trustme = pytest.importorskip("trustme", reason="trustme is not installed (pip install -e '.[test]')")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    keystore = d / "broker.pem"  # the private key and its chain in one file (Kafka's PEM keystore)
    keystore.write_bytes(server.private_key_pem.bytes() + b"".join(c.bytes() for c in server.cert_chain_pems))
    ca_file = d / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    other = trustme.CA()
    other_file = d / "other-ca.pem"
    other.cert_pem.write_to_path(str(other_file))
    return {"ca": ca, "server": server, "keystore": keystore, "ca_file": ca_file, "other_ca": other_file}


def ssl_broker(pki, **extra):
    return BrokerThread(overrides={"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
                                   "ssl.keystore.location": str(pki["keystore"]), **extra})


def test_confluent_and_kafka_python_over_ssl(pki):
    from confluent_kafka import Consumer, Producer
    from kafka import KafkaConsumer, KafkaProducer
    with ssl_broker(pki) as b:
        bs = b.bootstrap_servers
        p = Producer({"bootstrap.servers": bs, "security.protocol": "SSL", "ssl.ca.location": str(pki["ca_file"])})
        for i in range(10):
            p.produce("secure", value=b"ck-%d" % i)
        assert p.flush(30) == 0
        kp = KafkaProducer(bootstrap_servers=bs, security_protocol="SSL", ssl_cafile=str(pki["ca_file"]))
        for i in range(10):
            kp.send("secure", b"kp-%d" % i).get(timeout=30)
        kp.close()
        c = Consumer({"bootstrap.servers": bs, "security.protocol": "SSL", "ssl.ca.location": str(pki["ca_file"]),
                      "group.id": "g-ssl", "auto.offset.reset": "earliest"})
        c.subscribe(["secure"])
        got = []
        while len(got) < 20:
            m = c.poll(30)
            assert m is not None, got
            assert m.error() is None, m.error()
            got.append(m.value())
        c.close()
        assert sorted(got) == sorted([b"ck-%d" % i for i in range(10)] + [b"kp-%d" % i for i in range(10)])
        kc = KafkaConsumer("secure", bootstrap_servers=bs, security_protocol="SSL", ssl_cafile=str(pki["ca_file"]),
                           auto_offset_reset="earliest")
        assert len(kp_read(kc, 20)) == 20
        kc.close()


def test_a_failed_handshake_closes_that_connection_only(pki):
    with ssl_broker(pki) as b:
        host, port = b.bootstrap_servers.rsplit(":", 1)
        with structlog.testing.capture_logs() as logs:
            # a client that trusts another CA: its handshake fails
            ctx = ssl.create_default_context(cafile=str(pki["other_ca"]))
            with socket.create_connection((host, int(port)), timeout=10) as raw:
                with pytest.raises(ssl.SSLError):
                    ctx.wrap_socket(raw, server_hostname="127.0.0.1")
            # a PLAINTEXT client: an ApiVersions request is not a TLS hello
            with socket.create_connection((host, int(port)), timeout=10) as raw:
                raw.sendall(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\xff\xff")
                raw.settimeout(10)
                assert raw.recv(100) == b""  # closed, no Kafka answer
        fails = [e for e in logs if e["event"] == "connection.ssl_handshake_failed"]
        assert len(fails) >= 2 and all(e["peer"] == "127.0.0.1" and "SSL handshake failed" in e["message"]
                                       for e in fails), logs
        # the broker serves a good client meanwhile
        ctx = ssl.create_default_context(cafile=str(pki["ca_file"]))
        with socket.create_connection((host, int(port)), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x07\xff\xff")  # ApiVersions v0, corr 7
                head = tls.recv(8)
                assert head[4:8] == b"\x00\x00\x00\x07"


def test_inline_pem_keystore_and_required_client_certificates(pki):
    server = pki["server"]
    client = pki["ca"].issue_cert("client.example")
    key = server.private_key_pem.bytes().decode()
    chain = "".join(c.bytes().decode() for c in server.cert_chain_pems)
    with BrokerThread(overrides={"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
                                 "ssl.keystore.key": key, "ssl.keystore.certificate.chain": chain,
                                 "ssl.client.auth": "required", "ssl.truststore.type": "PEM",
                                 "ssl.truststore.location": str(pki["ca_file"])}) as b:
        host, port = b.bootstrap_servers.rsplit(":", 1)
        ctx = ssl.create_default_context(cafile=str(pki["ca_file"]))
        # without a client certificate: refused (TLS 1.3 reports it on the first read)
        with socket.create_connection((host, int(port)), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)):
                    tls.sendall(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\xff\xff")
                    if not tls.recv(8):
                        raise ConnectionResetError("closed")
        # with one the CA signed: served
        client.configure_cert(ctx)
        with socket.create_connection((host, int(port)), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x03\xff\xff")
                assert tls.recv(8)[4:8] == b"\x00\x00\x00\x03"
        # DescribeConfigs (its broker entries, as the handler builds them) never shows a password's value
        from kafkite.server.handlers.configs import broker_config_entries
        entries = {e.name: e for e in b.call(lambda: broker_config_entries(b.broker, None, synonyms=True,
                                                                           documentation=False))}
        assert entries["ssl.keystore.key"].value is None and entries["ssl.keystore.key"].is_sensitive
        assert all(s.value is None for s in entries["ssl.keystore.key"].synonyms)
        assert entries["ssl.keystore.type"].value == "PEM"


def test_a_jks_keystore_is_refused_naming_what_works(pki, tmp_path):
    from kafkite.security.ssl_context import server_context
    cfg = BrokerConfig(static={"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(pki["keystore"])})
    with pytest.raises(ConfigError, match="ssl.keystore.type: Kafkite reads keystores of type PEM or PKCS12"):
        server_context(cfg)  # Kafka's default type is JKS
    out = subprocess.run([sys.executable, "-m", "kafkite.cli", "serve", "--port", "0", "--in-memory",
                          "--override", "listeners=SSL://127.0.0.1:0",
                          "--override", f"ssl.keystore.location={pki['keystore']}"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, out.stderr[-2000:]
    assert "config.invalid" in out.stderr and "of type PEM or PKCS12" in out.stderr, out.stderr[-2000:]
    missing = BrokerConfig(static={"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
                                   "ssl.keystore.location": str(tmp_path / "nope.pem")})
    with pytest.raises(ConfigError, match="Failed to load SSL keystore"):
        server_context(missing)


def test_java_client_over_ssl_with_a_pem_truststore(pki):
    """Java kafka-clients 3.9 (its own TLS stack, host name verification on) with a PEM truststore."""
    from clients.drivers import run_java
    props = ["--prop", "security.protocol=SSL", "--prop", "ssl.truststore.type=PEM",
             "--prop", f"ssl.truststore.location={pki['ca_file']}"]
    with ssl_broker(pki) as b:
        out = run_java("produce", b.bootstrap_servers, "java-tls", 20, *props)
        assert out[-1]["acked"] == 20 and out[-1]["errors"] == 0, out[-1]
        got = run_java("consume-assign", b.bootstrap_servers, "java-tls", 20, "--timeout-ms", 30000, *props)
        assert got[-1]["consumed"] == 20, got[-1]
