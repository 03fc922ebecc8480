"""Disk mode, a clean restart: the active segment's .index/.timeindex written at the stop are loaded at the next start
(only the batches after the last index entry read: storage/active_segment.py), and clients see the same partition --
its end, every record, offsets by timestamp -- and appends go on after it."""
from __future__ import annotations

import structlog
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from kafkite.testing.runner import BrokerThread

T0 = 1_700_000_000_000
TS = [T0 + (i * 7919) % 500 for i in range(60)]  # out of order, as producers' clocks allow


def produce(bs, n, start=0):
    p = KafkaProducer(bootstrap_servers=bs, acks="all", linger_ms=0)
    try:
        return [p.send("t", value=b"v%d" % i + b"x" * 50, timestamp_ms=TS[i % len(TS)]).get(timeout=30).offset
                for i in range(start, start + n)]
    finally:
        p.close()


def offsets_for_times(bs, stamps):
    c = KafkaConsumer(bootstrap_servers=bs)
    tp = TopicPartition("t", 0)
    try:
        found = [c.offsets_for_times({tp: ts})[tp] for ts in stamps]
        return [f.offset if f else None for f in found], c.end_offsets([tp])[tp]
    finally:
        c.close()


def test_a_clean_restart_loads_the_active_segments_index_files(tmp_path):
    data = tmp_path / "data"
    stamps = [T0, T0 + 100, T0 + 250, T0 + 499, T0 + 500]
    with BrokerThread(data_dir=data) as b:
        a = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        a.create_topics([NewTopic("t", 1, 1, topic_configs={"index.interval.bytes": "300"})])
        a.close()
        assert produce(b.bootstrap_servers, 60) == list(range(60))
        before = offsets_for_times(b.bootstrap_servers, stamps)
        seg = b.state.replicas.get("t", 0).active
        want = (seg.index, seg.next_offset, seg.size, seg.max_ts, seg.max_ts_offset)
    d = data / "t-0"
    assert (d / "00000000000000000000.index").stat().st_size == 8 * len(want[0]) > 0  # written at the stop
    with structlog.testing.capture_logs() as logs:
        b = BrokerThread(data_dir=data).start()
    try:
        assert not [e for e in logs if e["event"] in ("log.index_rebuilt", "log_segment.invalid_messages")]
        seg = b.state.replicas.get("t", 0).active
        assert (seg.index, seg.next_offset, seg.size, seg.max_ts, seg.max_ts_offset) == want
        assert not (d / "00000000000000000000.index").exists()  # loaded, then deleted: a crash now walks it all
        assert before[1] == 60 and offsets_for_times(b.bootstrap_servers, stamps) == before
        assert before[0][-1] is None and before[0][0] == 0  # (nothing at or after T0 + 500)
        c = KafkaConsumer(bootstrap_servers=b.bootstrap_servers, auto_offset_reset="earliest",
                          consumer_timeout_ms=5000)
        tp = TopicPartition("t", 0)
        c.assign([tp])
        got = []
        for m in c:
            got.append((m.offset, m.timestamp))
            if len(got) == 60:
                break
        c.close()
        assert got == list(enumerate(TS))
        assert produce(b.bootstrap_servers, 2, start=60) == [60, 61]
    finally:
        b.stop()
