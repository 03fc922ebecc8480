"""Consumer lag from __consumer_offsets, computed in Spark.

The pipeline reads `__consumer_offsets` with Spark's Kafka source, decodes Kafka's
binary offset-commit key/value formats with Spark SQL functions (no per-record
Python), keeps the latest commit per (group, topic, partition) honouring
tombstones, joins each partition's end offset and writes lag per group and
partition.

Formats (Kafka's, big-endian): key = version int16 (0/1: offset commit; 2: group
metadata, ignored here), group string (int16 length + UTF-8), topic string,
partition int32. Value = version int16, then offset int64 (every version 0-4
starts with it); a null value is a tombstone (offsets deleted or expired).

Spark reads the topic with `assign` (all its partitions) and its consumer-based offset
reader: the default admin-based one leaves internal topics out. The end offsets are taken with one ListOffsets call (kafka-python) for the
partitions that have commits: a handful of rows, joined as a small DataFrame.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

OFFSETS_TOPIC = "__consumer_offsets"


def _int(col_bin, pos, length):
    """Big-endian unsigned integer of `length` bytes at 1-based `pos` (a Column expression)."""
    return F.conv(F.hex(F.expr(f"substring({col_bin}, {pos}, {length})")), 16, 10).cast("long")


def decode_offsets_df(df: DataFrame) -> DataFrame:
    """Rows of __consumer_offsets (key, value, partition, offset) -> offset commits and tombstones.

    Output: group, topic, partition, committed_offset (null for a tombstone), log_partition, log_offset.
    """
    k = df.select(F.col("key"), F.col("value"), F.col("partition").alias("log_partition"),
                  F.col("offset").alias("log_offset"))
    k = k.withColumn("key_version", _int("key", 1, 2)).where(F.col("key_version").isin(0, 1))
    k = k.withColumn("glen", _int("key", 3, 2))
    k = k.withColumn("group", F.expr("decode(substring(key, 5, glen), 'UTF-8')"))
    k = k.withColumn("tlen", F.expr("cast(conv(hex(substring(key, 5 + glen, 2)), 16, 10) as int)"))
    k = k.withColumn("topic", F.expr("decode(substring(key, 7 + glen, tlen), 'UTF-8')"))
    k = k.withColumn("partition", F.expr("cast(conv(hex(substring(key, 7 + glen + tlen, 4)), 16, 10) as int)"))
    k = k.withColumn("committed_offset", F.when(F.col("value").isNull(), F.lit(None).cast("long"))
                     .otherwise(_int("value", 3, 8)))
    return k.select("group", "topic", "partition", "committed_offset", "log_partition", "log_offset")


def latest_commits(decoded: DataFrame) -> DataFrame:
    """The newest record per (group, topic, partition); groups/partitions whose newest is a tombstone drop out."""
    w = Window.partitionBy("group", "topic", "partition").orderBy(F.col("log_partition").desc(),
                                                                 F.col("log_offset").desc())
    latest = decoded.withColumn("rn", F.row_number().over(w)).where("rn = 1").drop("rn")
    return latest.where(F.col("committed_offset").isNotNull()).select("group", "topic", "partition",
                                                                      "committed_offset")


END_OFFSETS_SCHEMA = T.StructType([T.StructField("topic", T.StringType()), T.StructField("partition", T.IntegerType()),
                                   T.StructField("end_offset", T.LongType())])


def compute_lag(commits: DataFrame, end_offsets: DataFrame) -> DataFrame:
    """lag = end offset - committed offset, per group and partition."""
    j = commits.join(end_offsets, on=["topic", "partition"], how="left")
    return (j.withColumn("lag", F.greatest(F.col("end_offset") - F.col("committed_offset"), F.lit(0)))
             .select("group", "topic", "partition", "committed_offset", "end_offset", "lag")
             .orderBy("group", "topic", "partition"))


def end_offsets(bootstrap_servers: str, partitions: list[tuple[str, int]]) -> list[tuple[str, int, int]]:
    from kafka import KafkaConsumer, TopicPartition
    if not partitions:
        return []
    c = KafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False)
    try:
        res = c.end_offsets([TopicPartition(t, p) for t, p in partitions])
        return [(tp.topic, tp.partition, int(o)) for tp, o in res.items()]
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
    """Spark's default (admin-based) offset reader leaves internal topics out, against Apache Kafka as
    against Kafkite; the consumer-based reader (`useDeprecatedOffsetFetching`) reads them. We switch it on
    for this read only, and `assign` every partition."""
    import json
    parts = offsets_topic_partitions(bootstrap_servers)
    if not parts:
        schema = T.StructType([T.StructField("key", T.BinaryType()), T.StructField("value", T.BinaryType()),
                               T.StructField("partition", T.IntegerType()), T.StructField("offset", T.LongType())])
        return spark.createDataFrame([], schema)
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
    commits = latest_commits(decode_offsets_df(raw)).cache()
    parts = [(r["topic"], r["partition"]) for r in commits.select("topic", "partition").distinct().collect()]
    ends = spark.createDataFrame(end_offsets(bootstrap_servers, parts), END_OFFSETS_SCHEMA)
    return compute_lag(commits, ends)


def run_lag(spark: SparkSession, bootstrap_servers: str, output: str | None = None) -> DataFrame:
    lag = lag_from_rows(spark, read_offsets_topic(spark, bootstrap_servers), bootstrap_servers)
    if output:
        lag.write.mode("overwrite").parquet(output)
    return lag
