"""The ProcessCluster harness itself: processes, signals, ports, ZooKeeper reads (the ZooKeeper-mode
behaviour of the brokers is tested in test_zk_cluster.py)."""
from __future__ import annotations

import os
import signal
import socket
import time

import pytest

from kafkite.testing import KafkiteCluster, ProcessCluster

pytestmark = pytest.mark.timeout(180)


def _answers(cluster: ProcessCluster, b: int) -> bool:
    return cluster.metadata_view(b, timeout=0.5)["brokers"] != []


def test_process_cluster_life_cycle(kafkite_zookeeper):
    with KafkiteCluster(brokers=2, processes=True, zookeeper_connect=kafkite_zookeeper.connect_string,
                        chroot="/harness-life", session_timeout_ms=2000) as c:
        assert isinstance(c, ProcessCluster)
        assert c.node_ids == [1, 2] and c.zookeeper_connect == kafkite_zookeeper.connect_string + "/harness-life"
        ports = c.ports
        assert len(set(ports.values())) == 2 and all(ports.values())
        assert c.bootstrap_servers == f"127.0.0.1:{ports[1]},127.0.0.1:{ports[2]}"
        for b in (1, 2):   # a ZooKeeper-mode broker lists brokers once the controller's UpdateMetadata came
            assert c.is_running(b)
            c.wait_until(lambda: _answers(c, b), 30, f"broker {b} answers")

        c.kill_broker(2)
        assert not c.is_running(2)
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", ports[2]), timeout=1).close()
        c.start_broker(2)
        assert c.ports == ports and c.is_running(2)
        c.wait_until(lambda: _answers(c, 2), 30, "broker 2 answers after its restart")
        assert "starting broker 2 (port %d)" % ports[2] in c.log_tail(2)

        c.pause_broker(1)
        assert c.is_paused(1) and c.is_running(1)
        with pytest.raises(OSError):            # accepted by the kernel, never answered
            c.metadata_view(1, timeout=0.5)
        c.resume_broker(1)
        assert not c.is_paused(1)
        c.wait_until(lambda: _answers(c, 1), 30, "broker 1 answers again")

        c.stop_broker(1)
        assert not c.is_running(1) and c._brokers[1].proc.returncode == 0   # SIGTERM: a clean exit
        c.pause_broker(2)                       # stop() must continue a frozen broker to end it
        proc2 = c._brokers[2].proc
        t0 = time.monotonic()
    assert proc2.returncode == 0 and time.monotonic() - t0 < c.stop_timeout
    assert c._zk is None                        # the kazoo client closed too


def test_process_cluster_reads_zookeeper(kafkite_zookeeper):
    with ProcessCluster(1, zookeeper_connect=kafkite_zookeeper.chroot("/harness-zk")) as c:
        assert c.chroot == "/harness-zk"
        zk = c.zk                               # the harness's own nodes, under a path no broker uses
        zk.ensure_path("/harness")
        zk.create("/harness/json", b'{"a": [1, 2]}')
        zk.create("/harness/number", b"7")
        zk.create("/harness/empty", b"")
        zk.create("/harness/text", b"not json")
        tree = c.zk_tree()
        assert {k: v for k, v in tree.items() if k.startswith("/harness")} == {
            "/harness": None, "/harness/json": {"a": [1, 2]}, "/harness/number": 7,
            "/harness/empty": None, "/harness/text": "not json"}
        assert not any(k.startswith("/zookeeper") for k in tree)
        assert c.zk_get("/harness/number") == 7 and c.zk_children("/harness") == ["empty", "json", "number", "text"]
        assert c.zk_children("/no/such/node") == []
        with pytest.raises(KeyError):
            c.zk_get("/no/such/node")
        zk.delete("/harness", recursive=True)


def test_wait_until_names_what_it_waited_for():
    c = ProcessCluster(1)                       # never started: wait_until needs nothing running
    assert c.wait_until(lambda: 5, 1, "five") == 5
    t0 = time.monotonic()
    with pytest.raises(AssertionError, match=r"the answer: not within 0.3s \(last error: ValueError\('nope'\)\)"):
        c.wait_until(lambda: (_ for _ in ()).throw(ValueError("nope")), 0.3, "the answer")
    assert 0.3 <= time.monotonic() - t0 < 2
    with pytest.raises(AssertionError, match=r"^nothing: not within 0.2s$"):
        c.wait_until(lambda: None, 0.2, "nothing")


def test_stop_kills_a_broker_that_ignores_sigterm(kafkite_zookeeper):
    with ProcessCluster(1, zookeeper_connect=kafkite_zookeeper.connect_string, chroot="/harness-stubborn",
                        stop_timeout=1.0) as c:
        # frozen behind the harness's back (not through pause_broker), the broker cannot act on SIGTERM,
        # as one whose shutdown hangs: stop() must SIGKILL it after stop_timeout
        os.kill(c.pid(1), signal.SIGSTOP)
        proc = c._brokers[1].proc
        t0 = time.monotonic()
    assert proc.returncode == -signal.SIGKILL and time.monotonic() - t0 < 5
    assert "not stopped in" in c.log_tail(1)
