"""flush.ms (fsync once that much time passed since the last flush: on append and from the flush
scheduler's periodic check) and compression.type (LogValidator recompresses on append)."""
from __future__ import annotations

import os

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkite.storage.batch import crc_ok, decode_records, iter_batches, read_header
from kafkite.storage.log_config import LogConfig
from kafkite.storage.unified_log import FileLog, MemoryLog


def batch(n=3, codec=0, ts=0, pid=-1, seq=-1):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=pid,
                                  producer_epoch=0 if pid >= 0 else -1, base_sequence=seq, batch_size=1 << 30)
    for i in range(n):
        b.append(i, timestamp=ts + i, key=b"k%d" % i, value=b"value %d " % i * 20, headers=[("h", b"x")])
    return bytearray(b.build())


@pytest.fixture
def fsyncs(monkeypatch):
    calls = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    return calls


def test_flush_ms_on_append(tmp_path, fsyncs):
    lg = FileLog(tmp_path / "t-0", LogConfig(flush_messages=1_000_000, flush_ms=100), now_ms=0)
    lg.append(batch(), now_ms=10)
    lg.append(batch(), now_ms=60)
    assert fsyncs == []  # neither flush.messages nor flush.ms reached
    lg.append(batch(), now_ms=100)  # 100 ms since the last flush (the log's opening)
    assert len(fsyncs) == 1
    lg.append(batch(), now_ms=150)
    assert len(fsyncs) == 1
    lg.append(batch(), now_ms=200)
    assert len(fsyncs) == 2


def test_flush_ms_from_the_scheduler(tmp_path, fsyncs):
    lg = FileLog(tmp_path / "t-0", LogConfig(flush_messages=1_000_000, flush_ms=100), now_ms=0)
    assert lg.scheduled_flush(500) is None  # nothing unflushed
    lg.append(batch(), now_ms=10)
    assert lg.scheduled_flush(50) is None and fsyncs == []
    target, run = lg.scheduled_flush(120)
    assert target == lg.log_end_offset == 3 and fsyncs == []
    run()  # in a worker thread, in the broker
    lg.mark_flushed(target)
    assert len(fsyncs) == 1
    assert lg.scheduled_flush(1000) is None  # flushed: nothing to do


def test_flush_ms_scheduler_covers_deferred_writes(tmp_path, fsyncs):
    lg = FileLog(tmp_path / "t-0", LogConfig(flush_messages=1_000_000, flush_ms=100), now_ms=0)
    lg.append(batch(), now_ms=10, defer_flush=True)
    assert lg.high_watermark == 0 and lg.flush_pending(0)
    target, run = lg.scheduled_flush(200)
    run()
    lg.mark_flushed(target)
    assert len(fsyncs) == 1 and lg.high_watermark == 3
    assert len(decode_records(lg.read(0, 1 << 20))) == 3


def test_default_flush_ms_never_schedules(tmp_path):
    lg = FileLog(tmp_path / "t-0", LogConfig(flush_messages=1_000_000), now_ms=0)
    lg.append(batch(), now_ms=10)
    assert lg.scheduled_flush(10**12) is None


@pytest.mark.parametrize("kind", ["memory", "file"])
@pytest.mark.parametrize("topic_codec,attr", [("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4),
                                             ("uncompressed", 0)])
def test_compression_type_recompresses_on_append(tmp_path, kind, topic_codec, attr):
    cfg = LogConfig(compression_type=topic_codec)
    lg = MemoryLog(cfg) if kind == "memory" else FileLog(tmp_path / "t-0", cfg)
    lg.append(batch(2), now_ms=0)
    produced = batch(3, codec=3 if attr == 0 else 0, pid=7, seq=0)
    expected = [(r.key, r.value, r.timestamp, r.headers) for r in decode_records(produced)]
    r = lg.append(produced, now_ms=0, leader_epoch=5)
    assert (r.base_offset, r.last_offset) == (2, 4)
    data = lg.read(2, 1 << 20)
    [(pos, h)] = list(iter_batches(data))
    assert h.compression == attr and crc_ok(data, pos, h)
    assert (h.base_offset, h.record_count, h.partition_leader_epoch) == (2, 3, 5)
    assert (h.producer_id, h.base_sequence) == (7, 0)
    assert [(r.key, r.value, r.timestamp, r.headers) for r in decode_records(data)] == expected
    assert [r.offset for r in decode_records(data)] == [2, 3, 4]
    assert lg.producer_state.producers[7].last_seq == 2


def test_producer_keeps_the_batch_as_produced():
    lg = MemoryLog(LogConfig(compression_type="producer"))
    produced = batch(3, codec=1)
    lg.append(bytearray(produced), now_ms=0)
    stored = lg.read(0, 1 << 20)
    assert read_header(stored).compression == 1
    assert stored[21:] == produced[21:]  # from the attributes on: the producer's bytes, CRC and all


def test_matching_codec_is_not_rewritten():
    lg = MemoryLog(LogConfig(compression_type="gzip"))
    produced = batch(3, codec=1)
    lg.append(bytearray(produced), now_ms=0)
    assert lg.read(0, 1 << 20)[21:] == produced[21:]
