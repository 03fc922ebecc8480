"""storage.default_record: the compiled record walk (_records.c) and the pure-Python one give the
same answers, Kafka's, on well-formed batches and on every corruption the validator tests use."""
from __future__ import annotations

import os

import pytest
from hypothesis import given, settings, strategies as st

import raw_batches as rb
from kafkite.storage import default_record as dr
from kafkite.storage.log_validator import validate_produce

NOW = 10_000_000

pytestmark = pytest.mark.skipif(not dr.COMPILED, reason="the compiled record reader was not built (no C compiler "
                                                       "at pip install, or KAFKITE_PURE_PYTHON set)")


def outcome(data: bytes, walk, **over) -> tuple:
    kw = dict(max_message_bytes=1_000_000, timestamp_type="CreateTime", timestamp_before_max_ms=2**63 - 1,
              timestamp_after_max_ms=3_600_000, now_ms=NOW, topic_partition="t-0")
    kw.update(over)
    saved, dr._walk = dr._walk, walk
    try:
        v = validate_produce(bytes(data), **kw)
    finally:
        dr._walk = saved
    return v.error, v.error_message, v.record_errors, v.valid_bytes, v.scans, v.in_response


def same(data: bytes, **over) -> tuple:
    c = outcome(data, dr._walk_c, **over)
    py = outcome(data, dr._walk_py, **over)
    assert c == py
    return c


BIG = b"x" * 20_000  # a 3-byte length varint


def sized(body: bytes) -> bytes:
    """A record of these bytes after its length."""
    return rb.varint(len(body)) + body

RECORDS = {  # name: (records, the count they hold)
    "plain": (rb.records(5), 5),
    "null keys": (rb.records(4, keys=False), 4),
    "long fields": (rb.record(0, 0, b"k" * 300, BIG, [(b"h" * 200, b"v" * 300)]) + rb.record(1, 1), 2),
    "null value and header value": (rb.record(0, 0, b"k", None, [(b"h", None), (b"", b"")]), 1),
    "timestamp deltas": (rb.record(0, -(1 << 40)) + rb.record(1, 3_000_000) + rb.record(2, -1), 3),
    "timestamps far out": (rb.record(0, 1 << 62) + rb.record(1, -(1 << 62)) + rb.record(2, (1 << 63) - 1), 3),
    "offsets out of order": (rb.record(1, 0) + rb.record(0, 1) + rb.record(70_000, 2), 3),
    "many headers": (rb.record(0, 0, b"k", b"v", [(b"a%d" % i, b"b") for i in range(300)]), 1),
    # Kafka reads any negative key or value length as null, and varints of up to 5 / 10 bytes
    # (the bits past 32 / 64 dropped)
    "non-canonical null key": (sized(b"\x00\x00\x00\x81\x00\x02v\x00"), 1),
    "key length -3": (sized(b"\x00\x00\x00\x05\x02v\x00"), 1),
    "value length -7": (sized(b"\x00\x00\x00\x02k\x0d\x00"), 1),
    "5-byte varint high bits": (sized(b"\x00\x00\x00\x02k\x82\x80\x80\x80\x70v\x00"), 1),
    "10-byte varlong": (sized(b"\x00" + b"\x80" * 9 + b"\x00\x00\x02k\x02v\x00"), 1),
    "over-long varlong": (b"\x0e\x00" + b"\xff" * 11 + b"\x01", 1),
    "garbage": (rb.record(0) + b"\x07garbage garbage garbage", 2),
    "header count -8": (rb.record(0) + rb.varint(6) + b"\x00\x00\x00\x02k\x0f", 2),
    "header count past the end": (rb.record(0) + rb.varint(6) + b"\x00\x00\x00\x02k\x7e", 2),
    "negative header count": (rb.record(0) + sized(b"\x00\x00\x00\x02k\x02v\x0f"), 2),
    "header count over a short record": (sized(b"\x00\x00\x00\x02k\x02v\x06\x00\x00") + rb.record(1, 1), 2),
    "record longer than its fields": (sized(b"\x00\x00\x00\x02k\x02v\x00\x00") + rb.record(1, 1), 2),
    "header key -1": (sized(b"\x00\x00\x00\x02k\x02v\x02\x01"), 1),
    "negative header key": (rb.record(0) + rb.varint(8) + b"\x00\x00\x00\x00\x00\x02\x03\x00", 2),
    "fields short of length": (rb.record(0) + rb.varint(9) + b"\x00\x00\x00\x02k\x02v\x00", 2),
    "fields past length": (rb.record(0, 0, b"k", b"vv", length=5), 1),
    "negative length": (rb.record(0) + rb.record(1, 1, length=-5) + rb.record(2, 2), 3),
    "length past the end": (rb.record(0) + rb.record(1, 1, length=10_000) + rb.record(2, 2), 3),
    "length varint too long": (rb.record(0) + b"\xff\xff\xff\xff\xff\x01", 2),
    "length cut": (rb.record(0) + b"\x80", 2),
    "empty record": (rb.record(0) + b"\x00", 2),
    "trailing byte": (rb.records(2) + b"\x00", 2),
}
WELL_FORMED = ("plain", "null keys", "long fields", "null value and header value", "timestamp deltas",
               "offsets out of order", "many headers", "non-canonical null key", "value length -7",
               "5-byte varint high bits", "10-byte varlong", "key length -3")


@pytest.mark.parametrize("codec", [rb.NONE, rb.GZIP, rb.ZSTD], ids=lambda c: rb.CODEC_NAMES[c])
@pytest.mark.parametrize("name", RECORDS, ids=list(RECORDS))
def test_compiled_and_pure_walks_agree(name, codec):
    raw, n = RECORDS[name]
    for count in {n, n - 1, n + 1} - {0}:
        data = rb.batch(raw, count, codec=codec, base_ts=NOW)
        same(data)
        same(data, compacted=True)
        same(data, timestamp_before_max_ms=1000, timestamp_after_max_ms=1000)
        same(data, timestamp_type="LogAppendTime")
        same(rb.batch(raw, count, codec=codec, base_ts=NOW, attributes=codec | 0x08))


def test_well_formed_batches_pass_the_compiled_walk_alone():
    """The exact reading is not what accepts them: the compiled walk reads them to the end."""
    for name in WELL_FORMED:
        raw, n = RECORDS[name]
        st_c, st_py = [dr._FAR, -dr._FAR, 0, True], [dr._FAR, -dr._FAR, 0, True]
        r = dr._walk_c(raw, 0, len(raw), 0, n, st_c)
        assert r == (len(raw), n) or (r is None and name == "key length -3"), name
        r = dr._walk_py(raw, 0, len(raw), 0, n, st_py)
        assert r is None or (r == (len(raw), n) and st_c == st_py), name
        assert same(rb.batch(raw, n, base_ts=NOW))[0] == 0, name


def test_a_large_batch_read_without_the_gil_and_in_stream_chunks():
    """Over 64 KiB the walk lets other threads run; compressed, the records come in 16 KiB reads
    and the walk stops at a record cut by the read."""
    raw = rb.records(1500, value=os.urandom(90))
    for codec in (rb.NONE, rb.LZ4):
        e, _, _, _, scans, _ = same(rb.batch(raw, 1500, codec=codec, base_ts=NOW))
        assert e == 0 and scans[0].max_timestamp == NOW + 1499
        bad = bytearray(raw)
        bad[len(raw) * 3 // 4] ^= 0x55
        same(rb.batch(bytes(bad), 1500, codec=codec, base_ts=NOW))
    st_c = [dr._FAR, -dr._FAR, 0, True]
    cut = len(rb.records(700, value=b"x" * 90)) + 10  # 10 bytes into record 700
    assert dr._walk_c(raw, 0, cut, 0, 1500, st_c) == (cut - 10, 700)
    assert st_c == [0, 699, 0, True]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_corruption_gets_the_same_answer_from_both_walks(data):
    codec = data.draw(st.sampled_from([rb.NONE, rb.NONE, rb.SNAPPY]))
    raw = bytearray(rb.record(0, 0, b"k", b"v" * 150, [(b"h", b"x"), (b"g", None)]) + rb.record(1, 5, None, b"w")
                    + rb.record(2, -3, b"key", b""))
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    count = data.draw(st.sampled_from([3, 3, 2, 4]))
    over = data.draw(st.sampled_from([{}, {"compacted": True}, {"timestamp_before_max_ms": 2}]))
    same(rb.batch(bytes(raw), count, codec=codec, base_ts=NOW), **over)


@given(st.binary(max_size=70_000), st.data())
@settings(max_examples=60)
def test_the_compiled_copy_is_a_bytearray_of_the_range(data, draw):
    """_records.copy (the log's copy of a produced batch, its pages made present first) is bytearray(buf[start:end]),
    from bytes, a bytearray or a memoryview, and refuses a range outside the buffer."""
    start = draw.draw(st.integers(0, len(data)))
    end = draw.draw(st.integers(start, len(data)))
    for buf in (data, bytearray(data), memoryview(data)):
        got = dr.copy_out(buf, start, end)
        assert type(got) is bytearray and got == dr._copy_py(buf, start, end) == data[start:end]
    assert dr.copy_out is not dr._copy_py
    with pytest.raises(ValueError):
        dr.copy_out(data, 0, len(data) + 1)
