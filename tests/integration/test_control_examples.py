"""The control plane's examples (examples/control/) run against `kafkite serve --brokers 3 --control-port 0`:
each injects a produce error and moves a leader, and asserts its client's behaviour and the request log."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafkite.testing.process import BrokerProcess

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients"))
from drivers import need  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "control"


@pytest.fixture(scope="module")
def serve3():
    with BrokerProcess(brokers=3, control=True) as b:
        yield b


def _run(argv: list[str], b: BrokerProcess, env: dict | None = None, timeout: float = 180) -> str:
    e = {**os.environ, "BOOTSTRAP": b.bootstrap_servers, "CONTROL_URL": b.control_url,
         "KAFKITE": f"{sys.executable} -m kafkite.cli", "PYTHON": sys.executable, **(env or {})}
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=e)
    print(p.stdout)
    assert p.returncode == 0 and p.stdout.splitlines()[-1] == "OK", (p.stdout[-3000:], p.stderr[-3000:])
    return p.stdout


def test_the_shell_example_kcat_and_kafkite_control(serve3):
    need("kcat")
    out = _run(["bash", str(EXAMPLES / "kcat_faults.sh")], serve3)
    assert "kcat delivered after 3 x NOT_LEADER_OR_FOLLOWER" in out and "nothing lost" in out


def test_the_node_example_kafkajs_and_fetch(serve3):
    need("node")
    from drivers import node_env
    out = _run(["node", str(EXAMPLES / "kafkajs_faults.js")], serve3, env=node_env())
    assert "kafkajs delivered after 3 x NOT_LEADER_OR_FOLLOWER" in out and "leader move" in out


def test_the_java_example_kafka_clients_and_java_net_http(serve3, tmp_path):
    """Compiled with javac against the test tools' kafka-clients jar (as tests/clients/java/KafkiteDriver.java)."""
    import shutil
    from drivers import tools_dir
    need("java")
    if shutil.which("javac") is None:
        pytest.skip("no javac")
    jars = sorted(str(p) for p in (tools_dir() / "java").glob("*.jar"))
    cp = os.pathsep.join(jars)
    subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "-d", str(tmp_path), "-cp", cp,
                    str(EXAMPLES / "ControlExample.java")], check=True, capture_output=True, timeout=180)
    out = _run(["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", os.pathsep.join([str(tmp_path), cp]),
                "ControlExample"], serve3)
    assert "delivered after 3 x NOT_LEADER_OR_FOLLOWER" in out and "leader move" in out
