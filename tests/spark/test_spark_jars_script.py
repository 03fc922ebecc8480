""".ci/spark-jars.sh: what scripts/test.sh runs to point KAFKITE_SPARK_JARS at the connector jars (no Spark here)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "spark-jars.sh"


def run(tools: Path, src: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "KAFKITE_TOOLS": str(tools), "KAFKITE_SPARK_JARS_SRC": str(src)}
    return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)


def test_gathers_the_connector_and_kafka_clients(tmp_path):
    src, tools = tmp_path / "shared" / "spark-jars", tmp_path / "tools"
    src.mkdir(parents=True)
    (tools / "java").mkdir(parents=True)
    for name in ("spark-sql-kafka-0-10_2.13-4.0.0.jar", "commons-pool2-2.12.0.jar"):
        (src / name).write_bytes(b"PK")
    (src / "README.md").write_text("not a jar")
    (tools / "java" / "kafka-clients.jar").write_bytes(b"PK")
    out = run(tools, src)
    assert out.returncode == 0, out.stderr
    jars = Path(out.stdout.strip())
    assert jars == tools / "spark-jars"
    assert sorted(p.name for p in jars.iterdir()) == ["commons-pool2-2.12.0.jar", "kafka-clients.jar",
                                                      "spark-sql-kafka-0-10_2.13-4.0.0.jar"]
    assert (jars / "kafka-clients.jar").resolve() == (tools / "java" / "kafka-clients.jar").resolve()
    before = (jars / "commons-pool2-2.12.0.jar").lstat().st_mtime_ns
    assert run(tools, src).stdout.strip() == str(jars)  # unchanged: left as it was
    assert (jars / "commons-pool2-2.12.0.jar").lstat().st_mtime_ns == before
    (src / "commons-pool2-2.12.0.jar").unlink()  # what it should hold changed: rebuilt
    run(tools, src)
    assert sorted(p.name for p in jars.iterdir()) == ["kafka-clients.jar", "spark-sql-kafka-0-10_2.13-4.0.0.jar"]


def test_prints_nothing_when_a_piece_is_missing(tmp_path):
    src, tools = tmp_path / "spark-jars", tmp_path / "tools"
    assert run(tools, src).stdout == ""  # no connector folder (not CI)
    src.mkdir()
    (src / "spark-sql-kafka-0-10_2.13-4.0.0.jar").write_bytes(b"PK")
    out = run(tools, src)  # no kafka-clients: install-clients.sh could not install it
    assert out.returncode == 0 and out.stdout == "" and "kafka-clients.jar" in out.stderr
