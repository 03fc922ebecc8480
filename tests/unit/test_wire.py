"""The wire layer: frames, request headers, golden frames from five real clients."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from kafkite.server.router import supported
from kafkite.wire import codec, registry
from kafkite.wire.frame import FrameBuffers, FrameReader, FrameTooLarge

GOLDEN = Path(__file__).resolve().parents[2].parent / "shared" / "golden-requests"

GOLDEN_FILES = sorted(GOLDEN.glob("*/*.bin")) if GOLDEN.exists() else []


def test_frame_reader_splits_and_joins():
    r = FrameReader(100)
    blob = struct.pack(">i", 3) + b"abc" + struct.pack(">i", 0) + struct.pack(">i", 2) + b"x"
    for i in range(len(blob)):
        r.feed(blob[i:i + 1])
    assert r.next_frame() == b"abc"
    assert r.next_frame() == b""
    assert r.next_frame() is None  # 1 of 2 bytes
    r.feed(b"y")
    assert r.next_frame() == b"xy"


def test_frame_reader_limit():
    r = FrameReader(10)
    r.feed(struct.pack(">i", 11))
    with pytest.raises(FrameTooLarge):
        r.next_frame()
    r = FrameReader(10)
    r.feed(struct.pack(">i", -1))
    with pytest.raises(FrameTooLarge):
        r.next_frame()


@given(st.binary(max_size=200))
def test_decode_garbage_never_crashes_unexpectedly(data):
    try:
        codec.decode_request(data, supported())
    except codec.RequestError:
        pass


@pytest.mark.skipif(not GOLDEN_FILES, reason="../shared/golden-requests not present")
@pytest.mark.parametrize("path", GOLDEN_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_golden_frames_decode(path: Path):
    frame = path.read_bytes()
    size = struct.unpack(">i", frame[:4])[0]
    assert size == len(frame) - 4
    api_key, version, corr = codec.peek_header(frame[4:])
    sup = supported()
    served = api_key in sup and sup[api_key][0] <= version <= sup[api_key][1]
    if not served:  # a version not advertised: the codec refuses it, as Kafka's SocketServer does (the broker then
        # closes the connection: tests/integration/test_golden_unserved.py); the frame itself is well formed
        with pytest.raises(codec.UnsupportedVersion):
            codec.decode_request(frame[4:], sup)
        sup = {**sup, api_key: (version, version)}
    req = codec.decode_request(frame[4:], sup)
    assert (req.api_key, req.api_version, req.correlation_id) == (api_key, version, corr)
    assert req.client_id


@pytest.mark.skipif(not GOLDEN_FILES, reason="../shared/golden-requests not present")
def test_golden_summaries_within_supported_ranges():
    """Every (api, version) the five clients negotiated must be one we serve (once all issues land)."""
    sup = supported()
    missing = set()
    for summary in GOLDEN.glob("*/summary.json"):
        for api, version, _ in json.loads(summary.read_text()):
            if api not in sup or not sup[api][0] <= version <= sup[api][1]:
                missing.add((api, version))
    # APIs of the foundation issue are all served
    foundation = {18, 3, 19, 20, 32, 33, 37, 44, 60, 75}
    assert not {m for m in missing if m[0] in foundation}


def test_encode_response_matches_kafka_python_encode():
    """encode_response runs kafka-python's compiled header and body encoders itself: the frame must be the one
    ApiMessage.encode(header=True, framed=True) makes, for every served (api, version) (ApiVersions' v0 header too)."""
    from kafkite.server.router import ROUTES
    for key, (lo, hi, _) in ROUTES.items():
        _, resp = registry.classes(key)
        for v in range(lo, hi + 1):
            want = resp(version=v)
            want.with_header(correlation_id=-7)
            assert bytes(codec.encode_response(resp(version=v), v, -7)) == bytes(
                want.encode(header=True, framed=True)), (resp.__name__, v)


@pytest.mark.skipif(not GOLDEN_FILES, reason="../shared/golden-requests not present")
def test_golden_frames_decode_as_kafka_python_does():
    """decode_request runs kafka-python's compiled header and body decoders itself: the same header and body as
    ApiMessage.decode(header=True), on every golden frame."""
    for path in GOLDEN_FILES:
        payload = path.read_bytes()[4:]
        api_key, version, _ = codec.peek_header(payload)
        req = codec.decode_request(payload, {api_key: (version, version)})
        want = registry.classes(api_key)[0].decode(payload, version=version, header=True)
        assert req.body == want and req.body.header == want.header, path


def test_compiled_strict_checks_answer_as_the_plan_walk():
    """strict.check runs code generated from each message's plan: for every served (api, version), on requests with
    random nulls and long strings, it refuses what the plan walk refuses, with the same message, and takes the rest."""
    import random

    from kafkite.testing import fuzz
    from kafkite.wire import strict
    rng = random.Random(20261126)
    compared = refused = 0
    for api, version in fuzz.served():
        req_cls = registry.classes(api)[0]
        plan = strict.plan_for(req_cls, version)
        checker = strict.compile_plan(plan)
        gen = fuzz.RequestGenerator(rng, null_rate=0.3)
        for _ in range(8):
            body = req_cls.decode(gen.frame(api, version), version=version, header=True)
            answers = []
            for check in (lambda: strict._walk(body, plan, ""), lambda: checker(body)):
                try:
                    check()
                    answers.append(None)
                except strict.StrictDecodeError as exc:
                    answers.append(str(exc))
            assert answers[0] == answers[1], (req_cls.__name__, version, answers)
            compared += 1
            refused += answers[0] is not None
    assert compared > 500 and refused > 100, (compared, refused)


@given(st.lists(st.binary(max_size=40), max_size=6), st.integers(1, 50))
def test_frame_reader_gives_the_frames_whatever_the_receives(payloads, cut):
    """Whole frames in one receive (the common case, read without copying pieces), several in one, or split."""
    blob = b"".join(struct.pack(">i", len(p)) + p for p in payloads)
    for chunks in ([blob], [blob[i:i + cut] for i in range(0, len(blob), cut)],
                   [struct.pack(">i", len(p)) + p for p in payloads]):
        r, got = FrameReader(100), []
        for c in chunks:
            r.feed(c)
            while (f := r.next_frame()) is not None:
                assert type(f) is bytes
                got.append(f)
        assert got == payloads and r.buffered == 0
    r = FrameReader(10)
    r.feed(struct.pack(">i", 11) + b"x" * 11)  # whole, but over the limit
    with pytest.raises(FrameTooLarge):
        r.next_frame()


@given(st.lists(st.binary(min_size=1, max_size=300), min_size=1, max_size=5), st.integers(1, 120),
       st.integers(0, 300))
def test_frames_received_into_their_own_buffers_are_the_frames(payloads, cut, extra):
    """A large frame (as network/connection.py reads it) is received into a buffer of its own, whatever was held
    before and however the reads split it; a buffer handed back serves a later frame only once no view of it is
    left, and then its old bytes never show."""
    pool = FrameBuffers(max_bytes=4096)
    pool.QUANTUM = 64
    r, got, views = FrameReader(1000, buffers=pool), [], []
    for p in payloads:
        blob = struct.pack(">i", len(p)) + p
        r.feed(blob[:4 + min(extra, len(p) - 1)])  # the size and maybe part of the frame, held as chunks first
        assert r.next_frame() is None and r.pending_size == len(p)
        while (f := r.next_frame()) is None:
            view = r.frame_buffer()
            n = min(cut, len(view))
            done = len(p) - len(view)
            view[:n] = p[done:done + n]
            r.filled(n)
        assert type(f) is memoryview and f == p and r.buffered == 0
        got.append(bytes(f))
        views.append(f[:1])  # a view kept: its buffer is never used again while it lives
        r.done()
        del f
    assert got == payloads and [bytes(v) for v in views] == [p[:1] for p in payloads]
    kept = list(pool._bufs)
    views.clear()
    del view
    r.feed(struct.pack(">i", 3))  # every buffer is free again: the next frame reuses one, its old bytes not shown
    view = r.frame_buffer()
    assert len(view) == 3 and any(view.obj is b for b in kept) and not any(view.obj is b for b in pool._bufs)
    view[:] = b"abc"
    r.filled(3)
    assert r.next_frame() == b"abc"
    r.feed(struct.pack(">i", 4) + b"ab")  # a feed after frame_buffer (a TLS read) fills it, and keeps what follows
    r.frame_buffer()
    r.feed(b"cd" + struct.pack(">i", 1) + b"z")
    assert r.next_frame() == b"abcd" and r.next_frame() == b"z" and r.buffered == 0


def test_the_registry_loads_each_api_from_the_module_that_holds_it():
    """registry.classes imports an API's module on its first use (registry._MODULE_KEYS); the classes are those a scan
    of every module finds, for every API."""
    full = registry._all_message_classes()
    assert registry.known_api_keys() == {k for k, v in full.items() if "request" in v and "response" in v}
    for key, entry in full.items():
        assert registry.classes(key) == (entry["request"], entry["response"]), key
        assert registry.response_class(key) is entry["response"]
    with pytest.raises(KeyError):
        registry.classes(9999)


@pytest.mark.parametrize("version", range(3, 12))
def test_a_produce_requests_records_are_a_view_of_the_frame(version):
    """A Produce's records come out of decode_request as a memoryview over the frame itself (no copy: the log copies
    them once, into the buffer it keeps), holding the bytes sent; other bytes fields are still bytes."""
    from kafka.protocol.producer.produce import ProduceRequest
    from kafkite.storage.batch import build_batch
    records = bytes(build_batch([(b"k%d" % i, b"v" * 100, []) for i in range(5)], timestamp_ms=1000))
    cls = ProduceRequest[version]
    data_cls = cls.TopicProduceData
    req = cls(transactional_id="tx" if version >= 3 else None, acks=-1, timeout_ms=1000, topic_data=[
        data_cls(name="t", partition_data=[data_cls.PartitionProduceData(index=0, records=records)])])
    req.with_header(correlation_id=7, client_id="c")
    frame = bytes(req.encode(header=True))
    got = codec.decode_request(frame, {0: (3, 11)}).body.topic_data[0].partition_data[0].records
    assert type(got) is memoryview and got.obj is frame and got == records
    assert codec.decode_request(frame, {0: (3, 11)}).body.transactional_id == "tx"


@pytest.mark.parametrize("name_len, partitions", [(0, 0), (1, 1), (126, 126), (127, 127), (128, 300), (20000, 2)])
def test_varints_of_one_and_more_bytes_decode_as_kafka_python_does(name_len, partitions):
    """The body decoders read a varint's first byte without kafka-python's loop (codec._one_byte_varint): lengths
    and counts of one, two and three bytes, empty and null strings, decode as kafka-python's own decoder does; a
    frame cut inside a varint is refused."""
    from kafka.protocol.consumer import OffsetCommitRequest
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    req = OffsetCommitRequest[9](
        group_id="g" * name_len, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[T(name="é" * (name_len // 2), partitions=[
            T.OffsetCommitRequestPartition(partition_index=p, committed_offset=p * 1000, committed_leader_epoch=-1,
                                           committed_metadata=None if p % 2 else "m" * p) for p in range(partitions)])])
    req.with_header(correlation_id=3, client_id="c")
    frame = bytes(req.encode(header=True))
    got = codec.decode_request(frame, {8: (9, 9)}).body
    assert got == OffsetCommitRequest.decode(frame, version=9, header=True) and got.group_instance_id is None
    with pytest.raises(codec.MalformedRequest):
        codec.decode_request(frame[:13], {8: (9, 9)})  # the header, then one byte of the group id's length


def test_decoders_with_the_strict_checks_in_them_refuse_what_the_plan_walk_refuses():
    """decode_request's decoders make the strict checks as they read (strict.fuse) where every checked field is set
    by a line of the decoder: for every served (api, version), on requests with random nulls and long strings, a
    request is refused with the plan walk's message exactly when the walk refuses kafka-python's decoding of it."""
    import random

    from kafkite.testing import fuzz
    from kafkite.wire import strict
    rng = random.Random(20261127)
    compared = refused = fused = 0
    for api, version in fuzz.served():
        req_cls = registry.classes(api)[0]
        plan = strict.plan_for(req_cls, version)
        gen = fuzz.RequestGenerator(rng, null_rate=0.3)
        for _ in range(8):
            frame = gen.frame(api, version)
            try:
                want_body = req_cls.decode(frame, version=version, header=True)
            except Exception:
                continue
            try:
                strict._walk(want_body, plan, "")
                want = None
            except strict.StrictDecodeError as exc:
                want = str(exc)
            try:
                got = codec.decode_request(frame, {api: (version, version)}).body
                answer = None
            except codec.MalformedRequest as exc:
                answer = exc.__cause__ and str(exc.__cause__)
                got = None
            assert answer == want, (req_cls.__name__, version, answer, want)
            if got is not None:
                assert got == want_body, (req_cls.__name__, version)
            compared += 1
            refused += want is not None
        fused += codec._READERS[(api, version)][2] is None
    assert compared > 500 and refused > 100 and fused > 150, (compared, refused, fused)
