"""The lag pipeline's decoding and computation on a local SparkSession, with records produced to Kafkite
and read back with kafka-python (no Spark connector needed)."""
from __future__ import annotations

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed")

from kafkite.spark.lag import (END_OFFSETS_SCHEMA, RAW_SCHEMA, compute_lag, decode_offsets_df,  # noqa: E402
                               end_offsets, latest_commits)


def read_offsets_topic(bs):
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False)
    tps = [TopicPartition("__consumer_offsets", p) for p in c.partitions_for_topic("__consumer_offsets")]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    ends = c.end_offsets(tps)
    rows = []
    while any(c.position(tp) < ends[tp] for tp in tps):
        for tp, msgs in c.poll(timeout_ms=500).items():
            rows.extend((m.key, m.value, m.partition, m.offset) for m in msgs)
    c.close()
    return rows


def test_lag_matches_list_offsets_and_offset_fetch(spark_local, broker):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic
    bs = broker.bootstrap_servers
    admin = KafkaAdminClient(bootstrap_servers=bs)
    admin.create_topics([NewTopic("lag-a", 3, 1), NewTopic("lag-b", 2, 1)])
    p = Producer({"bootstrap.servers": bs})
    for i in range(300):
        p.produce("lag-a", value=b"x", partition=i % 3)
    for i in range(100):
        p.produce("lag-b", value=b"y", partition=i % 2)
    p.flush()
    positions = {
        "g1": {("lag-a", 0): 10, ("lag-a", 1): 20, ("lag-a", 2): 100},
        "g2": {("lag-a", 0): 5, ("lag-b", 0): 50, ("lag-b", 1): 1},
        "g3": {("lag-b", 1): 49},
    }
    for group, pos in positions.items():
        c = Consumer({"bootstrap.servers": bs, "group.id": group})
        c.commit(offsets=[TopicPartition(t, pt, o - 3) for (t, pt), o in pos.items()], asynchronous=False)
        c.commit(offsets=[TopicPartition(t, pt, o) for (t, pt), o in pos.items()], asynchronous=False)  # newer wins
        c.close()
    # g3 also had a partition whose offsets were deleted: a tombstone hides it
    c = Consumer({"bootstrap.servers": bs, "group.id": "g3"})
    c.commit(offsets=[TopicPartition("lag-a", 0, 7)], asynchronous=False)
    c.close()
    admin.delete_group_offsets("g3", [__import__("kafka").TopicPartition("lag-a", 0)])

    rows = read_offsets_topic(bs)
    raw = spark_local.createDataFrame(rows, RAW_SCHEMA)
    commits = latest_commits(decode_offsets_df(raw))
    parts = [(r["topic"], r["partition"]) for r in commits.select("topic", "partition").distinct().collect()]
    ends_df = spark_local.createDataFrame(end_offsets(bs, parts), END_OFFSETS_SCHEMA)
    got = {(r["group"], r["topic"], r["partition"]): (r["committed_offset"], r["end_offset"], r["lag"])
           for r in compute_lag(commits, ends_df).collect()}

    # independently: OffsetFetch per group, ListOffsets per partition
    from kafka import KafkaConsumer
    kc = KafkaConsumer(bootstrap_servers=bs)
    expected = {}
    for group in positions:
        fetched = admin.list_group_offsets(group)[group]
        for tp, om in fetched.items():
            end = kc.end_offsets([tp])[tp]
            expected[(group, tp.topic, tp.partition)] = (om.offset, end, end - om.offset)
    kc.close()
    admin.close()
    assert got == expected
    assert got[("g1", "lag-a", 0)] == (10, 100, 90)
    assert ("g3", "lag-a", 0) not in got
