"""A cluster of separate broker processes on one ZooKeeper, with the in-process cluster's control API.

    with ProcessCluster(brokers=3) as cluster:               # its own ZooKeeper, temporary data dirs
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_of(1))
        cluster.kill_broker(cluster.controller_id)           # SIGKILL: the ZooKeeper session expires later
        cluster.wait_until(lambda: cluster.controller_id not in (-1, old), 10, "a new controller")

    KafkiteCluster(brokers=3, processes=True, ...)            # the same object

Every broker is `kafkite serve --override broker.id=N --override zookeeper.connect=...` in a child
process (node ids 1..N), with a data dir of its own kept across restarts (`start_broker` brings a
stopped or killed broker back on the port it had). Brokers find each other through ZooKeeper only:
`/brokers/ids`, `/controller`, `/controller_epoch`. What the cluster says about itself is read where a
test would look: ZooKeeper through a kazoo client (`zk`, `live_brokers`, `controller_id`,
`controller_epoch`, `zk_tree()`), and each broker's own metadata through a Metadata request sent to it
(`metadata_view`). Faults: `stop_broker` (SIGTERM, a clean shutdown), `kill_broker` (SIGKILL, a crash),
`pause_broker`/`resume_broker` (SIGSTOP/SIGCONT: a broker that hangs past its session timeout).

With `zookeeper_connect` the cluster uses that ZooKeeper (e.g. the `kafkite_zookeeper` fixture's) and
leaves it running; give each cluster its own `chroot` so several share one server. Without it a
`ZooKeeperServer` is started for the cluster and stopped with it.
"""
from __future__ import annotations

import collections
import re
import concurrent.futures
import json
import os
import signal
import subprocess
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable

from .process import spawn_serve

# test-friendly defaults; `overrides` wins over them
DEFAULT_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.replication.factor": "1",
    "default.replication.factor": "1",
    "offsets.topic.num.partitions": "6",
    # a broker stopped before it learnt the controller retries its ControlledShutdown after this (Kafka: 5 s)
    "controlled.shutdown.retry.backoff.ms": "500",
}


def _split_connect(connect: str) -> tuple[str, str]:
    """"h1:p1,h2:p2/chroot" -> ("h1:p1,h2:p2", "/chroot") (chroot "" when there is none)."""
    hosts, slash, path = connect.partition("/")
    return hosts, ("/" + path.strip("/")) if slash and path.strip("/") else ""


def _decode(raw: bytes | None) -> Any:
    """A znode's value as Kafka writes it: JSON (a bare number for /controller_epoch), empty for markers."""
    if not raw:
        return None
    text = raw.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


class _Broker:
    def __init__(self, node_id: int, data_dir: Path):
        self.node_id = node_id
        self.data_dir = data_dir
        self.port = 0                       # 0 until the first start picked a free one
        self.proc: subprocess.Popen | None = None
        self.paused = False
        self.tail: collections.deque[str] = collections.deque(maxlen=300)
        self.control_url: str | None = None  # its control listener, with ProcessCluster(control=True)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class ProcessCluster:
    def __init__(self, brokers: int = 3, data_dir: str | Path | None = None,
                 overrides: dict[str, str] | None = None, host: str = "127.0.0.1", *,
                 zookeeper_connect: str | None = None, session_timeout_ms: int = 6000, chroot: str = "",
                 start_timeout: float = 60.0, stop_timeout: float = 30.0, control: bool = False):
        """control: each broker also serves the control listener (kafkite.control.http): `control_url(id)`."""
        self.control = control
        if brokers < 1:
            raise ValueError(f"brokers must be at least 1, got {brokers}")
        self.n = brokers
        self.host = host
        self.session_timeout_ms = session_timeout_ms
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self._zk_hosts, given_chroot = _split_connect(zookeeper_connect) if zookeeper_connect else ("", "")
        self.chroot = ("/" + chroot.strip("/")) if chroot.strip("/") else given_chroot
        self.overrides = {**DEFAULT_OVERRIDES, "zookeeper.session.timeout.ms": str(session_timeout_ms),
                          **{k: str(v) for k, v in (overrides or {}).items()}}
        self._given_dir = Path(data_dir) if data_dir is not None else None
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._zk_server = None              # a ZooKeeperServer of our own, when none was given
        self._zk = None                     # the kazoo client for reading
        self._brokers: dict[int, _Broker] = {}
        self.data_dir: Path | None = None

    # -- life cycle -----------------------------------------------------------------------------
    @property
    def zookeeper_connect(self) -> str:
        """What the brokers get as `zookeeper.connect`: hosts plus the chroot."""
        return self._zk_hosts + self.chroot

    def start(self) -> "ProcessCluster":
        try:
            if not self._zk_hosts:
                from .zookeeper import ZooKeeperServer
                self._zk_server = ZooKeeperServer().start()
                self._zk_hosts = self._zk_server.connect_string
            if self._given_dir is None:
                self._tmp = tempfile.TemporaryDirectory(prefix="kafkite-pcluster-")
                self.data_dir = Path(self._tmp.name)
            else:
                self.data_dir = self._given_dir
            for i in range(1, self.n + 1):
                d = self.data_dir / f"broker-{i}"
                d.mkdir(parents=True, exist_ok=True)
                self._brokers[i] = _Broker(i, d)
            # all at once: each start is mostly Python's import time, which the processes overlap
            self._start_many(list(self._brokers))
            from kazoo.client import KazooClient
            with warnings.catch_warnings():  # kazoo warns when the chroot is missing: the brokers create it
                warnings.filterwarnings("ignore", "No chroot path exists", UserWarning)
                self._zk = KazooClient(hosts=self.zookeeper_connect, timeout=10.0)
                self._zk.start(timeout=15)
        except BaseException:
            self.stop()
            raise
        return self

    def _argv(self, b: _Broker) -> list[str]:
        args = ["--host", self.host, "--data-dir", str(b.data_dir)]
        if b.port:
            args += ["--port", str(b.port)]     # spawn_serve puts --port 0 first; the last one counts
        ov = {**self.overrides, "broker.id": str(b.node_id), "zookeeper.connect": self.zookeeper_connect}
        for k, v in ov.items():
            args += ["--override", f"{k}={v}"]
        if self.control:
            args += ["--control-port", "0"]
        return args

    def _start_one(self, node_id: int) -> None:
        b = self._brokers[node_id]
        if b.running():
            raise RuntimeError(f"broker {node_id} is running")
        b.paused = False
        b.tail.append(f"---- kafkite-pcluster: starting broker {node_id} (port {b.port or 'free'}) ----\n")
        proc, bootstrap = spawn_serve(self._argv(b), timeout=self.start_timeout, log_tail=b.tail)
        b.proc = proc
        port = int(bootstrap.split(",")[0].rsplit(":", 1)[1])
        if b.port and port != b.port:
            raise RuntimeError(f"broker {node_id} came back on port {port}, not {b.port}")
        b.port = port
        if self.control:
            ready = next(line for line in reversed(b.tail) if "ready" in line and "control=" in line)
            b.control_url = re.search(r"control='?(http://[^' ]+)", ready).group(1)

    def _start_many(self, ids: list[int]) -> None:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(ids))) as pool:
            futures = {i: pool.submit(self._start_one, i) for i in ids}
        errors = {i: f.exception() for i, f in futures.items() if f.exception() is not None}
        if errors:
            raise RuntimeError("; ".join(f"broker {i}: {e}" for i, e in sorted(errors.items())))

    def stop(self) -> None:
        """Every broker SIGTERMed (the controller's last, so the others' controlled shutdown can reach it),
        SIGKILL for any still running after `stop_timeout`; then the kazoo client, our ZooKeeper, the
        temporary data dir."""
        try:
            running = [b for b in self._brokers.values() if b.running()]
            if running:
                try:
                    ctl = self.controller_id if self._zk is not None else -1
                except Exception:
                    ctl = -1
                others = [b for b in running if b.node_id != ctl]
                last = [b for b in running if b.node_id == ctl]
                for group in (others, last):
                    for b in group:
                        self._signal(b, signal.SIGTERM)
                    deadline = time.monotonic() + self.stop_timeout
                    for b in group:
                        self._wait_or_kill(b, max(0.1, deadline - time.monotonic()))
        finally:
            if self._zk is not None:
                try:
                    self._zk.stop()
                    self._zk.close()
                except Exception:
                    pass
                self._zk = None
            if self._zk_server is not None:
                self._zk_server.stop()
                self._zk_server = None
                self._zk_hosts = ""
            if self._tmp is not None:
                self._tmp.cleanup()
                self._tmp = None

    def __enter__(self) -> "ProcessCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- faults ---------------------------------------------------------------------------------
    def _signal(self, b: _Broker, sig: int) -> None:
        if not b.running():
            return
        if b.paused and sig != signal.SIGSTOP:
            os.kill(b.proc.pid, signal.SIGCONT)     # a stopped process acts on SIGTERM only once continued
            b.paused = False
        os.kill(b.proc.pid, sig)

    def _wait_or_kill(self, b: _Broker, timeout: float) -> None:
        if b.proc is None:
            return
        try:
            b.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            b.tail.append(f"---- kafkite-pcluster: broker {b.node_id} not stopped in {timeout:.1f}s: SIGKILL ----\n")
            b.proc.kill()
            b.proc.wait(10)
        b.paused = False

    def stop_broker(self, broker_id: int, timeout: float | None = None) -> None:
        """SIGTERM (a clean shutdown), wait until it exited (SIGKILL after `timeout`, default stop_timeout)."""
        b = self._brokers[broker_id]
        self._signal(b, signal.SIGTERM)
        self._wait_or_kill(b, self.stop_timeout if timeout is None else timeout)

    def add_broker(self, broker_id: int | None = None) -> int:
        """A new broker process (the next id when None) on the cluster's ZooKeeper, with its own data dir and a free
        port; returns its id once it is registered (its ready line), so the controller lists it in Metadata. As on
        Kafka, no partition moves to it by itself: topics created later are placed on it too."""
        node_id = max(self._brokers) + 1 if broker_id is None else broker_id
        if node_id in self._brokers:
            raise ValueError(f"broker {node_id} exists")
        d = self.data_dir / f"broker-{node_id}"
        d.mkdir(parents=True, exist_ok=True)
        self._brokers[node_id] = _Broker(node_id, d)
        try:
            self._start_one(node_id)
        except BaseException:
            del self._brokers[node_id]
            raise
        return node_id

    def kill_broker(self, broker_id: int) -> None:
        """SIGKILL: no shutdown work at all; its ZooKeeper session lives on until it times out."""
        b = self._brokers[broker_id]
        if b.running():
            b.proc.kill()
            b.proc.wait(10)
        b.paused = False

    def start_broker(self, broker_id: int) -> None:
        """Start a stopped or killed broker again: the same node id, port and data dir. Returns at its ready
        line, which a ZooKeeper-mode broker logs once registered: after a kill, once the killed process's
        session expired (its /brokers/ids node is in the way until then)."""
        self._start_one(broker_id)

    def pause_broker(self, broker_id: int) -> None:
        """SIGSTOP: the process is frozen (no heartbeats to ZooKeeper, no answers) until resume_broker."""
        b = self._brokers[broker_id]
        if not b.running():
            raise RuntimeError(f"broker {broker_id} is not running")
        os.kill(b.proc.pid, signal.SIGSTOP)
        b.paused = True

    def resume_broker(self, broker_id: int) -> None:
        b = self._brokers[broker_id]
        if b.running():
            os.kill(b.proc.pid, signal.SIGCONT)
        b.paused = False

    def is_running(self, broker_id: int) -> bool:
        """The broker's process exists (a paused one too: see is_paused)."""
        return self._brokers[broker_id].running()

    def is_paused(self, broker_id: int) -> bool:
        return self._brokers[broker_id].paused

    def pid(self, broker_id: int) -> int:
        return self._brokers[broker_id].proc.pid

    # -- addresses ------------------------------------------------------------------------------
    @property
    def node_ids(self) -> list[int]:
        return sorted(self._brokers)

    @property
    def ports(self) -> dict[int, int]:
        return {i: b.port for i, b in sorted(self._brokers.items())}

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(self.bootstrap_of(i) for i in self.node_ids)

    def control_url(self, broker_id: int) -> str:
        """The broker's control listener (ProcessCluster(control=True)): its faults and request log over HTTP."""
        url = self._brokers[broker_id].control_url
        assert url is not None, "ProcessCluster(control=True) serves control listeners"
        return url

    def bootstrap_of(self, broker_id: int) -> str:
        return f"{self.host}:{self._brokers[broker_id].port}"

    def log_tail(self, broker_id: int, lines: int = 60) -> str:
        """The last stderr lines of a broker (over its restarts), for failure messages."""
        return "".join(list(self._brokers[broker_id].tail)[-lines:])

    def log_tails(self, lines: int = 30) -> str:
        return "\n".join(f"== broker {i} ==\n{self.log_tail(i, lines)}" for i in self.node_ids)

    # -- ZooKeeper ------------------------------------------------------------------------------
    @property
    def zk(self):
        """A kazoo client rooted at the cluster's chroot, for reading (the brokers' data: do not write)."""
        assert self._zk is not None, "not started"
        return self._zk

    def zk_get(self, path: str) -> Any:
        """A znode's decoded value; KeyError when it does not exist."""
        from kazoo.exceptions import NoNodeError
        try:
            raw, _ = self.zk.get(path)
        except NoNodeError:
            raise KeyError(path) from None
        return _decode(raw)

    def zk_children(self, path: str) -> list[str]:
        from kazoo.exceptions import NoNodeError
        try:
            return sorted(self.zk.get_children(path))
        except NoNodeError:
            return []

    @property
    def live_brokers(self) -> list[int]:
        """The ids registered under /brokers/ids (ephemeral: a broker whose session ended is gone)."""
        return sorted(int(c) for c in self.zk_children("/brokers/ids"))

    @property
    def controller_id(self) -> int:
        try:
            value = self.zk_get("/controller")
        except KeyError:
            return -1
        return int(value["brokerid"]) if isinstance(value, dict) and "brokerid" in value else -1

    @property
    def controller_epoch(self) -> int:
        """/controller_epoch (0 before the first election, Kafka's initial epoch)."""
        try:
            return int(self.zk_get("/controller_epoch"))
        except KeyError:
            return 0

    def registration(self, broker_id: int) -> dict:
        """/brokers/ids/<id> (KeyError when the broker is not registered)."""
        return self.zk_get(f"/brokers/ids/{broker_id}")

    def endpoints(self, broker_id: int) -> dict[str, tuple[str, int]]:
        """The listeners a broker registered: {"PLAINTEXT": (host, port), "INTERNAL": (host, port), ...}."""
        out = {}
        for ep in self.registration(broker_id).get("endpoints", []):
            name, _, addr = ep.partition("://")
            host, _, port = addr.rpartition(":")
            out[name] = (host.strip("[]"), int(port))
        return out

    def zk_tree(self) -> dict[str, Any]:
        """Every znode under the chroot (ZooKeeper's own /zookeeper left out): path -> decoded value
        (JSON, or None for an empty node). Paths are relative to the chroot."""
        from kazoo.exceptions import NoNodeError
        out: dict[str, Any] = {}

        def walk(path: str) -> None:
            try:
                children = self.zk.get_children(path)
            except NoNodeError:
                return
            for c in sorted(children):
                child = f"{path.rstrip('/')}/{c}"
                if child == "/zookeeper":
                    continue
                try:
                    raw, _ = self.zk.get(child)
                except NoNodeError:      # deleted while we walked
                    continue
                out[child] = _decode(raw)
                walk(child)

        walk("/")
        return out

    # -- what the brokers say -------------------------------------------------------------------
    def metadata_view(self, broker_id: int, timeout: float = 10.0) -> dict:
        """The broker's own view from a Metadata request (v12, or the highest it serves) for all topics:
        {"controller_id", "brokers": sorted [(id, host, port)],
         "topics": {name: {partition: (leader, leader_epoch, sorted isr tuple, replicas tuple)}}}."""
        from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

        from .wire_client import WireClient
        with WireClient.connect(self.bootstrap_of(broker_id), timeout=timeout) as w:
            versions = w.request(ApiVersionsRequest(), 0)
            top = max((k.max_version for k in versions.api_keys if k.api_key == MetadataRequest.API_KEY), default=0)
            v = min(12, top)
            req = MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                  include_cluster_authorized_operations=False,
                                  include_topic_authorized_operations=False)
            resp = w.request(req, v)
        topics = {}
        for t in resp.topics:
            topics[t.name] = {p.partition_index: (p.leader_id, p.leader_epoch, tuple(sorted(p.isr_nodes)),
                                                  tuple(p.replica_nodes))
                              for p in t.partitions}
        return {"controller_id": resp.controller_id,
                "brokers": sorted((b.node_id, b.host, b.port) for b in resp.brokers),
                "topics": topics}

    def leader(self, topic: str, partition: int) -> int:
        """The partition's leader as the controller's broker reports it (-1: none, or no controller)."""
        ctl = self.controller_id
        if ctl == -1:
            return -1
        p = self.metadata_view(ctl)["topics"].get(topic, {}).get(partition)
        return -1 if p is None else p[0]

    def move_leader(self, topic: str, partition: int, broker_id: int) -> dict:
        """Make a live ISR member the partition's leader: POST /v1/leaders to the controller's control listener
        (ProcessCluster(control=True)), which writes the state node and sends LeaderAndIsr; the partition's state
        as the controller has it then. ValueError with the control plane's message when refused."""
        body = {"topic": topic, "partition": partition, "broker": broker_id}
        return self.control_call(self.controller_id, "POST", "/v1/leaders", body)["partitions"][0]

    def make_leaderless(self, topic: str, partition: int) -> dict:
        """POST /v1/leaderless to the controller's listener: leader -1 until `restore_leader`."""
        return self.control_call(self.controller_id, "POST", "/v1/leaderless", {"topic": topic, "partition": partition})

    def restore_leader(self, topic: str | None = None, partition: int | None = None) -> dict:
        return self.control_call(self.controller_id, "DELETE", "/v1/leaderless", {"topic": topic, "partition": partition})

    def reassign(self, topic: str, partition: int, replicas: list[int]) -> dict:
        """POST /v1/replicas to the controller's listener: the new replicas copy the log and join the ISR, then those
        not kept leave (a leader not kept hands over) -> the partition's state."""
        body = {"topic": topic, "partition": partition, "replicas": list(replicas)}
        return self.control_call(self.controller_id, "POST", "/v1/replicas", body)["partitions"][0]

    def remove_broker(self, broker_id: int) -> list[dict]:
        """Decommission a broker process as an operator does on Kafka: each partition it hosts is reassigned through
        the controller's listener (the live broker with the fewest replicas takes its place, when one is not a
        replica yet; else the partition keeps one replica less), its new replica catching up first; then the process
        is stopped and forgotten. -> the partitions' new states."""
        if broker_id not in self._brokers:
            raise ValueError(f"no broker {broker_id}")
        live = set(self.live_brokers) - {broker_id}
        if not live:
            raise ValueError(f"broker {broker_id} is the last live broker: the cluster would have none")
        topics = self.metadata_view(self.controller_id)["topics"]
        load = collections.Counter(r for parts in topics.values() for *_, replicas in parts.values() for r in replicas)
        moved = []
        for topic, parts in sorted(topics.items()):
            for index, (*_, replicas) in sorted(parts.items()):
                if broker_id not in replicas:
                    continue
                spare = sorted((load[b], b) for b in live if b not in replicas)
                if spare:
                    load[spare[0][1]] += 1
                    new = [spare[0][1] if r == broker_id else r for r in replicas]
                else:
                    new = [r for r in replicas if r != broker_id]
                moved.append(self.reassign(topic, index, new))
        self.stop_broker(broker_id)
        del self._brokers[broker_id]
        return moved

    def cut_controller(self, broker_id: int) -> dict:
        """POST /v1/controller/cut to the controller's listener: its LeaderAndIsr and UpdateMetadata to `broker_id`
        fail and queue up (the broker keeps its old view) until `heal_controller`, when they go out in order."""
        return self.control_call(self.controller_id, "POST", "/v1/controller/cut", {"broker": broker_id})

    def heal_controller(self, broker_id: int) -> dict:
        return self.control_call(self.controller_id, "POST", "/v1/controller/heal", {"broker": broker_id})

    def empty(self) -> dict[int, dict]:
        """POST /v1/reset {"data": true} to every running broker's listener (the controls and request logs go too):
        the first deletes every topic but the internal ones, the ACLs and SCRAM users (in ZooKeeper, cluster-wide);
        each deletes the groups it coordinates. -> each broker's answer's "emptied"."""
        return {b: self.control_call(b, "POST", "/v1/reset", {"data": True})["emptied"]
                for b in self.node_ids if self.is_running(b)}

    def control_call(self, broker_id: int, method: str, path: str, body: dict | None = None) -> dict:
        """A request to the broker's control listener -> its JSON answer; ValueError with the message of a 4xx."""
        import json
        import urllib.error
        import urllib.request
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.control_url(broker_id) + path, data=data, method=method)
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as exc:
            raise ValueError(json.loads(exc.read())["error"]) from None

    def wait_until(self, predicate: Callable[[], Any], timeout: float = 30.0, what: str = "condition",
                   interval: float = 0.05) -> Any:
        """Poll `predicate` until it returns something truthy (returned) or `timeout` seconds passed
        (AssertionError naming `what`, with the last exception the predicate raised, if any)."""
        deadline = time.monotonic() + timeout
        last_exc: BaseException | None = None
        while True:
            try:
                value = predicate()
                if value:
                    return value
                last_exc = None
            except Exception as exc:   # e.g. a broker not listening yet: keep polling
                last_exc = exc
            if time.monotonic() >= deadline:
                why = f" (last error: {last_exc!r})" if last_exc is not None else ""
                raise AssertionError(f"{what}: not within {timeout}s{why}") from last_exc
            time.sleep(interval)
