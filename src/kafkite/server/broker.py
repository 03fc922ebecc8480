"""A broker: its listener, its connections, and the state it serves from.

`ClusterState` (cluster_state.py) is everything brokers of one process share (the cluster metadata, the
coordination store the controllers elect themselves through): a single `kafkite serve` has
one broker over it, whose partitions are the process's (`state.replicas`); the in-process
cluster has several, each with its own node id, listeners, metadata cache, group coordinator
and partitions (`state.storages[node_id]`, replicated between the brokers as between
processes). `Broker` owns the Trio side: the listening sockets, one task per connection,
and shutdown by cancelling its nursery. Where the cluster's metadata lives (this process, or ZooKeeper) is its
`admin` (admin_manager.py), chosen once: admin requests, its controller, its registration and stop go there.
"""
from __future__ import annotations

import dataclasses
import functools
import math

import structlog
import trio

from ..controller.controller import MetadataCache
from ..controller.metadata import BrokerInfo
from .admin_manager import admin_manager
from .cluster_state import ClusterState
from ..network.connection import serve_connection
from .fetch_session import FetchSessionCache
from .group_coordinator_service import GroupCoordinatorService
from .transaction_coordinator_service import TransactionCoordinatorService
from ..network.quotas import ConnectionQuotas, MemoryPool, accept_loop
from .kafka_apis import KafkaApis
from .router import Router
from ..network.listeners import PROTOCOLS, WILDCARDS, inter_broker_name, listeners_of, serve_listener

log = structlog.get_logger("kafkite.broker")
TLS_HANDSHAKE_TIMEOUT_S = 10.0


def _listeners(config_value: str) -> list[tuple[str, str, int]]:
    """'PLAINTEXT://h:p,INTERNAL://h:q' -> [(name, host, port)] (a bare 'h:p' is PLAINTEXT)."""
    out = []
    for item in config_value.split(","):
        item = item.strip()
        if not item:
            continue
        name, rest = item.split("://", 1) if "://" in item else ("PLAINTEXT", item)
        host, _, port = rest.rpartition(":")
        out.append((name.upper(), host.strip("[]") or "0.0.0.0", int(port)))
    return out


CLIENT_PROTOCOLS = PROTOCOLS  # a client listener's
_inter_broker_name = inter_broker_name  # (cli.py)


def parse_listener(listener: str, config=None) -> tuple[str, int]:
    """The primary client listener of `listeners` (the first that is not the inter-broker one): (host, port)."""
    if config is None:
        entries = _listeners(listener)
        _, host, port = next((e for e in entries if e[0] != "INTERNAL"), entries[0])
        return host, port
    ep = listeners_of(config).client[0]
    return ep.host or "0.0.0.0", ep.port


def client_protocol(config) -> tuple[str, str]:
    """(listener name, security protocol) of the broker's primary client listener."""
    ep = listeners_of(config).client[0]
    return ep.listener, ep.protocol


def inter_broker_listener(config, client_host: str) -> tuple[str, int]:
    """(host, port) of the inter-broker listener: the `listeners` entry named by inter.broker.listener.name
    (default INTERNAL), else a free port on the client listener's host."""
    inter = listeners_of(config).inter_broker
    if inter is None:
        return client_host, 0
    return inter.host or "0.0.0.0", inter.port


LOAD_CHUNK = 100  # partitions whose (loaded) logs Broker._load_logs puts in service in one step of the loop


class Broker:
    """One broker: a node id, a listener, and the shared state behind it."""

    def __init__(self, state: ClusterState, *, node_id: int | None = None, host: str | None = None,
                 port: int | None = None, advertised_host: str | None = None, rack: str | None = None):
        self.state = state
        self.config = state.config
        self.node_id = node_id if node_id is not None else state.config.node_id
        spec = listeners_of(state.config)
        primary = spec.client[0]
        self.host = host if host is not None else (primary.host or "0.0.0.0")
        self.port = port if port is not None else primary.port
        self.primary_listener = primary.listener
        adv_host, adv_port = spec.advertised.get(primary.listener, (None, 0))
        self.advertised_host = advertised_host or adv_host or None
        # an advertised port is taken by the broker that binds the configured port (an in-process cluster's others
        # bind the next ones: they advertise what they bind)
        self.advertised_port = adv_port if adv_port and self.port == primary.port else 0
        # ZooKeeper mode: the INTERNAL listener of `listeners` (or `inter.broker.listener.name`), else a free
        # port on the client listener's host
        self.internal_host, self.internal_port = inter_broker_listener(state.config, self.host)
        # each client listener's TLS context and SASL settings (security/ssl_context.py, security/sasl.py), built
        # now so that a bad keystore or JAAS config stops the start
        self.client_listeners = [serve_listener(ep, spec.advertised, state.config, lambda user, mech: (
            state.metadata.scram_credential(user, mech))) for ep in spec.client]
        # the inter-broker listener as this broker serves it (TLS, SASL) and connects to the others' (its credentials)
        from .interbroker import inter_broker_security
        from ..network.listeners import EndPoint
        self.inter_broker_security = inter_broker_security(state.config)
        self.inter_broker_listener = serve_listener(
            spec.inter_broker or EndPoint(self.inter_broker_security.listener, "PLAINTEXT", self.internal_host,
                                          self.internal_port), spec.advertised, state.config,
            lambda user, mech: state.metadata.scram_credential(user, mech))
        self.ssl_context = self.client_listeners[0].ssl_context
        self.sasl_config = self.client_listeners[0].sasl_config
        self.rack = rack or state.config.get("broker.rack") or None  # broker.rack (KIP-392 follower fetching)
        self.cache = MetadataCache(self.node_id)  # this broker's view, fed by the controller
        # the partitions this broker hosts: its own in an in-process cluster, else the process's
        storage = state.storages.get(self.node_id)
        self.replicas = storage.replicas if storage is not None else state.replicas
        self.broker_epoch = -1  # ZooKeeper mode: the czxid of its registration (Kafka's broker epoch)
        # the cluster's metadata as this broker reaches it, in-process or in ZooKeeper (admin_manager.py): admin
        # requests, its controller, its life cycle against it
        self.admin = admin_manager(self)
        self.controller = self.admin.controller
        self.groups = GroupCoordinatorService(self)
        self.transactions = TransactionCoordinatorService(self)
        # this broker's incremental fetch sessions (KIP-227): in memory, lost when the broker restarts
        self.fetch_sessions = FetchSessionCache(self.config.get("max.incremental.fetch.session.cache.slots"))
        # the request handler (Kafka's KafkaApis) holding the managers above, and the router calling it
        self.apis = KafkaApis(self)
        self.router = Router(self, self.apis)
        self.cache.listeners.append(lambda _old, cache: self.groups.on_metadata(cache))
        self.cache.listeners.append(lambda _old, cache: self.transactions.on_metadata(cache))
        self.connections: set[trio.abc.Stream] = set()
        self.client_connections: set = set()  # listeners.Connection of each open connection (listener, principal)
        self.connection_quotas = ConnectionQuotas(self.config)  # max.connections, max.connections.per.ip
        self.memory_pool = MemoryPool.from_config(self.config)  # queued.max.request.bytes
        self.bound_port: int | None = None
        self._cancel: trio.CancelScope | None = None
        self._nursery: trio.Nursery | None = None  # the broker's own tasks, while it serves
        self._to_load: set[tuple[str, int]] = set()  # in-process cluster: partitions whose logs _load_logs makes
        self._loading = False
        self._loaded = trio.Event()  # set whenever _load_logs has nothing left to do
        self._loaded.set()

    @property
    def replicated(self) -> bool:
        """Whether this broker copies partitions from their leaders (ZooKeeper mode, an in-process cluster)."""
        return self.replicas.is_replicated

    def _apply_partition_states(self, cache: MetadataCache, *, inline: bool = False,
                                only: set[tuple[str, int]] | None = None) -> None:
        """An in-process cluster: the controller's view applied to this broker's replicas as Kafka's LeaderAndIsr
        (a partition at a newer leader epoch: leader or follower), UpdateMetadata (the ISR of a partition it
        leads) and StopReplica (a partition it no longer hosts) would apply it. A partition whose log is to be made
        or loaded (and recovered) from disk waits for it: it is made in a worker thread (`_load_logs`), as
        handle_leader_and_isr does in ZooKeeper mode, and its state applied then (meanwhile this broker answers
        NOT_LEADER_OR_FOLLOWER for it, as a Kafka broker does before its LeaderAndIsr is done)."""
        rm = self.replicas
        lc = rm.lifecycle
        hosted = set()
        for t in list(cache.topics.values()):
            for p in t.partitions:
                if self.node_id not in p.replicas:
                    continue
                key = (t.name, p.index)
                hosted.add(key)
                if only is not None and key not in only:
                    continue
                if key not in rm.leader_epochs or p.leader_epoch > rm.leader_epochs[key]:
                    if not inline and self._nursery is not None and lc.must_load(key):
                        self._to_load.add(key)
                        continue
                    rm.become_replica(t, dataclasses.replace(p, replicas=list(p.replicas), isr=list(p.isr)))
                elif p.leader == self.node_id:
                    rm.on_isr_changed(t.name, p.index, list(p.isr), p.partition_epoch)
        if only is None:
            for key in [k for k in rm.leader_epochs if k not in hosted]:
                # a replica a reassignment took off this broker: its files go, as StopReplica(deletePartition=true)
                # has them go on Kafka (renamed now, removed in a worker thread: LogLifecycle._delete_dir); a
                # deleted topic's files go with StorageHooks.on_topic_deleted
                t = cache.topics.get(key[0])
                rm.stop_replica(*key, delete=t is not None and key[1] < len(t.partitions))
        if self._to_load and not self._loading:
            try:
                self._nursery.start_soon(self._load_logs)
            except RuntimeError:  # the broker is stopping (its nursery closed): they open with its next start
                self._to_load.clear()
            else:
                self._loading = True
                self._loaded = trio.Event()

    async def logs_settled(self) -> None:
        """Once the logs the controller's view asked for so far are made and in service (an in-process cluster:
        CreateTopics and CreatePartitions are answered then, as when they were made inline)."""
        while self._loading:
            await self._loaded.wait()

    async def _load_logs(self) -> None:
        """Make or load (recover) the logs `_apply_partition_states` left, in a worker thread, then apply the
        controller's latest view to them, LOAD_CHUNK partitions a step (what the worker could not make is opened
        there, as before)."""
        lc = self.replicas.lifecycle
        try:
            while self._to_load:
                keys, self._to_load = self._to_load, set()
                by_topic: dict[str, list[int]] = {}
                for t, i in sorted(keys):
                    by_topic.setdefault(t, []).append(i)
                prepared = []
                async with lc.making_logs:
                    try:
                        for name, indexes in by_topic.items():
                            info = self.cache.topic(name)
                            if info is not None:
                                prepared.append((info, indexes))
                                await lc.prepare_logs(info, indexes, existing=True)
                        ordered = sorted(keys)
                        for i in range(0, len(ordered), LOAD_CHUNK):
                            self._apply_partition_states(self.cache, inline=True, only=set(ordered[i:i + LOAD_CHUNK]))
                            await trio.sleep(0)  # (other tasks run between two chunks)
                    finally:
                        if self._nursery is not None:  # (still serving)
                            self._apply_partition_states(self.cache, inline=True)
                        for info, indexes in prepared:
                            lc.discard_prepared(info, indexes)  # (those no longer this broker's)
        finally:
            self._loading = False
            self._loaded.set()

    @property
    def faults(self):
        """The control plane (control/model.py: testing's Faults) when fault injection is on, else None."""
        return self.apis.faults

    @faults.setter
    def faults(self, value) -> None:
        self.apis.faults = value

    # -- what the control plane and the harness use ----------------------------
    @property
    def metadata(self) -> MetadataCache:
        return self.cache

    def cluster_brokers(self) -> list[BrokerInfo]:
        return list(self.cache.brokers.values())

    def controller_id(self) -> int:
        return self.cache.controller_id

    # -- Trio ---------------------------------------------------------------
    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        listeners: list = []  # (served listener, its trio listeners), primary first
        internal = []
        try:
            for i, served in enumerate(self.client_listeners):
                ep = served.endpoint
                # the primary binds the broker's port; another keeps its port across a restart of this broker
                port = self.port if i == 0 else self.state.listener_ports.get((self.node_id, ep.listener), ep.port)
                bound = await trio.open_tcp_listeners(port, host=self.host if i == 0 else (ep.host or "0.0.0.0"),
                                                      backlog=128)
                listeners.append((served, bound))
                served.bound_port = bound[0].socket.getsockname()[1]
                self.state.listener_ports[(self.node_id, ep.listener)] = served.bound_port
        except BaseException:
            for _, bound in listeners:
                for lst in bound:
                    await trio.aclose_forcefully(lst)
            raise
        if self.replicated:  # the inter-broker listener: controller requests and replication come in there only
            if any(s.endpoint == self.inter_broker_listener.endpoint for s in self.client_listeners):
                from ..config import ConfigError
                raise ConfigError(f"The inter-broker listener {self.inter_broker_listener.name} is the only listener: "
                                  "Kafkite keeps the brokers' requests on a listener of their own (where Kafka lets "
                                  "clients share it); add one to listeners, e.g. BROKER://host:port with "
                                  "listener.security.protocol.map BROKER:<protocol>, and name it in "
                                  "inter.broker.listener.name")
            internal = await trio.open_tcp_listeners(self.internal_port, host=self.internal_host, backlog=128)
        self.bound_port = listeners[0][0].bound_port
        adv_host = self.advertised_host or (self.host if self.host not in WILDCARDS else "127.0.0.1")
        self.state.brokers[self.node_id] = self
        try:
            async with trio.open_nursery() as nursery:
                self._cancel = nursery.cancel_scope
                self._nursery = nursery
                accept = functools.partial(nursery.start_soon, self._accept_loops, listeners, nursery)
                self.admin.starting(accept)  # in-process: clients are taken from now on
                if internal:
                    nursery.start_soon(self._accept_loop, internal, nursery, self.inter_broker_listener)
                await nursery.start(self.groups.run)
                await nursery.start(self.transactions.run)
                endpoints = []
                if self.replicated:  # followers' fetchers and leaders' ISR requests
                    from .replication import Replication
                    iport = internal[0].socket.getsockname()[1]
                    ihost = self.internal_host if self.internal_host not in ("0.0.0.0", "::", "") else adv_host
                    endpoints = [[self.inter_broker_listener.name, ihost, iport]]
                    self.admin.replication_starting()
                    self.replicas.replication = Replication(self)
                    await nursery.start(self.replicas.replication.run)
                # the other client listeners, by name (Metadata answers each client with its listener's endpoints)
                for served, _ in listeners[1:]:
                    endpoints.append([served.name, self._advertised(served)[0], self._advertised(served)[1]])
                me = BrokerInfo(self.node_id, *self._advertised(listeners[0][0]), self.rack, listeners=endpoints,
                                listener=self.primary_listener,
                                protocols={s.name: s.endpoint.protocol for s in self.client_listeners + (
                                    [self.inter_broker_listener] if self.replicated else [])})
                # it joins the cluster (ZooKeeper mode: it takes clients once it knows the cluster)
                await self.admin.register(me, accept)
                task_status.started(self.bound_port)
                await trio.sleep(math.inf)
        finally:
            # The broker's session ends: its registration (and the controller claim, if held) vanish,
            # and the remaining brokers elect a controller and move leadership.
            self.state.brokers.pop(self.node_id, None)
            self._nursery = None
            await self.admin.stopped()
            for lst in [x for _, bound in listeners for x in bound] + internal:
                with trio.CancelScope(shield=True):
                    await lst.aclose()

    def knows_the_cluster(self) -> bool:
        """The controller's UpdateMetadata reached this broker: its cache lists itself and the controller."""
        c = self.cache
        return self.node_id in c.brokers and c.controller_id in c.brokers

    async def wait_until_it_knows_the_cluster(self) -> None:
        ready = trio.Event()

        def check(_old, _cache) -> None:
            if self.knows_the_cluster():
                ready.set()
        self.cache.listeners.append(check)
        try:
            check(None, None)
            while not ready.is_set():
                with trio.move_on_after(5):
                    await ready.wait()
                if not ready.is_set():
                    log.info("broker.waiting_for_metadata", broker=self.node_id,
                             controller=self.cache.controller_id, known_brokers=sorted(self.cache.brokers),
                             message="no UpdateMetadata from the controller yet: client connections wait")
        finally:
            self.cache.listeners.remove(check)

    def _advertised(self, served) -> tuple[str, int]:
        """(host, port) a client listener is advertised at: advertised.listeners, else where it binds (a wildcard
        host: the primary's advertised host, or 127.0.0.1)."""
        if served is self.client_listeners[0]:
            return (self.advertised_host or (self.host if self.host not in WILDCARDS else "127.0.0.1"),
                    self.advertised_port or served.bound_port)
        host = served.advertised_host or (served.endpoint.host if served.endpoint.host not in WILDCARDS
                                          else self.advertised_host or "127.0.0.1")
        return host, served.advertised_port or served.bound_port

    async def _accept_loops(self, listeners, nursery) -> None:
        async with trio.open_nursery() as accepting:
            for served, bound in listeners:
                for lst in bound:
                    accepting.start_soon(accept_loop, lst, self.connection_quotas,
                                         functools.partial(self._serve_connection, served=served), nursery)

    async def _accept_loop(self, listeners, nursery, served) -> None:
        """The inter-broker listener's connections (`served`: its TLS context and SASL settings)."""
        async with trio.open_nursery() as accepting:
            for lst in listeners:
                accepting.start_soon(accept_loop, lst, self.connection_quotas,
                                     functools.partial(self._serve_connection, inter_broker=True, served=served),
                                     nursery)

    async def _serve_connection(self, stream: trio.SocketStream, ip: str, *, inter_broker: bool = False,
                                served=None) -> None:
        try:
            if served is not None and served.ssl_context is not None:
                stream = await self._tls_handshake(stream, ip, served.ssl_context)
                if stream is None:
                    return
            await serve_connection(self, stream, inter_broker=inter_broker, listener=served)
        finally:
            self.connection_quotas.dec(ip)

    async def _tls_handshake(self, stream: trio.SocketStream, ip: str, context) -> trio.SSLStream | None:
        """The TLS handshake of an SSL listener's connection (non-blocking: Trio's SSLStream over the socket); a
        failure is logged with the peer and closes that connection only."""
        tls = trio.SSLStream(stream, context, server_side=True)
        try:
            with trio.fail_after(TLS_HANDSHAKE_TIMEOUT_S):
                await tls.do_handshake()
        except (trio.BrokenResourceError, trio.TooSlowError, trio.ClosedResourceError, OSError) as exc:
            cause = exc.__cause__ or exc
            log.warning("connection.ssl_handshake_failed", peer=ip, error=type(cause).__name__,
                        message=f"Failed authentication with /{ip} (SSL handshake failed: {cause})")
            await trio.aclose_forcefully(stream)
            return None
        return tls

    def stop(self) -> None:
        if self._cancel is not None:
            self._cancel.cancel()

    @property
    def bootstrap(self) -> str:
        host = self.advertised_host or (self.host if self.host not in WILDCARDS else "127.0.0.1")
        return f"{host}:{self.bound_port}"

    def bootstrap_of(self, listener: str) -> str:
        """host:port of this broker's client listener named `listener` (as advertised)."""
        served = next(s for s in self.client_listeners if s.name == listener.upper())
        host, port = self._advertised(served)
        return f"{host}:{port}"
