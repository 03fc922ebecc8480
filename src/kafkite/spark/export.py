"""Export a topic to Parquet with Spark's Kafka source (batch): key, value, headers, partition, offset, timestamp."""
from __future__ import annotations


from pyspark.sql import DataFrame, SparkSession


def read_topic(spark: SparkSession, bootstrap_servers: str, topic: str, starting_timestamp: int | None = None,
               ending_timestamp: int | None = None) -> DataFrame:
    r = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap_servers)
         .option("subscribe", topic).option("includeHeaders", "true"))
    r = r.option("startingTimestamp", str(starting_timestamp)) if starting_timestamp is not None \
        else r.option("startingOffsets", "earliest")
    r = r.option("endingTimestamp", str(ending_timestamp)) if ending_timestamp is not None \
        else r.option("endingOffsets", "latest")
    return r.load().select("key", "value", "headers", "partition", "offset", "timestamp")


def export(spark: SparkSession, bootstrap_servers: str, topic: str, output: str, **kw) -> int:
    df = read_topic(spark, bootstrap_servers, topic, **kw)
    df.write.mode("overwrite").parquet(output)
    return spark.read.parquet(output).count()
