"""storage.log_validator: produce-time checks answer the error codes Kafka 4 answers."""
from __future__ import annotations

import struct

import crc32c
import kafka.errors as kerr
from hypothesis import given, settings, strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkite.storage.batch import read_header
from kafkite.storage.log_validator import validate_produce

CORRUPT = kerr.CorruptRecordError.errno
TOO_LARGE = kerr.MessageSizeTooLargeError.errno
INVALID_TS = kerr.InvalidTimestampError.errno
INVALID_RECORD = kerr.InvalidRecordError.errno
UNSUPPORTED_COMPRESSION = kerr.UnsupportedCompressionTypeError.errno
NOW = 10_000_000


def batch(n=2, ts=NOW, size=10, codec=0, pid=-1, epoch=-1, seq=-1, timestamps=None, keys=True):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=1 << 30)
    for i in range(n):
        t = timestamps[i] if timestamps else ts + i
        b.append(i, timestamp=t, key=(b"k%d" % i) if keys else None, value=b"v" * size, headers=[])
    return bytearray(b.build())


def kw(**over):
    d = dict(max_message_bytes=1_000_000, timestamp_type="CreateTime", timestamp_before_max_ms=2**63 - 1,
             timestamp_after_max_ms=3_600_000, now_ms=NOW)
    d.update(over)
    return d


def refresh_crc(buf):
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    return buf


def test_good_batch():
    data = bytes(batch(3))
    v = validate_produce(data, **kw())
    assert v.ok and v.error == 0 and v.valid_bytes == len(data)
    assert [(p, h.record_count) for p, h in v.batches] == [(0, 3)]


def test_bad_crc_is_corrupt_message():
    data = batch(2)
    data[-1] ^= 1
    v = validate_produce(bytes(data), **kw())
    assert v.error == CORRUPT == 2


def test_tiny_batch_length_is_corrupt_message():
    data = batch(2)
    struct.pack_into(">i", data, 8, 20)
    assert validate_produce(bytes(data), **kw()).error == CORRUPT


def test_no_complete_batch_is_invalid_record():
    data = bytes(batch(2))
    assert validate_produce(b"", **kw()).error == INVALID_RECORD
    assert validate_produce(data[:-5], **kw()).error == INVALID_RECORD
    assert validate_produce(data[:30], **kw()).error == INVALID_RECORD


def test_trailing_partial_bytes_are_trimmed_like_kafka():
    data = bytes(batch(2))
    v = validate_produce(data + data[:20], **kw())
    assert v.ok and v.valid_bytes == len(data)


def test_magic_below_2_is_invalid_record():
    data = batch(2)
    data[16] = 1
    v = validate_produce(bytes(data), **kw())
    assert v.error == INVALID_RECORD and "magic" in v.error_message


def test_two_batches_are_invalid_record_unless_allowed():
    two = bytes(batch(1) + batch(1))
    assert validate_produce(two, **kw()).error == INVALID_RECORD
    assert validate_produce(two, single_batch=False, **kw()).ok


def test_message_too_large():
    data = bytes(batch(1, size=5000))
    assert validate_produce(data, **kw(max_message_bytes=len(data) - 1)).error == TOO_LARGE == 10
    assert validate_produce(data, **kw(max_message_bytes=len(data))).ok


def test_non_zero_base_offset_is_invalid_record():
    data = batch(2)
    struct.pack_into(">q", data, 0, 5)  # outside the CRC
    assert validate_produce(bytes(data), **kw()).error == INVALID_RECORD


def test_count_mismatch_is_invalid_record():
    data = batch(3)
    struct.pack_into(">i", data, 57, 2)  # recordsCount, inside the CRC
    v = validate_produce(bytes(refresh_crc(data)), **kw())
    assert v.error == INVALID_RECORD and "count" in v.error_message
    data = batch(3)
    struct.pack_into(">i", data, 57, 0)
    assert validate_produce(bytes(refresh_crc(data)), **kw()).error == INVALID_RECORD


def test_control_batch_from_client_is_invalid_record():
    data = batch(1)
    struct.pack_into(">h", data, 21, 0x20)
    assert validate_produce(bytes(refresh_crc(data)), **kw()).error == INVALID_RECORD


def test_producer_id_without_sequence_is_invalid_record():
    data = batch(1, pid=5, epoch=0, seq=-1)
    assert validate_produce(bytes(data), **kw()).error == INVALID_RECORD
    assert validate_produce(bytes(batch(1, pid=5, epoch=0, seq=0)), **kw()).ok


def test_zstd_needs_produce_v7():
    data = bytes(batch(20, codec=4))
    assert read_header(data).compression == 4
    assert validate_produce(data, produce_version=6, **kw()).error == UNSUPPORTED_COMPRESSION
    assert validate_produce(data, produce_version=7, **kw()).ok


def test_timestamp_after_max_with_record_errors():
    data = bytes(batch(3, timestamps=[NOW, NOW + 3_600_001, NOW + 1]))
    v = validate_produce(data, **kw())
    assert v.error == INVALID_TS == 32
    assert [i for i, _ in v.record_errors] == [1]
    assert "out of range" in v.record_errors[0][1]


def test_timestamp_before_max_checks_records_below_base_timestamp():
    # record deltas may be negative: the second record is older than the first
    data = bytes(batch(2, timestamps=[NOW, NOW - 5000]))
    assert validate_produce(data, **kw(timestamp_before_max_ms=4000)).record_errors == \
        [(1, validate_produce(data, **kw(timestamp_before_max_ms=4000)).record_errors[0][1])]
    assert validate_produce(data, **kw(timestamp_before_max_ms=6000)).ok
    assert validate_produce(data, **kw()).ok  # default before.max.ms = Long.MAX


def test_log_append_time_topic_ignores_client_timestamps():
    data = bytes(batch(2, ts=0))
    assert validate_produce(data, **kw(timestamp_type="LogAppendTime")).ok


def test_producer_set_log_append_time_is_invalid_timestamp():
    data = batch(2)
    struct.pack_into(">h", data, 21, 0x08)
    v = validate_produce(bytes(refresh_crc(data)), **kw(timestamp_type="LogAppendTime"))
    assert v.error == INVALID_TS and len(v.record_errors) == 2


def test_compacted_topic_needs_keys():
    data = bytes(batch(2, keys=False))
    v = validate_produce(data, compacted=True, **kw())
    assert v.error == INVALID_RECORD and [i for i, _ in v.record_errors] == [0, 1]
    assert validate_produce(bytes(batch(2)), compacted=True, **kw()).ok


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_mutation_is_rejected_or_still_a_good_batch(data):
    """Fuzz: flipping bytes never crashes the validator and never lets a CRC failure through."""
    good = batch(3, codec=data.draw(st.sampled_from([0, 1, 3])))
    i = data.draw(st.integers(0, len(good) - 1))
    bad = bytearray(good)
    bad[i] ^= data.draw(st.integers(1, 255))
    v = validate_produce(bytes(bad), **kw())
    if i >= 21:  # inside the CRC
        assert v.error in (CORRUPT, INVALID_RECORD)
    elif v.ok:
        h = read_header(bad)
        assert h.base_offset == 0 and h.magic == 2
