"""A broker in ZooKeeper mode (`zookeeper.connect`): one broker per process, the cluster in ZooKeeper.

`ZkMode` is the broker's ZooKeeper side:

- its ZooKeeper session (`ZooKeeperStore`, kazoo) and its **controller event thread** (Kafka's
  ControllerEventManager): every ZooKeeper call and every controller action runs there, one at a
  time. kazoo's watch and session callbacks are handed to that thread, never run on kazoo's;
  Trio code awaits work on it with `call`;
- its controller (`ZkController`), whose view goes out as Kafka's LeaderAndIsr / StopReplica /
  UpdateMetadata (`RequestBuilder`) through the `ControllerChannelManager`, to every live broker's
  inter-broker listener;
- what the broker itself does against ZooKeeper (Kafka's AdminZkClient and config manager): admin
  requests write the ZooKeeper nodes and the controller takes it from there; topic config changes
  come back through /config/changes notifications; producer id blocks.

The requests the controller sends are applied by `handlers/controller_apis.py` on the receiving
broker (its metadata cache, its logs, its coordinators).
"""
from __future__ import annotations

import queue
import threading
import uuid
from typing import TYPE_CHECKING, Any, Callable

import structlog
import trio
from kazoo.exceptions import KazooException

from ..controller import zk_data as z
from ..controller.metadata import ClusterMetadata, MetadataError, TopicInfo
from ..controller.store import NodeExists
from ..controller.zk_controller import ZkController
from ..controller.zk_metadata import AdminZk, TopicQueuedForDeletion, ZkMetadataStore, claim_producer_id_block
from ..controller.zk_requests import RequestBuilder, inter_broker_endpoint
from ..controller.zk_store import ZooKeeperStore
from ..wire.interbroker import StopReplicaRequest
from ..wire.errors import E
from .context import now_ms
from .controller_channel import ControllerChannelManager, send_once

if TYPE_CHECKING:
    from .broker import Broker, ClusterState

log = structlog.get_logger("kafkite.zk_mode")


class EventThread:
    """One thread running submitted callables in order (Kafka's ControllerEventThread)."""

    def __init__(self, name: str) -> None:
        self._q: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def put(self, fn: Callable[[], None]) -> None:
        self._q.put(fn)

    def _run(self) -> None:
        while True:
            fn = self._q.get()
            if fn is None:
                return
            try:
                fn()
            except KazooException as exc:  # e.g. the session expired meanwhile: the session event comes next
                log.warning("controller_event.zookeeper_error", error=repr(exc))
            except Exception:
                log.exception("controller_event.failed")

    async def call(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` on the thread and return its result (or raise its exception) to the awaiting Trio task."""
        token = trio.lowlevel.current_trio_token()
        done = trio.Event()
        out: list = []

        def run() -> None:
            try:
                out.append((True, fn()))
            except BaseException as exc:  # handed to the caller
                out.append((False, exc))
            try:
                trio.from_thread.run_sync(done.set, trio_token=token)
            except trio.RunFinishedError:
                pass
        self.put(run)
        with trio.CancelScope(shield=True):  # the thread is running it: the answer must be collected
            await done.wait()
        ok, value = out[0]
        if not ok:
            raise value
        return value

    def stop(self, timeout: float = 5.0) -> None:
        self._q.put(None)
        self._thread.join(timeout)


class ZkMode:
    def __init__(self, state: "ClusterState", node_id: int) -> None:
        cfg = state.config
        self.state = state
        self.node_id = node_id
        self.connect = cfg.get("zookeeper.connect")
        self.session_timeout_ms = cfg.get("zookeeper.session.timeout.ms")
        conn_timeout = cfg.get("zookeeper.connection.timeout.ms")
        self.connection_timeout_s = (conn_timeout if conn_timeout is not None else self.session_timeout_ms) / 1000
        self.events = EventThread(f"controller-event-thread-{node_id}")
        self.channel = ControllerChannelManager(node_id)
        self.builder = RequestBuilder()
        self.store: ZooKeeperStore | None = None
        self.admin: AdminZk | None = None
        self.acls = None  # server/zk_acls.py's ZkAclStore, once connected
        self.controller: ZkController | None = None
        self.broker: "Broker | None" = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._last_config_change: int | None = None  # the last /config/changes sequence applied (-1: none)
        self._pid_next = self._pid_end = 0
        self._closed = False

    # -- start and stop --------------------------------------------------------------------------
    async def open(self) -> ClusterMetadata:
        """Connect to ZooKeeper (on the event thread) and load the cluster's metadata from it."""
        self._token = trio.lowlevel.current_trio_token()

        def connect() -> ClusterMetadata:
            self.store = ZooKeeperStore(self.connect, owner=self.node_id, session_timeout_ms=self.session_timeout_ms,
                                        op_timeout=max(self.connection_timeout_s, 5.0), deliver=self.events.put,
                                        on_session_event=self._session_event)
            self.admin = AdminZk(self.store)
            return ClusterMetadata(ZkMetadataStore(self.store, self.node_id), node_id=self.node_id)
        try:
            authority = await self.events.call(connect)
            dynamic = await self.events.call(self.load_broker_configs)
            users = await self.events.call(self.admin.user_configs)
            groups = await self.events.call(self.admin.group_configs)
            from .zk_acls import ZkAclStore
            self.acls = ZkAclStore(self.store)
            acls = await self.events.call(self.acls.load_all)
        except Exception as exc:
            self._closed = True
            self.events.stop()
            raise RuntimeError(f"cannot connect to ZooKeeper at {self.connect}: {exc!r}") from None
        for entity, configs in dynamic.items():
            if configs:
                self.apply_broker_configs(entity, configs)
        authority.apply_user_configs(users)  # SCRAM credentials (/config/users), kept current by the notifications
        authority.apply_group_configs(groups)  # groups' own configs (/config/groups), likewise
        authority.acls = frozenset(acls)  # ACLs (/kafka-acl...), kept current by their notifications
        if self.state.authorizer is not None:
            self.state.authorizer.load(authority.acls)
        log.info("zookeeper.connected", connect=self.connect, session_timeout_ms=self.session_timeout_ms,
                 cluster_id=authority.cluster_id)
        return authority

    def new_controller(self, broker: "Broker") -> ZkController:
        self.broker = broker
        security = broker.inter_broker_security  # the controller connects to the brokers' inter-broker listener
        self.channel.connect = lambda host, port: security.connect(host, port, client_id=str(self.node_id))
        self.controller = ZkController(
            self.node_id, self.store, self.state.metadata, self.send,
            auto_leader_rebalance=self.state.config.get("auto.leader.rebalance.enable"), now_ms=now_ms,
            unclean_default=lambda: bool(self.state.config.get("unclean.leader.election.enable")),
            on_resign=self._on_resign)
        return self.controller

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """The Trio side: the controller's channel, the preferred-leader check."""
        async with trio.open_nursery() as n:
            await n.start(self.channel.run)
            n.start_soon(self._preferred_leader_checks)
            task_status.started()

    async def register(self, info) -> None:
        """Register the broker, join the controller election, follow topic config changes."""
        deadline = trio.current_time() + self.session_timeout_ms / 1000 + 10
        while True:
            try:
                await self.call(lambda: self.controller.startup(info))
                break
            except NodeExists:  # the registration of this id's previous session (a crash): it expires in time
                if trio.current_time() > deadline:
                    raise
                log.info("broker.registration_exists", broker=self.node_id,
                         message="a previous session's registration is still there: waiting for it to expire")
                await trio.sleep(0.5)
        await self.call(self._watch_config_changes)
        await self.call(lambda: self.acls.watch(self._acls_changed))
        self.broker.broker_epoch = self.controller.broker_epoch

    async def call(self, fn: Callable[[], Any]) -> Any:
        return await self.events.call(fn)

    async def close(self) -> None:
        """End the session: the registration (and /controller when held) go at once. Once only."""
        if self._closed:
            return
        self._closed = True

        def end() -> None:
            self.controller.shutdown() if self.controller is not None else None
            if self.store is not None:
                self.store.close()
        with trio.CancelScope(shield=True):
            try:
                with trio.move_on_after(10):
                    await self.events.call(end)
            finally:
                await trio.to_thread.run_sync(self.events.stop)

    def _session_event(self, event: str) -> None:  # event thread
        if self.controller is not None:
            self.controller.on_session_event(event)
            if event == "connected" and self.controller.broker_epoch != getattr(self.broker, "broker_epoch", None):
                self._to_trio(lambda: setattr(self.broker, "broker_epoch", self.controller.broker_epoch))
                self._watch_config_changes()
                self.acls.watch(self._acls_changed)

    # -- the controller's requests ------------------------------------------------------------------
    def send(self, broker_id: int, cmd) -> int:
        """Controller.publish's `send` (event thread): the broker's requests, queued on the channel in order."""
        brokers = {b["node_id"]: b for b in cmd.snapshot.get("brokers", [])}
        if broker_id not in brokers:  # registered after the view was taken: the broker watch publishes again
            return int(E.BROKER_NOT_AVAILABLE)
        reqs = self.builder.build(broker_id, cmd.controller_id, cmd.controller_epoch, cmd.snapshot)
        host, port = inter_broker_endpoint(brokers[broker_id], self.broker.inter_broker_security.listener)
        live = set(brokers)
        self._to_trio(lambda: self._enqueue(broker_id, host, port, reqs, live))
        return 0

    def _enqueue(self, broker_id: int, host: str, port: int, reqs: list, live: set[int]) -> None:
        for gone in [b for b in self.channel.brokers if b not in live]:
            self.channel.remove_broker(gone)
        self.channel.add_broker(broker_id, host, port)
        for r in reqs:
            self.channel.send(broker_id, r, lambda resp, b=broker_id, r=r: self._answered(b, r, resp))

    def _answered(self, broker_id: int, request, response) -> None:  # Trio thread
        err = getattr(response, "error_code", 0) if response is not None else 0
        if err:
            log.warning("controller_request.refused", broker=broker_id, api=type(request).__name__,
                        error=E(err).name, controller_epoch=request.controller_epoch)
        if isinstance(request, StopReplicaRequest):
            asked = [(t.topic_name, p.partition_index) for t in request.topic_states for p in t.partition_states
                     if p.delete_partition]
            ok = [] if err or response is None else [  # None: never answered (the broker went away)
                (pe.topic_name, pe.partition_index) for pe in response.partition_errors if pe.error_code == 0]
            failed = [tp for tp in asked if tp not in set(ok)]
            epoch = request.controller_epoch

            def record() -> None:  # event thread: the controller's deletion bookkeeping
                if failed:
                    self.builder.stop_failed(broker_id, failed)
                if ok and self.controller is not None:
                    self.controller.on_replicas_deleted(broker_id, epoch, ok)
            self.events.put(record)

    def _on_resign(self) -> None:  # event thread
        self.builder.reset()
        self._to_trio(lambda: [self.channel.remove_broker(b) for b in list(self.channel.brokers)])
        for b in self.state.brokers.values():
            self._to_trio(lambda b=b: b.groups.on_metadata(b.cache))
            self._to_trio(lambda b=b: b.transactions.on_metadata(b.cache))

    def _to_trio(self, fn: Callable[[], Any]) -> None:
        try:
            trio.from_thread.run_sync(fn, trio_token=self._token)
        except trio.RunFinishedError:
            pass

    async def _preferred_leader_checks(self) -> None:
        while True:
            await trio.sleep(self.state.config.get("leader.imbalance.check.interval.seconds"))
            if self.controller is not None and self.controller.active:
                await self.call(self.controller.check_preferred_leaders)

    # -- topic configs (Kafka's ZooKeeper config change notifications) -------------------------------
    def _watch_config_changes(self) -> None:  # event thread
        def fired(_path: str) -> None:
            self._watch_config_changes()
        # the watch first: a notification made between the listing and the watch would wait for the next one
        self.store.watch(z.CONFIG_CHANGES + "/", fired)
        children = self.store.children(z.CONFIG_CHANGES)
        seqs = sorted(int(c[len(z.CONFIG_CHANGE_PREFIX):]) for c in children if c.startswith(z.CONFIG_CHANGE_PREFIX))
        if self._last_config_change is None:  # at start-up: configs are read with each topic, not from old changes
            self._last_config_change = seqs[-1] if seqs else -1
            return
        topics, brokers, users, groups = set(), set(), set(), set()
        for seq in seqs:
            if seq <= self._last_config_change:
                continue
            got = self.store.get(f"{z.CONFIG_CHANGES}/{z.CONFIG_CHANGE_PREFIX}{seq:010d}")
            entity = (got[0] or {}).get("entity_path", "") if got else ""
            if entity.startswith("topics/"):
                topics.add(entity[len("topics/"):])
            elif entity.startswith("users/") and "/" not in entity[len("users/"):]:  # not users/<u>/clients/<c>
                users.add(entity[len("users/"):])
            elif entity.startswith("groups/"):
                groups.add(entity[len("groups/"):])
            elif entity in (f"brokers/{z.DEFAULT_BROKER_ENTITY}", f"brokers/{self.node_id}"):
                brokers.add(entity[len("brokers/"):])
            self._last_config_change = seq
        configs = {t: self.admin.topic_configs(t) for t in topics}
        if configs:
            self._to_trio(lambda: self.apply_topic_configs(configs))
            if self.controller is not None:
                self.controller.on_topic_configs_changed(topics)
        for entity in brokers:
            cfg = self.admin.broker_configs(entity)
            self._to_trio(lambda e=entity, c=cfg: self.apply_broker_configs(e, c))
        if users:
            from ..security.scram import desanitize
            changed = {desanitize(u): self.admin.user_config(u) for u in users}
            self._to_trio(lambda: self.apply_user_configs(changed))
        if groups:
            from ..security.scram import desanitize
            changed_groups = {desanitize(g): self.admin.group_config(g) for g in groups}
            self._to_trio(lambda: self.apply_group_configs(changed_groups))

    # -- ACLs (server/zk_acls.py: /kafka-acl, /kafka-acl-extended and their change notifications) ---------------
    def _acls_changed(self, resources: dict) -> None:  # event thread
        self._to_trio(lambda: self.apply_acls(resources))

    def apply_acls(self, resources: dict) -> None:
        self.state.metadata.apply_resource_acls(resources)
        if self.state.authorizer is not None:
            self.state.authorizer.load(self.state.metadata.acls)
        log.info("acls.applied", resources=sorted(f"{t}:{p}:{n}" for t, n, p in resources))

    async def alter_acls(self, add, remove) -> None:
        """Written to ZooKeeper (each resource read, changed, written back with its version, then notified), and
        applied here at once; the other brokers follow the notifications."""
        self.apply_acls(await self.call(lambda: self.acls.alter(add, remove)))

    # -- users' SCRAM credentials (Kafka's /config/users/<user> and its "users/<user>" notifications) --------------
    def apply_user_configs(self, changes: dict[str, dict[str, str]]) -> None:
        self.state.metadata.apply_user_configs(changes)
        log.info("user_config.applied", users=sorted(changes))

    async def user_configs(self, names: list[str] | None = None) -> dict[str, dict[str, str]]:
        """From ZooKeeper: every user's config, or those named (a user without a node has none)."""
        from ..security.scram import sanitize
        if names is None:
            return await self.call(self.admin.user_configs)
        got = await self.call(lambda: {n: self.admin.user_config(sanitize(n)) for n in set(names) if n})
        return {n: c for n, c in got.items() if c}

    async def set_user_configs(self, changes: dict[str, dict[str, str]]) -> None:
        """Write the users' configs (and their notifications), then apply them here at once; the other brokers
        follow the notification."""
        def write() -> None:
            for user, config in changes.items():
                self.admin.set_user_config(user, config)
        await self.call(write)
        self.apply_user_configs(changes)

    # -- groups' own configs (the GROUP config resource: /config/groups/<group>, "groups/<group>" notifications) ---
    def apply_group_configs(self, changes: dict[str, dict[str, str]]) -> None:
        self.state.metadata.apply_group_configs(changes)
        log.info("group_config.applied", groups=sorted(changes))

    async def group_configs(self, names: list[str] | None = None) -> dict[str, dict[str, str]]:
        """From ZooKeeper: every group's configs, or those named (a group without a node has none)."""
        from ..controller.zk_metadata import group_node
        if names is None:
            return await self.call(self.admin.group_configs)
        got = await self.call(lambda: {n: self.admin.group_config(group_node(n)) for n in set(names) if n})
        return {n: c for n, c in got.items() if c}

    async def set_group_configs(self, changes: dict[str, dict[str, str]]) -> None:
        """Write the groups' configs (and their notifications), then apply them here at once; the other brokers
        follow the notification."""
        def write() -> None:
            for group, config in changes.items():
                self.admin.set_group_config(group, config)
        await self.call(write)
        self.apply_group_configs(changes)

    def load_broker_configs(self) -> dict[str, dict[str, str]]:  # event thread
        """At start-up: the dynamic broker configs kept in ZooKeeper, the default's and this broker's."""
        return {e: self.admin.broker_configs(e) for e in (z.DEFAULT_BROKER_ENTITY, str(self.node_id))}

    def apply_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        """Dynamic broker configs read from ZooKeeper (Kafka's DynamicBrokerConfig): keys this broker cannot take
        dynamically, or values that do not parse, are left out with a warning, as Kafka skips them."""
        from ..config import ConfigError, check_dynamic_broker_config
        good = {}
        for k, v in configs.items():
            try:
                check_dynamic_broker_config(k, v)
                good[k] = v
            except ConfigError as exc:
                log.warning("broker_config.ignored", entity=entity, key=k, error=str(exc))
        cfg = self.state.config
        if entity == z.DEFAULT_BROKER_ENTITY:
            cfg.dynamic_default = good
        else:
            cfg.dynamic = good
        if self.broker is not None:
            for t in list(self.broker.cache.topics.values()):
                for h in self.state.hooks:
                    h.on_configs_changed(t)
        log.info("broker_config.applied", entity=entity, configs=good)

    async def set_broker_configs(self, resource_name: str, configs: dict[str, str]) -> None:
        entity = resource_name or z.DEFAULT_BROKER_ENTITY
        await self.call(lambda: self.admin.set_broker_configs(entity, configs))
        self.apply_broker_configs(entity, configs)  # this broker at once; the others through the notification

    def apply_topic_configs(self, configs: dict[str, dict[str, str]]) -> None:
        b = self.broker
        for name, cfg in configs.items():
            t = b.cache.topic(name)
            if t is not None:
                t.configs = dict(cfg)
                for h in self.state.hooks:
                    h.on_configs_changed(t)

    async def topic_configs(self, names: list[str]) -> dict[str, dict[str, str]]:
        return await self.call(lambda: {n: self.admin.topic_configs(n) for n in names})

    # -- admin requests from this broker (Kafka's AdminZkClient) ------------------------------------
    def check_create_topic(self, name, num_partitions, replication_factor, assignments, configs, *, max_records):
        cache, cfg = self.broker.cache, self.state.config
        return cache.check_create_topic(
            name, num_partitions, replication_factor, assignments, configs,
            default_partitions=cfg.get("num.partitions"),
            default_rf=min(cfg.get("default.replication.factor"), max(1, len(cache.brokers))),
            max_records=max_records)

    async def create_topic(self, name, num_partitions, replication_factor, assignments, configs, *,
                           wait: bool = True, max_records: int) -> TopicInfo | None:
        _, _, replicas = self.check_create_topic(name, num_partitions, replication_factor, assignments, configs,
                                                 max_records=max_records)
        clean = {k: v for k, v in configs.items() if v is not None}
        try:
            await self.call(lambda: self.admin.create_topic(name, replicas, clean, uuid.uuid4()))
        except NodeExists:
            raise MetadataError(E.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.") from None
        except TopicQueuedForDeletion:
            raise MetadataError(E.TOPIC_ALREADY_EXISTS, f'Topic "{name}" is queued for deletion.') from None
        log.info("topic.created", topic=name, partitions=len(replicas), replication_factor=len(replicas[0]))
        if not wait:
            return None
        return await self._wait_for(lambda: self._ready(name, len(replicas)), f"topic {name} created")

    def _ready(self, name: str, partitions: int) -> TopicInfo | None:
        t = self.broker.cache.topic(name)
        if t is None or len(t.partitions) < partitions or any(p.leader_epoch < 0 for p in t.partitions):
            return None
        return t

    async def _wait_for(self, check: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
        """Kafka's DelayedCreatePartitions: the answer waits until this broker's metadata shows the change."""
        with trio.move_on_after(timeout):
            while True:
                got = check()
                if got:
                    return got
                await trio.sleep(0.01)
        raise MetadataError(E.REQUEST_TIMED_OUT, f"{what}: not in this broker's metadata within {timeout:.0f}s")

    async def delete_topic(self, name: str) -> None:
        await self.call(lambda: self.admin.delete_topic(name))
        await self._wait_for(lambda: self.broker.cache.topic(name) is None, f"topic {name} deleted")

    async def create_partitions(self, name: str, count: int, assignments, *, max_records: int) -> int:
        replicas = self.broker.cache.check_create_partitions(name, count, assignments, max_records)
        await self.call(lambda: self.admin.add_partitions(name, replicas))
        await self._wait_for(lambda: self._ready(name, count), f"partitions of {name} added")
        return len(replicas)

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        await self.call(lambda: self.admin.set_topic_configs(name, configs))
        self.apply_topic_configs({name: configs})  # this broker at once; the others through the notification

    async def allocate_producer_id(self) -> int:
        if self._pid_next >= self._pid_end:
            first, last = await self.call(lambda: claim_producer_id_block(self.store, self.node_id))
            self._pid_next, self._pid_end = first, last + 1
        pid = self._pid_next
        self._pid_next += 1
        return pid

    # -- controlled shutdown (Kafka's KafkaServer.controlledShutdown) ---------------------------------
    async def controlled_shutdown(self) -> bool:
        """Ask the controller to move leadership off this broker, retrying as configured -> whether it succeeded."""
        from ..wire.interbroker import ControlledShutdownRequest
        cfg = self.state.config
        if not cfg.get("controlled.shutdown.enable") or self.broker is None:
            return False
        for attempt in range(cfg.get("controlled.shutdown.max.retries")):
            if attempt:
                await trio.sleep(cfg.get("controlled.shutdown.retry.backoff.ms") / 1000)
            cache = self.broker.cache
            ctrl = cache.brokers.get(cache.controller_id)
            if ctrl is None:
                continue
            security = self.broker.inter_broker_security
            host, port = inter_broker_endpoint(vars(ctrl), security.listener)
            req = ControlledShutdownRequest(version=3, broker_id=self.node_id, broker_epoch=self.broker.broker_epoch)
            try:
                resp = await send_once(host, port, req, timeout=30, client_id=str(self.node_id),
                                       connect=lambda h, p: security.connect(h, p, client_id=str(self.node_id)))
            except Exception as exc:  # refused, timed out, closed: the next attempt asks again
                log.warning("controlled_shutdown.failed", attempt=attempt + 1, error=repr(exc))
                continue
            left = [(r.topic_name, r.partition_index) for r in resp.remaining_partitions]
            if resp.error_code == 0 and not left:
                log.info("controlled_shutdown.done", broker=self.node_id)
                return True
            log.info("controlled_shutdown.remaining", attempt=attempt + 1, error=E(resp.error_code).name,
                     partitions=len(left))
        return False
