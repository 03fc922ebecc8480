import os
import shutil

import pytest

pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed")

if shutil.which("java") is None:
    pytest.skip("no Java runtime for Spark", allow_module_level=True)


@pytest.fixture(scope="session")
def _spark():
    """One SparkSession for the whole run (Spark allows one per JVM); with the Kafka connector
    when KAFKITE_SPARK_JARS points at its jars."""
    from kafkite.spark import session
    s = session(app_name="kafkite-tests", with_connector=bool(os.environ.get("KAFKITE_SPARK_JARS")))
    yield s
    s.stop()


@pytest.fixture
def spark_local(_spark):
    """Decoding and lag logic only: no connector needed."""
    return _spark


@pytest.fixture
def spark_kafka(_spark):
    if not os.environ.get("KAFKITE_SPARK_JARS"):
        pytest.skip("KAFKITE_SPARK_JARS not set: Spark's Kafka connector jars are not available")
    return _spark
