"""The state every broker of this process shares: the configuration, the cluster metadata and its controller, the
coordination store, the topics' lifecycle (create, delete, partitions, configs: the in-process controller's job; in
ZooKeeper mode the metadata comes from ZooKeeper, zk_mode.py), and a single broker's ReplicaManager."""
from __future__ import annotations

import contextlib
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import structlog
import trio

from ..config import BrokerConfig, validate_topic_configs
from ..controller.controller import Controller, MetadataUpdate
from ..controller.metadata import (MAX_RECORDS_PER_USER_OP, ClusterMetadata, FileMetadataStore, MemoryMetadataStore,
                                   MetadataError, TopicInfo)
from ..controller.store import InProcessStore
from ..wire.errors import E
from .metadata_writer import resolved, wait

if TYPE_CHECKING:
    from .broker import Broker

log = structlog.get_logger("kafkite.broker")


class ClusterState:
    """State shared by all brokers of this process."""

    def __init__(self, config: BrokerConfig, *, data_dir: Path | None, in_memory: bool):
        self.config = config
        self.in_memory = in_memory or data_dir is None
        self.data_dir = None if self.in_memory else Path(data_dir)
        self.zk = None
        if config.get("zookeeper.connect"):
            # ZooKeeper mode: one broker in this process, the metadata in ZooKeeper (`open_zk` loads it)
            from .zk_mode import ZkMode
            self.zk = ZkMode(self, config.node_id)
            self.metadata: ClusterMetadata = None  # type: ignore[assignment]
        else:
            store = MemoryMetadataStore() if self.in_memory else FileMetadataStore(self.data_dir)
            # The authoritative metadata: written by the active controller only, persisted.
            # (a new data dir's first snapshot: written by the metadata writer, in a worker thread)
            self.metadata = ClusterMetadata(store, node_id=config.node_id, defer_first_write=not self.in_memory)
        self.store = InProcessStore()  # the coordination store controllers elect themselves through
        # authorizer.class.name (security/authorizer.py): None allows everything; its ACLs are the metadata's
        from ..security.authorizer import Authorizer
        self.authorizer = Authorizer.from_config(config, self.metadata.acls if self.metadata else ())
        self.brokers: dict[int, "Broker"] = {}  # running brokers of this process, by node id
        self.listener_ports: dict[tuple[int, str], int] = {}  # (node id, listener) -> bound port: kept on restart
        self.hooks: list[Any] = []  # objects with on_topic_created/on_topic_deleted/on_partitions_added/on_configs
        self.replicas: Any = None  # the ReplicaManager of a single broker (services.attach)
        # an in-process cluster: each broker's own partitions (services.Storage, by node id), replicated between them
        self.storages: dict[int, Any] = {}
        # the partitions a test keeps without a leader (Controller.make_leaderless), whichever broker is controller
        self.leaderless: dict[tuple[str, int], Any] = {}
        self.writer: Any = None  # the metadata's writer off the event loop (metadata_writer.py), with a data dir
        # IncrementalAlterConfigs of topics, one at a time: each reads the configs a broker's cache has, which shows a
        # change only once it is durable (the change before it is waited for, not overwritten)
        self.topic_configs_lock = trio.Lock()
        self._publish_later: bool | None = None  # (see _one_publish)
        # a test control: the brokers the controller's commands do not reach (its connection to them cut), and the
        # newest command each missed: the whole view, delivered when the connection heals (as Kafka's channel sends
        # its queue once it reconnects)
        self.controller_cut: set[int] = set()
        self._missed: dict[int, MetadataUpdate] = {}

    async def open_zk(self) -> None:
        """ZooKeeper mode: connect and load the cluster's metadata (the authority of this broker's controller)."""
        self.metadata = await self.zk.open()
        self.store = self.zk.store

    # -- controller plumbing ------------------------------------------------------
    def deliver(self, broker_id: int, cmd: MetadataUpdate) -> int:
        """Carry a controller command to a broker (in-process: a call)."""
        b = self.brokers.get(broker_id)
        if b is None:
            return int(E.BROKER_NOT_AVAILABLE)
        if broker_id in self.controller_cut:  # queued until the connection heals
            self._missed[broker_id] = cmd
            return 0
        return b.cache.apply(cmd)

    def cut_controller(self, broker_id: int, cut: bool = True) -> None:
        """The controller's connection to a broker cut (its commands do not reach it: it keeps its view of leaders,
        ISRs and brokers) or healed (it gets the newest command it missed, the whole view, at once)."""
        if cut:
            self.controller_cut.add(broker_id)
            return
        self.controller_cut.discard(broker_id)
        cmd, b = self._missed.pop(broker_id, None), self.brokers.get(broker_id)
        if cmd is not None and b is not None:
            b.cache.apply(cmd)

    def active_controller(self) -> Controller | None:
        for b in self.brokers.values():
            c = b.controller.active_controller()
            if c is not None:
                return c
        return None

    def publish(self) -> None:
        if self._publish_later is not None:  # the callbacks of one metadata write: once, after them all
            self._publish_later = True
            return
        c = self.active_controller()
        if c is not None:
            c.publish()

    @contextmanager
    def _one_publish(self):
        """Around the callbacks of one metadata write (metadata_writer.py): the brokers are told once, at the end."""
        self._publish_later = False
        try:
            yield
        finally:
            wanted, self._publish_later = self._publish_later, None
            if wanted:
                try:
                    self.publish()
                except Exception as exc:  # (the callers' changes are on disk and made: told at the next publish)
                    log.warning("metadata.publish_failed", error=repr(exc))

    def _elect_offline(self) -> None:
        """The active controller elects again (on_brokers_changed), e.g. offline partitions that may now lead."""
        c = self.active_controller()
        if c is not None:
            c.on_brokers_changed()

    # -- metadata writes -----------------------------------------------------------
    async def durable(self, then=None, *, version: int | None = None):
        """Once the metadata changes made so far (up to `version`) are on disk: `then()` -> its result. With a data
        dir the snapshot is written in a worker thread, for every change made meanwhile (server/metadata_writer.py),
        and `then` runs in the order of the changes; OSError when the write failed (the change is undone)."""
        return await wait(self._later(then, version=version))

    def _later(self, then=None, *, version: int | None = None):
        """`durable` registered now (right after the change: `then` keeps its turn), for `wait` later."""
        return resolved(then) if self.writer is None else self.writer.register(version, then)

    # -- topic lifecycle (the controller's job; single controller for now) ---------
    async def create_topic_off_loop(self, name: str, num_partitions: int, replication_factor: int,
                                    assignments: dict[int, list[int]] | None, configs: dict[str, str | None],
                                    *, max_records: int = MAX_RECORDS_PER_USER_OP) -> TopicInfo:
        """create_topic, with a single broker's new logs made in a worker thread first (server/prepared_logs.py;
        an in-process cluster's brokers open theirs with their partition states), one maker at a time
        (making_logs)."""
        finish = await self._begin_topic(name, num_partitions, replication_factor, assignments, configs,
                                         max_records=max_records)
        return await finish()

    async def create_topics_off_loop(self, entries, *, max_records: int = MAX_RECORDS_PER_USER_OP
                                     ) -> list[TopicInfo | MetadataError]:
        """Topics of one CreateTopics, `entries` (an iterable) of (name, partitions, replication factor, assignments,
        configs): each checked and made in memory in turn (after those before it), then all waited for together
        (one metadata write for them when none is in flight) -> each one's TopicInfo or MetadataError, in order."""
        begun: list = []
        out: list[TopicInfo | MetadataError] = []
        try:
            with contextlib.ExitStack() as held:
                holding = self.writer is None
                for entry in entries:
                    try:
                        begun.append(await self._begin_topic(*entry, max_records=max_records))
                    except MetadataError as exc:
                        begun.append(exc)
                    else:  # from its first change on, no write starts before the request's last: one for all
                        if not holding:
                            held.enter_context(self.writer.hold())
                            holding = True
        finally:  # (also those begun before an unexpected error: their prepared logs are let go)
            for item in begun:
                try:
                    out.append(item if isinstance(item, MetadataError) else await item())
                except MetadataError as exc:
                    out.append(exc)
        return out

    async def _begin_topic(self, name: str, num_partitions: int, replication_factor: int,
                           assignments: dict[int, list[int]] | None, configs: dict[str, str | None],
                           *, max_records: int = MAX_RECORDS_PER_USER_OP):
        """Make a topic in memory (a single broker on disk: its logs made in a worker thread first) -> what to await
        for it once it is on disk."""
        rm = self.replicas
        if rm is None or rm.in_memory or rm.is_replicated:
            return self._create_topic(name, num_partitions, replication_factor, assignments, configs,
                                      max_records=max_records)
        lc = rm.lifecycle
        async with lc.making_logs:  # let go once the metadata has the topic: the next one's logs are made meanwhile
            planned = self.check_topic(name, num_partitions, replication_factor, assignments, configs,
                                       max_records=max_records)  # MetadataError as it would
            planned.topic_id = uuid.uuid4()
            await lc.prepare_logs(planned)
            try:
                finish = self._create_topic(name, num_partitions, replication_factor, assignments, configs,
                                            max_records=max_records, topic_id=planned.topic_id)
            except BaseException:
                lc.discard_prepared(planned)
                raise

        async def finished() -> TopicInfo:
            try:
                return await finish()
            finally:
                lc.discard_prepared(planned)  # (those its callback did not take)
        return finished

    def _plan_topic(self, name: str, num_partitions: int, replication_factor: int,
                    assignments: dict[int, list[int]] | None, configs: dict[str, str | None],
                    max_records: int) -> tuple[int, int, list[list[int]]]:
        md = self.metadata
        return md.check_create_topic(
            name, num_partitions, replication_factor, assignments, configs,
            default_partitions=self.config.get("num.partitions"),
            default_rf=min(self.config.get("default.replication.factor"), max(1, len(md.brokers))),
            max_records=max_records)

    def check_topic(self, name: str, num_partitions: int, replication_factor: int,
                    assignments: dict[int, list[int]] | None, configs: dict[str, str | None],
                    *, max_records: int = MAX_RECORDS_PER_USER_OP) -> TopicInfo:
        """Validate a CreateTopics entry (MetadataError as Kafka refuses it) -> the topic it would make."""
        from ..controller.metadata import PartitionInfo
        _, _, replicas = self._plan_topic(name, num_partitions, replication_factor, assignments, configs, max_records)
        return TopicInfo(name, uuid.UUID(int=0),
                         [PartitionInfo(i, r, r[0], 0, list(r)) for i, r in enumerate(replicas)],
                         {k: v for k, v in configs.items() if v is not None})

    def _create_topic(self, name: str, num_partitions: int, replication_factor: int,
                      assignments: dict[int, list[int]] | None, configs: dict[str, str | None],
                      *, max_records: int = MAX_RECORDS_PER_USER_OP, topic_id: uuid.UUID | None = None):
        """The topic made in memory now (MetadataError when Kafka refuses it) -> what to await for it: on disk, its
        logs made, the brokers told."""
        md = self.metadata
        n, rf, replicas = self._plan_topic(name, num_partitions, replication_factor, assignments, configs,
                                           max_records)

        def made() -> TopicInfo:  # the metadata on disk: the logs are made, then brokers see it
            try:
                for h in self.hooks:
                    h.on_topic_created(info)
            except BaseException:
                self._roll_back(lambda: md.forget_topic(name), info)
                raise
            self.publish()
            log.info("topic.created", topic=name, partitions=n, replication_factor=rf, topic_id=str(info.topic_id))
            return info
        # all or nothing (disk faults): the metadata is persisted, then the logs are made, then brokers see it
        what = f"creating topic {name}"
        with self._storage(what):
            self._check_log_dir()
            info = md.create_topic(name, replicas, {k: v for k, v in configs.items() if v is not None}, topic_id)
            waiter = self._later(made)

        async def finish() -> TopicInfo:
            with self._storage(what):
                info = await wait(waiter)
            await self.logs_settled()
            return info
        return finish

    def _roll_back(self, undo, info: TopicInfo | None = None) -> None:
        """Undo a metadata change whose logs could not be made: in memory at once, on disk if it still
        takes writes (else the snapshot may keep it: the log dir is offline until a restart anyway).
        With `info`, a created topic: its partition directories are removed too."""
        undo()
        if info is not None:
            for h in self.hooks:
                h.on_topic_deleted(info)
        try:
            self.metadata.persist()
        except OSError as exc:
            log.warning("metadata.roll_back_not_persisted", error=str(exc))

    def _check_log_dir(self) -> None:
        if self.replicas is not None:
            self.replicas.lifecycle.check_log_dir()

    @contextmanager
    def _storage(self, what: str):
        """A failed metadata write or log creation: the log dir goes offline, and the request is answered
        KAFKA_STORAGE_ERROR (MetadataError)."""
        from .log_lifecycle import KafkaStorageException
        try:
            yield
        except OSError as exc:
            if self.replicas is None:  # an in-process cluster's metadata file: its brokers' logs are not at fault
                raise MetadataError(E.KAFKA_STORAGE_ERROR, f"{what}: {exc}") from None
            raise MetadataError(E.KAFKA_STORAGE_ERROR, str(self.replicas.handle_log_dir_failure(exc, what))) from None
        except KafkaStorageException as exc:
            raise MetadataError(E.KAFKA_STORAGE_ERROR, str(exc)) from None

    async def delete_topic(self, name: str) -> None:
        await self.delete_topics([name])

    async def delete_topics(self, names: list[str]) -> list[TopicInfo]:
        """Delete topics with one metadata write; then the brokers learn it once and the logs go. A name the metadata
        does not know (a concurrent DeleteTopics took it, not yet durable, so the caches still show it) is
        UNKNOWN_TOPIC_OR_PARTITION and nothing is deleted."""
        def deleted() -> list[TopicInfo]:
            self.publish()
            for info in infos:
                log.info("topic.deleted", topic=info.name, topic_id=str(info.topic_id))
                for h in self.hooks:
                    h.on_topic_deleted(info)
            return infos
        missing = [n for n in names if self.metadata.topic(n) is None]
        if missing:
            raise MetadataError(E.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        with self._storage(f"deleting topic {names[0] if len(names) == 1 else names}"):
            infos: list[TopicInfo] = []
            try:
                for name in names:
                    infos.append(self.metadata.delete_topic(name))
            except OSError:  # (written at once: those deleted before are on disk)
                if infos:
                    deleted()
                raise
            return await self.durable(deleted)

    async def create_partitions(self, name: str, count: int, assignments, *, validate_only: bool = False,
                                max_records: int = MAX_RECORDS_PER_USER_OP) -> int:
        """Add partitions up to `count` -> how many (validated only, with validate_only). A single broker's new logs
        are made in a worker thread first, as a new topic's (create_topic_off_loop)."""
        md = self.metadata
        if validate_only:
            return len(md.check_create_partitions(name, count, assignments, max_records))
        rm = self.replicas
        if rm is None or rm.in_memory or rm.is_replicated:
            return await self._add_partitions(name, count, assignments, max_records)
        lc = rm.lifecycle
        await lc.making_logs.acquire()
        try:
            md.check_create_partitions(name, count, assignments, max_records)  # MetadataError before any log is made
            topic = md.topic(name)
            indexes = list(range(len(topic.partitions), count))
            await lc.prepare_logs(topic, indexes)
            try:
                return await self._add_partitions(name, count, assignments, max_records, changed=lc.making_logs.release)
            finally:
                lc.discard_prepared(topic, indexes)
        finally:
            if lc.making_logs.locked() and lc.making_logs.statistics().owner is trio.lowlevel.current_task():
                lc.making_logs.release()

    async def _add_partitions(self, name: str, count: int, assignments, max_records: int,
                              changed: Callable[[], None] | None = None) -> int:
        md = self.metadata
        replicas = md.check_create_partitions(name, count, assignments, max_records)

        def added() -> int:
            try:
                for h in self.hooks:
                    h.on_partitions_added(info)
            except BaseException:
                self._roll_back(lambda: md.remove_partitions(name, before))
                raise
            self.publish()
            return len(replicas)
        with self._storage(f"adding partitions to {name}"):
            self._check_log_dir()
            info = md.topic(name)
            before = len(info.partitions)
            md.add_partitions(name, replicas)
            if changed is not None:
                changed()
            n = await self.durable(added)
        await self.logs_settled()
        return n

    async def logs_settled(self) -> None:
        """An in-process cluster: once its brokers made (in a worker thread) the logs they were told of so far."""
        for b in list(self.brokers.values()):
            await b.logs_settled()

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        validate_topic_configs(configs)
        if self.metadata.topic(name) is None:  # deleted by a request not yet durable (the caches still show it)
            raise MetadataError(E.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")

        def changed() -> None:
            if str(configs.get("unclean.leader.election.enable", "")).lower() == "true":
                self._elect_offline()  # Kafka's TopicUncleanLeaderElectionEnable: its offline partitions may lead now
            self.publish()
            for h in self.hooks:
                h.on_configs_changed(info)
        with self._storage(f"altering the configs of {name}"):
            self.metadata.set_topic_configs(name, configs)
            info = self.metadata.topic(name)
            await self.durable(changed)

    def set_dynamic_broker_configs(self, configs: dict[str, str], *, default: bool = False) -> None:
        """This process's dynamic broker configs (`default`: the cluster-wide default layer) replaced by `configs`."""
        if default:
            self.config.dynamic_default = dict(configs)
        else:
            self.config.dynamic = dict(configs)
        for h in self.hooks:
            for t in list(self.metadata.topics.values()):
                h.on_configs_changed(t)

    async def allocate_producer_id(self) -> int:
        """A producer id, answered once its block is on disk (OSError when it cannot be written)."""
        pid = self.metadata.allocate_producer_id()
        await self.durable(version=self.metadata.producer_id_block_version)
        return pid

    async def set_user_configs(self, changes: dict[str, dict[str, str]]) -> None:
        """Users' configs (SCRAM credentials), on disk when this returns (OSError when they cannot be written)."""
        self.metadata.set_user_configs(changes)
        await self.durable()

    async def set_group_configs(self, changes: dict[str, dict[str, str]]) -> None:
        """Groups' own configs, on disk when this returns (OSError when they cannot be written); every broker of
        the process reads them from the metadata at its groups' next heartbeat."""
        self.metadata.set_group_configs(changes)
        await self.durable()

    async def set_acls(self, acls) -> None:
        """The cluster's ACLs, on disk when this returns (OSError when they cannot be written)."""
        self.metadata.set_acls(acls)
        await self.durable()
