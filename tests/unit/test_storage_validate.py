"""storage.log_validator: produce-time checks answer the error codes Kafka 4 answers."""
from __future__ import annotations

import struct

import crc32c
import kafka.errors as kerr
from hypothesis import given, settings, strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkite.storage.batch import crc_ok, read_header
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
    if i >= 21 and bad[22] & 0x07 > 4:  # the attributes now name no codec: Kafka's IllegalArgumentException,
        assert v.error == -1 and "Unknown compression type id" in v.error_message  # before the CRC is read
    elif i >= 21:  # inside the CRC
        assert v.error in (CORRUPT, INVALID_RECORD)
    elif v.ok:
        h = read_header(bad)
        assert h.base_offset == 0 and h.magic == 2


# -- every record read (Kafka's DefaultRecord / DefaultRecordBatch iteration) -----------------------
import pytest  # noqa: E402
from kafka.record.default_records import DefaultRecordBatch  # noqa: E402

import raw_batches as rb  # noqa: E402
from kafkite.storage.log_config import LogConfig  # noqa: E402
from kafkite.storage.log_validator import NeedsWorker, prepare_append  # noqa: E402

UNKNOWN_SERVER_ERROR = -1
codecs = pytest.mark.parametrize("codec", rb.CODECS, ids=lambda c: rb.CODEC_NAMES[c])


def check(data, **over):
    return validate_produce(bytes(data), topic_partition="t-0", **kw(**over))


@codecs
def test_raw_good_batches_pass_and_kafka_python_reads_them(codec):
    data = rb.good(4, codec)
    v = check(data)
    assert v.ok, v.error_message
    assert [r.key for r in DefaultRecordBatch(data)] == [b"k0", b"k1", b"k2", b"k3"]


@codecs
@pytest.mark.parametrize("count", [2, 4])
def test_record_count_other_than_the_records_is_invalid_record(codec, count):
    v = check(rb.batch(rb.records(3), count, codec=codec))
    assert v.error == INVALID_RECORD and not v.record_errors and not v.in_response
    assert ("records still remaining" if count == 2 else "premature EOF") in v.error_message \
        or "reached EOF" in v.error_message or "remaining bytes" in v.error_message


@codecs
@pytest.mark.parametrize("length", [-5, 10_000])
def test_negative_or_past_the_end_record_length_is_invalid_record(codec, length):
    payload = rb.record(0, 0) + rb.record(1, 1, length=length) + rb.record(2, 2)
    v = check(rb.batch(payload, 3, codec=codec))
    assert v.error == INVALID_RECORD, v.error_message
    assert "in topic partition t-0" in v.error_message


GARBAGE = {
    "bytes": b"\x07garbage garbage garbage",
    "header count": rb.varint(6) + b"\x00\x00\x00\x02k\x0f",  # headers count -8
    "negative header key": rb.varint(8) + b"\x00\x00\x00\x00\x00\x02\x03\x00",
    "fields short of length": rb.varint(9) + b"\x00\x00\x00\x02k\x02v\x00",
    "long varint": b"\x0e\x00" + b"\xff" * 11 + b"\x01",
}


@codecs
@pytest.mark.parametrize("garbage", GARBAGE, ids=list(GARBAGE))
def test_garbage_records_are_invalid_record(codec, garbage):
    v = check(rb.batch(rb.record(0) + GARBAGE[garbage], 2, codec=codec))
    assert v.error == INVALID_RECORD and not v.in_response, v.error_message


@pytest.mark.parametrize("codec", rb.CODECS[1:], ids=lambda c: rb.CODEC_NAMES[c])
@pytest.mark.parametrize("payload", [b"not compressed at all, not at all", b"\x00" * 3])
def test_undecodable_compressed_payload_is_unknown_server_error(codec, payload):
    v = check(rb.batch(payload, 1, codec=codec, compressed=True))
    assert v.error in (UNKNOWN_SERVER_ERROR, INVALID_RECORD), v.error_message
    if codec != rb.SNAPPY:  # raw snappy may decode 3 zero bytes... to nothing: then the records are missing
        assert v.error == UNKNOWN_SERVER_ERROR


@pytest.mark.parametrize("codec", rb.CODECS[1:], ids=lambda c: rb.CODEC_NAMES[c])
def test_truncated_compressed_payload_is_refused(codec):
    whole = rb.compress(codec, rb.records(50, value=b"x" * 100))
    v = check(rb.batch(whole[:len(whole) // 2], 50, codec=codec, compressed=True))
    assert v.error in (UNKNOWN_SERVER_ERROR, INVALID_RECORD)


def test_unknown_compression_id_is_unknown_server_error():
    v = check(rb.batch(rb.records(1), 1, attributes=5))
    assert v.error == UNKNOWN_SERVER_ERROR and not v.log_start


def test_magic_above_two_is_corrupt_message_below_is_invalid_record():
    v = check(rb.batch(rb.records(1), 1, magic=3))
    assert v.error == CORRUPT and "Invalid magic found in record: 3" in v.error_message and not v.log_start
    assert check(rb.batch(rb.records(1), 1, magic=-1)).error == CORRUPT
    assert check(rb.batch(rb.records(1), 1, magic=1)).error == INVALID_RECORD
    # a partial second batch with magic 3 is met by the iterator too
    two = rb.good(1) + rb.batch(rb.records(1), 1, magic=3)[:30]
    assert check(two).error == CORRUPT


@codecs
def test_null_key_on_compacted_topic_lists_each_record(codec):
    payload = rb.record(0, 0, b"a") + rb.record(1, 1, None) + rb.record(2, 2, None)
    v = check(rb.batch(payload, 3, codec=codec), compacted=True)
    assert v.error == INVALID_RECORD and v.in_response
    assert v.record_errors == [(i, "Compacted topic cannot accept message without key in topic partition t-0")
                               for i in (1, 2)]
    assert v.error_message.startswith("One or more records have been rejected due to 2 record errors in total")
    assert check(rb.batch(payload, 3, codec=codec)).ok  # not compacted: fine


def test_record_error_messages_are_kafkas():
    payload = rb.record(0, 0) + rb.record(1, 3_600_001)
    v = check(rb.batch(payload, 2, base_ts=NOW))
    assert v.error == INVALID_TS and v.record_errors == [
        (1, f"Timestamp {NOW + 3_600_001} of message with offset 1 is out of range. The timestamp should be within "
            f"[{NOW - (2**63 - 1)}, {NOW + 3_600_000}]")]


@codecs
def test_producer_log_append_time_flag(codec):
    data = rb.batch(rb.records(2), 2, codec=codec, attributes=codec | 0x08, base_ts=NOW, max_ts=NOW + 7)
    v = check(data, timestamp_type="LogAppendTime")
    assert v.error == INVALID_TS and [i for i, _ in v.record_errors] == [0, 1]
    assert "Producer should not set timestamp type to LogAppendTime" in v.record_errors[0][1]
    # a CreateTime topic refuses it too, as Kafka's validateTimestamp does (the flag is checked whenever the
    # timestamp is not out of range), and appends nothing
    v = check(data)
    assert v.error == INVALID_TS and [i for i, _ in v.record_errors] == [0, 1]
    assert "Producer should not set timestamp type to LogAppendTime" in v.record_errors[1][1]
    p = prepare_append(data, LogConfig(), now_ms=NOW)
    assert not p.ok and p.error == INVALID_TS


@codecs
def test_max_timestamp_is_set_from_the_records(codec):
    data = rb.batch(rb.records(3), 3, codec=codec, base_ts=NOW, max_ts=NOW + 1000)
    p = prepare_append(data, LogConfig(), now_ms=NOW)
    h = read_header(p.data)
    assert p.ok and h.max_timestamp == NOW + 2 and crc_ok(p.data, 0, h)
    good = rb.good(3, codec, base_ts=NOW)
    assert prepare_append(good, LogConfig(), now_ms=NOW).data == good  # right already: bytes untouched


def test_out_of_order_offsets_in_a_compressed_batch_are_renumbered():
    payload = rb.record(0) + rb.record(5) + rb.record(2)
    p = prepare_append(rb.batch(payload, 3, codec=rb.LZ4), LogConfig(), now_ms=NOW)
    assert p.ok and [r.offset for r in DefaultRecordBatch(bytes(p.data))] == [0, 1, 2]
    assert read_header(p.data).compression == rb.LZ4


def test_recompressed_batch_over_max_message_bytes_is_message_too_large():
    import os
    data = rb.batch(rb.record(0, 0, b"k", os.urandom(3000)), 1, codec=rb.NONE)
    cfg = LogConfig(compression_type="gzip", max_message_bytes=len(data) + 10)
    v = prepare_append(data, cfg, now_ms=NOW, topic_partition="t-0")
    assert v.error == TOO_LARGE and v.error_message.startswith("Message batch size is")
    assert prepare_append(data, LogConfig(compression_type="gzip"), now_ms=NOW).ok


def test_zip_bomb_is_message_too_large_past_the_bound():
    bomb = rb.batch(rb.zstd_bomb(8 << 20), 1, codec=rb.ZSTD, compressed=True)
    assert len(bomb) < 2000
    v = check(bomb, max_message_bytes=64 << 10)  # bound: 64 x 64 KiB = 4 MiB
    assert v.error == TOO_LARGE and not v.log_start and "expand to more than 4194304 bytes" in v.error_message
    assert check(bomb, max_message_bytes=256 << 10).ok  # bound 16 MiB: a legal (if large) record
    with pytest.raises(NeedsWorker):  # past the inline limit: the caller hops to a worker
        check(bomb, max_message_bytes=256 << 10, inline=True)


def test_many_records_go_to_a_worker_few_stay_inline(monkeypatch):
    import kafkite.storage.log_validator as lv
    assert check(rb.good(10), inline=True).ok
    with pytest.raises(NeedsWorker):
        check(rb.good(5000, codec=rb.GZIP), inline=True)
    monkeypatch.setattr(lv, "COMPILED", False)  # the pure-Python walk: 4096 records at most
    with pytest.raises(NeedsWorker):
        check(rb.good(5000), inline=True)
    monkeypatch.setattr(lv, "COMPILED", True)  # the compiled walk: 65536 uncompressed records
    assert check(rb.good(5000), inline=True).ok
    monkeypatch.setattr(lv, "INLINE_RECORDS_COMPILED", 4999)
    with pytest.raises(NeedsWorker):
        check(rb.good(5000), inline=True)
    monkeypatch.setattr(lv, "INLINE_BATCH_BYTES", 1000)  # a large batch of few records: its CRC and copy
    assert check(rb.batch(rb.records(4, value=b"v" * 200), 4), inline=True).ok  # 61 + 4 x 210 bytes
    with pytest.raises(NeedsWorker):
        check(rb.batch(rb.records(5, value=b"v" * 200), 5), inline=True)
    assert check(rb.batch(rb.records(5, value=b"v" * 200), 5)).ok


def _attributes_with_high_bit(records: bytes) -> bool:
    """Whether a record (length varint, then the attributes byte) has an attributes byte >= 0x80."""
    from kafka.record.util import decode_varint
    p = 0
    try:
        while p < len(records):
            length, q = decode_varint(records, p)
            if records[q] >= 0x80:
                return True
            p = q + length
    except (IndexError, ValueError):
        pass
    return False


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_whatever_is_accepted_kafka_python_can_read(data):
    """Fuzz the records (CRC kept right): the validator never crashes, and a batch it accepts is
    one a consumer reads whole, with the header's count of records."""
    codec = data.draw(st.sampled_from(rb.CODECS))
    raw = bytearray(rb.record(0, 0, b"k", b"v" * 70, [(b"h", b"x")]) + rb.record(1, 1, None, b"w"))
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    count = data.draw(st.sampled_from([2, 2, 1, 3]))
    batch_bytes = rb.batch(bytes(raw), count, codec=codec)
    v = check(batch_bytes)
    if v.ok:
        try:
            recs = list(DefaultRecordBatch(batch_bytes))
        except kerr.CorruptRecordError as exc:
            # Kafka takes any bytes as a header key (Java decodes it leniently); kafka-python
            # insists on UTF-8. And Kafka reads a record's attributes as one byte, kafka-python as a
            # varint (an attributes byte >= 0x80 runs it off the record). Kafka's answer is kept: accepted.
            assert "UnicodeDecodeError" in str(exc) or _attributes_with_high_bit(bytes(raw)), exc
        else:
            assert len(recs) == count


def test_a_batch_kafka_python_cannot_decode_is_refused_not_crashed_when_it_must_be_rebuilt():
    data = rb.batch(rb.record(0, 0, b"k", b"v", [(b"\xff\xfe", b"x")]), 1)  # a non-UTF-8 header key
    assert prepare_append(data, LogConfig(), now_ms=NOW).ok  # stored as produced, as Kafka does
    v = prepare_append(data, LogConfig(compression_type="gzip"), now_ms=NOW, topic_partition="t-0")
    assert v.error == UNKNOWN_SERVER_ERROR
