"""The state every broker of this process shares: the configuration, the cluster metadata and its controller, the
coordination store, the topics' lifecycle (create, delete, partitions, configs: the in-process controller's job; in
ZooKeeper mode the metadata comes from ZooKeeper, zk_mode.py), and a single broker's ReplicaManager."""
from __future__ import annotations

import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from ..config import BrokerConfig, validate_topic_configs
from ..controller.controller import Controller, MetadataUpdate
from ..controller.metadata import (MAX_RECORDS_PER_USER_OP, ClusterMetadata, FileMetadataStore, MemoryMetadataStore,
                                   MetadataError, TopicInfo)
from ..controller.store import InProcessStore
from ..wire.errors import E

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
            self.metadata = ClusterMetadata(store, node_id=config.node_id)
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
        return b.cache.apply(cmd)

    def active_controller(self) -> Controller | None:
        for b in self.brokers.values():
            c = b.controller.active_controller()
            if c is not None:
                return c
        return None

    def publish(self) -> None:
        c = self.active_controller()
        if c is not None:
            c.publish()

    def _elect_offline(self) -> None:
        """The active controller elects again (on_brokers_changed), e.g. offline partitions that may now lead."""
        c = self.active_controller()
        if c is not None:
            c.on_brokers_changed()

    # -- topic lifecycle (the controller's job; single controller for now) ---------
    async def create_topic_off_loop(self, name: str, num_partitions: int, replication_factor: int,
                                    assignments: dict[int, list[int]] | None, configs: dict[str, str | None],
                                    *, max_records: int = MAX_RECORDS_PER_USER_OP) -> TopicInfo:
        """create_topic, with a single broker's new logs made in a worker thread first (server/prepared_logs.py;
        an in-process cluster's brokers open theirs with their partition states), one at a time (making_logs)."""
        rm = self.replicas
        if rm is None or rm.in_memory or rm.is_replicated:
            return self.create_topic(name, num_partitions, replication_factor, assignments, configs,
                                     max_records=max_records)
        async with rm.making_logs:
            planned = self.create_topic(name, num_partitions, replication_factor, assignments, configs,
                                        validate_only=True, max_records=max_records)  # MetadataError as it would
            planned.topic_id = uuid.uuid4()
            await rm.prepare_logs(planned)
            try:
                return self.create_topic(name, num_partitions, replication_factor, assignments, configs,
                                         max_records=max_records, topic_id=planned.topic_id)
            finally:
                rm.discard_prepared(planned)

    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     assignments: dict[int, list[int]] | None, configs: dict[str, str | None],
                     *, validate_only: bool = False, max_records: int = MAX_RECORDS_PER_USER_OP,
                     topic_id: uuid.UUID | None = None) -> TopicInfo:
        md = self.metadata
        n, rf, replicas = md.check_create_topic(
            name, num_partitions, replication_factor, assignments, configs,
            default_partitions=self.config.get("num.partitions"),
            default_rf=min(self.config.get("default.replication.factor"), max(1, len(md.brokers))),
            max_records=max_records)
        if validate_only:
            from ..controller.metadata import PartitionInfo
            return TopicInfo(name, uuid.UUID(int=0),
                             [PartitionInfo(i, r, r[0], 0, list(r)) for i, r in enumerate(replicas)],
                             {k: v for k, v in configs.items() if v is not None})
        # all or nothing (disk faults): the metadata is persisted, then the logs are made, then brokers see it
        with self._storage(f"creating topic {name}"):
            self._check_log_dir()
            info = md.create_topic(name, replicas, {k: v for k, v in configs.items() if v is not None}, topic_id)
            try:
                for h in self.hooks:
                    h.on_topic_created(info)
            except BaseException:
                self._roll_back(lambda: md.forget_topic(name), info)
                raise
        self.publish()
        log.info("topic.created", topic=name, partitions=n, replication_factor=rf, topic_id=str(info.topic_id))
        return info

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
            self.replicas.check_log_dir()

    @contextmanager
    def _storage(self, what: str):
        """A failed metadata write or log creation: the log dir goes offline, and the request is answered
        KAFKA_STORAGE_ERROR (MetadataError)."""
        from .replica_manager import KafkaStorageException
        try:
            yield
        except OSError as exc:
            if self.replicas is None:  # an in-process cluster's metadata file: its brokers' logs are not at fault
                raise MetadataError(E.KAFKA_STORAGE_ERROR, f"{what}: {exc}") from None
            raise MetadataError(E.KAFKA_STORAGE_ERROR, str(self.replicas.handle_log_dir_failure(exc, what))) from None
        except KafkaStorageException as exc:
            raise MetadataError(E.KAFKA_STORAGE_ERROR, str(exc)) from None

    def delete_topic(self, name: str) -> None:
        with self._storage(f"deleting topic {name}"):
            info = self.metadata.delete_topic(name)
        self.publish()
        log.info("topic.deleted", topic=name, topic_id=str(info.topic_id))
        for h in self.hooks:
            h.on_topic_deleted(info)

    def create_partitions(self, name: str, count: int, assignments, *, validate_only: bool = False,
                          max_records: int = MAX_RECORDS_PER_USER_OP) -> int:
        """Add partitions up to `count` -> how many (validated only, with validate_only)."""
        md = self.metadata
        replicas = md.check_create_partitions(name, count, assignments, max_records)
        if validate_only:
            return len(replicas)
        with self._storage(f"adding partitions to {name}"):
            self._check_log_dir()
            before = len(md.topic(name).partitions)
            md.add_partitions(name, replicas)
            info = md.topic(name)
            try:
                for h in self.hooks:
                    h.on_partitions_added(info)
            except BaseException:
                self._roll_back(lambda: md.remove_partitions(name, before))
                raise
        self.publish()
        return len(replicas)

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        validate_topic_configs(configs)
        with self._storage(f"altering the configs of {name}"):
            self.metadata.set_topic_configs(name, configs)
        if str(configs.get("unclean.leader.election.enable", "")).lower() == "true":
            self._elect_offline()  # Kafka's TopicUncleanLeaderElectionEnable: its offline partitions may lead now
        self.publish()
        for h in self.hooks:
            h.on_configs_changed(self.metadata.topic(name))

    def set_dynamic_broker_configs(self, configs: dict[str, str], *, default: bool = False) -> None:
        """This process's dynamic broker configs (`default`: the cluster-wide default layer) replaced by `configs`."""
        if default:
            self.config.dynamic_default = dict(configs)
        else:
            self.config.dynamic = dict(configs)
        for h in self.hooks:
            for t in list(self.metadata.topics.values()):
                h.on_configs_changed(t)

    def allocate_producer_id(self) -> int:
        return self.metadata.allocate_producer_id()
