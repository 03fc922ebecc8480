"""Idempotent producers whose connection is cut after the broker appended (so they retry): exactly one copy."""
from __future__ import annotations

import pytest

from clients import drivers
from kafkite.testing.cluster import KafkiteCluster


def unique_values(bs, topic, n):
    """The topic's records (its 3 partitions), read back until n came (60 s at most), and its log holds exactly n
    records: a duplicate would show there (no fixed 6 s read for n + 10, which a loaded machine could end short)."""
    from confluent_kafka import Consumer, TopicPartition
    from helpers import ck_consume_all
    got = ck_consume_all(bs, topic, n, timeout=60)
    c = Consumer({"bootstrap.servers": bs, "group.id": "unused-watermarks"})
    try:
        sizes = [c.get_watermark_offsets(TopicPartition(topic, p), timeout=30) for p in range(3)]
    finally:
        c.close()
    assert sum(high - low for low, high in sizes) == n, sizes
    return got


def create(bs, topic):
    from kafka.admin import KafkaAdminClient, NewTopic
    a = KafkaAdminClient(bootstrap_servers=bs)
    a.create_topics([NewTopic(topic, 3, 1)])
    a.close()


@pytest.mark.usefixtures("java_client")
def test_java_idempotent_producer_with_cut_connections():
    drivers.need("java")
    with KafkiteCluster(brokers=1) as cluster:
        bs = cluster.bootstrap_servers
        create(bs, "idem-java")
        cluster.drop_response("Produce", count=4, skip=3)
        r = drivers.run_java("produce", bs, "idem-java", "20000", "lz4", "true")[0]
        assert r["acked"] == 20000 and r["errors"] == 0
        got = unique_values(bs, "idem-java", 20000)
        values = [g[4] for g in got]
        assert len(values) == 20000 and len(set(values)) == 20000  # every record once, none twice
        # the connection really was cut 4 times
        assert cluster.faults.state()["drops"] == []
        assert sum(r.get("dropped", False) for r in cluster.faults.requests) == 4


def test_confluent_idempotent_producer_with_cut_connections():
    from helpers import ck_produce, make_records
    with KafkiteCluster(brokers=1) as cluster:
        bs = cluster.bootstrap_servers
        create(bs, "idem-ck")
        cluster.drop_response("Produce", count=4, skip=2)
        recs = make_records(20000, prefix="ck")
        delivered = ck_produce(bs, "idem-ck", recs, compression="zstd", extra={"enable.idempotence": True})
        assert len(delivered) == 20000
        got = unique_values(bs, "idem-ck", 20000)
        assert sorted(g[4] for g in got) == sorted(v for _, v, _ in recs)
        assert cluster.faults.state()["drops"] == []
        assert sum(r.get("dropped", False) for r in cluster.faults.requests) == 4
