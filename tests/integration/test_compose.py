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


def test_compose_zookeeper_cluster():
    """`docker compose --profile cluster up`: ZooKeeper and three brokers finding each other through it; the
    default services (kafkite, spark-lag) stay out of that profile, the cluster's services are only in it."""
    from kafkite.cli import build_parser

    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = doc["services"]
    assert "profiles" not in services["kafkite"] and "profiles" not in services["spark-lag"]
    zk = services["zookeeper"]
    assert zk["profiles"] == ["cluster"] and zk["image"] == "zookeeper:3.8"
    assert zk["healthcheck"]["test"][0] == "CMD"
    ids = set()
    for n in (1, 2, 3):
        b = services[f"kafkite-{n}"]
        assert b["profiles"] == ["cluster"] and b["build"] == "."
        assert b["depends_on"]["zookeeper"]["condition"] == "service_healthy"
        assert b["command"][:2] == ["kafkite", "serve"]
        args = build_parser().parse_args(b["command"][1:])     # flags `kafkite serve` really takes
        assert args.port is None and args.host is None          # either would rewrite `listeners`
        static = dict(o.split("=", 1) for o in args.override)
        assert static["zookeeper.connect"] == "zookeeper:2181"
        assert static["listeners"] == "PLAINTEXT://0.0.0.0:9092"
        assert static["advertised.listeners"] == f"PLAINTEXT://kafkite-{n}:9092"
        ids.add(static["broker.id"])
        assert args.data_dir == "/data" and b["volumes"] == [f"kafkite-{n}-data:/data"]
        assert f"kafkite-{n}-data" in doc["volumes"]
    assert ids == {"1", "2", "3"}
