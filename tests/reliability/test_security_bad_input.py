"""Bad input on secured listeners (issue "Security as Kafka has it", acceptance "Bad input"): a garbage TLS hello,
a SASL token of 100 MB, an unknown mechanism, SaslAuthenticate before SaslHandshake and a client that stops
mid-handshake each close that one connection with a log line, while an authenticated client keeps producing on the
same broker; and random SaslHandshake / SaslAuthenticate frames fed to the SASL authenticator (the fuzz's SASL
side) never raise and never authenticate."""
from __future__ import annotations

import os
import socket
import ssl
import struct
import time

import pytest
import structlog
from hypothesis import HealthCheck, given, settings, strategies as st
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from kafkite.testing.wire_client import WireClient
from kafkite.wire.errors import E

pytest.importorskip("trustme", reason="trustme is not installed")
IDLE_MS = 2000  # connections.max.idle.ms: what ends a SASL exchange the client abandoned


@pytest.fixture(scope="module")
def sb():
    from kafkite.testing.secured import SecuredBroker
    with SecuredBroker(process=False, overrides={"connections.max.idle.ms": str(IDLE_MS)}) as b:
        yield b


@pytest.fixture(scope="module")
def good_producer(sb):
    """An authenticated client opened before the bad input, used again after it."""
    from kafka import KafkaProducer
    p = KafkaProducer(**sb.kafka_python(), connections_max_idle_ms=3_600_000)
    p.send("good", b"before").get(timeout=30)
    yield p
    p.close()


def still_serving(sb, good_producer):
    good_producer.send("good", b"after").get(timeout=30)
    from confluent_kafka import Producer
    p = Producer({**sb.confluent(listener="SSL"), "log_level": 0})
    p.produce("good", b"new-connection")
    assert p.flush(30) == 0


def tls_wire(sb, listener="SASL_SSL", user=None) -> WireClient:
    host, port = sb.bootstrap(listener).rsplit(":", 1)
    w = WireClient(host, int(port))
    w.sock = sb.ssl_context(user).wrap_socket(w.sock, server_hostname="127.0.0.1")
    return w


def closed(sock, timeout: float = 10.0) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
        return True
    except socket.timeout:
        return False


def events(logs, name):
    return [e for e in logs if e["event"] == name]


def test_garbage_tls_hello(sb, good_producer):
    host, port = sb.bootstrap("SSL").rsplit(":", 1)
    with structlog.testing.capture_logs() as logs:
        for garbage in (os.urandom(300), b"\x16\x03\x01\x00\x40" + os.urandom(64)):  # noise; a TLS record of noise
            with socket.create_connection((host, int(port)), timeout=10) as raw:
                raw.sendall(garbage)
                assert closed(raw)
    fails = events(logs, "connection.ssl_handshake_failed")
    assert len(fails) == 2 and all("SSL handshake failed" in e["message"] for e in fails), logs
    still_serving(sb, good_producer)


def test_sasl_token_of_100_mb(sb, good_producer):
    with structlog.testing.capture_logs() as logs, tls_wire(sb) as w:
        assert w.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1).error_code == 0
        head = struct.pack(">hhi", 36, 2, 9) + struct.pack(">h", -1) + b"\x00"  # SaslAuthenticate v2, flexible
        token = 100 * 1024 * 1024
        size = len(head) + 5 + token
        try:
            w.send_raw(struct.pack(">i", size) + head + b"\x00" * (1 << 16))
        except (ssl.SSLError, OSError):
            pass  # closed while we wrote: the broker did not wait for the rest
        assert closed(w.sock)
    why = [e for e in events(logs, "connection.closed") if "exceeds sasl.server.max.receive.size" in e["reason"]]
    assert why, logs
    still_serving(sb, good_producer)


@pytest.mark.parametrize("token_kib", [600, 4096])
def test_a_sasl_token_over_the_pre_authentication_limit(sb, good_producer, token_kib):
    """Kafka's sasl.server.max.receive.size (512 KiB): before authentication completes a larger frame -- far below
    socket.request.max.bytes -- closes the connection at its size header, before the broker buffers it."""
    with structlog.testing.capture_logs() as logs, tls_wire(sb) as w:
        assert w.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1).error_code == 0
        head = struct.pack(">hhi", 36, 2, 9) + struct.pack(">h", -1) + b"\x00"
        size = len(head) + 5 + token_kib * 1024
        try:
            w.send_raw(struct.pack(">i", size) + head + b"\x00" * 1024)
        except (ssl.SSLError, OSError):
            pass
        assert closed(w.sock)
    why = [e for e in events(logs, "connection.closed") if f"frame of {size} bytes exceeds "
           "sasl.server.max.receive.size=524288" in e["reason"]]
    assert why, logs
    still_serving(sb, good_producer)


def test_frames_over_the_pre_authentication_limit_are_taken_once_authenticated(sb, good_producer):
    """The limit is the SASL exchange's only: an authenticated client's 700 KB record is taken."""
    good_producer.send("good", b"x" * (700 << 10)).get(timeout=30)


def test_unknown_mechanism(sb, good_producer):
    with structlog.testing.capture_logs() as logs, tls_wire(sb) as w:
        r = w.request(SaslHandshakeRequest(mechanism="NOT-A-MECHANISM"), 1)
        assert (r.error_code, r.mechanisms) == (E.UNSUPPORTED_SASL_MECHANISM, ["SCRAM-SHA-512"])
        assert closed(w.sock)
    assert [e["mechanism"] for e in events(logs, "sasl.unsupported_mechanism")] == ["NOT-A-MECHANISM"], logs
    still_serving(sb, good_producer)


def test_sasl_authenticate_before_handshake(sb, good_producer):
    with structlog.testing.capture_logs() as logs, tls_wire(sb) as w:
        # Kafka: "Unexpected Kafka request of type SASL_AUTHENTICATE during SASL handshake.", closed without an answer
        w.send_raw(w.encode(SaslAuthenticateRequest(auth_bytes=b"n,,n=alice,r=abc"), 1)[0])
        assert closed(w.sock)
    assert [e["api_key"] for e in events(logs, "sasl.unexpected_request")] == [36], logs
    still_serving(sb, good_producer)


@pytest.fixture
def info_logs():
    """Log at INFO for one test (the idle close is an info line; the tests run at WARNING)."""
    import logging
    before = structlog.get_config()["wrapper_class"]
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    yield
    structlog.configure(wrapper_class=before)


def test_a_client_that_stops_mid_handshake(sb, good_producer, info_logs):
    host, port = sb.bootstrap("SSL").rsplit(":", 1)
    with structlog.testing.capture_logs() as logs:
        # TLS: half a real ClientHello, then EOF
        hello = _client_hello(sb)
        with socket.create_connection((host, int(port)), timeout=10) as raw:
            raw.sendall(hello[: len(hello) // 2])
            raw.shutdown(socket.SHUT_WR)
            assert closed(raw)
        # SASL: the handshake and a first SCRAM message, then silence: closed after connections.max.idle.ms
        with tls_wire(sb) as w:
            assert w.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1).error_code == 0
            first = w.request(SaslAuthenticateRequest(auth_bytes=b"n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL"), 1)
            assert first.error_code == 0 and first.auth_bytes.startswith(b"r=fyko")
            t0 = time.monotonic()
            assert closed(w.sock, timeout=IDLE_MS / 1000 + 10)
            assert time.monotonic() - t0 >= IDLE_MS / 1000 - 0.5
    assert events(logs, "connection.ssl_handshake_failed"), logs
    assert [e for e in events(logs, "connection.closed") if e.get("reason") == "idle"], logs
    still_serving(sb, good_producer)


def _client_hello(sb) -> bytes:
    """The first flight of a real TLS client (its ClientHello), through a memory BIO."""
    ctx = sb.ssl_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    return outgoing.read()


# -- the fuzz's SASL side: random frames into the authenticator -----------------------------------------------------
def _frame(api_key: int, version: int, body: bytes) -> bytes:
    """A request header (v1: client id) of any api and version, then random bytes."""
    return struct.pack(">hhih", api_key, version, 1, 4) + b"fuzz" + body


frames = st.one_of(
    st.builds(lambda v, m: _encode(SaslHandshakeRequest(mechanism=m), v),
              st.integers(0, 1), st.sampled_from(["SCRAM-SHA-512", "PLAIN", "FOO", "", "scram-sha-512", "x" * 300])),
    st.builds(lambda v, b: _encode(SaslAuthenticateRequest(auth_bytes=b), v), st.integers(0, 2),
              st.binary(max_size=300)),
    st.builds(_frame, st.sampled_from([17, 36, 18, 3, 0]), st.integers(-1, 5), st.binary(max_size=200)),
    st.binary(max_size=64),
)


def _encode(req, version: int) -> bytes:
    req.API_VERSION = version
    req.with_header(correlation_id=1, client_id="fuzz")
    return bytes(req.encode(header=True, framed=False))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(frames, min_size=1, max_size=6), st.sampled_from(["SCRAM-SHA-512", "PLAIN", "SCRAM-SHA-512,PLAIN"]))
def test_random_sasl_frames_never_raise_nor_authenticate(seq, mechs):
    from kafkite.security.sasl import SaslConfig, SaslServerAuthenticator
    config = SaslConfig("SASL_SSL", mechs.split(","), plain_users={"alice": "alice-secret"})
    auth = SaslServerAuthenticator(config, "127.0.0.1")
    clog = structlog.get_logger().bind(test="fuzz")
    for frame in seq:
        what, close = auth.handle(frame, clog, now_ms=1_700_000_000_000)
        assert what is None or what == "dispatch" or isinstance(what, (tuple, bytes)), what
        assert not auth.done
        if close:
            break
