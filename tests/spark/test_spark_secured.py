"""Spark's Kafka sink and source over SASL_SSL with SCRAM-SHA-512, and over SSL with a client certificate, on the
secured test broker (issue "Security as Kafka has it": the Spark line of the client matrix), with the
`kafka.`-prefixed options SecuredBroker.spark() hands out; the user is the ordinary alice, so every request is
authorized through ACLs. Needs KAFKITE_SPARK_JARS."""
from __future__ import annotations

import pytest

pytest.importorskip("pyspark", reason="pyspark is not installed")
pytest.importorskip("trustme", reason="trustme is not installed")

from pyspark.sql import functions as F  # noqa: E402


@pytest.mark.parametrize("listener", ["SASL_SSL", "SSL"])
def test_spark_writes_and_reads_over_a_secured_listener(spark_kafka, listener):
    from kafkite.testing.secured import SecuredBroker
    with SecuredBroker() as sb:
        opts = sb.spark(listener=listener)
        assert opts["kafka.security.protocol"] == listener
        if listener == "SASL_SSL":
            assert "ScramLoginModule" in opts["kafka.sasl.jaas.config"]
        else:  # alice's client certificate, mapped to User:alice
            assert "kafka.sasl.jaas.config" not in opts and opts.get("kafka.ssl.keystore.type") == "PEM", opts
        # a topic and group of its own: Spark's consumer pool keys its consumers by group and partition
        topic = f"spark-secured-{listener.lower()}"
        df = spark_kafka.range(0, 500).select(F.col("id").cast("string").alias("key"),
                                              F.concat(F.lit("v-"), F.col("id").cast("string")).alias("value"))
        df.write.format("kafka").options(**opts).option("topic", topic).save()
        rows = (spark_kafka.read.format("kafka").options(**opts).option("subscribe", topic)
                .option("startingOffsets", "earliest").option("endingOffsets", "latest")
                .option("kafka.group.id", f"{topic}-reader").load().collect())
        assert sorted(int(r.key) for r in rows) == list(range(500))
        assert all(r.value == b"v-" + r.key for r in rows)
        # and the Python clients see what Spark wrote, through the SSL listener with alice's certificate
        from kafka import KafkaConsumer, TopicPartition
        c = KafkaConsumer(**sb.kafka_python(listener="SSL"))
        parts = [TopicPartition(topic, p) for p in c.partitions_for_topic(topic)]
        assert sum(c.end_offsets(parts).values()) == 500
        c.close()
