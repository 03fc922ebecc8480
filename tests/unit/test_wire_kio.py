"""The requests kio decodes (wire/codec.py KIO_DECODED): the same fields, values and refusals as kafka-python's
decoder with strict.py, for every version kio decodes."""
from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings, strategies as st
from kafka.protocol.consumer import OffsetCommitRequest

from helpers import as_kafka_python
from kafkite.wire import codec, registry


def _names(kio_cls) -> list:
    out = []
    for f in dataclasses.fields(kio_cls):
        inner = [a for a in getattr(f.type, "__args__", ()) if dataclasses.is_dataclass(a)]
        out.append((f.name, _names(inner[0]) if inner else None))
    return out


def _kp_names(struct, version: int) -> list:
    return [(f.name, _kp_names(f.array_of if f.is_struct_array() else f, version)
             if f.is_struct_array() or f.is_struct() else None)
            for f in struct._fields if f.for_version_q(version)]


@pytest.mark.parametrize("api_key,version", [(k, v) for k, (lo, hi) in codec.KIO_DECODED.items()
                                             for v in range(lo, hi + 1)])
def test_kio_classes_carry_kafka_pythons_field_names(api_key, version):
    """A handler reads the same attributes whichever library decoded the request."""
    kio_cls = codec.kio_request_class(api_key, version)
    req_cls = registry.classes(api_key)[0]
    assert _names(kio_cls) == _kp_names(req_cls._struct, version)


def _frame(version: int, corr: int, group: str, member: str, instance, topics, client_id="rdkafka") -> bytes:
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    r = OffsetCommitRequest(version=version, group_id=group, generation_id_or_member_epoch=-1, member_id=member,
                            group_instance_id=instance, topics=[
                                T(name=name, partitions=[P(partition_index=i, committed_offset=o,
                                                           committed_leader_epoch=e, committed_metadata=m)
                                                         for i, o, e, m in parts]) for name, parts in topics])
    r.with_header(correlation_id=corr, client_id=client_id)
    return bytes(r.encode(header=True))


def _kafka_python(payload: bytes, version: int):
    """kafka-python's decode with strict.py: what codec.decode_request does for an API kio does not decode."""
    saved = codec.KIO_DECODED
    codec.KIO_DECODED = {}
    try:
        return codec.decode_request(payload, {8: (version, version)})
    finally:
        codec.KIO_DECODED = saved


text = st.text(max_size=12)
partitions = st.lists(st.tuples(st.integers(-2**31, 2**31 - 1), st.integers(-2**63, 2**63 - 1),
                                st.integers(-2**31, 2**31 - 1), st.none() | text), max_size=3)


@settings(max_examples=150, deadline=None)
@given(version=st.integers(8, 9), corr=st.integers(-2**31, 2**31 - 1), group=text, member=text,
       instance=st.none() | text, topics=st.lists(st.tuples(text, partitions), max_size=3),
       client_id=st.none() | text)
def test_offset_commit_decodes_as_kafka_python_does(version, corr, group, member, instance, topics, client_id):
    payload = _frame(version, corr, group, member, instance, topics, client_id)
    got = codec.decode_request(payload, {8: (0, 9)})
    want = _kafka_python(payload, version)
    assert type(got.body).__module__.startswith("kio.")
    assert (got.api_key, got.api_version, got.correlation_id, got.client_id) == \
        (want.api_key, want.api_version, want.correlation_id, want.client_id)
    assert as_kafka_python(OffsetCommitRequest, version, got.body) == \
        as_kafka_python(OffsetCommitRequest, version, want.body)


@settings(max_examples=300, deadline=None)
@given(version=st.integers(8, 9), data=st.data())
def test_offset_commit_damaged_frames_refused_alike(version, data):
    """Bytes changed, cut or appended: kio refuses what kafka-python with strict.py refuses, and decodes the rest
    to the same values."""
    payload = bytearray(_frame(version, 7, "group", "member-1", "instance", [("topic", [(0, 42, 3, "meta")]),
                                                                              ("other", [(1, 7, -1, None)])]))
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(8, len(payload) - 1))  # past the fixed api key, version, correlation id
        payload[i] = data.draw(st.sampled_from([0, 1, 0x7F, 0x80, 0xFF, data.draw(st.integers(0, 255))]))
    cut = data.draw(st.integers(8, len(payload)))
    payload = bytes(payload[:cut]) + data.draw(st.binary(max_size=3))
    outcomes = []
    for decode in (lambda: codec.decode_request(payload, {8: (0, 9)}), lambda: _kafka_python(payload, version)):
        try:
            req = decode()
            outcomes.append(as_kafka_python(OffsetCommitRequest, version, req.body) | {"_client": req.client_id})
        except codec.MalformedRequest:
            outcomes.append("refused")
    assert outcomes[0] == outcomes[1]


def test_offset_commit_over_32767_bytes_goes_through_strict():
    """A string longer than Kafka's readers take ("string field ... had invalid length") is refused: such a frame
    is decoded by kafka-python and strict.py."""
    payload = _frame(9, 1, "g" * 40000, "", None, [])
    with pytest.raises(codec.MalformedRequest, match="invalid length"):
        codec.decode_request(payload, {8: (0, 9)})
    ok = codec.decode_request(_frame(9, 1, "g" * 30000, "", None, [("t", [(0, 1, -1, "x" * 3000)])]), {8: (0, 9)})
    assert ok.body.group_id == "g" * 30000 and type(ok.body).__module__.startswith("kafka.")
