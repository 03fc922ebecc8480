"""PySpark side of Kafkite: a SparkSession wired to Spark's Kafka connector, and pipelines.

    from kafkite.spark import session
    spark = session("127.0.0.1:9092")
    spark.read.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:9092")...

The connector jars come from KAFKITE_SPARK_JARS (a directory of jars: spark-sql-kafka-0-10_2.13,
spark-token-provider-kafka-0-10_2.13, kafka-clients, commons-pool2) when it is set, else from
Maven through spark.jars.packages with the coordinates matching the installed pyspark.
"""
from __future__ import annotations

import os
from pathlib import Path


def connector_conf() -> dict[str, str]:
    jars_dir = os.environ.get("KAFKITE_SPARK_JARS")
    if jars_dir:
        jars = sorted(str(p) for p in Path(jars_dir).glob("*.jar"))
        if not jars:
            raise RuntimeError(f"KAFKITE_SPARK_JARS={jars_dir} holds no *.jar")
        return {"spark.jars": ",".join(jars)}
    import pyspark
    v = pyspark.__version__
    return {"spark.jars.packages": f"org.apache.spark:spark-sql-kafka-0-10_2.13:{v}"}


def session(bootstrap_servers: str | None = None, app_name: str = "kafkite", master: str = "local[2]",
            extra_conf: dict[str, str] | None = None, with_connector: bool = True):
    """A SparkSession sized for a small machine, with Spark's Kafka connector on the classpath.

    `bootstrap_servers` is kept in the conf as `kafkite.bootstrap.servers` for pipelines to read.
    """
    from pyspark.sql import SparkSession
    b = (SparkSession.builder.appName(app_name).master(master)
         .config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "4")
         .config("spark.default.parallelism", "2")
         .config("spark.driver.memory", "1g")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.ui.showConsoleProgress", "false"))
    if with_connector:
        for k, v in connector_conf().items():
            b = b.config(k, v)
    if bootstrap_servers:
        b = b.config("kafkite.bootstrap.servers", bootstrap_servers)
    for k, v in (extra_conf or {}).items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
