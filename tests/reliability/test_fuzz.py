"""Fuzzed frames against a live broker: valid headers of every served (api, version) with random bodies,
and random mutations of golden client frames. The broker answers or closes that connection, and keeps
serving everyone else; it never dies."""
from __future__ import annotations

import os
import random
import socket
import struct
from pathlib import Path

from kafka.protocol.metadata import MetadataRequest

from kafkite.server.router import supported
from kafkite.testing.wire_client import WireClient

GOLDEN = Path(__file__).resolve().parents[2].parent / "shared" / "golden-requests"


def send_frame(bs: str, payload: bytes) -> None:
    host, port = bs.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        s.settimeout(2)
        try:
            s.recv(65536)  # an answer or EOF; either is fine
        except (socket.timeout, ConnectionResetError):
            pass


def assert_alive(bs: str) -> None:
    with WireClient.connect(bs) as w:
        assert w.request(MetadataRequest(topics=None), 9).brokers


def no_handler_crash(capfd) -> None:
    """A handler that raises is caught (the connection closes) but logged as connection.error: none allowed."""
    err = capfd.readouterr().err
    assert "connection.error" not in err, err[err.find("connection.error") - 200:][:3000]


def test_random_bodies_for_every_api(broker, capfd):
    rng = random.Random(int(os.environ.get("KAFKITE_FUZZ_SEED", "20261122")))
    bs = broker.bootstrap_servers
    for api, (lo, hi) in sorted(supported().items()):
        for v in (lo, hi):
            for _ in range(8):
                body = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 120)))
                header = struct.pack(">hhi", api, v, rng.randint(0, 1 << 30)) + struct.pack(">h", 4) + b"fuzz"
                if v >= 0 and rng.random() < 0.5:
                    header += b"\x00"  # an empty tagged-field section, as flexible headers carry
                send_frame(bs, header + body)
    assert_alive(bs)
    no_handler_crash(capfd)


def test_mutated_golden_frames(broker, capfd):
    frames = sorted(GOLDEN.glob("*/*.bin")) if GOLDEN.exists() else []
    if not frames:
        import pytest
        pytest.skip("../shared/golden-requests not present")
    rng = random.Random(int(os.environ.get("KAFKITE_FUZZ_SEED", "7")))
    bs = broker.bootstrap_servers
    for path in frames:
        payload = bytearray(path.read_bytes()[4:])
        for _ in range(12):
            m = bytearray(payload)
            for _ in range(rng.randint(1, 6)):
                i = rng.randrange(8, len(m)) if len(m) > 8 else 0  # keep api key/version: reach the handlers
                m[i] = rng.getrandbits(8)
            if rng.random() < 0.3:
                m = m[: rng.randint(8, len(m))]
            send_frame(bs, bytes(m))
    assert_alive(bs)
    no_handler_crash(capfd)
