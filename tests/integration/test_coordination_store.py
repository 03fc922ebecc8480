"""The coordination-store protocol the controller stands on, held by both stores: the in-process one and the
ZooKeeper one (kazoo, a real ZooKeeper from Debian's package). The same assertions run against each, so the
controller above them can be one. Each test is a pair of brokers (owners 1 and 2) with their stores."""
from __future__ import annotations

import itertools
import json
import time

import pytest

from kafkite.controller.store import BadVersion, InProcessStore, NodeExists, NoNode

_roots = itertools.count()


@pytest.fixture(params=["in-process", "zookeeper"])
def stores(request):
    """{owner: store}: two brokers' views of one coordination service."""
    if request.param == "in-process":
        shared = InProcessStore()
        yield {1: shared, 2: shared}
        return
    zk = request.getfixturevalue("kafkite_zookeeper")
    from kafkite.controller.zk_store import ZooKeeperStore
    root = zk.chroot(f"kafkite-test-{next(_roots)}")  # a fresh chroot per test: no state shared
    made = {o: ZooKeeperStore(root, owner=o, session_timeout_ms=4000) for o in (1, 2)}
    yield made
    for s in made.values():
        s.close()


def settle(stores, cond, timeout: float = 10.0) -> None:
    """Run delivered watch callbacks until `cond()` holds (the in-process store runs them synchronously)."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        for s in {id(s): s for s in stores.values()}.values():
            if hasattr(s, "run_pending"):
                s.run_pending(0.05)


def test_create_get_and_claim_if_absent(stores):
    a, b = stores[1], stores[2]
    assert a.get("/cluster/id") is None
    a.create("/cluster/id", {"version": "1", "id": "abc"})
    assert b.get("/cluster/id") == ({"version": "1", "id": "abc"}, 0)
    with pytest.raises(NodeExists):
        b.create("/cluster/id", {"version": "1", "id": "other"})
    assert a.get("/cluster/id")[0]["id"] == "abc"


def test_versioned_set_and_delete(stores):
    a, b = stores[1], stores[2]
    a.create("/controller_epoch", 1)
    assert b.set("/controller_epoch", 2, expected_version=0) == 1
    with pytest.raises(BadVersion):
        a.set("/controller_epoch", 5, expected_version=0)  # a stale reader loses
    assert a.get("/controller_epoch") == (2, 1)
    with pytest.raises(NoNode):
        a.set("/nothing", 1, expected_version=-1)
    with pytest.raises(BadVersion):
        a.delete("/controller_epoch", expected_version=0)
    a.delete("/controller_epoch", expected_version=1)
    assert b.get("/controller_epoch") is None
    with pytest.raises(NoNode):
        b.delete("/controller_epoch")


def test_compare_and_set_race_has_one_winner(stores):
    """Two controllers read epoch 7 and both try to write 8: exactly one write lands."""
    a, b = stores[1], stores[2]
    a.create("/controller_epoch", 7)
    (va, ver_a), (vb, ver_b) = a.get("/controller_epoch"), b.get("/controller_epoch")
    outcomes = []
    for s, v, ver in ((a, va, ver_a), (b, vb, ver_b)):
        try:
            s.set("/controller_epoch", v + 1, expected_version=ver)
            outcomes.append("won")
        except BadVersion:
            outcomes.append("lost")
    assert sorted(outcomes) == ["lost", "won"]
    assert a.get("/controller_epoch") == (8, 1)


def test_children(stores):
    a, b = stores[1], stores[2]
    assert a.children("/brokers/ids") == []
    for i in (3, 1, 2):
        (a if i % 2 else b).create(f"/brokers/ids/{i}", {"host": "127.0.0.1", "port": 9090 + i})
    assert a.children("/brokers/ids") == ["1", "2", "3"] == b.children("/brokers/ids/")


def test_watch_fires_once_on_change(stores):
    a, b = stores[1], stores[2]
    a.create("/controller", {"brokerid": 1})
    fired = []
    b.watch("/controller", fired.append)
    a.set("/controller", {"brokerid": 1, "again": True}, expected_version=0)
    settle(stores, lambda: fired)
    a.set("/controller", {"brokerid": 1}, expected_version=1)
    a.create("/marker", 1)  # a later change we can wait for: the one-shot watch must not fire again meanwhile
    marker = []
    b.watch("/marker", marker.append)
    a.delete("/marker")
    settle(stores, lambda: marker)
    assert len(fired) == 1 and fired[0] == "/controller"


def test_child_watch_sees_a_broker_register(stores):
    a, b = stores[1], stores[2]
    a.create("/brokers/ids/1", {"host": "h"})
    fired = []
    a.watch("/brokers/ids/", fired.append)
    b.create("/brokers/ids/2", {"host": "h"})
    settle(stores, lambda: fired)
    assert a.children("/brokers/ids") == ["1", "2"]


def test_ephemeral_nodes_end_with_their_session(stores):
    """A broker's registration and its /controller claim vanish when its session ends; the watcher hears it."""
    a, b = stores[1], stores[2]
    a.create("/brokers/ids/1", {"host": "h"}, ephemeral_owner=1)
    a.create("/controller", {"version": 1, "brokerid": 1}, ephemeral_owner=1)
    b.create("/brokers/ids/2", {"host": "h"}, ephemeral_owner=2)
    a.create("/controller_epoch", 1)  # persistent
    gone = []
    b.watch("/controller", gone.append)
    a.end_session(1)
    settle(stores, lambda: gone)
    assert b.get("/controller") is None
    assert b.children("/brokers/ids") == ["2"]
    assert b.get("/controller_epoch") == (1, 0)
    b.create("/controller", {"version": 1, "brokerid": 2}, ephemeral_owner=2)  # the survivor can claim it


def test_zookeeper_store_keeps_kafka_json_under_its_chroot(kafkite_zookeeper):
    """What the store writes is JSON at the path given, under the chroot of zookeeper.connect, which is created
    when missing (as Kafka does): a raw kazoo client sees it there."""
    from kazoo.client import KazooClient

    from kafkite.controller.zk_store import ZooKeeperStore, split_connect
    assert split_connect("h1:2181,h2:2181/kafka/a/") == ("h1:2181,h2:2181", "/kafka/a")
    assert split_connect("h1:2181") == ("h1:2181", "")
    s = ZooKeeperStore(kafkite_zookeeper.chroot("/deep/kafkite-json"), owner=3)
    raw = KazooClient(hosts=kafkite_zookeeper.connect_string)
    raw.start(10)
    try:
        s.create("/controller", {"version": 1, "brokerid": 3, "timestamp": "1"}, ephemeral_owner=3)
        data, stat = raw.get("/deep/kafkite-json/controller")
        assert json.loads(data) == {"version": 1, "brokerid": 3, "timestamp": "1"}
        assert stat.ephemeralOwner == s.session_id
        with pytest.raises(ValueError):
            s.create("/brokers/ids/4", {}, ephemeral_owner=4)  # another broker's session is not ours
    finally:
        s.close()
        raw.stop()
        raw.close()
