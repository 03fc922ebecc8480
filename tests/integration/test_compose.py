"""docker-compose.yml's structure (no Docker engine runs on the build machine)."""
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_compose_structure():
    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    k = doc["services"]["kafkite"]
    assert k["build"] == "."
    assert "9092:9092" in k["ports"]
    assert any(v.startswith("kafkite-data:/data") for v in k["volumes"])
    assert "kafkite-data" in doc["volumes"]
    assert k["healthcheck"]["test"][0] == "CMD"
    lag = doc["services"]["spark-lag"]
    assert lag["depends_on"]["kafkite"]["condition"] == "service_healthy"
    assert "kafkite:9092" in lag["command"]
    assert (ROOT / lag["build"]["dockerfile"]).exists()
    df = (ROOT / "Dockerfile").read_text()
    assert "--data-dir" in df and "/data" in df and "EXPOSE 9092" in df
