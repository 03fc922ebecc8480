"""Bad input closes that one connection (with a log line); the broker keeps serving everyone else."""
from __future__ import annotations

import random
import struct

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from kafkite.testing.wire_client import WireClient


def still_serving(broker):
    with WireClient.connect(broker.bootstrap_servers) as w:
        assert w.request(MetadataRequest(topics=None), 9).cluster_id == broker.state.metadata.cluster_id


_garbage = random.Random(20261126).randbytes  # the same bytes every run (and in every pytest-xdist worker)


@pytest.mark.parametrize("payload", [
    _garbage(3),                                      # shorter than a header
    struct.pack(">hhi", 3, 9, 1) + _garbage(40),      # Metadata v9 header + garbage
    struct.pack(">hhi", 18, 3, 1) + b"\xff" * 20,     # ApiVersions v3 with a broken body
    b"\x00" * 64,
])
def test_garbage_closes_connection(broker, payload):
    with WireClient.connect(broker.bootstrap_servers) as w:
        w.send_raw(struct.pack(">i", len(payload)) + payload)
        assert w.is_closed()
    still_serving(broker)


def test_frame_over_limit(broker_factory):
    b = broker_factory(overrides={"socket.request.max.bytes": "1024"})
    with WireClient.connect(b.bootstrap_servers) as w:
        w.send_raw(struct.pack(">i", 1025) + b"\x00" * 100)
        assert w.is_closed()
    with WireClient.connect(b.bootstrap_servers) as w:
        w.send_raw(struct.pack(">i", -5))
        assert w.is_closed()
    still_serving(b)


def test_truncated_frame_then_eof(broker):
    with WireClient.connect(broker.bootstrap_servers) as w:
        data, _ = w.encode(MetadataRequest(topics=None), 9)
        w.send_raw(data[: len(data) // 2])
        w.sock.shutdown(1)  # EOF mid-frame
        assert w.is_closed()
    still_serving(broker)


def test_unknown_api_key_closes(broker):
    with WireClient.connect(broker.bootstrap_servers) as w:
        payload = struct.pack(">hhi", 9999, 0, 7) + struct.pack(">h", 1) + b"x"
        w.send_raw(struct.pack(">i", len(payload)) + payload)
        assert w.is_closed()
    still_serving(broker)


def test_unsupported_version_of_other_api_closes(broker):
    with WireClient.connect(broker.bootstrap_servers) as w:
        payload = struct.pack(">hhi", 3, 99, 7) + struct.pack(">h", 1) + b"x"
        w.send_raw(struct.pack(">i", len(payload)) + payload)
        assert w.is_closed()
    still_serving(broker)


def test_pipelined_requests_answered_in_order(broker):
    with WireClient.connect(broker.bootstrap_servers) as w:
        sent = []
        blob = b""
        for i in range(50):
            req = ApiVersionsRequest(client_software_name="p", client_software_version="1") if i % 2 else \
                MetadataRequest(topics=None)
            v = 3 if i % 2 else 9
            data, corr = w.encode(req, v)
            blob += data
            sent.append((req.API_KEY, v, corr))
        w.send_raw(blob)  # all at once
        for api, v, corr in sent:
            w.read_response(api, v, corr)  # asserts the correlation id order
