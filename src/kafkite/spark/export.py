"""Export a topic to Parquet with Spark's Kafka source (batch): key, value, headers, partition, offset, timestamp.

The range per partition is earliest..latest offset by default. With timestamps it is
[first offset with timestamp >= starting, first offset with timestamp >= ending): Spark asks
the cluster with ListOffsets by timestamp. A starting timestamp past a partition's last record
reads nothing from it (startingOffsetsByTimestampStrategy=latest) instead of failing the job.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

EXPORT_COLUMNS = ("key", "value", "headers", "partition", "offset", "timestamp")


def read_topic(spark: SparkSession, bootstrap_servers: str, topic: str, starting_timestamp: int | None = None,
               ending_timestamp: int | None = None) -> DataFrame:
    r = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap_servers)
         .option("subscribe", topic).option("includeHeaders", "true"))
    if starting_timestamp is not None:
        r = r.option("startingTimestamp", str(starting_timestamp)) \
             .option("startingOffsetsByTimestampStrategy", "latest")
    else:
        r = r.option("startingOffsets", "earliest")
    r = r.option("endingTimestamp", str(ending_timestamp)) if ending_timestamp is not None \
        else r.option("endingOffsets", "latest")
    return r.load().select(*EXPORT_COLUMNS)


def export(spark: SparkSession, bootstrap_servers: str, topic: str, output: str, **kw) -> int:
    """Write the topic's records as Parquet to `output` (overwritten); returns how many were written."""
    df = read_topic(spark, bootstrap_servers, topic, **kw)
    df.write.mode("overwrite").parquet(output)
    return spark.read.parquet(output).count()
