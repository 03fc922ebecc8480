"""A ZooKeeper-mode broker stopped and started over its own control listener (POST /v1/brokers/stop, /start), as if
its `kafkite serve` process died and was started again with the same config, while the control listener (and its
control model: faults, request log) stays up.

`kafkite serve --control-port` in ZooKeeper mode runs its broker through `ZkBrokerRunner`: each start is one whole
`server.node.open_node` from the process's config -- a new ClusterState, a new ZooKeeper session and controller event
thread, the logs opened (recovered) from the data dir, the broker registered and serving -- and each stop is the end of
it, so nothing of the old broker is kept or patched back:

- a stop (the default, `{"clean": false}`) is a kill: the client and inter-broker listeners close, connections drop,
  the replica fetchers and the controller channel stop, the ZooKeeper session is closed (so /brokers/ids/N goes at
  once and the controller moves the leaderships; a killed process's session would linger until
  zookeeper.session.timeout.ms, which only delays the same outcome), and the logs' files are closed without a flush,
  checkpoints or the clean-shutdown marker (what a killed process leaves: the OS keeps the bytes written): the next
  start recovers them from the recovery points;
- a clean stop (`{"clean": true}`) is SIGTERM's: a controlled shutdown first (the controller moves this broker's
  leaderships away before it leaves), then the logs flushed, checkpointed and marked clean.

A kill is the default because it is what the same route does to a one-process cluster's broker, what librdkafka's
mock (broker_set_down) and kfake do, and the harder case for a client (requests in flight are cut).
"""
from __future__ import annotations

from pathlib import Path

import structlog
import trio

from ..server.node import Node, open_node

log = structlog.get_logger("kafkite.control")


class ZkBrokerRunner:
    """The one broker of a ZooKeeper-mode `kafkite serve` process, stoppable and startable while the process runs.
    `node` is the running server.node.Node, None while stopped."""

    def __init__(self, config, *, data_dir: Path | None, in_memory: bool, faults=None) -> None:
        self.config = config
        self.node_id = config.node_id
        self._kw = {"data_dir": data_dir, "in_memory": in_memory, "faults": faults}
        self._static = dict(config.static)
        self.node: Node | None = None
        self.ports: dict[str, int] = {}  # each client listener's bound port (kept across restarts)
        self._stop: trio.Event | None = None
        self._clean = False
        self._done: trio.Event | None = None
        self._busy = trio.Lock()  # one stop or start at a time
        self._nursery: trio.Nursery | None = None

    @property
    def brokers(self) -> dict:
        """The running broker by id ({} while stopped)."""
        return {} if self.node is None else self.node.brokers

    @property
    def live_brokers(self) -> list[int]:
        return [] if self.node is None else self.node.live_brokers

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Start the broker, then keep the nursery its later starts run in until cancelled (the process's end)."""
        async with trio.open_nursery() as n:
            self._nursery = n
            first = await self._start()
            task_status.started(first)
            await trio.sleep_forever()

    async def _start(self) -> Node:
        return await self._nursery.start(self._serve_once)

    async def _serve_once(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        # the config as the process read it (a restarted process loads its dynamic configs from ZooKeeper afresh),
        # its listeners on the ports they bound the first time (where they were configured as 0)
        static = dict(self._static)
        if self.ports:
            static["listeners"] = self._listeners_on(self.ports)
        config = type(self.config)(static=static)
        self._stop, self._done = trio.Event(), trio.Event()
        try:
            async with open_node(config, **self._kw) as node:
                self.node = node
                if not self.ports:
                    self.ports = {name: port for (nid, name), port in node.state.listener_ports.items()
                                  if nid == self.node_id}
                task_status.started(node)
                await self._stop.wait()
                node.killed = not self._clean  # open_node skips the controlled shutdown and the clean close
        finally:
            self.node = None
            self._done.set()

    def _listeners_on(self, ports: dict[str, int]) -> str:
        """`listeners` with each client listener configured on port 0 on the port it bound the first time."""
        from ..server.broker import _listeners
        return ",".join(f"{name}://{f'[{host}]' if ':' in host else host}:{port or ports.get(name, 0)}"
                        for name, host, port in _listeners(self.config.get("listeners")))

    def stopped_view(self) -> dict:
        """GET /v1/brokers while stopped: the broker, not live, on the port it comes back on."""
        from ..network.listeners import listeners_of
        port = self.ports.get(listeners_of(self.config).client[0].listener)
        return {"brokers": [{"id": self.node_id, "live": False, "port": port, "rack": None}], "controller": None}

    def _check(self, broker_id: int) -> None:
        if broker_id != self.node_id:
            raise ValueError(f"unknown broker {broker_id}: this ZooKeeper-mode process runs broker {self.node_id} "
                             "(ask that broker's own control listener)")

    async def stop(self, broker_id: int, *, clean: bool = False) -> None:
        """Stop the broker (a kill, or with `clean` a controlled shutdown); returns once it is gone: out of
        ZooKeeper, its listeners and logs closed."""
        self._check(broker_id)
        async with self._busy:
            if self.node is None:
                raise ValueError(f"broker {broker_id} is not running")
            self._clean = clean
            log.info("broker.stopping", broker=broker_id, clean=clean)
            self._stop.set()
            await self._done.wait()
            log.info("broker.stopped", broker=broker_id, clean=clean)

    async def start(self, broker_id: int) -> None:
        """Start it again from the same config on the same port and data dir; returns once it is registered and
        serving (as `kafkite serve` is at its ready line)."""
        self._check(broker_id)
        async with self._busy:
            if self.node is not None:
                raise ValueError(f"broker {broker_id} is running")
            try:
                node = await self._start()
            except Exception as exc:  # (nothing of it is left: open_node closed what it had opened)
                while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
                    exc = exc.exceptions[0]
                log.warning("broker.start_failed", broker=broker_id, error=repr(exc))
                raise RuntimeError(f"broker {broker_id} did not start: {exc}") from None
            log.info("broker.restarted", broker=broker_id, bootstrap=node.bootstrap_servers)
