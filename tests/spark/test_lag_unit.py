"""The lag pipeline's decoding and computation on a local SparkSession, with records produced to Kafkite
and read back with kafka-python (no Spark connector needed)."""
from __future__ import annotations

from pyspark.sql import types as T

from kafkite.spark.lag import compute_lag, decode_offsets_df, END_OFFSETS_SCHEMA, latest_commits, end_offsets

RAW = T.StructType([T.StructField("key", T.BinaryType()), T.StructField("value", T.BinaryType()),
                    T.StructField("partition", T.IntegerType()), T.StructField("offset", T.LongType())])


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
    raw = spark_local.createDataFrame(rows, RAW)
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


def test_decode_handles_all_value_versions(spark_local):
    import struct

    def key(g, t, p, version=1):
        g, t = g.encode(), t.encode()
        return struct.pack(">h", version) + struct.pack(">h", len(g)) + g + struct.pack(">h", len(t)) + t + \
            struct.pack(">i", p)

    def value(version, offset):
        body = struct.pack(">q", offset)
        if version == 3:
            body += struct.pack(">i", 4)
        return struct.pack(">h", version) + body + b"\x00\x00" + struct.pack(">q", 0)

    group_md = struct.pack(">h", 2) + struct.pack(">h", 1) + b"g"  # group metadata key: ignored
    rows = [(key("g", "t", 0, 0), value(0, 11), 0, 0), (key("g", "t", 1), value(1, 2**40), 0, 1),
            (key("g", "t", 2), value(3, 7), 0, 2), (key("g", "t", 2), None, 0, 3), (group_md, b"\x00", 0, 4),
            (key("grüppe", "tö", 3), value(3, 5), 1, 0)]
    out = {(r["group"], r["topic"], r["partition"]): r["committed_offset"]
           for r in latest_commits(decode_offsets_df(spark_local.createDataFrame(rows, RAW))).collect()}
    assert out == {("g", "t", 0): 11, ("g", "t", 1): 2**40, ("grüppe", "tö", 3): 5}
