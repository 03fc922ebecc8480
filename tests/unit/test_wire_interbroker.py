"""Controller-to-broker messages (LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown).

Round trips of every version of all eight message types, fully populated; hand-assembled bytes
(struct.pack, following the protocol guide's per-version layouts) for every version of each
message, which is what ties the spec files to Kafka's wire format and not only to themselves;
request/response header versions; and kafkite.wire.codec serving them when asked to.
"""
from __future__ import annotations

import itertools
import struct
import uuid

import pytest

from kafkite.server.router import supported as client_supported
from kafkite.wire import codec, registry
from kafkite.wire.interbroker import (
    ControlledShutdownRequest, ControlledShutdownResponse,
    LeaderAndIsrRequest, LeaderAndIsrResponse,
    StopReplicaRequest, StopReplicaResponse,
    UpdateMetadataRequest, UpdateMetadataResponse,
)

# Facts from the protocol guide (Kafka 3.9), written here independently of the spec files:
# api key -> (highest version, first flexible version)
PROTOCOL = {4: (7, 4), 5: (4, 2), 6: (8, 6), 7: (3, 3)}
PAIRS = {
    4: (LeaderAndIsrRequest, LeaderAndIsrResponse),
    5: (StopReplicaRequest, StopReplicaResponse),
    6: (UpdateMetadataRequest, UpdateMetadataResponse),
    7: (ControlledShutdownRequest, ControlledShutdownResponse),
}
SERVE_ALL = {4: (0, 7), 5: (0, 4), 6: (0, 8), 7: (0, 3)}
CLIENT_ID = "controller-1"

REQUEST_CASES = [(key, v) for key, (hi, _) in PROTOCOL.items() for v in range(hi + 1)]
ALL_CASES = [(cls, v) for key, v in REQUEST_CASES for cls in PAIRS[key]]


def case_id(case):
    return f"{case[0].__name__}-v{case[1]}"


# -- populated messages -------------------------------------------------------------------

def populated(cls, version):
    """`cls` at `version` with every field of that version set to a value other than its default."""
    counter = itertools.count(1)

    def value(field):
        if field.is_struct_array():
            return [build(field.array_of, field.data_class) for _ in range(2)]
        if field.is_array():  # every plain array here is []int32
            return [next(counter) for _ in range(3)]
        n = next(counter)
        return {
            "bool": lambda: not field.default,
            "int8": lambda: n % 100 + 1,
            "int16": lambda: n + 100,
            "int32": lambda: n * 1000 + 7,
            "int64": lambda: (1 << 40) + n,
            "string": lambda: f"s{n}-\u00e9",  # multi-byte utf-8: lengths count bytes
            "uuid": lambda: uuid.UUID(int=(n << 64) | 0xABCDEF),
        }[field.type_str]()

    def build(struct_field, data_class, **extra):
        kw = {f.name: value(f) for f in struct_field._fields if f.for_version_q(version)}
        return data_class(**kw, **extra)

    msg = build(cls._struct, cls, version=version)
    _assert_not_default(msg, cls._struct, version)
    return msg


def _assert_not_default(obj, struct_field, version):
    for f in struct_field._fields:
        if not f.for_version_q(version):
            continue
        val = getattr(obj, f.name)
        assert val != f.default and val not in (None, [], ""), f.name
        if f.is_struct_array():
            for item in val:
                _assert_not_default(item, f.array_of, version)


def test_populated_covers_every_field():
    # the populator really reaches nested and tagged fields
    msg = populated(UpdateMetadataRequest, 8)
    assert msg.update_type != 0 and msg.is_kraft_controller is True
    broker = msg.live_brokers[0]
    assert broker.endpoints[1].listener and broker.rack
    ps = msg.topic_states[1].partition_states[0]
    assert ps.offline_replicas and ps.zk_version


# -- round trips --------------------------------------------------------------------------

@pytest.mark.parametrize("cls,version", ALL_CASES, ids=[case_id(c) for c in ALL_CASES])
def test_round_trip_with_header(cls, version):
    msg = populated(cls, version)
    if cls.is_request():
        msg.with_header(correlation_id=0x01020304, client_id=CLIENT_ID)
    else:
        msg.with_header(correlation_id=0x01020304)
    data = bytes(msg.encode(header=True))
    back = cls.decode(data, version=version, header=True)
    assert back == msg
    assert back.header.correlation_id == 0x01020304
    back.with_header(correlation_id=0x01020304, **({"client_id": CLIENT_ID} if cls.is_request() else {}))
    assert bytes(back.encode(header=True)) == data
    # and without a header, through the versioned class
    assert cls[version].decode(bytes(msg.encode(header=False))) == msg


def test_versions_and_registry():
    for key, (hi, first_flexible) in PROTOCOL.items():
        req, resp = registry.classes(key)
        assert (req, resp) == PAIRS[key]
        assert req.API_KEY == resp.API_KEY == key
        assert req.is_request() and not resp.is_request()
        for cls in (req, resp):
            assert cls.max_version == hi
            assert [v for v in range(hi + 1) if cls.flexible_version_q(v)] == list(range(first_flexible, hi + 1))
    assert registry.response_class(4) is LeaderAndIsrResponse


def test_not_served_to_clients():
    # kafkite serves these only on inter-broker connections (later work), never to clients
    sup = client_supported()
    for key in PAIRS:
        assert key not in sup
        msg = populated(PAIRS[key][0], 0)
        msg.with_header(correlation_id=1, client_id="c")
        with pytest.raises(codec.UnknownApi):
            codec.decode_request(bytes(msg.encode(header=True)), sup)


# -- headers ------------------------------------------------------------------------------

def request_header(key, version, correlation_id, client_id):
    if key == 7 and version == 0:  # request header v0: no client id
        return struct.pack(">hhi", key, version, correlation_id)
    raw = client_id.encode()
    v1 = struct.pack(">hhih", key, version, correlation_id, len(raw)) + raw
    return v1 + b"\x00" if version >= PROTOCOL[key][1] else v1  # v2 adds a tag buffer


def response_header(key, version, correlation_id):
    v0 = struct.pack(">i", correlation_id)
    return v0 + b"\x00" if version >= PROTOCOL[key][1] else v0


@pytest.mark.parametrize("key,version", REQUEST_CASES, ids=[f"{k}-v{v}" for k, v in REQUEST_CASES])
def test_header_versions_follow_flexible_versions(key, version):
    req_cls, resp_cls = PAIRS[key]
    req = populated(req_cls, version)
    req.with_header(correlation_id=42, client_id=CLIENT_ID)
    assert bytes(req.encode(header=True)) == request_header(key, version, 42, CLIENT_ID) + bytes(req.encode())
    resp = populated(resp_cls, version)
    resp.with_header(correlation_id=42)
    assert bytes(resp.encode(header=True)) == response_header(key, version, 42) + bytes(resp.encode())


@pytest.mark.parametrize("key,version", REQUEST_CASES, ids=[f"{k}-v{v}" for k, v in REQUEST_CASES])
def test_codec_serves_them_when_asked(key, version):
    req_cls, resp_cls = PAIRS[key]
    msg = populated(req_cls, version)
    msg.with_header(correlation_id=77, client_id=CLIENT_ID)
    frame = bytes(msg.encode(header=True))
    req = codec.decode_request(frame, SERVE_ALL)
    assert (req.api_key, req.api_version, req.correlation_id) == (key, version, 77)
    # Kafka reports header v0's absent client id as ""
    assert req.client_id == ("" if (key, version) == (7, 0) else CLIENT_ID)
    assert req.body == msg

    resp = populated(resp_cls, version)
    out = bytes(codec.encode_response(resp, version, 77))
    assert struct.unpack(">i", out[:4])[0] == len(out) - 4
    assert out[4:] == response_header(key, version, 77) + bytes(resp.encode())
    assert resp_cls.decode(out[4:], version=version, header=True) == resp


def test_codec_refuses_bad_versions_and_truncation():
    msg = populated(LeaderAndIsrRequest, 7)
    msg.with_header(correlation_id=5, client_id=CLIENT_ID)
    frame = bytes(msg.encode(header=True))
    with pytest.raises(codec.UnsupportedVersion):
        codec.decode_request(frame, {4: (0, 6)})
    for cut in range(len(frame)):
        with pytest.raises(codec.MalformedRequest):
            codec.decode_request(frame[:cut], SERVE_ALL)
    cs = ControlledShutdownRequest(version=0, broker_id=3)
    cs.with_header(correlation_id=5)
    frame = bytes(cs.encode(header=True))
    assert len(frame) == 12
    for cut in range(len(frame)):
        with pytest.raises(codec.MalformedRequest):
            codec.decode_request(frame[:cut], SERVE_ALL)


# -- bytes as the protocol guide lays them out ---------------------------------------------

def i8(v): return struct.pack(">b", v)
def i16(v): return struct.pack(">h", v)
def i32(v): return struct.pack(">i", v)
def i64(v): return struct.pack(">q", v)
def boolean(v): return b"\x01" if v else b"\x00"


def uvarint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def string(s):  # STRING / NULLABLE_STRING: int16 length
    if s is None:
        return i16(-1)
    raw = s.encode()
    return i16(len(raw)) + raw


def cstring(s):  # COMPACT_(NULLABLE_)STRING: unsigned varint length + 1, 0 for null
    if s is None:
        return uvarint(0)
    raw = s.encode()
    return uvarint(len(raw) + 1) + raw


def array(items): return i32(len(items)) + b"".join(items)
def carray(items): return uvarint(len(items) + 1) + b"".join(items)
def int32s(vals): return array([i32(v) for v in vals])
def cint32s(vals): return carray([i32(v) for v in vals])


TAGS = b"\x00"  # empty tag buffer
TOPIC_ID = uuid.UUID("0123456789abcdef0123456789abcdef")


def check_bytes(msg, expected):
    cls = type(msg)
    assert bytes(msg.encode()) == expected
    assert cls.decode(expected, version=msg.version) == msg


def make(cls, version=None, **kw):
    """`cls` with the given fields that exist at `version` (the others are left out)."""
    keep = {f.name for f in cls._struct._fields if version is None or f.for_version_q(version)}
    return cls(**{k: v for k, v in kw.items() if k in keep})


def codecs(flexible):
    """string, array, []int32 encoders and the tag buffer of a (non-)flexible version."""
    return (cstring, carray, cint32s, TAGS) if flexible else (string, array, int32s, b"")


# Each request below: one sample message, and its bytes at every version written out from the
# protocol guide's layout for that version (field order, types, compact forms, tag buffers).

def leader_and_isr(v):
    R = LeaderAndIsrRequest
    part = dict(partition_index=0, controller_epoch=5, leader=2, leader_epoch=3, isr=[2, 3], partition_epoch=9,
                replicas=[2, 3, 4], adding_replicas=[4], removing_replicas=[], is_new=True,
                leader_recovery_state=1)
    if v <= 1:
        states = dict(ungrouped_partition_states=[make(R.LeaderAndIsrPartitionState, v, topic_name="t", **part)])
    else:
        T = R.LeaderAndIsrTopicState
        states = dict(topic_states=[make(T, v, topic_name="t", topic_id=TOPIC_ID, partition_states=[
            make(T.LeaderAndIsrPartitionState, v, **part)])])
    msg = make(R, v, controller_id=1, is_kraft_controller=False, controller_epoch=5, broker_epoch=77,
               update_type=0, live_leaders=[R.LeaderAndIsrLiveLeader(broker_id=2, host_name="h2", port=9092)],
               **states)
    msg.API_VERSION = v

    S, A, I32S, T = codecs(v >= 4)
    p = (S("t") if v <= 1 else b"") + i32(0) + i32(5) + i32(2) + i32(3) + I32S([2, 3]) + i32(9) + I32S([2, 3, 4])
    p += (I32S([4]) + I32S([]) if v >= 3 else b"") + (boolean(True) if v >= 1 else b"")
    p += (i8(1) if v >= 6 else b"") + T
    out = i32(1) + (boolean(False) if v >= 7 else b"") + i32(5)
    out += (i64(77) if v >= 2 else b"") + (i8(0) if v >= 5 else b"")
    if v <= 1:
        out += A([p])
    else:
        out += A([S("t") + (TOPIC_ID.bytes if v >= 5 else b"") + A([p]) + T])
    out += A([i32(2) + S("h2") + i32(9092) + T]) + T
    return msg, out


def stop_replica(v):
    R = StopReplicaRequest
    if v == 0:
        parts = dict(ungrouped_partitions=[R.StopReplicaPartitionV0(topic_name="t", partition_index=0),
                                           R.StopReplicaPartitionV0(topic_name="t", partition_index=2)])
    elif v <= 2:
        parts = dict(topics=[R.StopReplicaTopicV1(name="t", partition_indexes=[0, 2])])
    else:
        T = R.StopReplicaTopicState
        parts = dict(topic_states=[T(topic_name="t", partition_states=[
            T.StopReplicaPartitionState(partition_index=0, leader_epoch=-2, delete_partition=True),
            T.StopReplicaPartitionState(partition_index=2, leader_epoch=6, delete_partition=True)])])
    msg = make(R, v, controller_id=1, is_kraft_controller=False, controller_epoch=5, broker_epoch=77,
               delete_partitions=True, **parts)
    msg.API_VERSION = v

    S, A, I32S, T = codecs(v >= 2)
    out = i32(1) + (boolean(False) if v >= 4 else b"") + i32(5) + (i64(77) if v >= 1 else b"")
    if v <= 2:
        out += boolean(True)
    if v == 0:
        out += A([S("t") + i32(0), S("t") + i32(2)])
    elif v <= 2:
        out += A([S("t") + I32S([0, 2]) + T])
    else:
        out += A([S("t") + A([i32(0) + i32(-2) + boolean(True) + T, i32(2) + i32(6) + boolean(True) + T]) + T])
    return msg, out + T


def update_metadata(v, update_type=0):
    R = UpdateMetadataRequest
    B = R.UpdateMetadataBroker
    part = dict(partition_index=0, controller_epoch=5, leader=2, leader_epoch=3, isr=[2], zk_version=9,
                replicas=[2, 3], offline_replicas=[3])
    if v <= 4:
        states = dict(ungrouped_partition_states=[make(R.UpdateMetadataPartitionState, v, topic_name="t", **part)])
    else:
        T = R.UpdateMetadataTopicState
        states = dict(topic_states=[make(T, v, topic_name="t", topic_id=TOPIC_ID, partition_states=[
            make(T.UpdateMetadataPartitionState, v, **part)])])
    brokers = [
        make(B, v, id=2, v0_host="h2", v0_port=9092, rack="r1", endpoints=[
            make(B.UpdateMetadataEndpoint, v, port=9092, host="h2", listener="PLAINTEXT", security_protocol=0),
            make(B.UpdateMetadataEndpoint, v, port=9093, host="h2", listener="SSL", security_protocol=1)]),
        make(B, v, id=3, v0_host="h3", v0_port=9094, rack=None, endpoints=[]),
    ]
    msg = make(R, v, controller_id=1, is_kraft_controller=True, update_type=update_type, controller_epoch=5,
               broker_epoch=77, live_brokers=brokers, **states)
    msg.API_VERSION = v

    S, A, I32S, T = codecs(v >= 6)
    p = (S("t") if v <= 4 else b"") + i32(0) + i32(5) + i32(2) + i32(3) + I32S([2]) + i32(9) + I32S([2, 3])
    p += (I32S([3]) if v >= 4 else b"") + T
    out = i32(1) + (boolean(True) if v >= 8 else b"") + i32(5) + (i64(77) if v >= 5 else b"")
    if v <= 4:
        out += A([p])
    else:
        out += A([S("t") + (TOPIC_ID.bytes if v >= 7 else b"") + A([p]) + T])

    def endpoint(port, listener, proto):
        return i32(port) + S("h2") + (S(listener) if v >= 3 else b"") + i16(proto) + T

    if v == 0:
        out += A([i32(2) + S("h2") + i32(9092), i32(3) + S("h3") + i32(9094)])
    else:
        rack = (lambda r: S(r) if v >= 2 else b"")
        out += A([i32(2) + A([endpoint(9092, "PLAINTEXT", 0), endpoint(9093, "SSL", 1)]) + rack("r1") + T,
                  i32(3) + A([]) + rack(None) + T])
    if v >= 8 and update_type != 0:  # Type: tagged field 0, written only when not its default 0
        out += uvarint(1) + uvarint(0) + uvarint(1) + i8(update_type)
    else:
        out += T
    return msg, out


def controlled_shutdown(v):
    msg = make(ControlledShutdownRequest, v, broker_id=3, broker_epoch=1 << 33)
    msg.API_VERSION = v
    return msg, i32(3) + (i64(1 << 33) if v >= 2 else b"") + (TAGS if v >= 3 else b"")


LAYOUTS = {4: leader_and_isr, 5: stop_replica, 6: update_metadata, 7: controlled_shutdown}


@pytest.mark.parametrize("key,version", REQUEST_CASES, ids=[f"{k}-v{v}" for k, v in REQUEST_CASES])
def test_request_bytes_match_protocol_layout(key, version):
    msg, expected = LAYOUTS[key](version)
    check_bytes(msg, expected)


@pytest.mark.parametrize("update_type", [1, 2])
def test_update_metadata_tagged_type(update_type):
    msg, expected = update_metadata(8, update_type)
    check_bytes(msg, expected)
    assert UpdateMetadataRequest.decode(expected, version=8).update_type == update_type


def test_controlled_shutdown_bytes_with_headers():
    cases = [
        (0, ControlledShutdownRequest(version=0, broker_id=3),
         struct.pack(">hhi", 7, 0, 9) + i32(3)),
        (1, ControlledShutdownRequest(version=1, broker_id=3),
         struct.pack(">hhih", 7, 1, 9, 2) + b"b3" + i32(3)),
        (2, ControlledShutdownRequest(version=2, broker_id=3, broker_epoch=1 << 33),
         struct.pack(">hhih", 7, 2, 9, 2) + b"b3" + i32(3) + i64(1 << 33)),
        (3, ControlledShutdownRequest(version=3, broker_id=3, broker_epoch=12),
         struct.pack(">hhih", 7, 3, 9, 2) + b"b3" + TAGS + i32(3) + i64(12) + TAGS),
    ]
    for version, msg, expected in cases:
        msg.with_header(correlation_id=9, client_id="b3")
        assert bytes(msg.encode(header=True)) == expected, version
        back = ControlledShutdownRequest.decode(expected, version=version, header=True)
        assert back == msg
        assert back.header.correlation_id == 9
        assert codec.decode_request(expected, SERVE_ALL).body == msg


def responses(key, v):
    """A sample response of api `key` at version `v` and its bytes per the protocol guide."""
    S, A, _, T = codecs(v >= PROTOCOL[key][1])
    if key == 4:
        R = LeaderAndIsrResponse
        if v <= 4:
            msg = R(error_code=0, partition_errors=[
                R.LeaderAndIsrPartitionError(topic_name="t", partition_index=1, error_code=56)])
            out = i16(0) + A([S("t") + i32(1) + i16(56) + T]) + T
        else:
            E = R.LeaderAndIsrTopicError
            msg = R(error_code=0, topics=[E(topic_id=TOPIC_ID, partition_errors=[
                E.LeaderAndIsrPartitionError(partition_index=1, error_code=56)])])
            out = i16(0) + A([TOPIC_ID.bytes + A([i32(1) + i16(56) + T]) + T]) + T
    elif key == 5:
        R = StopReplicaResponse
        msg = R(error_code=0, partition_errors=[
            R.StopReplicaPartitionError(topic_name="t", partition_index=2, error_code=74)])
        out = i16(0) + A([S("t") + i32(2) + i16(74) + T]) + T
    elif key == 6:
        msg = UpdateMetadataResponse(error_code=11)
        out = i16(11) + T
    else:
        R = ControlledShutdownResponse
        msg = R(error_code=0, remaining_partitions=[R.RemainingPartition(topic_name="t", partition_index=4)])
        out = i16(0) + A([S("t") + i32(4) + T]) + T
    msg.API_VERSION = v
    return msg, out


@pytest.mark.parametrize("key,version", REQUEST_CASES, ids=[f"{k}-v{v}" for k, v in REQUEST_CASES])
def test_response_bytes_match_protocol_layout(key, version):
    check_bytes(*responses(key, version))
