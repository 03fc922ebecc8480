"""The one way to start brokers (server.node.open_node) and the public names of kafkite.testing."""
from __future__ import annotations

import subprocess
import sys

import trio
from kafka.protocol.metadata import MetadataRequest

from kafkite.config import BrokerConfig
from kafkite.server.node import broker_plan, open_node
from kafkite.testing.wire_client import WireClient


def test_testing_exports_the_three_runners():
    code = ("import sys, kafkite.testing as t\n"
            "assert 'kafkite.testing.cluster' not in sys.modules  # lazy\n"
            "from kafkite.testing import KafkiteCluster, BrokerThread, BrokerProcess\n"
            "from kafkite.testing.cluster import KafkiteCluster as C\n"
            "assert KafkiteCluster is C and BrokerThread.__name__ == 'BrokerThread'\n"
            "assert BrokerProcess.__module__ == 'kafkite.testing.process'\n"
            "assert set(t.__all__) <= set(dir(t))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def test_broker_plan():
    one = BrokerConfig(static={"listeners": "PLAINTEXT://127.0.0.1:9092", "broker.id": "7"})
    assert broker_plan(one, 1) == [(7, 9092)]
    assert broker_plan(one, 3) == [(1, 9092), (2, 9093), (3, 9094)]
    free = BrokerConfig(static={"listeners": "PLAINTEXT://127.0.0.1:0"})
    assert broker_plan(free, 2) == [(1, 0), (2, 0)]
    assert broker_plan(free, 1, node_ids=[4, 5]) == [(4, 0), (5, 0)]


async def _metadata_brokers(bootstrap: str) -> list[int]:
    def ask():
        with WireClient.connect(bootstrap.split(",")[0]) as w:
            return sorted(b.node_id for b in w.request(MetadataRequest(topics=None), 9).brokers)
    return await trio.to_thread.run_sync(ask)


async def test_open_node_starts_stops_and_restarts_brokers(tmp_path):
    config = BrokerConfig(static={"listeners": "PLAINTEXT://127.0.0.1:0"})
    async with open_node(config, data_dir=tmp_path, brokers=3) as node:
        assert node.live_brokers == [1, 2, 3]
        assert len(node.bootstrap_servers.split(",")) == 3
        assert await _metadata_brokers(node.bootstrap_servers) == [1, 2, 3]
        port = node.ports[2]
        node.stop_broker(2)
        await node.wait_stopped(2)
        assert node.live_brokers == [1, 3]
        await node.start_broker(2)
        assert node.ports[2] == port and node.live_brokers == [1, 2, 3]
    assert node.live_brokers == []
    assert (tmp_path / "meta.properties").exists() and (tmp_path / "kafkite-metadata.json").exists()


async def test_a_broker_takes_no_client_before_it_knows_the_controller(monkeypatch):
    """As Kafka enables request processing at the end of start-up: a client connecting while the broker is still
    starting (here its transaction coordinator held back) is served once the broker registered and the controller's
    metadata reached it, so its Metadata names the controller (not -1, which left librdkafka's admin client waiting
    for one past its timeouts)."""
    import socket
    import time

    from kafkite.server.transaction_coordinator_service import TransactionCoordinatorService as Txn
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    release, run = trio.Event(), Txn.run

    async def held_run(self, *, task_status=trio.TASK_STATUS_IGNORED):
        await release.wait()
        await run(self, task_status=task_status)
    monkeypatch.setattr(Txn, "run", held_run)

    def ask():
        deadline = time.monotonic() + 60
        while True:  # (the port is bound early in the start)
            try:
                w = WireClient("127.0.0.1", port, timeout=60)
                break
            except OSError:
                assert time.monotonic() < deadline, "the port never took a connection"
                time.sleep(0.01)
        with w:
            data, corr = w.encode(MetadataRequest(topics=None), 9)
            w.send_raw(data)  # (sent while the start is held)
            trio.from_thread.run_sync(release.set)
            return w.read_response(MetadataRequest.API_KEY, 9, corr)

    config = BrokerConfig(static={"listeners": f"PLAINTEXT://127.0.0.1:{port}"})
    answers: list = []
    async with trio.open_nursery() as n:
        n.start_soon(trio.to_thread.run_sync, lambda: answers.append(ask()))
        async with open_node(config, in_memory=True, brokers=1):
            with trio.fail_after(60):
                while not answers:
                    await trio.sleep(0.01)
    assert answers[0].controller_id == 1 and [b.node_id for b in answers[0].brokers] == [1]
