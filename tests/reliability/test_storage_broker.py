"""The storage managers inside a running broker (in-process BrokerThread, real clients): the log
cleaner compacts a compacted topic within seconds (segment.ms rolls from the cleaner's periodic
check), and compression.type recompresses produced batches."""
from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from helpers import kp_produce, wait_until
from kafkite.storage.batch import iter_batches
from kafkite.testing.runner import BrokerThread


@pytest.fixture
def disk_broker(tmp_path):
    with BrokerThread(data_dir=tmp_path / "data", overrides={"log.cleaner.backoff.ms": "50"}) as b:
        yield b


def create_topic(bs, name, configs):
    a = KafkaAdminClient(bootstrap_servers=bs)
    a.create_topics([NewTopic(name, 1, 1, topic_configs=configs)])
    a.close()


def read_from_start(bs, topic):
    """Every record from offset 0 to the current end, as (offset, key, value)."""
    c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek(tp, 0)
    end = c.end_offsets([tp])[tp]
    out = []
    deadline = time.monotonic() + 10
    while c.position(tp) < end and time.monotonic() < deadline:
        for msgs in c.poll(timeout_ms=200).values():
            out.extend((m.offset, m.key, m.value) for m in msgs)
    c.close()
    return out


def test_compacted_topic_is_cleaned_within_seconds(disk_broker, monkeypatch):
    """The cleaner compacts the topic within seconds, its worker giving the GIL up as it goes (kafkite.gil_pacing);
    its cleaner-offset-checkpoint file is read (the first time it looks at a log of the log dir) and written by a
    worker thread, not on the event loop; so are the swap-in's renames (under the log's lock)."""
    import kafkite.storage.log_cleaner as log_cleaner
    from helpers import OnTheLoop
    from kafkite.gil_pacing import Pacer
    from kafkite.storage.file_log_segment import FileLogSegment
    checkpoints = OnTheLoop(monkeypatch, log_cleaner, "write_checkpoint").__enter__()
    reads = OnTheLoop(monkeypatch, log_cleaner, "read_cleaner_checkpoint").__enter__()
    swaps, real_replaced_by = [], FileLogSegment.replaced_by
    monkeypatch.setattr(FileLogSegment, "replaced_by", lambda seg, prepared: swaps.append(seg.base)
                        or real_replaced_by(seg, prepared))
    swaps_on_loop = OnTheLoop(monkeypatch, FileLogSegment, "replaced_by").__enter__()
    paces, real_run = [], log_cleaner.CleanJob.run
    monkeypatch.setattr(log_cleaner.CleanJob, "run", lambda job: paces.append(type(job.pace)) or real_run(job))
    bs = disk_broker.bootstrap_servers
    create_topic(bs, "compacted", {"cleanup.policy": "compact", "segment.ms": "100",
                                    "min.cleanable.dirty.ratio": "0.01"})
    latest = {}
    for version in range(5):
        recs = [(b"key-%d" % k, b"v%d-%d" % (version, k), []) for k in range(20)]
        for (key, value, _), meta in zip(recs, kp_produce(bs, "compacted", recs)):
            latest[key] = (meta.offset, value)

    def only_latest():
        got = read_from_start(bs, "compacted")
        return got if len(got) == len(latest) else None
    got = wait_until(only_latest, timeout=15, what="compaction down to the latest value per key")
    assert sorted(got) == sorted((off, k, v) for k, (off, v) in latest.items())  # offsets kept
    lg = disk_broker.state.replicas.get("compacted", 0)
    assert lg.log_end_offset == 100
    cp = disk_broker.state.replicas.log_dir.path / "cleaner-offset-checkpoint"
    wait_until(lambda: cp.exists() and "compacted 0 " in cp.read_text(), timeout=15, what="the cleaner's checkpoint")
    checkpoints.check(0)
    reads.check(0)
    swaps_on_loop.check(0)
    assert swaps  # (the compacted segments replaced: in a worker thread)
    assert cp.parent in disk_broker.state.log_cleaner._checkpoints  # (read, in a worker)
    assert paces and set(paces) == {Pacer}  # (services.py hands the broker's cleaner its pace)


@pytest.mark.parametrize("codec,attr", [("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4), ("uncompressed", 0)])
def test_topic_compression_type_recompresses(disk_broker, codec, attr):
    bs = disk_broker.bootstrap_servers
    create_topic(bs, f"c-{codec}", {"compression.type": codec})
    produced_with = "lz4" if codec == "uncompressed" else None
    recs = [(b"k%d" % i, b"value-%d" % i * 10, [("h", b"%d" % i)]) for i in range(50)]
    metas = kp_produce(bs, f"c-{codec}", recs, compression=produced_with)
    got = read_from_start(bs, f"c-{codec}")
    assert [(o, k, v) for o, k, v in got] == [(m.offset, k, v) for m, (k, v, _) in zip(metas, recs)]
    lg = disk_broker.state.replicas.get(f"c-{codec}", 0)
    data = disk_broker.call(lambda: lg.read(0, 1 << 20))
    assert {h.compression for _, h in iter_batches(data)} == {attr}


def test_broker_compression_type_and_producer(tmp_path):
    with BrokerThread(data_dir=tmp_path / "data", overrides={"compression.type": "zstd"}) as b:
        bs = b.bootstrap_servers
        create_topic(bs, "broker-default", {})
        create_topic(bs, "as-produced", {"compression.type": "producer"})
        recs = [(b"k", b"v" * 100, [])] * 10
        kp_produce(bs, "broker-default", recs, compression="gzip")
        kp_produce(bs, "as-produced", recs, compression="gzip")
        for topic, attr in (("broker-default", 4), ("as-produced", 1)):
            lg = b.state.replicas.get(topic, 0)
            data = b.call(lambda: lg.read(0, 1 << 20))
            assert {h.compression for _, h in iter_batches(data)} == {attr}
            assert [v for _, _, v in read_from_start(bs, topic)] == [b"v" * 100] * 10


def test_flush_ms_fsyncs_without_further_appends(disk_broker, monkeypatch):
    """(The flush scheduler looks at one log a step of the loop here, services.LOGS_PER_STEP: the log it must flush
    comes after other partitions' and is still reached.)"""
    import os
    import kafkite.services as services
    monkeypatch.setattr(services, "LOGS_PER_STEP", 1)
    bs = disk_broker.bootstrap_servers
    for name in ("before-lazy-1", "before-lazy-2", "before-lazy-3"):
        create_topic(bs, name, {})
    create_topic(bs, "lazy", {"flush.messages": "1000000", "flush.ms": "3000"})
    lg = disk_broker.state.replicas.get("lazy", 0)
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    kp_produce(bs, "lazy", [(b"k", b"v", [])] * 5)
    fd = lg.active.fd
    assert lg.high_watermark == 5  # written: visible without waiting for an fsync (flush.messages)
    assert fd not in synced  # not yet 3 s since the log was opened: no fsync on append
    wait_until(lambda: fd in synced, timeout=15, what="the flush scheduler's fsync")
    assert lg.scheduled_flush(10**15) is None
