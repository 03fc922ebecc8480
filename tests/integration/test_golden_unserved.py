"""Golden frames (../shared/golden-requests) of versions Kafkite does not advertise get Kafka's answer to a version
it does not enable: SocketServer's parseRequestHeader raises InvalidRequestException ("Received request api key X with
version N which is not enabled") and the processor closes that connection; the broker keeps serving everyone else.
Every golden frame of a served version is decoded in tests/unit/test_wire.py."""
from __future__ import annotations

import struct
from pathlib import Path

from kafka.protocol.metadata import ApiVersionsRequest

from kafkite.server.router import supported
from kafkite.testing.wire_client import WireClient

GOLDEN = Path(__file__).resolve().parents[2].parent / "shared" / "golden-requests"


def _unserved() -> list[Path]:
    out = []
    sup = supported()
    for path in sorted(GOLDEN.glob("*/*.bin")):
        api_key, version = struct.unpack(">hh", path.read_bytes()[4:8])
        if api_key != 18 and not (api_key in sup and sup[api_key][0] <= version <= sup[api_key][1]):
            out.append(path)
    return out


def test_golden_frames_exist():
    assert sorted(GOLDEN.glob("*/*.bin")), f"no golden request frames under {GOLDEN}"


def test_unadvertised_golden_versions_close_the_connection(broker):
    frames = _unserved()
    sup = supported()
    for path in frames:
        frame = path.read_bytes()
        api_key, version = struct.unpack(">hh", frame[4:8])
        with WireClient.connect(broker.bootstrap_servers) as w:
            # the same connection first proves it is alive: ApiVersions answers and says the version is not served
            versions = {k.api_key: (k.min_version, k.max_version) for k in w.request(ApiVersionsRequest(), 0).api_keys}
            assert versions[api_key] == sup[api_key] and not versions[api_key][0] <= version <= versions[api_key][1]
            w.send_raw(frame)
            assert w.is_closed(), f"{path.parent.name}/{path.name}: api {api_key} v{version} was answered"
        with WireClient.connect(broker.bootstrap_servers) as w:
            assert w.request(ApiVersionsRequest(), 0).error_code == 0
