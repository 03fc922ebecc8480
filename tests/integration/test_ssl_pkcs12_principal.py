"""TLS item 2 of issue "Security as Kafka has it": PKCS12 keystores and truststores (made with trustme and the
cryptography package, as keytool -storetype PKCS12 would), ssl.cipher.suites, and the principal of an SSL client
certificate through ssl.principal.mapping.rules, seen end to end (the broker's log line and the connection's
`principal`)."""
from __future__ import annotations

import ssl

import pytest
import structlog

from kafkite.config import BrokerConfig, ConfigError
from kafkite.network.listeners import ListenerConfig
from kafkite.testing.runner import BrokerThread

trustme = pytest.importorskip("trustme", reason="trustme is not installed (pip install -e '.[test]')")


def _pkcs12(path, blob, password: str) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12
    key = serialization.load_pem_private_key(blob.private_key_pem.bytes(), None)
    certs = [x509.load_pem_x509_certificate(c.bytes()) for c in blob.cert_chain_pems]
    path.write_bytes(pkcs12.serialize_key_and_certificates(b"broker", key, certs[0], certs[1:] or None,
                                                           serialization.BestAvailableEncryption(password.encode())))


def _trust_pkcs12(path, ca, password: str) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12
    cert = x509.load_pem_x509_certificate(ca.cert_pem.bytes())
    path.write_bytes(pkcs12.serialize_key_and_certificates(None, None, None, [cert],
                                                           serialization.BestAvailableEncryption(password.encode())))


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki12")
    ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    client = ca.issue_cert("alice@example.com", common_name="alice", organization_name="Acme",
                           organization_unit_name="ServiceUsers")
    _pkcs12(d / "broker.p12", server, "store-secret")
    _trust_pkcs12(d / "trust.p12", ca, "trust-secret")
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    client.private_key_and_cert_chain_pem.write_to_path(str(d / "client.pem"))
    return {"dir": d, "keystore": d / "broker.p12", "truststore": d / "trust.p12", "ca_file": d / "ca.pem",
            "client": d / "client.pem"}


def pkcs12_listener(pki, **extra):
    return {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(pki["keystore"]), "ssl.keystore.password": "store-secret",
            "ssl.key.password": "store-secret", **extra}


def test_pkcs12_keystore_with_confluent_and_kafka_python(pki):
    from confluent_kafka import Producer
    from kafka import KafkaConsumer
    with BrokerThread(overrides=pkcs12_listener(pki)) as b:
        p = Producer({"bootstrap.servers": b.bootstrap_servers, "security.protocol": "SSL",
                      "ssl.ca.location": str(pki["ca_file"])})
        for i in range(5):
            p.produce("p12", value=b"v%d" % i)
        assert p.flush(30) == 0
        kc = KafkaConsumer("p12", bootstrap_servers=b.bootstrap_servers, security_protocol="SSL",
                           ssl_cafile=str(pki["ca_file"]), auto_offset_reset="earliest", consumer_timeout_ms=20000)
        got = []
        for m in kc:
            got.append(m.value)
            if len(got) == 5:
                break
        assert sorted(got) == [b"v%d" % i for i in range(5)]
        kc.close()


def test_pkcs12_errors_and_jks():
    from kafkite.security.ssl_context import server_context
    with pytest.raises(ConfigError, match="PEM or PKCS12"):
        server_context(BrokerConfig(static={"ssl.keystore.type": "JKS", "ssl.keystore.location": "/x.jks"}))


def test_a_wrong_pkcs12_password_is_refused_at_start(pki):
    from kafkite.security.ssl_context import server_context
    cfg = BrokerConfig(static=pkcs12_listener(pki, **{"ssl.keystore.password": "wrong", "ssl.key.password": "wrong"}))
    with pytest.raises(ConfigError, match="Failed to load SSL keystore .*broker.p12 of type PKCS12"):
        server_context(cfg)


def test_cipher_suites_by_kafka_names(pki):
    from kafkite.security.ssl_context import server_context
    ctx = server_context(BrokerConfig(static=pkcs12_listener(pki, **{
        "ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_AES_256_GCM_SHA384",
        "ssl.enabled.protocols": "TLSv1.2"})))
    assert {c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"} == {"ECDHE-RSA-AES256-GCM-SHA384"}
    with pytest.raises(ConfigError, match="ssl.cipher.suites"):
        server_context(BrokerConfig(static=pkcs12_listener(pki, **{"ssl.cipher.suites": "TLS_NOT_A_SUITE"})))
    # a real handshake gets the one suite served
    with BrokerThread(overrides=pkcs12_listener(pki, **{"ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
                                                       "ssl.enabled.protocols": "TLSv1.2"})) as b:
        import socket
        host, port = b.bootstrap_servers.rsplit(":", 1)
        cctx = ssl.create_default_context(cafile=str(pki["ca_file"]))
        with socket.create_connection((host, int(port)), timeout=10) as raw, \
                cctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            assert tls.cipher()[0] == "ECDHE-ECDSA-AES128-GCM-SHA256"


def test_client_certificate_principal_through_mapping_rules(pki):
    from confluent_kafka import Producer
    rules = "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT"
    overrides = pkcs12_listener(pki, **{"ssl.client.auth": "required", "ssl.truststore.type": "PKCS12",
                                        "ssl.truststore.location": str(pki["truststore"]),
                                        "ssl.truststore.password": "trust-secret",
                                        "ssl.principal.mapping.rules": rules})
    with structlog.testing.capture_logs() as logs, BrokerThread(overrides=overrides) as b:
        p = Producer({"bootstrap.servers": b.bootstrap_servers, "security.protocol": "SSL",
                      "ssl.ca.location": str(pki["ca_file"]), "ssl.certificate.location": str(pki["client"]),
                      "ssl.key.location": str(pki["client"])})
        p.produce("principals", value=b"x")
        assert p.flush(30) == 0
        # the connection's principal (what the authorizer reads): the producer's connections are still open
        principals = {c.principal for c in list(b.broker.client_connections)}
        assert principals == {"User:alice"}
    seen = [e for e in logs if e["event"] == "ssl.principal"]  # the log line, when this process's logger is fresh
    assert all(e["dn"] == "CN=alice,OU=ServiceUsers,O=Acme" and e["principal"] == "User:alice" for e in seen)


def test_listener_prefixed_ssl_keys_win(pki):
    cfg = BrokerConfig(static={"ssl.keystore.type": "PEM", "listener.name.secure.ssl.keystore.type": "PKCS12",
                               "listener.name.secure.ssl.enabled.protocols": "TLSv1.3"})
    assert ListenerConfig(cfg, "SECURE").get("ssl.keystore.type") == "PKCS12"
    assert ListenerConfig(cfg, "SECURE").get("ssl.enabled.protocols") == ["TLSv1.3"]
    assert ListenerConfig(cfg, "OTHER").get("ssl.keystore.type") == "PEM"


def test_a_certificate_no_rule_maps_closes_the_connection(pki):
    import socket
    overrides = pkcs12_listener(pki, **{"ssl.client.auth": "required", "ssl.truststore.type": "PKCS12",
                                        "ssl.truststore.location": str(pki["truststore"]),
                                        "ssl.truststore.password": "trust-secret",
                                        "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=Admins.*$/$1/"})
    with BrokerThread(overrides=overrides) as b:
        host, port = b.bootstrap_servers.rsplit(":", 1)
        cctx = ssl.create_default_context(cafile=str(pki["ca_file"]))
        cctx.load_cert_chain(str(pki["client"]))
        with socket.create_connection((host, int(port)), timeout=10) as raw, \
                cctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            try:  # ApiVersions v0, correlation id 1, no client id
                tls.sendall(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00")
                data = tls.recv(4)
            except (ConnectionError, ssl.SSLError):
                data = b""
            assert data == b""  # closed: Kafka's SslPrincipalMapper.NoMatchingRule fails the connection
        assert not b.broker.client_connections
