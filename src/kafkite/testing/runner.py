"""Run a broker in a background thread so plain synchronous tests can use it."""
from __future__ import annotations

from pathlib import Path

import trio

from ..config import BrokerConfig
from ..server.broker import Broker, ClusterState
from ..server.node import open_node
from .faults import Faults
from .trio_thread import TrioThread


class BrokerThread(TrioThread):
    """A single broker on 127.0.0.1 (random free port by default) in its own Trio thread.

    with BrokerThread() as b:
        KafkaProducer(bootstrap_servers=b.bootstrap_servers)

    `faults` is its control model (kafkite.control.model: errors, drops, latency, holds, version caps, the
    request log); `control=True` also serves it over HTTP at `control_url` (kafkite.control.http).
    """
    thread_name = "kafkite-broker"

    def __init__(self, *, data_dir: str | Path | None = None, overrides: dict[str, str] | None = None,
                 port: int = 0, control: bool = False):
        super().__init__()
        self.faults = Faults()
        self.control = control
        self.control_url: str | None = None
        static = {"listeners": f"PLAINTEXT://127.0.0.1:{port}", "group.initial.rebalance.delay.ms": "0"}
        static.update(overrides or {})
        self.config = BrokerConfig(static=static)
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.state: ClusterState | None = None
        self.broker: Broker | None = None
        self.node = None

    async def _serve(self) -> None:
        async with open_node(self.config, data_dir=self.data_dir, in_memory=self.data_dir is None,
                             faults=self.faults) as node, trio.open_nursery() as side:
            self.state, self.node = node.state, node
            self.broker = node.brokers[self.config.node_id]
            if self.control:
                from ..control.http import ControlApp, serve_control
                app = ControlApp(self.faults, sorted(node.brokers), lambda: node.brokers, lambda: node)
                port = await side.start(serve_control, app, "127.0.0.1", 0)
                self.control_url = f"http://127.0.0.1:{port}"
            await self._started()
            await trio.sleep_forever()

    # -- the controls that act on the broker rather than on requests (the others: `faults`) ------------------
    def make_leaderless(self, topic: str, partition: int) -> None:
        """POST /v1/leaderless: the partition has no leader (Metadata: leader -1, LEADER_NOT_AVAILABLE; Produce and
        Fetch: NOT_LEADER_OR_FOLLOWER) until `restore_leader`."""
        from ..control import views
        self.call(views.make_leaderless, self.node.brokers, topic, partition)

    def restore_leader(self, topic: str | None = None, partition: int | None = None) -> None:
        from ..control import views
        self.call(views.restore_leader, self.node.brokers, topic, partition)

    def advance_clock(self, ms: int) -> list[dict]:
        """POST /v1/clock: the broker's log clock `ms` ahead (retention, compaction, segment.ms, LogAppendTime)."""
        from ..control import views
        return self.call(views.advance_clock, self.node.brokers, ms)

    @property
    def bootstrap_servers(self) -> str:
        assert self.broker is not None
        return self.broker.bootstrap

    @property
    def port(self) -> int:
        assert self.broker is not None and self.broker.bound_port is not None
        return self.broker.bound_port
