"""storage.batch: the v2 header view, CRC32C, in-place patching, record decoding/building."""
from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given, settings, strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kafkite.storage.batch import (HEADER_SIZE, build_batch, crc_ok, decode_batch, decode_records, iter_batches,
                                   patch_base_offset, patch_partition_leader_epoch, read_header, rebuild_batch,
                                   set_log_append_time, valid_prefix)


def kp_batch(n=3, ts=1000, codec=0, pid=-1, epoch=-1, seq=-1, transactional=False, value=b"v" * 10):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=transactional,
                                  producer_id=pid, producer_epoch=epoch, base_sequence=seq, batch_size=1 << 30)
    for i in range(n):
        b.append(i, timestamp=ts + i, key=b"k%d" % i, value=value, headers=[("h", b"x")])
    return bytearray(b.build())


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_header_fields_match_kafka_python(codec):
    data = kp_batch(5, ts=1000, codec=codec, pid=42, epoch=3, seq=7)
    (pos, h), = list(iter_batches(data))
    ref = DefaultRecordBatch(bytes(data))
    assert pos == 0 and h.size == len(data) == ref.size_in_bytes
    assert (h.magic, h.record_count, h.last_offset_delta, h.compression) == (2, 5, 4, codec)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (42, 3, 7, 11)
    assert (h.base_timestamp, h.max_timestamp) == (1000, 1004)
    assert h.crc == ref.crc and crc_ok(data, 0, h)
    assert (h.timestamp_type, h.is_transactional, h.is_control) == (0, False, False)
    assert (h.last_offset, h.next_offset) == (4, 5)
    recs = decode_records(data)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in recs] == \
        [(i, 1000 + i, b"k%d" % i, b"v" * 10, [("h", b"x")]) for i in range(5)]


def test_attribute_bits():
    h = read_header(kp_batch(transactional=True, pid=1, epoch=0, seq=0))
    assert h.is_transactional and not h.is_control and h.has_producer_id


def test_crc_detects_any_flipped_byte_after_crc_field():
    data = kp_batch(3)
    for i in range(21, len(data)):
        bad = bytearray(data)
        bad[i] ^= 0x40
        assert not crc_ok(bad, 0, read_header(bad)), i


def test_patches_outside_crc_keep_it_valid():
    data = kp_batch(3)
    patch_base_offset(data, 0, 1234567890123)
    patch_partition_leader_epoch(data, 0, 17)
    h = read_header(data)
    assert (h.base_offset, h.partition_leader_epoch, h.last_offset) == (1234567890123, 17, 1234567890125)
    assert crc_ok(data, 0, h)
    assert [r.offset for r in decode_batch(data)] == [1234567890123 + i for i in range(3)]


@pytest.mark.parametrize("codec", [0, 4])
def test_log_append_time_sets_type_and_recomputes_crc(codec):
    data = kp_batch(3, ts=1000, codec=codec)
    set_log_append_time(data, 0, 99_999)
    h = read_header(data)
    assert h.timestamp_type == 1 and h.log_append_time and h.max_timestamp == 99_999 and h.compression == codec
    assert crc_ok(data, 0, h)
    assert h.crc == crc32c.crc32c(bytes(data[21:]))
    assert [r.timestamp for r in decode_batch(data)] == [99_999] * 3  # readers use maxTimestamp


def test_iter_batches_stops_at_partial_and_valid_prefix():
    a, b = kp_batch(2), kp_batch(3)
    buf = a + b
    assert [p for p, _ in iter_batches(buf)] == [0, len(a)]
    for cut in range(len(buf)):
        got = list(iter_batches(buf[:cut]))
        expect = 0 if cut < len(a) else 1
        assert len(got) == expect
        assert valid_prefix(buf[:cut]) == (0 if expect == 0 else len(a))
    # an impossible batchLength stops iteration too
    bad = bytearray(a)
    struct.pack_into(">i", bad, 8, 10)
    assert list(iter_batches(bad)) == [] and valid_prefix(bad) == 0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=20)), st.one_of(st.none(), st.binary(max_size=50)),
                          st.lists(st.tuples(st.text(max_size=5), st.binary(max_size=5)), max_size=2)),
                min_size=1, max_size=8),
       st.integers(0, 2**40), st.integers(0, 2**40), st.sampled_from([0, 1, 2, 3, 4]))
def test_build_batch_round_trip(records, base, ts, codec):
    data = build_batch(records, base_offset=base, timestamp_ms=ts, compression=codec)
    h = read_header(data)
    # kafka-python's builder sends uncompressed when compressing does not help
    assert (h.base_offset, h.record_count, h.size) == (base, len(records), len(data))
    assert h.compression in (codec, 0)
    assert crc_ok(data, 0, h) and h.producer_id == -1
    got = decode_records(data)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in got] == \
        [(base + i, ts, k, v, list(hs)) for i, (k, v, hs) in enumerate(records)]


_SIZED = st.one_of(st.none(), st.binary(max_size=70), st.integers(0, 20000).map(lambda n: b"v" * n))  # 1-3 byte varints


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_SIZED, _SIZED,
                          st.lists(st.tuples(st.text(max_size=70), st.one_of(st.none(), st.binary(max_size=70))),
                                   max_size=3)),
                min_size=1, max_size=70),
       st.integers(-1, 2**62), st.integers(-1, 2**62), st.integers(-1, 2**62), st.integers(-1, 2**15 - 1),
       st.integers(-1, 2**31 - 1), st.booleans(), st.integers(-1, 2**31 - 1))
def test_build_batch_bytes_equal_kafka_python_builder(records, base, ts, pid, epoch, seq, txn, ple):
    """The one-pass encoder of uncompressed batches writes exactly the bytes (CRC included) of kafka-python's
    DefaultRecordBatchBuilder: what Kafka's DefaultRecordBatch writes and reads back."""
    data = build_batch(records, base_offset=base, timestamp_ms=ts, producer_id=pid, producer_epoch=epoch,
                       base_sequence=seq, is_transactional=txn, partition_leader_epoch=ple)
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=txn, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=1 << 31)
    for i, (k, v, hs) in enumerate(records):
        b.append(i, timestamp=ts, key=k, value=v, headers=hs)
    ref = bytearray(b.build())
    patch_base_offset(ref, 0, base)
    patch_partition_leader_epoch(ref, 0, ple)
    assert data == bytes(ref)


def test_build_batch_producer_fields_and_empty():
    data = build_batch([(b"k", b"v", [])], timestamp_ms=5, producer_id=9, producer_epoch=2, base_sequence=4)
    h = read_header(data)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (9, 2, 4)
    with pytest.raises(ValueError):
        build_batch([], timestamp_ms=0)


def test_rebuild_batch_keeps_offsets_and_fields():
    data = kp_batch(5, ts=100, codec=1, pid=3, epoch=1, seq=0)
    patch_base_offset(data, 0, 50)
    patch_partition_leader_epoch(data, 0, 7)
    h = read_header(data)
    keep = [r for r in decode_batch(data) if r.offset in (51, 53)]
    out = rebuild_batch(h, keep)
    h2 = read_header(out)
    assert (h2.base_offset, h2.partition_leader_epoch, h2.compression, h2.producer_id) == (51, 7, 1, 3)
    assert crc_ok(out, 0, h2)
    assert [(r.offset, r.timestamp, r.key) for r in decode_batch(out)] == [(51, 101, b"k1"), (53, 103, b"k3")]


def test_decode_records_skips_control_batches():
    data = kp_batch(2)
    ctl = bytearray(kp_batch(1))
    attrs = struct.unpack_from(">h", ctl, 21)[0] | 0x20
    struct.pack_into(">h", ctl, 21, attrs)
    assert read_header(ctl).is_control
    assert len(decode_records(ctl + data)) == 2
    assert HEADER_SIZE == 61


def test_the_first_crc_loads_the_c_function_without_the_crc32c_package():
    """The crc32c package's __init__ imports importlib.metadata (14-60 ms, paid by a broker's first Produce): the
    first CRC loads the package's extension module alone, and later calls reach the C function directly."""
    import subprocess
    import sys
    code = ("import sys\nfrom kafkite.wire.lazy_kafka import install\ninstall()  # as kafkite serve does\n"
            "from kafkite.storage import batch, log_validator\n"
            "first = batch.crc32c_of(b'123456789')\n"
            "again = log_validator.crc32c_of(b'123456789')\n"  # a module that imported the name before the first call
            "print(first, again, type(batch.crc32c_of).__name__, 'importlib.metadata' in sys.modules, "
            "'crc32c' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    expected = crc32c.crc32c(b"123456789")
    assert out.stdout.split() == [str(expected), str(expected), "builtin_function_or_method", "False", "False"]
