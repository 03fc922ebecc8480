"""Incremental fetch sessions (KIP-227) with real clients: the Java consumer and kafka-python use them, librdkafka
(confluent-kafka) does not. Each reads everything exactly once while records keep arriving, and the broker's
own counters say which kind of fetches it served."""
from __future__ import annotations

import json
import subprocess
import threading
import time

import pytest
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from clients.drivers import java_argv, need
from helpers import wait_until
from kafkite.testing.cluster import KafkiteCluster
from kafkite.testing.wire_client import WireClient


def batch(n):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    now = int(time.time() * 1000)
    for i in range(n):
        b.append(i, timestamp=now, key=b"k", value=b"v" * 10, headers=[])
    return bytes(b.build())


def produce(w, topic, records, partition=0):
    T = ProduceRequest.TopicProduceData
    req = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=10_000, topic_data=[
        T(name=topic, partition_data=[T.PartitionProduceData(index=partition, records=records)])])
    return w.request(req, 9).responses[0].partition_responses[0]


def create(w, name, partitions, rf=1):
    CT = CreateTopicsRequest.CreatableTopic
    req = CreateTopicsRequest(topics=[CT(name=name, num_partitions=partitions, replication_factor=rf, assignments=[],
                                         configs=[])], timeout_ms=10_000)
    assert w.request(req, 7).topics[0].error_code == 0


def produce_wave(bootstrap_of, topic, partitions, per_partition, pause=0.0):
    """`per_partition` records to each partition, one batch a partition, to its leader (bootstrap_of(p))."""
    conns: dict[str, WireClient] = {}
    try:
        for p in range(partitions):
            bs = bootstrap_of(p)
            w = conns.get(bs) or conns.setdefault(bs, WireClient.connect(bs))
            assert produce(w, topic, batch(per_partition), partition=p).error_code == 0
            if pause:
                time.sleep(pause)
    finally:
        for w in conns.values():
            w.close()


def start_java_consumer(bs, topic, expected, timeout_ms=90_000):
    need("java")
    return subprocess.Popen(java_argv("consume-assign", bs, topic, str(expected), "--timeout-ms", str(timeout_ms)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def java_result(proc, timeout=120):
    out, err = proc.communicate(timeout=timeout)
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert lines and "consumed" in lines[-1], f"java consumer: {out[-2000:]} {err[-2000:]}"
    return [(r["p"], r["o"]) for r in lines if "o" in r], lines[-1]


def assert_exactly_once(got, partitions, per_partition):
    assert len(got) == len(set(got)), "a record was read twice"
    assert set(got) == {(p, o) for p in range(partitions) for o in range(per_partition)}


@pytest.mark.usefixtures("java_client")
def test_java_consumer_reads_many_partitions_exactly_once_over_incremental_fetches(broker):
    parts, first, second = 200, 3, 2
    bs = broker.bootstrap_servers
    with WireClient.connect(bs) as w:
        create(w, "js-many", parts)
    produce_wave(lambda p: bs, "js-many", parts, first)
    stats = broker.broker.fetch_sessions.stats
    proc = start_java_consumer(bs, "js-many", parts * (first + second))
    try:
        # records arrive while the consumer reads: some partitions at a time, between its fetches
        wait_until(lambda: stats["incremental"] >= 3, timeout=60, what="incremental fetches")
        produce_wave(lambda p: bs, "js-many", parts, second, pause=0.002)
        got, summary = java_result(proc)
    finally:
        proc.kill()
    assert summary["timed_out"] is False
    assert_exactly_once(got, parts, first + second)
    assert stats["created"] >= 1 and stats["incremental"] >= 5
    assert stats["FETCH_SESSION_ID_NOT_FOUND"] == 0 and stats["INVALID_FETCH_SESSION_EPOCH"] == 0


def test_java_consumer_not_stuck_when_leaders_move_under_its_sessions():
    parts, first, second = 12, 4, 3
    with KafkiteCluster(brokers=3) as c:
        with WireClient.connect(c.bootstrap_of(1)) as w:
            create(w, "js-move", parts, rf=3)
        wait_until(lambda: all(len(c.isr("js-move", p)) == 3 for p in range(parts)), what="full ISRs")
        produce_wave(lambda p: c.bootstrap_of(c.leader("js-move", p)), "js-move", parts, first)
        proc = start_java_consumer(c.bootstrap_servers, "js-move", parts * (first + second))
        try:
            def incremental():
                return sum(b.fetch_sessions.stats["incremental"] for b in c.brokers.values())
            wait_until(lambda: incremental() >= 3, timeout=60, what="incremental fetches")
            for p in range(parts):  # every leader moves while the sessions hold its partitions
                old = c.leader("js-move", p)
                c.move_leader("js-move", p, old % 3 + 1)
            produce_wave(lambda p: c.bootstrap_of(c.leader("js-move", p)), "js-move", parts, second)
            got, summary = java_result(proc)
        finally:
            proc.kill()
        # the moved partitions' errors reached the consumer inside incremental responses
        errors = sum(b.fetch_sessions.stats["incremental_partition_errors"] for b in c.brokers.values())
    assert summary["timed_out"] is False
    assert_exactly_once(got, parts, first + second)
    assert errors > 0


def _kp_consumer(bs, **kw):
    from kafka import KafkaConsumer
    return KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, group_id=None, auto_offset_reset="earliest",
                         fetch_max_wait_ms=200, **kw)


def _poll_until(consumer, want, timeout=60.0):
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        for recs in consumer.poll(timeout_ms=200).values():
            got += [(r.topic, r.partition, r.offset) for r in recs]
    return got


def test_kafka_python_uses_sessions_and_survives_a_topic_deleted_under_them(broker):
    from kafka import TopicPartition
    bs = broker.bootstrap_servers
    with WireClient.connect(bs) as w:
        create(w, "kp-a", 20)
        create(w, "kp-b", 2)
        for p in range(20):
            produce(w, "kp-a", batch(2), partition=p)
        for p in range(2):
            produce(w, "kp-b", batch(2), partition=p)
    stats = broker.broker.fetch_sessions.stats
    consumer = _kp_consumer(bs)
    try:
        consumer.assign([TopicPartition("kp-a", p) for p in range(20)] + [TopicPartition("kp-b", p) for p in range(2)])
        got = _poll_until(consumer, 44)
        assert len(got) == 44 and len(set(got)) == 44
        deadline = time.monotonic() + 30  # kafka-python fetches inside poll()
        while stats["incremental"] < 3 and time.monotonic() < deadline:
            assert not consumer.poll(timeout_ms=100)
        assert stats["incremental"] >= 3, dict(stats)
        # the topic goes while the session holds its partitions: the errors come in incremental responses, and
        # the other partitions go on
        with WireClient.connect(bs) as w:
            from kafka.protocol.admin import DeleteTopicsRequest
            assert w.request(DeleteTopicsRequest(topic_names=["kp-b"], timeout_ms=5000), 4).responses[0].error_code == 0
            for p in range(20):
                produce(w, "kp-a", batch(1), partition=p)
        more = _poll_until(consumer, 20)
    finally:
        consumer.close()
    assert sorted(more) == [("kp-a", p, 2) for p in range(20)]
    assert stats["created"] >= 1 and stats["incremental_partition_errors"] > 0


def test_confluent_kafka_fetches_without_sessions(broker):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    parts = 50
    bs = broker.bootstrap_servers
    with WireClient.connect(bs) as w:
        create(w, "ck-many", parts)
    produce_wave(lambda p: bs, "ck-many", parts, 2)
    stats = broker.broker.fetch_sessions.stats
    c = Consumer({"bootstrap.servers": bs, "group.id": "unused-assign", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 100})
    got = []
    try:
        c.assign([TopicPartition("ck-many", p, OFFSET_BEGINNING) for p in range(parts)])
        t = threading.Thread(target=produce_wave, args=(lambda p: bs, "ck-many", parts, 1, 0.002))
        t.start()
        deadline = time.monotonic() + 60
        while len(got) < parts * 3 and time.monotonic() < deadline:
            for m in c.consume(1000, timeout=0.5):
                assert not m.error(), m.error()
                got.append((m.partition(), m.offset()))
        t.join(30)
    finally:
        c.close()
    assert_exactly_once(got, parts, 3)
    # librdkafka sends no session: every fetch full and sessionless (epoch -1)
    assert stats["sessionless"] > 0 and stats["created"] == 0 and stats["incremental"] == 0


@pytest.mark.parametrize("slots", ["0"])
def test_java_consumer_with_sessions_turned_off(broker_factory, slots):
    b = broker_factory(overrides={"max.incremental.fetch.session.cache.slots": slots})
    bs = b.bootstrap_servers
    with WireClient.connect(bs) as w:
        create(w, "js-off", 20)
    produce_wave(lambda p: bs, "js-off", 20, 2)
    proc = start_java_consumer(bs, "js-off", 40)
    try:
        got, summary = java_result(proc)
    finally:
        proc.kill()
    assert summary["timed_out"] is False
    assert_exactly_once(got, 20, 2)
    stats = b.broker.fetch_sessions.stats
    assert stats["not_created"] >= 1 and stats["incremental"] == 0
