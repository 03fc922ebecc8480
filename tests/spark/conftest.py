import os
import shutil

import pytest

pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed")

if shutil.which("java") is None:
    pytest.skip("no Java runtime for Spark", allow_module_level=True)


@pytest.fixture(scope="session")
def spark_local():
    """A local SparkSession without the Kafka connector (decoding and lag logic only)."""
    from kafkite.spark import session
    s = session(app_name="kafkite-tests", with_connector=False)
    yield s
    s.stop()


@pytest.fixture(scope="session")
def spark_kafka():
    if not os.environ.get("KAFKITE_SPARK_JARS"):
        pytest.skip("KAFKITE_SPARK_JARS not set: Spark's Kafka connector jars are not available")
    from kafkite.spark import session
    s = session(app_name="kafkite-e2e")
    yield s
    s.stop()
