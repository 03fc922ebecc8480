"""The node lifecycle: the one way to start brokers, used by every entry point.

    async with open_node(config, data_dir=None, in_memory=True, brokers=3) as node:
        node.bootstrap_servers          # "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
        node.stop_broker(2); await node.wait_stopped(2); await node.start_broker(2)

`open_node` builds the state the brokers of this process share (`ClusterState`: cluster
metadata, the controllers' coordination store), the partitions (one broker: the process's, in the data dir;
an in-process cluster: each broker its own `services.Storage`, in `<data dir>/broker-<id>`, replicated between
them as between processes), starts their background services, starts the brokers in one nursery, and on exit
cancels them and closes the services (the logs). `kafkite serve`
(app.serve), `BrokerThread`, `KafkiteCluster` and, through `kafkite serve`, `BrokerProcess`
all start brokers through it.
"""
from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator, Iterable

import structlog
import trio

from .. import services
from ..config import BrokerConfig
from ..config_keys import check_broker_keys
from .broker import Broker, ClusterState, parse_listener

log = structlog.get_logger("kafkite.node")


class Node:
    """The brokers of this process over their shared state (yielded by `open_node`)."""

    def __init__(self, state: ClusterState, nursery: trio.Nursery, *, faults=None, racks: dict[int, str] | None = None):
        self.state = state
        self.racks = dict(racks or {})  # node id -> broker.rack (else the config's)
        self.config = state.config
        self.faults = faults
        self.brokers: dict[int, Broker] = {}  # the last broker started under each node id (kept when stopped)
        self.ports: dict[int, int] = {}  # each node id's port: a restarted broker listens where it did
        self._nursery = nursery
        self._scopes: dict[int, trio.CancelScope] = {}
        # an in-process cluster: each broker's storage services (retention, cleaner, flushes), stopped on removal
        self._services: dict[int, tuple[trio.CancelScope, trio.Event]] = {}
        # set before open_node's exit: the node ends as a killed process does (no controlled shutdown; the logs'
        # files closed without a flush, checkpoints or the clean-shutdown marker: the next start recovers them)
        self.killed = False

    @property
    def live_brokers(self) -> list[int]:
        """Node ids of the brokers serving now."""
        return sorted(self.state.brokers)

    @property
    def bootstrap_servers(self) -> str:
        """Every broker started (stopped ones included: clients skip them), in node id order."""
        return ",".join(self.brokers[i].bootstrap for i in sorted(self.brokers))

    async def start_broker(self, node_id: int, *, port: int | None = None) -> Broker:
        """Start a broker (again) under `node_id`; returns once it listens and is registered."""
        if node_id in self._scopes:
            raise RuntimeError(f"broker {node_id} is running")
        if port is None:
            port = self.ports.get(node_id)
        b = await self._nursery.start(self._run_broker, node_id, port)
        await self._settled()
        return b

    async def _settled(self) -> None:
        """The controller's changes so far (elections, a broker come or gone) written and told to the brokers."""
        if self.state.writer is not None:
            await self.state.writer.durable()
        await self.state.logs_settled()

    def stop_broker(self, node_id: int) -> None:
        """Stop a broker as if its process died: listener closed, connections dropped, session ended
        (the remaining brokers elect a controller and move leadership). Returns at once: see wait_stopped."""
        self._scopes[node_id].cancel()

    async def wait_stopped(self, node_id: int) -> None:
        while node_id in self.state.brokers or node_id in self._scopes:
            await trio.sleep(0.01)
        await self._settled()

    async def start_services(self, node_id: int, storage) -> None:
        """Run a broker's storage services (services.run) until `remove_broker` (or the node's end)."""
        scope, done = trio.CancelScope(), trio.Event()
        self._services[node_id] = scope, done

        async def run(*, task_status=trio.TASK_STATUS_IGNORED) -> None:
            try:
                with scope:
                    await services.run(storage, task_status=task_status)
            finally:
                done.set()
        await self._nursery.start(run)

    async def add_broker(self, node_id: int | None = None, *, rack: str | None = None) -> Broker:
        """A new broker in this one-process cluster (librdkafka's mock broker_add, kfake's AddNode): its own (empty)
        partitions and services, a free port; returns once it listens and is registered, so the controller lists it
        in Metadata. As on Kafka, no partition moves to it by itself: topics and partitions created later are placed
        on it, and a partition gets it by reassignment (control/topology.py). `node_id`: the next one when None."""
        st = self.state
        if st.zk is not None or not st.storages:
            raise ValueError("adding a broker is served for one-process clusters of several brokers (kafkite serve "
                             "--brokers N, KafkiteCluster); in ZooKeeper mode start another process")
        if node_id is None:
            node_id = max(set(st.storages) | set(self.brokers)) + 1
        if node_id < 0 or node_id in st.storages or node_id in self.brokers:
            raise ValueError(f"broker {node_id} exists" if node_id >= 0 else "a broker id is >= 0")
        # (a new broker's data dir holds nothing yet: opening it is quick)
        storage = services.Storage(st, node_id, None if st.in_memory else st.data_dir / f"broker-{node_id}",
                                   st.in_memory)
        st.storages[node_id] = storage
        if rack is not None:
            self.racks[node_id] = rack
        try:
            await self.start_services(node_id, storage)
            return await self.start_broker(node_id, port=0)
        except BaseException:
            with trio.CancelScope(shield=True):
                await self._forget(node_id)
            raise

    async def remove_broker(self, node_id: int) -> None:
        """Stop a broker and forget it: its port, storage services and partitions (closed; a data dir keeps its
        files). Its partitions are moved off it first by control/topology.py's decommission."""
        if node_id not in self.state.storages:
            raise ValueError(f"no broker {node_id} in this one-process cluster")
        if len(self.state.storages) == 1:
            raise ValueError("the last broker of a cluster is not removed")
        if node_id in self._scopes:
            self.stop_broker(node_id)
            await self.wait_stopped(node_id)
        await self._forget(node_id)

    async def _forget(self, node_id: int) -> None:
        if node_id in self._scopes:
            self.stop_broker(node_id)
            await self.wait_stopped(node_id)
        storage = self.state.storages.pop(node_id, None)
        scope, done = self._services.pop(node_id, (None, None))
        if scope is not None:
            scope.cancel()
            await done.wait()
        self.brokers.pop(node_id, None)
        self.ports.pop(node_id, None)
        self.racks.pop(node_id, None)
        for key in [k for k in self.state.listener_ports if k[0] == node_id]:
            del self.state.listener_ports[key]
        if storage is not None:
            await trio.to_thread.run_sync(services.close, storage)

    def set_rack(self, node_id: int, rack: str | None) -> None:
        """Change a running broker's broker.rack (librdkafka's mock broker_set_rack; on Kafka a restart with another
        broker.rack): its registration is rewritten, so the controller tells every broker and Metadata shows it."""
        from ..controller import zk_data
        from ..controller.controller import BROKERS
        b = self.brokers.get(node_id)
        if self.state.zk is not None or b is None or node_id not in self.state.brokers:
            raise ValueError(f"broker {node_id} is not running in this one-process cluster")
        path = f"{BROKERS}/{node_id}"
        got = self.state.store.get(path)
        if got is None:
            raise ValueError(f"broker {node_id} is not registered")
        reg = zk_data.parse_broker_registration(node_id, got[0])
        b.rack = rack or None
        if rack:
            self.racks[node_id] = rack
        else:
            self.racks.pop(node_id, None)
        import dataclasses
        self.state.store.set(path, zk_data.broker_registration(dataclasses.replace(reg, rack=b.rack),
                                                               int(got[0].get("timestamp", 0))),
                             expected_version=got[1])

    async def _run_broker(self, node_id: int, port: int | None, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        b = Broker(self.state, node_id=node_id, port=port, rack=self.racks.get(node_id))
        b.faults = self.faults
        with trio.CancelScope() as cs:
            self._scopes[node_id] = cs
            try:
                async with trio.open_nursery() as n:
                    await n.start(b.serve)
                    self.brokers[node_id] = b
                    self.ports[node_id] = b.bound_port
                    task_status.started(b)
            finally:
                self._scopes.pop(node_id, None)


def broker_plan(config: BrokerConfig, brokers: int, node_ids: Iterable[int] | None = None) -> list[tuple[int, int]]:
    """(node id, port) of each broker to start. One broker: the configured node id (`node.id`/`broker.id`) on
    the listener's port. N brokers: node ids 1..N (or `node_ids`) on ports P, P+1, ... (all free ports when
    the listener's port P is 0)."""
    _, port = parse_listener(config.get("listeners"))
    if node_ids is not None:
        ids = list(node_ids)
    else:
        ids = [config.node_id] if brokers == 1 else list(range(1, brokers + 1))
    return [(node_id, 0 if port == 0 else port + i) for i, node_id in enumerate(ids)]


@asynccontextmanager
async def open_node(config: BrokerConfig, *, data_dir: str | Path | None = None, in_memory: bool = False,
                    brokers: int = 1, node_ids: Iterable[int] | None = None,
                    faults=None, racks: dict[int, str] | None = None) -> AsyncIterator[Node]:
    """Build the shared state, start its services and `brokers` brokers (or one per id of `node_ids`) on
    the listener's host (see broker_plan), yield the `Node` once every broker listens; on exit stop everything and
    close the logs. With `data_dir=None` (or `in_memory`) nothing touches the disk. `racks`: each node id's
    broker.rack (an in-process cluster's brokers share one config)."""
    if brokers < 1:
        raise ValueError(f"brokers must be at least 1, got {brokers}")
    for key, message in check_broker_keys(config.static):  # one warning line per key Kafkite takes no notice of
        log.warning("config.unknown" if "isn't a known config" in message else "config.unused", key=key,
                    message=message)
    state = ClusterState(config, data_dir=None if data_dir is None else Path(data_dir), in_memory=in_memory)
    if state.zk is not None:  # ZooKeeper mode: one broker, the one of broker.id / node.id
        if brokers != 1 or (node_ids is not None and list(node_ids) != [config.node_id]):
            raise ValueError("with zookeeper.connect a process runs one broker (start one process per broker)")
        await state.open_zk()
    try:
        plan = broker_plan(config, brokers, node_ids)
        if len(plan) > 1:  # an in-process cluster: each broker its own partitions, replicated between them
            for node_id, _ in plan:
                state.storages[node_id] = services.Storage(
                    state, node_id, None if state.in_memory else state.data_dir / f"broker-{node_id}", state.in_memory)
            state.hooks.append(services.StorageHooks(state.storages))
        else:
            services.attach(state)
        single = not state.storages
        node = None
        try:
            async with trio.open_nursery() as nursery:
                if state.zk is None and not state.in_memory:  # the metadata snapshot written off the loop
                    from .metadata_writer import MetadataWriter
                    state.writer = MetadataWriter(state.metadata)
                    state.writer.batch = state._one_publish
                    state.writer.publish = state.publish
                    await nursery.start(state.writer.run)
                node = Node(state, nursery, faults=faults, racks=racks)
                if single:
                    await nursery.start(services.run, state)
                for node_id, storage in list(state.storages.items()):
                    await node.start_services(node_id, storage)
                if state.zk is not None:
                    await nursery.start(state.zk.run)
                else:
                    nursery.start_soon(_preferred_leader_checks, state)
                for node_id, port in plan:
                    await node.start_broker(node_id, port=port)
                yield node
                if state.zk is not None and not node.killed:  # a clean stop: leadership moves off it first (Kafka's)
                    await state.zk.controlled_shutdown()
                nursery.cancel_scope.cancel()
        finally:
            # the logs' last flushes, fsyncs and checkpoints, in a worker: nothing else runs on this node any more,
            # and another node of this loop (or a test's) is not held meanwhile
            close = services.abandon if node is not None and node.killed else services.close
            with trio.CancelScope(shield=True):
                for storage in [state] if single else list(state.storages.values()):  # (removed brokers' are closed)
                    await trio.to_thread.run_sync(close, storage)
    finally:
        if state.zk is not None:  # (a no-op once the broker ended its session; else a start that failed on the way)
            await state.zk.close()


async def _preferred_leader_checks(state: ClusterState) -> None:
    """Kafka's auto leader rebalance: every leader.imbalance.check.interval.seconds the active controller gives
    each partition back to its preferred replica where that one is live and in the ISR."""
    while True:
        await trio.sleep(state.config.get("leader.imbalance.check.interval.seconds"))
        c = state.active_controller()
        if c is not None:
            c.check_preferred_leaders()
