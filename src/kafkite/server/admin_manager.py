"""A broker's side of the cluster's metadata, one object chosen once when the broker is made: where admin requests
go, how its controller is made and reached, and its life cycle against it. Nothing above this module branches on
ZooKeeper mode: `Broker` (broker.py) and the handlers call one `AdminManager`, and the two differ only here.

- `InProcessAdminManager`: the cluster's metadata is this process's (`ClusterState`, cluster_state.py), written by
  the in-process controller (`controller.Controller`) as Kafka's KRaft QuorumController writes its metadata log:
  CreateTopics, DeleteTopics, CreatePartitions, configs, SCRAM users, ACLs and producer id blocks are changed in
  memory and answered once durable (one snapshot write for a whole request). The controller's commands reach the
  brokers by a call (`ClusterState.deliver` -> `MetadataCache.apply`), and this broker applies them to its replicas
  as Kafka's BrokerMetadataPublisher applies the metadata log (become leader or follower, ISR, stop replica).
  Life cycle: Kafka's BrokerServer registering with a controller in its own process.
- `ZkAdminManager`: the metadata is ZooKeeper's (`ZkMode`, zk_mode.py). Admin requests write ZooKeeper's nodes, as
  Kafka's ZkAdminManager does through AdminZkClient (answered once this broker's metadata shows the change, Kafka's
  DelayedCreatePartitions), and the controller elected through ZooKeeper (`ZkController`, on its event thread)
  takes it from there; its commands come over the network as LeaderAndIsr / UpdateMetadata / StopReplica
  (handlers/controller_apis.py), and ControlledShutdown / AlterPartition are handed to its event thread.
  Life cycle: Kafka's KafkaServer: register in /brokers/ids, wait for the controller's UpdateMetadata, then take
  client connections; on stop the ZooKeeper session ends (the registration and a held /controller go with it).
"""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Callable

import structlog

from ..controller.controller import Controller
from ..controller.metadata import MAX_RECORDS_PER_USER_OP, BrokerInfo, MetadataError, PartitionInfo, TopicInfo
from ..wire.errors import E

log = structlog.get_logger("kafkite.admin_manager")

if TYPE_CHECKING:
    from .broker import Broker


class AdminManager:
    """What both sides share; `admin_manager(broker)` picks the side."""
    # whether the controller's requests (LeaderAndIsr, ...) come over the network to the inter-broker listener
    controller_requests_over_network: bool = False

    def __init__(self, broker: "Broker"):
        self.broker = broker
        self.state = broker.state
        self.controller: Any = None  # this broker's controller (one per broker; the active one acts)

    # -- admin requests ----------------------------------------------------------------------------------------
    def is_admin_controller(self) -> bool:
        """Whether this broker takes CreateTopics, DeleteTopics and CreatePartitions."""
        raise NotImplementedError

    def check_create_topic(self, name, num_partitions, replication_factor, assignments, configs, *,
                           max_records: int = MAX_RECORDS_PER_USER_OP) -> TopicInfo:
        """Validate a CreateTopics entry (MetadataError when Kafka refuses it) -> the topic it would make."""
        raise NotImplementedError

    async def create_topic(self, name, num_partitions, replication_factor, assignments, configs, *,
                           validate_only: bool = False, max_records: int = MAX_RECORDS_PER_USER_OP,
                           wait: bool = True) -> TopicInfo | None:
        """Create a topic -> it, once this broker's metadata has it (ZooKeeper mode without `wait`: None at once)."""
        if validate_only:
            return self.check_create_topic(name, num_partitions, replication_factor, assignments, configs,
                                           max_records=max_records)
        return await self._create_topic(name, num_partitions, replication_factor, assignments, configs,
                                        max_records=max_records, wait=wait)

    async def _create_topic(self, name, num_partitions, replication_factor, assignments, configs, *,
                            max_records: int, wait: bool) -> TopicInfo | None:
        raise NotImplementedError

    async def create_topics(self, entries, *,
                            max_records: int = MAX_RECORDS_PER_USER_OP) -> list[TopicInfo | Exception]:
        """The topics of one CreateTopics, an iterable of (name, partitions, replication factor, assignments,
        configs) taken in order, each made before the next is taken -> each one's TopicInfo or MetadataError."""
        raise NotImplementedError

    async def delete_topic(self, name: str) -> None:
        raise NotImplementedError

    async def delete_topics(self, names: list[str]) -> dict:
        """Delete topics -> {name: the MetadataError it failed with} (none: all deleted)."""
        raise NotImplementedError

    async def create_partitions(self, name: str, count: int, assignments, *, validate_only: bool = False,
                                max_records: int = MAX_RECORDS_PER_USER_OP) -> int:
        raise NotImplementedError

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        raise NotImplementedError

    async def topic_configs(self, names: list[str]) -> dict[str, dict[str, str]]:
        """Topics' configs as the metadata's authority has them now."""
        raise NotImplementedError

    async def allocate_producer_id(self) -> int:
        raise NotImplementedError

    async def user_configs(self, names: list[str] | None = None) -> dict[str, dict[str, str]]:
        """Users' configs as the store has them now: those named, or every user's."""
        raise NotImplementedError

    async def set_user_configs(self, changes: dict[str, dict[str, str]]) -> None:
        raise NotImplementedError

    async def group_configs(self, names: list[str] | None = None) -> dict[str, dict[str, str]]:
        """Groups' own configs (the GROUP config resource) as the store has them now: those named (with any), or
        every group's."""
        raise NotImplementedError

    async def set_group_configs(self, changes: dict[str, dict[str, str]]) -> None:
        """Groups' whole new configs (an empty one: none left); every broker's coordinator reads them."""
        raise NotImplementedError

    async def alter_acls(self, add, remove) -> None:
        """ACLs added and removed, written; this broker's authorizer has them at once. OSError when they cannot be
        written."""
        await self._write_acls(add, remove)
        if self.state.authorizer is not None:
            self.state.authorizer.load(self.state.metadata.acls)

    async def _write_acls(self, add, remove) -> None:
        raise NotImplementedError

    async def set_dynamic_broker_configs(self, resource_name: str, configs: dict[str, str]) -> None:
        """AlterConfigs on a broker resource: this broker's id, or "" for the cluster-wide default."""
        raise NotImplementedError

    async def auto_create_topic(self, name: str) -> tuple[int, TopicInfo | None]:
        """An unknown topic a Metadata or Produce request names, already allowed to be made -> (error, the topic)."""
        raise NotImplementedError

    # -- the controller's requests taken by this broker --------------------------------------------------------
    async def alter_partition(self, broker_id: int, broker_epoch: int, items: list) -> tuple[int, list]:
        """AlterPartition: a partition leader's new ISRs, taken by the controller -> (error, each partition's)."""
        raise NotImplementedError

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[int, list]:
        """ControlledShutdown: the controller moves leadership off a broker -> (error, the partitions left)."""
        raise NotImplementedError

    # -- life cycle (Broker.serve) -----------------------------------------------------------------------------
    def starting(self, accept: Callable[[], None]) -> None:
        """The broker's nursery is open; `accept` starts taking client connections."""

    def replication_starting(self) -> None:
        """The broker's replication (its followers' fetchers) is about to start."""

    async def register(self, me: BrokerInfo, accept: Callable[[], None]) -> None:
        """The broker is listening and its services run: it joins the cluster as `me`."""
        raise NotImplementedError

    async def stopped(self) -> None:
        """The broker's nursery is done: its session with the cluster ends (its controller, if active, resigns)."""
        raise NotImplementedError


class InProcessAdminManager(AdminManager):
    """The metadata of this process's `ClusterState`, written by the in-process controller (see the module)."""
    # the controller's LeaderAndIsr, UpdateMetadata, StopReplica are calls in the process, not requests
    controller_requests_over_network = False

    def __init__(self, broker: "Broker"):
        super().__init__(broker)
        state = self.state
        from .context import now_ms
        self.controller = Controller(broker.node_id, state.store, state.metadata, state.deliver, now_ms=now_ms,
                                     auto_leader_rebalance=state.config.get("auto.leader.rebalance.enable"),
                                     unclean_default=lambda: bool(state.config.get("unclean.leader.election.enable")),
                                     leaderless=state.leaderless)
        if broker.replicas.is_replicated:  # an in-process cluster's broker: first its replicas
            broker.cache.listeners.append(lambda _old, cache: broker._apply_partition_states(cache))

    def is_admin_controller(self) -> bool:
        return True  # every broker takes them: the metadata is the process's

    def check_create_topic(self, name, num_partitions, replication_factor, assignments, configs, *,
                           max_records: int = MAX_RECORDS_PER_USER_OP) -> TopicInfo:
        return self.state.check_topic(name, num_partitions, replication_factor, assignments, configs,
                                      max_records=max_records)

    async def _create_topic(self, name, num_partitions, replication_factor, assignments, configs, *,
                            max_records: int, wait: bool) -> TopicInfo:
        return await self.state.create_topic_off_loop(name, num_partitions, replication_factor, assignments,
                                                      configs, max_records=max_records)

    async def create_topics(self, entries, *,
                            max_records: int = MAX_RECORDS_PER_USER_OP) -> list[TopicInfo | Exception]:
        """All are made, then written with one metadata write."""
        return await self.state.create_topics_off_loop(entries, max_records=max_records)

    async def delete_topic(self, name: str) -> None:
        await self.state.delete_topic(name)

    async def delete_topics(self, names: list[str]) -> dict:
        """With one metadata write for all (DeleteTopics, the control plane's reset to empty)."""
        known = [n for n in names if self.state.metadata.topic(n) is not None]
        failed = {n: MetadataError(E.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
                  for n in names if n not in known}  # (taken by a concurrent deletion not yet durable)
        try:
            if known:
                await self.state.delete_topics(known)
        except MetadataError as exc:
            failed.update(dict.fromkeys(known, exc))
        return failed

    async def create_partitions(self, name: str, count: int, assignments, *, validate_only: bool = False,
                                max_records: int = MAX_RECORDS_PER_USER_OP) -> int:
        return await self.state.create_partitions(name, count, assignments, validate_only=validate_only,
                                                  max_records=max_records)

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        await self.state.set_topic_configs(name, configs)

    async def topic_configs(self, names: list[str]) -> dict[str, dict[str, str]]:
        md = self.state.metadata
        return {n: dict(md.topic(n).configs) for n in names if md.topic(n) is not None}

    async def allocate_producer_id(self) -> int:
        return await self.state.allocate_producer_id()

    async def user_configs(self, names: list[str] | None = None) -> dict[str, dict[str, str]]:
        users = self.state.metadata.users
        return {u: dict(c) for u, c in users.items() if names is None or u in names}

    async def set_user_configs(self, changes: dict[str, dict[str, str]]) -> None:
        """In the metadata snapshot."""
        await self.state.set_user_configs(changes)

    async def group_configs(self, names: list[str] | None = None) -> dict[str, dict[str, str]]:
        groups = self.state.metadata.group_configs
        return {g: dict(c) for g, c in groups.items() if names is None or g in names}

    async def set_group_configs(self, changes: dict[str, dict[str, str]]) -> None:
        """In the metadata snapshot (the process's brokers share it)."""
        await self.state.set_group_configs(changes)

    async def _write_acls(self, add, remove) -> None:
        await self.state.set_acls((self.state.metadata.acls | set(add)) - set(remove))

    async def set_dynamic_broker_configs(self, resource_name: str, configs: dict[str, str]) -> None:
        self.state.set_dynamic_broker_configs(configs, default=resource_name == "")

    async def auto_create_topic(self, name: str) -> tuple[int, TopicInfo | None]:
        try:
            return 0, await self.state.create_topic_off_loop(name, -1, -1, None, {})
        except MetadataError as exc:
            return int(exc.code), None

    async def alter_partition(self, broker_id: int, broker_epoch: int, items: list) -> tuple[int, list]:
        err, out = self.controller.alter_partition(broker_id, broker_epoch, items)  # (its controller: this thread)
        if not err and self.state.writer is not None:  # answered once the new ISRs are on disk (written off the loop)
            try:
                await self.state.writer.durable()
            except OSError as exc:
                log.warning("alter_partition.not_written", error=str(exc))
                return E.UNKNOWN_SERVER_ERROR, []
        return err, out

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[int, list]:
        # (not served: an in-process cluster's inter-broker listener does not take ControlledShutdown, router.py)
        raise NotImplementedError("an in-process cluster's brokers stop through their controller by a call")

    def replication_starting(self) -> None:
        rm = self.broker.replicas  # an in-process broker (re)starting: it learns its partitions afresh
        rm.leader_epochs.clear()
        rm.partitions.clear()

    async def register(self, me: BrokerInfo, accept: Callable[[], None]) -> None:
        self.controller.startup(me)  # (in the process: the metadata reaches this broker's cache in the call)
        # As Kafka enables request processing at the end of start-up: no client connection is taken before this
        # broker has registered and the controller's metadata reached it. A client taken before (while the group
        # and transaction coordinators started) was answered Metadata without a controller, and librdkafka's admin
        # client then waited for one past its timeouts (seen on a loaded machine: CreateTopics never sent).
        accept()

    async def stopped(self) -> None:
        if self.broker.replicated:
            self.broker.replicas.replication = None  # its fetchers stopped with it
        self.controller.shutdown()
        self.state.store.end_session(self.broker.node_id)


class ZkAdminManager(AdminManager):
    """The metadata of ZooKeeper, through this process's `ZkMode` (see the module)."""
    # the controller (maybe in another process) sends LeaderAndIsr, UpdateMetadata, StopReplica, and is sent
    # ControlledShutdown: the inter-broker listener serves them (router.INTER_BROKER_ROUTES)
    controller_requests_over_network = True

    def __init__(self, broker: "Broker"):
        super().__init__(broker)
        state = self.state
        self.zk = state.zk
        if state.brokers or broker.node_id != state.config.node_id:
            raise ValueError("a ZooKeeper-mode process runs one broker, the one of its broker.id/node.id")
        broker.cache.cluster_id = state.metadata.cluster_id  # ZooKeeper's /cluster/id (loaded by open_zk)
        self.controller = self.zk.new_controller(broker)

    def is_admin_controller(self) -> bool:
        # only the active controller does (others answer NOT_CONTROLLER, and clients go to the controller Metadata
        # names)
        return self.controller.active

    def check_create_topic(self, name, num_partitions, replication_factor, assignments, configs, *,
                           max_records: int = MAX_RECORDS_PER_USER_OP) -> TopicInfo:
        _, _, replicas = self.zk.check_create_topic(name, num_partitions, replication_factor, assignments, configs,
                                                    max_records=max_records)
        return TopicInfo(name, uuid.UUID(int=0),
                         [PartitionInfo(i, r, r[0], 0, list(r)) for i, r in enumerate(replicas)],
                         {k: v for k, v in configs.items() if v is not None})

    async def _create_topic(self, name, num_partitions, replication_factor, assignments, configs, *,
                            max_records: int, wait: bool) -> TopicInfo | None:
        return await self.zk.create_topic(name, num_partitions, replication_factor, assignments, configs,
                                          wait=wait, max_records=max_records)

    async def create_topics(self, entries, *,
                            max_records: int = MAX_RECORDS_PER_USER_OP) -> list[TopicInfo | Exception]:
        """One by one."""
        out: list[TopicInfo | Exception] = []
        for entry in entries:
            try:
                out.append(await self.zk.create_topic(*entry, wait=True, max_records=max_records))
            except MetadataError as exc:
                out.append(exc)
        return out

    async def delete_topic(self, name: str) -> None:
        await self.zk.delete_topic(name)

    async def delete_topics(self, names: list[str]) -> dict:
        """One by one."""
        failed = {}
        for name in names:
            try:
                await self.zk.delete_topic(name)
            except MetadataError as exc:
                failed[name] = exc
        return failed

    async def create_partitions(self, name: str, count: int, assignments, *, validate_only: bool = False,
                                max_records: int = MAX_RECORDS_PER_USER_OP) -> int:
        if validate_only:
            return len(self.broker.cache.check_create_partitions(name, count, assignments, max_records))
        return await self.zk.create_partitions(name, count, assignments, max_records=max_records)

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        from ..config import validate_topic_configs
        validate_topic_configs(configs)
        await self.zk.set_topic_configs(name, configs)

    async def topic_configs(self, names: list[str]) -> dict[str, dict[str, str]]:
        return await self.zk.topic_configs(names)

    async def allocate_producer_id(self) -> int:
        return await self.zk.allocate_producer_id()

    async def user_configs(self, names: list[str] | None = None) -> dict[str, dict[str, str]]:
        """ZooKeeper is read, not this broker's cache, as Kafka's AdminZkClient does."""
        return await self.zk.user_configs(names)

    async def set_user_configs(self, changes: dict[str, dict[str, str]]) -> None:
        """ZooKeeper's /config/users."""
        await self.zk.set_user_configs(changes)

    async def group_configs(self, names: list[str] | None = None) -> dict[str, dict[str, str]]:
        """ZooKeeper is read, not this broker's copy."""
        return await self.zk.group_configs(names)

    async def set_group_configs(self, changes: dict[str, dict[str, str]]) -> None:
        """ZooKeeper's /config/groups/<group>, with a notification every broker follows."""
        await self.zk.set_group_configs(changes)

    async def _write_acls(self, add, remove) -> None:
        await self.zk.alter_acls(add, remove)  # /kafka-acl with its notifications (every broker follows them)

    async def set_dynamic_broker_configs(self, resource_name: str, configs: dict[str, str]) -> None:
        """Kept in /config/brokers/<id> or /config/brokers/<default>, which every broker follows."""
        await self.zk.set_broker_configs(resource_name, configs)

    async def auto_create_topic(self, name: str) -> tuple[int, TopicInfo | None]:
        """Kafka's ZK-mode AutoTopicCreationManager: written to ZooKeeper, and answered LEADER_NOT_AVAILABLE until
        the controller has elected its leaders (clients retry)."""
        try:
            await self.create_topic(name, -1, -1, None, {}, wait=False)
            return int(E.LEADER_NOT_AVAILABLE), None
        except MetadataError as exc:
            if exc.code == E.TOPIC_ALREADY_EXISTS:
                return int(E.LEADER_NOT_AVAILABLE), None
            return int(exc.code), None

    async def alter_partition(self, broker_id: int, broker_epoch: int, items: list) -> tuple[int, list]:
        zk = self.zk
        return await zk.call(lambda: zk.controller.alter_partition(broker_id, broker_epoch, items))

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[int, list]:
        zk = self.zk
        return await zk.call(lambda: zk.controller.controlled_shutdown(broker_id, broker_epoch))

    async def register(self, me: BrokerInfo, accept: Callable[[], None]) -> None:
        await self.zk.register(me)
        # As Kafka enables request processing at the end of start-up: the client port is bound (a port 0 had to
        # be known to register) but no client connection is taken before this broker knows the cluster, so no
        # client ever sees Metadata without the live brokers.
        await self.broker.wait_until_it_knows_the_cluster()
        accept()

    async def stopped(self) -> None:
        await self.zk.close()


def admin_manager(broker: "Broker") -> AdminManager:
    """The broker's side: ZooKeeper's when its process runs in ZooKeeper mode (`zookeeper.connect`), else the
    in-process controller's."""
    return ZkAdminManager(broker) if broker.state.zk is not None else InProcessAdminManager(broker)
