"""The control plane (issue "Fault injection and inspection from any language", first slice): `kafkite serve
--control-port` serves the broker's faults and request log over HTTP/JSON, and `kafkite control` drives it from a
shell. A confluent-kafka producer sees NOT_LEADER_OR_FOLLOWER three times, retries and succeeds, and the request log
shows the four Produce requests (the three answered with the injected error) and the Metadata refreshes."""
from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from kafkite.testing.process import BrokerProcess


def control(url: str, *args: str, token: str | None = None) -> tuple[int, object]:
    argv = [sys.executable, "-m", "kafkite.cli", "control", "--url", url, *(["--token", token] if token else []),
            *args]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    out = p.stdout if p.returncode == 0 else p.stderr
    return p.returncode, json.loads(out.strip().splitlines()[-1])


def http(url: str, method: str, path: str, body=None, token: str | None = None) -> tuple[int, object]:
    req = urllib.request.Request(url + path, method=method, data=None if body is None else (
        body if isinstance(body, bytes) else json.dumps(body).encode()))
    if token:
        req.add_header("authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture(scope="module")
def served():
    with BrokerProcess(control=True) as b:
        yield b


def test_a_produce_error_injected_from_the_shell(served):
    from confluent_kafka import Producer
    url, bs = served.control_url, served.bootstrap_servers
    assert url.startswith("http://127.0.0.1:")
    p = Producer({"bootstrap.servers": bs, "retry.backoff.ms": 50, "linger.ms": 0})
    p.produce("ctl", value=b"warm-up")
    assert p.flush(30) == 0
    assert control(url, "requests", "--clear")[0] == 0
    code, state = control(url, "error", "Produce", "NOT_LEADER_OR_FOLLOWER", "--count", "3")
    assert code == 0 and state["errors"] == [{"id": state["id"], "api": "Produce", "errors": ["NOT_LEADER_OR_FOLLOWER"],
                                              "remaining": 3, "broker": None, "version": None, "client_id": None,
                                              "topic": None, "partition": None}]
    delivered = []
    p.produce("ctl", value=b"through-the-faults", on_delivery=lambda err, msg: delivered.append(err))
    assert p.flush(30) == 0 and delivered == [None]
    code, log = control(url, "requests", "--api", "Produce")
    produces = log["requests"]
    assert [r["error"] for r in produces] == ["NOT_LEADER_OR_FOLLOWER"] * 3 + [None], produces
    assert all(r["injected"] for r in produces[:3]) and produces[-1]["client_id"] == "rdkafka"
    _, everything = control(url, "requests")
    assert any(r["api"] == "Metadata" for r in everything["requests"]), "no Metadata refresh after the errors"
    assert control(url, "faults")[1]["errors"] == []  # used up


def test_latency_drops_and_clear(served):
    from kafka import KafkaProducer
    url, bs = served.control_url, served.bootstrap_servers
    assert control(url, "latency", "1", "300")[0] == 0
    kp = KafkaProducer(bootstrap_servers=bs)
    t0 = time.monotonic()
    kp.send("ctl-lat", b"slow").get(timeout=30)
    assert time.monotonic() - t0 >= 0.3
    assert control(url, "clear")[1] == {"errors": [], "drops": [], "latency": [], "holds": [], "versions": []}
    assert control(url, "drop", "Produce", "--count", "1")[0] == 0
    kp.send("ctl-lat", b"dropped-then-retried").get(timeout=30)  # the producer retries on the cut connection
    kp.close()
    assert control(url, "faults")[1]["drops"] == []


def test_bad_input_is_a_4xx_with_a_message(served):
    url = served.control_url
    assert http(url, "POST", "/v1/errors", {"api": "Produce", "error": "NO_SUCH_ERROR"}) == (
        400, {"error": "unknown error 'NO_SUCH_ERROR': a Kafka error name (NOT_LEADER_OR_FOLLOWER, ...) or code"})
    assert http(url, "POST", "/v1/errors", {"api": "Nope", "error": 6})[0] == 400
    assert http(url, "POST", "/v1/errors", {"api": "Produce", "error": 6, "count": 0})[0] == 400
    assert http(url, "POST", "/v1/latency", {"broker": 7, "ms": 1})[1]["error"].startswith("unknown broker 7")
    assert http(url, "POST", "/v1/errors", b"{not json")[0] == 400
    assert http(url, "GET", "/v1/nothing")[0] == 404
    assert http(url, "PUT", "/v1/errors", {})[0] == 405
    code, listing = http(url, "GET", "/v1")
    assert code == 200 and "/v1/errors" in listing["routes"] and listing["brokers"] == [1]
    assert control(url, "error", "Produce", "BOGUS")[0] == 1  # the CLI exits 1 on a 4xx


def test_a_token_guards_the_control_listener():
    with BrokerProcess(control=True, control_token="s3cret") as b:
        assert http(b.control_url, "GET", "/v1/faults")[0] == 401
        assert http(b.control_url, "GET", "/v1/faults", token="wrong")[0] == 401
        assert http(b.control_url, "GET", "/v1/faults", token="s3cret")[0] == 200
        assert control(b.control_url, "faults", token="s3cret")[0] == 0


def test_the_same_controls_on_a_zookeeper_process_cluster(kafkite_zookeeper):
    """Each broker process of a 3-broker ZooKeeper cluster serves its control listener: the partition leader's
    process answers three Produce requests NOT_LEADER_OR_FOLLOWER, the producer retries and succeeds, and that
    broker's request log shows the four Produce requests."""
    import uuid
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafkite.testing.process_cluster import ProcessCluster
    with ProcessCluster(3, zookeeper_connect=kafkite_zookeeper.connect_string, control=True,
                        chroot=f"/kafkite-control-{uuid.uuid4().hex[:8]}") as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        admin.create_topics([NewTopic("zk-ctl", num_partitions=1, replication_factor=3)])["zk-ctl"].result(30)
        leader = c.wait_until(lambda: c.leader("zk-ctl", 0) > 0 and c.leader("zk-ctl", 0), 30, "a leader")
        url = c.control_url(leader)
        p = Producer({"bootstrap.servers": c.bootstrap_servers, "retry.backoff.ms": 50})
        p.produce("zk-ctl", value=b"warm-up")
        assert p.flush(30) == 0
        assert control(url, "requests", "--clear")[0] == 0
        assert control(url, "error", "Produce", "NOT_LEADER_OR_FOLLOWER", "--count", "3")[0] == 0
        p.produce("zk-ctl", value=b"through-the-faults")
        assert p.flush(60) == 0
        produces = control(url, "requests", "--api", "Produce")[1]["requests"]
        assert [r["error"] for r in produces] == ["NOT_LEADER_OR_FOLLOWER"] * 3 + [None], produces
        assert all(r["broker"] == leader for r in produces)
