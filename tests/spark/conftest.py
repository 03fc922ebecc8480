"""Spark fixtures. One SparkSession for the whole run: Spark allows one SparkContext per JVM, and
starting one costs seconds on a small machine. Unit tests need only pyspark and Java; end-to-end
tests also need Spark's Kafka connector jars in KAFKITE_SPARK_JARS.

Test modules start with `pytest.importorskip("pyspark")`: a skip raised here, in a conftest,
would abort `pytest tests/spark` instead of skipping."""
import os
import shutil

import pytest


@pytest.fixture(scope="session")
def _spark():
    pytest.importorskip("pyspark", reason="pyspark is not installed")
    if shutil.which("java") is None:
        pytest.skip("no Java runtime for Spark")
    from kafkite.spark import session
    # Spark pools its Kafka producers and consumers (10 and 5 minutes idle by default): a test's pooled clients would
    # outlive its broker, reconnecting twice a second to a closed port beside the tests that follow
    idle = {f"spark.kafka.{kind}.cache.{key}": value for kind in ("producer", "consumer")
            for key, value in (("timeout", "5s"), ("evictorThreadRunInterval", "2s"))}
    s = session(app_name="kafkite-tests", with_connector=bool(os.environ.get("KAFKITE_SPARK_JARS")), extra_conf=idle)
    yield s
    s.stop()


@pytest.fixture
def spark_local(_spark):
    """Decoding and lag logic only: no connector needed."""
    return _spark


@pytest.fixture
def spark_kafka(request):
    """With Spark's Kafka connector; skipped (before any JVM starts) when its jars are not given."""
    if not os.environ.get("KAFKITE_SPARK_JARS"):
        pytest.skip("KAFKITE_SPARK_JARS not set")
    return request.getfixturevalue("_spark")
