"""storage.log_validator.prepare_simple: the common produced batch in one pass, with prepare_append's bytes, and
None (prepare_append's route) for every other batch and topic."""
from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given, settings, strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkite.storage.batch import TIMESTAMP_TYPE_BIT, read_header
from kafkite.storage.default_record import COMPILED
from kafkite.storage.log_config import LogConfig
from kafkite.storage.log_validator import prepare_append, prepare_simple
from kafkite.storage.unified_log import MemoryLog

NOW = 10_000_000

compiled = pytest.mark.skipif(not COMPILED, reason="the one-pass route reads records with the compiled reader (not "
                                                   "built, or KAFKITE_PURE_PYTHON set)")


def batch(n=3, ts=NOW, codec=0, pid=-1, epoch=-1, seq=-1, transactional=False, keys=True):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=transactional, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=1 << 30)
    for i in range(n):
        b.append(i, timestamp=ts + i, key=(b"k%d" % i) if keys else None, value=b"v" * 20, headers=[])
    return bytes(b.build())


def refresh_crc(buf: bytearray) -> bytes:
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    return bytes(buf)


def general(data, config=None):
    v = prepare_append(data, config or LogConfig(), now_ms=NOW)
    return bytes(v.data) if v.ok else None


@compiled
def test_the_common_batch_gives_prepare_appends_bytes():
    data = batch(5)
    got = prepare_simple(data, LogConfig(), NOW)
    assert type(got) is bytearray and got == data == general(data)
    assert prepare_simple(memoryview(data), LogConfig(compression_type="uncompressed"), NOW) == data


@compiled
def test_an_idempotent_producers_batch_gives_prepare_appends_bytes():
    """Its sequence is the log's producer state's to check (ReplicaManager), after either route."""
    data = batch(4, pid=7, epoch=3, seq=12)
    got = prepare_simple(data, LogConfig(), NOW)
    assert got is not None and bytes(got) == data == general(data)


@compiled
def test_a_wrong_max_timestamp_is_set_as_prepare_append_sets_it():
    buf = bytearray(batch(3))
    struct.pack_into(">q", buf, 35, NOW + 1000)
    data = refresh_crc(buf)
    got = prepare_simple(data, LogConfig(), NOW)
    assert got is not None and bytes(got) == general(data) and read_header(got).max_timestamp == NOW + 2


def _cases():
    two = batch(2) + batch(2)
    log_append_flag = bytearray(batch(2))
    struct.pack_into(">h", log_append_flag, 21, TIMESTAMP_TYPE_BIT)
    base_offset = bytearray(batch(2))
    struct.pack_into(">q", base_offset, 0, 5)
    bad_crc = bytearray(batch(2))
    bad_crc[-1] ^= 1
    count = bytearray(batch(2))
    struct.pack_into(">i", count, 57, 3)
    return {
        "two batches": (two, LogConfig()),
        "trailing bytes": (batch(2) + b"\0" * 5, LogConfig()),
        "compressed": (batch(3, codec=1), LogConfig()),
        "idempotent without a sequence": (batch(3, pid=7, epoch=0, seq=-1), LogConfig()),
        "transactional": (batch(3, pid=7, epoch=0, seq=0, transactional=True), LogConfig()),
        "LogAppendTime topic": (batch(3), LogConfig(message_timestamp_type="LogAppendTime")),
        "compacted topic": (batch(3), LogConfig(cleanup_policy="compact")),
        "gzip topic": (batch(3), LogConfig(compression_type="gzip")),
        "producer's LogAppendTime flag": (refresh_crc(log_append_flag), LogConfig()),
        "base offset": (bytes(base_offset), LogConfig()),
        "bad CRC": (bytes(bad_crc), LogConfig()),
        "record count": (refresh_crc(count), LogConfig()),
        "too large": (batch(3), LogConfig(max_message_bytes=100)),
        "timestamp too new": (batch(3, ts=NOW + 7_200_000), LogConfig()),
        "timestamp too old": (batch(3, ts=NOW - 5000), LogConfig(message_timestamp_before_max_ms=1000)),
        "short": (batch(3)[:40], LogConfig()),
        "empty": (b"", LogConfig()),
    }


@pytest.mark.parametrize("case", list(_cases()))
def test_anything_else_takes_prepare_appends_route(case):
    data, config = _cases()[case]
    assert prepare_simple(data, config, NOW) is None


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_a_mutated_batch_is_left_to_prepare_append_or_gets_its_bytes(data):
    """Fuzz: whatever prepare_simple accepts, prepare_append accepts with the same bytes."""
    idempotent = data.draw(st.booleans())
    good = bytearray(batch(data.draw(st.integers(1, 4)), keys=data.draw(st.booleans()), pid=7 if idempotent else -1,
                           epoch=0 if idempotent else -1, seq=0 if idempotent else -1))
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(good) - 1))
        good[i] ^= data.draw(st.integers(1, 255))
    if data.draw(st.booleans()):
        refresh_crc(good)
    got = prepare_simple(bytes(good), LogConfig(), NOW)
    if got is not None:
        assert bytes(got) == general(bytes(good))


@compiled
def test_append_produced_logs_what_append_logs():
    """UnifiedLog.append_produced (offsets and leader epoch stamped in place) against append, batch for batch."""
    a, b = MemoryLog(LogConfig(), now_ms=NOW), MemoryLog(LogConfig(), now_ms=NOW)
    for n in (3, 1, 4):
        data = batch(n)
        base = a.append_produced(prepare_simple(data, LogConfig(), NOW), NOW, 7, False)
        res = b.append(bytearray(general(data)), now_ms=NOW, leader_epoch=7)
        assert base == res.base_offset and a.log_end_offset == b.log_end_offset == res.last_offset + 1
    assert a.read(0, 1 << 20) == b.read(0, 1 << 20)
    assert [h.partition_leader_epoch for h in a.iter_headers()] == [7, 7, 7]
