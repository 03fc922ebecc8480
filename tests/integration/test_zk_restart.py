"""A ZooKeeper-mode broker stopped and started over its own control listener (control/zk_restart.py), here in a
thread of the test process, wired as `kafkite serve --control-port` wires it (the process cluster's test is
test_control_plane.py::test_the_same_controls_on_a_zookeeper_process_cluster): a stop is a kill (or with clean a
controlled shutdown) that takes the broker out of ZooKeeper; a start rebuilds it from the same config on the same
port and data dir; records are kept; a stop/start loop leaves nothing of the old brokers behind (threads, sockets,
ZooKeeper sessions, Trio tasks); bad input answers 4xx and changes nothing."""
from __future__ import annotations

import collections
import gc
import os
import re
import socket
import threading
import time
import uuid

import trio

from kafkite.config import BrokerConfig
from kafkite.controller.zk_store import ZooKeeperStore
from kafkite.testing.trio_thread import TrioThread

from test_control_plane import http


class _ServedZkBroker(TrioThread):
    def __init__(self, config, data_dir) -> None:
        super().__init__()
        self.config, self.data_dir = config, data_dir

    async def _serve(self) -> None:
        from kafkite.control.http import ControlApp, serve_control
        from kafkite.control.zk_restart import ZkBrokerRunner
        from kafkite.testing.faults import Faults
        self.runner = r = ZkBrokerRunner(self.config, data_dir=self.data_dir, in_memory=False, faults=Faults())
        async with trio.open_nursery() as n:
            await n.start(r.run)
            app = ControlApp(Faults(), [r.node_id], lambda: r.brokers, lambda: r)
            port = await n.start(serve_control, app, "127.0.0.1", 0)
            self.url = f"http://127.0.0.1:{port}"
            await self._started()

    def tasks(self) -> int:
        def count(task) -> int:
            return 1 + sum(count(t) for n in task.child_nurseries for t in n.child_tasks)
        return self.call(lambda: count(trio.lowlevel.current_root_task()))


def _threads() -> collections.Counter:
    """This process's threads by name, trio's idle worker threads left out (they come and go by themselves)."""
    return collections.Counter(re.sub(r"\d+", "N", t.name) for t in threading.enumerate()
                               if not t.name.startswith("Trio thread"))


def _sockets() -> int:
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            pass
    return n


def produce(bootstrap: str, n: int) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(n):
        p.produce("kept", value=b"%d" % i)
    assert p.flush(30) == 0
    del p
    gc.collect()


def _settled(s) -> tuple:
    """(threads, sockets, tasks) once the same for 0.5 s."""
    last, since = None, time.monotonic()
    while True:
        now = (_threads(), _sockets(), s.tasks())
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since > 0.5:
            return now
        time.sleep(0.05)


def test_a_zookeeper_broker_stopped_and_started_over_its_own_listener_leaves_nothing_behind(kafkite_zookeeper,
                                                                                             tmp_path):
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    connect = kafkite_zookeeper.chroot(f"zk-restart-{uuid.uuid4().hex[:8]}")
    config = BrokerConfig(static={"zookeeper.connect": connect, "broker.id": "1",
                                  "listeners": "PLAINTEXT://127.0.0.1:0", "zookeeper.session.timeout.ms": "6000"})
    zk = ZooKeeperStore(connect, owner=99, session_timeout_ms=6000)
    with _ServedZkBroker(config, tmp_path) as s:
        url, marker = s.url, tmp_path / ".kafka_cleanshutdown"
        [b] = http(url, "GET", "/v1/brokers")[1]["brokers"]
        port = b["port"]
        assert b == {"id": 1, "live": True, "port": port, "rack": None}
        bootstrap = f"127.0.0.1:{port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("kept", 1, 1)])["kept"].result(30)
        del admin
        produce(bootstrap, 50)
        # bad input: another broker's id, a start while running; nothing changes
        for path, body, message in (("/v1/brokers/stop", {"broker": 2}, "unknown broker 2"),
                                    ("/v1/brokers/start", {"broker": 1}, "broker 1 is running"),
                                    ("/v1/brokers/stop", {"broker": 1, "clean": "yes"}, "clean must be boolean")):
            code, out = http(url, "POST", path, body)
            assert code == 400 and message in out["error"], out
        assert http(url, "GET", "/v1/brokers")[1]["brokers"][0]["live"] and zk.get("/brokers/ids/1") is not None
        baseline = None
        for round_, clean in enumerate((False, True, False)):
            code, out = http(url, "POST", "/v1/brokers/stop", {"broker": 1, "clean": clean})
            assert code == 200 and out == {"brokers": [{"id": 1, "live": False, "port": port, "rack": None}],
                                           "controller": None}, out
            assert zk.get("/brokers/ids/1") is None and zk.get("/controller") is None  # its session closed
            assert marker.exists() == clean  # a kill leaves no clean-shutdown marker
            code, out = http(url, "POST", "/v1/brokers/stop", {"broker": 1})  # twice
            assert code == 400 and "broker 1 is not running" in out["error"]
            code, out = http(url, "GET", "/v1/partitions")  # a control that needs the broker
            assert code == 409 and "broker 1 is stopped" in out["error"]
            if clean:  # a start that fails (its port taken meanwhile) leaves nothing behind and can be tried again
                with socket.create_server(("127.0.0.1", port)):
                    code, out = http(url, "POST", "/v1/brokers/start", {"broker": 1})
                assert code == 500 and "Address already in use" in out["error"], out
                assert zk.get("/brokers/ids/1") is None
            code, out = http(url, "POST", "/v1/brokers/start", {"broker": 1})
            assert code == 200 and out["brokers"] == [{"id": 1, "live": True, "port": port, "rack": None}], out
            assert zk.get("/brokers/ids/1") is not None and not marker.exists()  # registered; the marker taken
            c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
            assert c.get_watermark_offsets(TopicPartition("kept", 0), timeout=30) == (0, 50 + round_ * 10)
            c.close()
            del c
            produce(bootstrap, 10)  # (a new client each time: an old one would reconnect only after its backoff)
            # nothing of the stopped brokers lingers: the same threads, sockets and Trio tasks after each restart (once
            # the clients' connections are gone on the broker's side too)
            if baseline is None:
                baseline = _settled(s)
            else:
                deadline = time.monotonic() + 15
                while (now := (_threads(), _sockets(), s.tasks())) != baseline and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert now == baseline, (now, baseline)
    zk.close()
