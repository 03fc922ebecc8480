"""Spark's Kafka sink and source over SASL_SSL with SCRAM-SHA-512 on the secured test broker (issue "Security as
Kafka has it": the Spark line of the client matrix), with the `kafka.`-prefixed options SecuredBroker.spark() hands
out; the user is the ordinary alice, so every request is authorized through ACLs. Needs KAFKITE_SPARK_JARS."""
from __future__ import annotations

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed")
pytest.importorskip("trustme", reason="trustme is not installed")

from pyspark.sql import functions as F  # noqa: E402


def test_spark_writes_and_reads_over_sasl_ssl(spark_kafka):
    from kafkite.testing.secured import SecuredBroker
    with SecuredBroker() as sb:
        opts = sb.spark()
        assert opts["kafka.security.protocol"] == "SASL_SSL" and "ScramLoginModule" in opts["kafka.sasl.jaas.config"]
        df = spark_kafka.range(0, 500).select(F.col("id").cast("string").alias("key"),
                                              F.concat(F.lit("v-"), F.col("id").cast("string")).alias("value"))
        df.write.format("kafka").options(**opts).option("topic", "spark-secured").save()
        rows = (spark_kafka.read.format("kafka").options(**opts).option("subscribe", "spark-secured")
                .option("startingOffsets", "earliest").option("endingOffsets", "latest")
                .option("kafka.group.id", "spark-secured-reader").load().collect())
        assert sorted(int(r.key) for r in rows) == list(range(500))
        assert all(r.value == b"v-" + r.key for r in rows)
        # and the Python clients see what Spark wrote, through the SSL listener with alice's certificate
        from kafka import KafkaConsumer, TopicPartition
        c = KafkaConsumer(**sb.kafka_python(listener="SSL"))
        parts = [TopicPartition("spark-secured", p) for p in c.partitions_for_topic("spark-secured")]
        assert sum(c.end_offsets(parts).values()) == 500
        c.close()
