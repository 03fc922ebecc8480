"""Spark's own Kafka source and sink against Kafkite (needs KAFKITE_SPARK_JARS: the connector jars)."""
from __future__ import annotations

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed")

from pyspark.sql import functions as F  # noqa: E402


def create(bs, *names, partitions=2):
    from kafka.admin import KafkaAdminClient, NewTopic
    a = KafkaAdminClient(bootstrap_servers=bs)
    a.create_topics([NewTopic(n, partitions, 1) for n in names])
    a.close()


def write_rows(spark, bs, topic, start, n):
    df = spark.range(start, start + n).select(
        F.col("id").cast("string").alias("key"), F.concat(F.lit("v-"), F.col("id").cast("string")).alias("value"),
        F.array(F.struct(F.lit("h").alias("key"), F.col("id").cast("string").cast("binary").alias("value")))
        .alias("headers"))
    df.write.format("kafka").option("kafka.bootstrap.servers", bs).option("topic", topic) \
        .option("includeHeaders", "true").save()


def read_batch(spark, bs, topic, **opts):
    r = spark.read.format("kafka").option("kafka.bootstrap.servers", bs).option("subscribe", topic)
    for k, v in {"startingOffsets": "earliest", "endingOffsets": "latest", **opts}.items():
        r = r.option(k, v)
    return r.load()


def test_sink_then_batch_read(spark_kafka, broker):
    bs = broker.bootstrap_servers
    create(bs, "spark-in")
    write_rows(spark_kafka, bs, "spark-in", 0, 1000)
    rows = read_batch(spark_kafka, bs, "spark-in", includeHeaders="true").collect()
    assert len(rows) == 1000
    assert sorted(int(r.key) for r in rows) == list(range(1000))
    assert all(r.value == b"v-" + r.key for r in rows)
    assert all(r.headers[0].value == r.key for r in rows)


def test_streaming_available_now_copies_only_new_rows(spark_kafka, broker, tmp_path):
    bs = broker.bootstrap_servers
    create(bs, "stream-src", "stream-dst")
    write_rows(spark_kafka, bs, "stream-src", 0, 300)

    def run_once():
        src = (spark_kafka.readStream.format("kafka").option("kafka.bootstrap.servers", bs)
               .option("subscribe", "stream-src").option("startingOffsets", "earliest").load())
        q = (src.select("key", "value").writeStream.format("kafka").option("kafka.bootstrap.servers", bs)
             .option("topic", "stream-dst").option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
        q.awaitTermination(120)
        assert q.exception() is None
    run_once()
    assert read_batch(spark_kafka, bs, "stream-dst").count() == 300
    write_rows(spark_kafka, bs, "stream-src", 300, 200)
    run_once()
    rows = read_batch(spark_kafka, bs, "stream-dst").collect()
    assert len(rows) == 500  # the second run processed only the 200 new rows
    assert sorted(int(r.key) for r in rows) == list(range(500))


def test_starting_timestamp(spark_kafka, broker):
    from kafka import KafkaProducer
    bs = broker.bootstrap_servers
    create(bs, "spark-ts", partitions=1)
    p = KafkaProducer(bootstrap_servers=bs)
    base = 1_700_000_000_000
    for i in range(10):
        p.send("spark-ts", value=b"%d" % i, timestamp_ms=base + i * 1000, partition=0)
    p.flush()
    p.close()
    rows = read_batch(spark_kafka, bs, "spark-ts", startingTimestamp=str(base + 4500)).collect()
    assert [int(r.value) for r in rows] == [5, 6, 7, 8, 9]


def test_streaming_with_group_id_and_headers(spark_kafka, broker, tmp_path):
    bs = broker.bootstrap_servers
    create(bs, "spark-grp")
    write_rows(spark_kafka, bs, "spark-grp", 0, 100)
    src = (spark_kafka.readStream.format("kafka").option("kafka.bootstrap.servers", bs)
           .option("subscribe", "spark-grp").option("startingOffsets", "earliest")
           .option("kafka.group.id", "spark-stream-group").option("includeHeaders", "true").load())
    q = (src.select("key", "headers").writeStream.format("memory").queryName("grp_out")
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    q.awaitTermination(120)
    rows = spark_kafka.sql("select * from grp_out").collect()
    assert len(rows) == 100
    assert all(r.headers[0].key == "h" and r.headers[0].value == r.key for r in rows)


def independent_lag(bs, groups):
    """Lag from OffsetFetch (KafkaAdminClient.list_group_offsets) and ListOffsets (KafkaConsumer.end_offsets)."""
    from kafka import KafkaConsumer
    from kafka.admin import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=bs)
    kc = KafkaConsumer(bootstrap_servers=bs)
    try:
        out = {}
        for g in groups:
            fetched = admin.list_group_offsets(g)[g]
            ends = kc.end_offsets(list(fetched))
            for tp, om in fetched.items():
                out[(g, tp.topic, tp.partition)] = (om.offset, ends[tp], ends[tp] - om.offset)
        return out
    finally:
        kc.close()
        admin.close()


def commit_known_positions(bs):
    """Three groups with known positions on a 3-partition topic of 30 records per partition."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    create(bs, "lag-e2e", partitions=3)
    p = Producer({"bootstrap.servers": bs})
    for i in range(90):
        p.produce("lag-e2e", value=b"x", partition=i % 3)
    p.flush()
    known = {"ga": [5, 10, 30], "gb": [0, 29, 1], "gc": [30, 30, 30]}
    for g, offs in known.items():
        c = Consumer({"bootstrap.servers": bs, "group.id": g})
        c.commit(offsets=[TopicPartition("lag-e2e", i, max(o - 2, 0)) for i, o in enumerate(offs)],
                 asynchronous=False)
        c.commit(offsets=[TopicPartition("lag-e2e", i, o) for i, o in enumerate(offs)], asynchronous=False)
        c.close()
    return known


def test_lag_pipeline_end_to_end(spark_kafka, broker, tmp_path):
    from kafkite.spark.lag import LAG_COLUMNS, run_lag
    bs = broker.bootstrap_servers
    known = commit_known_positions(bs)
    df = run_lag(spark_kafka, bs, output=str(tmp_path / "lag"))
    got = {(r.group, r.topic, r.partition): (r.committed_offset, r.end_offset, r.lag) for r in df.collect()}
    assert got == independent_lag(bs, known)
    assert {(g, p): v[2] for (g, _, p), v in got.items()} == \
        {(g, i): 30 - o for g, offs in known.items() for i, o in enumerate(offs)}
    written = spark_kafka.read.parquet(str(tmp_path / "lag"))
    assert tuple(written.columns) == LAG_COLUMNS and written.count() == 9


def test_lag_on_a_cluster_without_commits(spark_kafka, broker):
    from kafkite.spark.lag import run_lag
    assert run_lag(spark_kafka, broker.bootstrap_servers).collect() == []


def test_cli_lag_and_export(spark_kafka, broker, tmp_path, capsys):
    """`kafkite spark lag` / `kafkite spark export` in-process (they reuse the running session)."""
    from kafka import KafkaProducer
    from kafkite.cli import main
    bs = broker.bootstrap_servers
    known = commit_known_positions(bs)
    assert main(["spark", "lag", "--bootstrap-server", bs]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "COMMITTED-OFFSET", "END-OFFSET", "LAG"]
    table = {(w[0], int(w[2])): (int(w[3]), int(w[4]), int(w[5])) for w in (ln.split() for ln in lines[1:])}
    assert table == {(g, i): (o, 30, 30 - o) for g, offs in known.items() for i, o in enumerate(offs)}

    assert main(["spark", "lag", "--bootstrap-servers", bs, "--output", str(tmp_path / "lag")]) == 0
    assert "wrote lag for 9 partitions" in capsys.readouterr().out

    p = KafkaProducer(bootstrap_servers=bs)
    for i in range(7):
        p.send("cli-export", key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"x")], timestamp_ms=1000 + i)
    p.flush()
    p.close()
    assert main(["spark", "export", "--bootstrap-servers", bs, "--topic", "cli-export",
                 "--output", str(tmp_path / "exp"), "--starting-timestamp", "1002", "--ending-timestamp", "1005"]) == 0
    assert "exported 3 records" in capsys.readouterr().out
    rows = spark_kafka.read.parquet(str(tmp_path / "exp")).orderBy("offset").collect()
    assert [(r.key, r.offset, r.headers[0].key) for r in rows] == [(b"k2", 2, "h"), (b"k3", 3, "h"), (b"k4", 4, "h")]


def test_export_to_parquet_with_timestamps(spark_kafka, broker, tmp_path):
    from kafka import KafkaProducer
    from kafkite.spark.export import export
    bs = broker.bootstrap_servers
    create(bs, "spark-export", partitions=1)
    p = KafkaProducer(bootstrap_servers=bs)
    base = 1_700_000_000_000
    for i in range(20):
        p.send("spark-export", key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"%d" % i)],
               timestamp_ms=base + i * 1000, partition=0)
    p.flush()
    p.close()
    assert export(spark_kafka, bs, "spark-export", str(tmp_path / "all")) == 20
    rows = spark_kafka.read.parquet(str(tmp_path / "all")).orderBy("offset").collect()
    assert [r.offset for r in rows] == list(range(20))
    assert rows[3].key == b"k3" and rows[3].value == b"v3" and rows[3].headers[0].value == b"3"
    assert set(rows[0].asDict()) == {"key", "value", "headers", "partition", "offset", "timestamp"}
    n = export(spark_kafka, bs, "spark-export", str(tmp_path / "window"), starting_timestamp=base + 5000,
               ending_timestamp=base + 10000)
    assert n == 5  # offsets 5..9
    # past the last record: an empty export, not a failed job; an end past the last record reads to the end
    assert export(spark_kafka, bs, "spark-export", str(tmp_path / "none"), starting_timestamp=base + 10**9) == 0
    assert export(spark_kafka, bs, "spark-export", str(tmp_path / "tail"), starting_timestamp=base + 15000,
                  ending_timestamp=base + 10**9) == 5


def test_batch_read_committed_returns_only_committed_rows(spark_kafka, broker):
    """kafka.isolation.level=read_committed: aborted rows are skipped, and "latest" is the last stable offset, so
    the rows of a transaction still open are not read either."""
    from kafka import KafkaProducer
    bs = broker.bootstrap_servers
    create(bs, "spark-tx")
    p = KafkaProducer(bootstrap_servers=bs, transactional_id="spark-tx")
    p.init_transactions()
    want = []
    for t, fate in enumerate(["commit", "abort", "commit", "abort", "commit", "open"]):
        p.begin_transaction()
        vals = [b"%s-%d-%d" % (fate.encode(), t, i) for i in range(20)]
        for i, v in enumerate(vals):
            p.send("spark-tx", value=v, partition=i % 2)
        p.flush()
        if fate == "commit":
            p.commit_transaction()
            want += vals
        elif fate == "abort":
            p.abort_transaction()
    try:
        committed = read_batch(spark_kafka, bs, "spark-tx", **{"kafka.isolation.level": "read_committed"}).collect()
        assert sorted(r.value for r in committed) == sorted(want)
        everything = read_batch(spark_kafka, bs, "spark-tx").collect()
        assert len(everything) == 120  # read_uncommitted: the aborted and the open rows too
    finally:
        p.close(timeout=5)
