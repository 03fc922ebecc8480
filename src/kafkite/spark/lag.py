"""Consumer lag from __consumer_offsets, computed in Spark.

The pipeline reads `__consumer_offsets` with Spark's Kafka source, decodes Kafka's
binary offset-commit key/value formats with Spark SQL functions (substring, hex,
conv: no per-record Python), keeps the latest commit per (group, topic, partition)
honouring tombstones, joins each partition's end offset and writes lag per group
and partition.

Formats (Kafka's OffsetCommitKey / OffsetCommitValue, big-endian):

    key   = version int16 (0/1: offset commit; 2: group metadata; 3+: other coordinator
            records) | group string | topic string | partition int32
            (string = int16 length + UTF-8)
    value = version int16 (0-4) | offset int64 | ...   (v3+: leader epoch int32 next;
            then metadata, commit timestamp, v1 only: expire timestamp; v4 is flexible)

Every value version starts with the offset right after the version, so the pipeline
reads only those 10 bytes. A null value is a tombstone (offsets deleted or expired).
Rows of other key versions, and values of versions this code does not know, are
dropped rather than guessed at.

Reading the topic: Spark's default (admin-based) offset reader filters internal topics
out of every strategy (`retrieveAllPartitions` drops `isInternal` topics), against Apache
Kafka as against Kafkite, so this read switches on the consumer-based reader
(`spark.sql.streaming.kafka.useDeprecatedOffsetFetching`) and `assign`s every partition
of `__consumer_offsets` (assign, not subscribe: no consumer-group join, and no
auto-creation of the topic when no group ever committed).

End offsets: one ListOffsets call (kafka-python `KafkaConsumer.end_offsets`) for the
partitions that have commits, made into a small DataFrame and joined. Lag is
`end_offset - committed_offset`, floored at 0 like `kafkite groups describe`; it is null
when the partition's end offset is unknown (e.g. the topic was deleted).
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

OFFSETS_TOPIC = "__consumer_offsets"
OFFSET_COMMIT_KEY_VERSIONS = (0, 1)
OFFSET_COMMIT_VALUE_VERSIONS = (0, 1, 2, 3, 4)

RAW_SCHEMA = T.StructType([T.StructField("key", T.BinaryType()), T.StructField("value", T.BinaryType()),
                           T.StructField("partition", T.IntegerType()), T.StructField("offset", T.LongType())])
LAG_COLUMNS = ("group", "topic", "partition", "committed_offset", "end_offset", "lag")


def be_int(binary: Column, pos: Column | int, length: int) -> Column:
    """Kafka's signed big-endian int16/int32/int64 (`length` 2, 4 or 8 bytes) at 1-based `pos` of a
    binary column, as a long; null when the bytes are missing.

    hex -> conv(..., 16, -10) reads the digits as a signed 64-bit number: exact for int64 (-1 is
    FFFFFFFFFFFFFFFF); shorter fields come out unsigned and get their sign applied here."""
    pos = pos if isinstance(pos, Column) else F.lit(pos)
    v = F.conv(F.hex(F.substring(binary, pos, F.lit(length))), 16, -10).cast("long")
    if length == 8:
        return v
    half, full = 1 << (8 * length - 1), 1 << (8 * length)
    return F.when(v >= half, v - F.lit(full)).otherwise(v)


def _utf8(binary: Column, pos: Column, length: Column) -> Column:
    return F.decode(F.substring(binary, pos, length), "UTF-8")


def decode_offsets_df(df: DataFrame) -> DataFrame:
    """Rows of __consumer_offsets (key, value, partition, offset) -> offset commits and tombstones.

    Output: group, topic, partition, committed_offset (null for a tombstone), log_partition, log_offset.
    Group-metadata records (key version 2) and unknown key or value versions are left out.
    """
    key, value = F.col("key"), F.col("value")
    d = df.select(key, value, F.col("partition").alias("log_partition"), F.col("offset").alias("log_offset"))
    d = d.where(be_int(key, 1, 2).isin(*OFFSET_COMMIT_KEY_VERSIONS))
    d = d.where(value.isNull() | be_int(value, 1, 2).isin(*OFFSET_COMMIT_VALUE_VERSIONS))
    glen = be_int(key, 3, 2)
    d = d.withColumn("_glen", glen.cast("int"))
    d = d.withColumn("_tpos", F.col("_glen") + 5)  # topic length field: after version(2) + len(2) + group
    d = d.withColumn("_tlen", be_int(key, F.col("_tpos"), 2).cast("int"))
    d = d.select(
        _utf8(key, F.lit(5), F.col("_glen")).alias("group"),
        _utf8(key, F.col("_tpos") + 2, F.col("_tlen")).alias("topic"),
        be_int(key, F.col("_tpos") + 2 + F.col("_tlen"), 4).cast("int").alias("partition"),
        F.when(value.isNull(), F.lit(None).cast("long")).otherwise(be_int(value, 3, 8)).alias("committed_offset"),
        "log_partition", "log_offset")
    return d


def latest_commits(decoded: DataFrame) -> DataFrame:
    """The newest record per (group, topic, partition); groups/partitions whose newest is a tombstone drop out.

    "Newest" is the highest log offset: a group's records all live in one __consumer_offsets partition
    (chosen by the group id's hash), so its log order is its commit order."""
    w = Window.partitionBy("group", "topic", "partition").orderBy(F.col("log_partition").desc(),
                                                                 F.col("log_offset").desc())
    latest = decoded.withColumn("rn", F.row_number().over(w)).where("rn = 1").drop("rn")
    return latest.where(F.col("committed_offset").isNotNull()).select("group", "topic", "partition",
                                                                      "committed_offset")


END_OFFSETS_SCHEMA = T.StructType([T.StructField("topic", T.StringType()), T.StructField("partition", T.IntegerType()),
                                   T.StructField("end_offset", T.LongType())])


def compute_lag(commits: DataFrame, end_offsets: DataFrame) -> DataFrame:
    """Per group and partition: committed_offset, end_offset and lag = end - committed (floored at 0;
    null when the end offset is unknown). `end_offsets` has topic, partition, end_offset."""
    j = commits.join(end_offsets, on=["topic", "partition"], how="left")
    # greatest() skips nulls, so an unknown end offset is kept null explicitly
    lag = F.when(F.col("end_offset").isNotNull(), F.greatest(F.col("end_offset") - F.col("committed_offset"),
                                                             F.lit(0)))
    return (j.withColumn("lag", lag)
             .select(*LAG_COLUMNS)
             .orderBy("group", "topic", "partition"))


def end_offsets(bootstrap_servers: str, partitions: list[tuple[str, int]]) -> list[tuple[str, int, int]]:
    """(topic, partition, log end offset) by one ListOffsets (latest) round, for the partitions that exist.

    Partitions of topics that no longer exist are left out (their lag comes out null) instead of
    waiting for metadata that never arrives; the metadata lookup never auto-creates a topic."""
    from kafka import KafkaConsumer, TopicPartition
    if not partitions:
        return []
    c = KafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False,
                      allow_auto_create_topics=False, request_timeout_ms=30000)
    try:
        known = {t: c.partitions_for_topic(t) for t in {t for t, _ in partitions}}
        tps = [TopicPartition(t, p) for t, p in partitions if p in known[t]]
        res = c.end_offsets(tps) if tps else {}
        return sorted((tp.topic, tp.partition, int(o)) for tp, o in res.items())
    finally:
        c.close()


def offsets_topic_partitions(bootstrap_servers: str) -> list[int]:
    from kafka import KafkaConsumer
    c = KafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False)
    try:
        return sorted(c.partitions_for_topic(OFFSETS_TOPIC) or [])
    finally:
        c.close()


def read_offsets_topic(spark: SparkSession, bootstrap_servers: str) -> DataFrame:
    """__consumer_offsets as (key, value, partition, offset) rows with Spark's Kafka source, earliest..latest.

    Spark's default (admin-based) offset reader leaves internal topics out, against Apache Kafka as
    against Kafkite; the consumer-based reader (`useDeprecatedOffsetFetching`) reads them. We switch it on
    for this read only (restored afterwards), and `assign` every partition."""
    import json
    parts = offsets_topic_partitions(bootstrap_servers)
    if not parts:  # no group ever committed: nothing to read
        return spark.createDataFrame([], RAW_SCHEMA)
    key = "spark.sql.streaming.kafka.useDeprecatedOffsetFetching"
    before = spark.conf.get(key, "false")
    spark.conf.set(key, "true")
    try:
        df = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap_servers)
              .option("assign", json.dumps({OFFSETS_TOPIC: parts})).option("startingOffsets", "earliest")
              .option("endingOffsets", "latest").load())
        # materialise the offsets range now, while the consumer-based reader is on
        return df.select("key", "value", "partition", "offset").localCheckpoint(eager=True)
    finally:
        spark.conf.set(key, before)


def lag_from_rows(spark: SparkSession, raw: DataFrame, bootstrap_servers: str) -> DataFrame:
    """The pipeline after the read: decode, keep the latest commits, join end offsets from the cluster."""
    commits = latest_commits(decode_offsets_df(raw)).cache()
    parts = [(r["topic"], r["partition"]) for r in commits.select("topic", "partition").distinct().collect()]
    ends = spark.createDataFrame(end_offsets(bootstrap_servers, parts), END_OFFSETS_SCHEMA)
    return compute_lag(commits, ends)


def run_lag(spark: SparkSession, bootstrap_servers: str, output: str | None = None) -> DataFrame:
    """Lag per group and partition (columns LAG_COLUMNS); also written as Parquet to `output` if given."""
    lag = lag_from_rows(spark, read_offsets_topic(spark, bootstrap_servers), bootstrap_servers)
    if output:
        lag.write.mode("overwrite").parquet(output)
    return lag
