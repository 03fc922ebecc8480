"""Cluster metadata: the one source of truth for brokers, topics and partitions.

Sans-IO: this module holds the state and its rules (topic name validation,
replica placement, partition leaders and leader epochs, topic configs). It
never reads the clock and never touches a socket; it persists through a
`MetadataStore` (a JSON snapshot in the data dir, or nothing in memory: metadata_store.py).

Producer ids are handed out in blocks of 1000, like Kafka's ProducerIdManager: a block is
persisted before any id of it is used, in its own file (`latest_producer_id_block`, the JSON of
Kafka's ZooKeeper node of that name) as well as in the snapshot, so a lost snapshot does not
make ids be handed out again; the broker also raises the next block above every producer id its
logs hold (`raise_producer_id_floor`). Producer ids are never reused.

Users' configs (Kafka's user entity configs: SCRAM credentials, security/scram.py) are in the snapshot too (in
ZooKeeper mode they live under /config/users and only the in-memory copy is kept here), and so are the ACLs and
the groups' own configs (the GROUP config resource, coordinator/group_config.py; ZooKeeper: /config/groups).
"""
from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Callable

from ..config import ConfigError, validate_topic_configs
from ..wire.errors import E
from .metadata_store import (DeferredWrites, FileMetadataStore, MemoryMetadataStore, MetadataStore, PendingWrite,
                             new_cluster_id)

# Also this module's API (callers import the stores from here): see metadata_store.py.
__all__ = ["BatchTooLarge", "BrokerInfo", "ClusterMetadata", "DeferredWrites", "FileMetadataStore",
           "INTERNAL_TOPICS", "MAX_RECORDS_PER_USER_OP", "MemoryMetadataStore", "MetadataError", "MetadataStore",
           "PartitionInfo", "PendingWrite", "TopicInfo", "collision_key", "new_cluster_id",
           "validate_topic_name"]

MAX_TOPIC_NAME = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


class MetadataError(Exception):
    """A request the metadata rejects, with the Kafka error code to answer."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = int(code)
        self.message = message


# KRaft's QuorumController.MAX_RECORDS_PER_USER_OP: the metadata records one CreateTopics (a TopicRecord, its
# ConfigRecords and one PartitionRecord per partition, over all its topics) or one CreatePartitions may make.
MAX_RECORDS_PER_USER_OP = 10000


class BatchTooLarge(MetadataError):
    """Kafka's answer when an operation would make more than MAX_RECORDS_PER_USER_OP records."""

    def __init__(self) -> None:
        super().__init__(E.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")


def validate_topic_name(name: str | None) -> None:
    """Kafka's Topic.validate."""
    if not name:
        raise MetadataError(E.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise MetadataError(E.INVALID_TOPIC_EXCEPTION, "Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_TOPIC_NAME:
        raise MetadataError(
            E.INVALID_TOPIC_EXCEPTION,
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME} characters, topic name: {name}")
    if not _LEGAL.match(name):
        raise MetadataError(
            E.INVALID_TOPIC_EXCEPTION,
            f"Topic name \"{name}\" is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'")


def collision_key(name: str) -> str:
    """Kafka: topics whose names differ only in '.' vs '_' collide in metric names."""
    return name.replace(".", "_")


@dataclass
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None
    listeners: list = field(default_factory=list)  # [name, host, port] of its other listeners (INTERNAL...)
    epoch: int = -1  # Kafka's broker epoch: the zxid that created its registration (ZooKeeper mode)
    listener: str = "PLAINTEXT"  # the name of its primary client listener (host, port)
    protocols: dict = field(default_factory=dict)  # listener name -> security protocol (PLAINTEXT when absent)


@dataclass(slots=True)  # (no instance dict: two of them a partition, the controller's and each cache's)
class PartitionInfo:
    index: int
    replicas: list[int]
    leader: int
    leader_epoch: int = 0
    isr: list[int] = field(default_factory=list)
    partition_epoch: int = 0


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionInfo]
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class ClusterMetadata:
    """Brokers, topics, partitions and configs; every change is persisted before it is visible (one
    that cannot be persisted is undone, and the OSError raised).

    Deferred writes (`defer_writes`, a broker with a data dir): a change (create/delete a topic, add partitions,
    configs, a producer id block, users, ACLs) is made in memory and numbered (`version`); the writer puts the
    snapshot on disk later, one write for every change made meanwhile (`take_pending`, `write`, `written`), and
    the caller answers once `durable_version` reaches its change. When the write fails, every change not yet
    durable is undone, newest first (`write_failed`). The controller's own changes (`persist()`: elections,
    ISRs) are written at once (`DeferredWrites.write_now`), with everything pending before them."""

    def __init__(self, store: MetadataStore, *, node_id: int = 1, defer_first_write: bool = False):
        """A store without a snapshot gets one at once (a new cluster id); with `defer_first_write`, by the writer
        `defer_writes` hands the writes to next (a broker's data dir: not on the event loop)."""
        self.store = store
        snap = store.load()
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.users: dict[str, dict[str, str]] = {}  # user -> its config (SCRAM mechanism -> credential string)
        self.group_configs: dict[str, dict[str, str]] = {}  # group id -> its configs (KRaft's GROUP ConfigRecords)
        self.acls: frozenset = frozenset()  # security/authorizer.py's AclBinding values
        self.controller_id = node_id
        self.controller_epoch = 0
        self.producer_id_next_block = 0  # producer ids are handed out in persisted blocks, like Kafka's
        self._pid_next = 0
        self._pid_end = 0
        self.node_id = node_id
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        self.version = 0  # changes made (each one persisted or to be)
        self.durable_version = 0  # the changes on disk
        self.producer_id_block_version = 0  # the change that handed out the block in use
        self.dirty = False  # a deferred change not yet taken by a write
        self._writes: DeferredWrites | None = None
        self._undos: list[tuple[int, Callable[[], None]]] = []  # deferred changes not yet durable, oldest first
        self._pending_pid_block: tuple[int, int, int] | None = None
        # (deferred) the last snapshot written, as its JSON text (a copy of its dicts took ~450 bytes a partition)
        self._durable_snapshot: str | None = None
        if snap is None:
            self.cluster_id = new_cluster_id()
        else:
            self.load_snapshot(snap, brokers=False)
        self.raise_producer_id_floor(store.load_producer_id_block())
        if snap is None and defer_first_write:
            self.version, self.dirty = 1, True
        elif snap is None:
            self.persist()  # like Kafka's meta.properties: the data dir says which cluster it belongs to

    # -- persistence ---------------------------------------------------------
    def load_snapshot(self, snap: dict, *, brokers: bool = True) -> None:
        self.cluster_id = snap["cluster_id"]
        self.controller_epoch = snap.get("controller_epoch", 0)
        self.producer_id_next_block = snap.get("producer_id_next_block", 0)
        self.topics = {}
        self._by_id = {}
        for t in snap["topics"]:
            self.put_topic(t)
        if "users" in snap:  # (a ZooKeeper snapshot has none: users follow /config/users there)
            self.users = {u: dict(c) for u, c in snap["users"].items()}
        if "group_configs" in snap:  # (likewise: /config/groups in ZooKeeper mode)
            self.group_configs = {g: dict(c) for g, c in snap["group_configs"].items()}
        if "acls" in snap:
            from ..security.authorizer import AclBinding
            self.acls = frozenset(AclBinding.from_json(a) for a in snap["acls"])
        if brokers and "brokers" in snap:
            self.brokers = {b["node_id"]: BrokerInfo(**b) for b in snap["brokers"]}

    def put_topic(self, t: dict) -> TopicInfo:
        """A topic from its snapshot entry, added or replacing the one of that name."""
        self.forget_topic(t["name"])
        info = self.topics[t["name"]] = TopicInfo(
            name=t["name"], topic_id=uuid.UUID(t["topic_id"]), partitions=[PartitionInfo(**p) for p in t["partitions"]],
            configs=dict(t.get("configs", {})))
        self._by_id[info.topic_id] = info
        return info

    def snapshot(self, include_brokers: bool = False) -> dict:
        extra = {"brokers": [vars(b).copy() for b in self.brokers.values()]} if include_brokers else {}
        return {
            **extra,
            "cluster_id": self.cluster_id,
            "node_id": self.node_id,
            "controller_epoch": self.controller_epoch,
            "producer_id_next_block": self.producer_id_next_block,
            "topics": [
                {"name": t.name, "topic_id": str(t.topic_id), "configs": dict(t.configs),
                 "partitions": [{"index": p.index, "replicas": list(p.replicas), "leader": p.leader,
                                 "leader_epoch": p.leader_epoch, "isr": list(p.isr),
                                 "partition_epoch": p.partition_epoch} for p in t.partitions]}
                for t in self.topics.values()
            ],
            "users": {u: dict(c) for u, c in self.users.items()},
            "group_configs": {g: dict(c) for g, c in self.group_configs.items()},
            "acls": sorted(a.to_json() for a in self.acls),
        }

    def persist(self) -> None:
        """Write every change made so far now (the controller's: elections, ISRs; OSError when it cannot).
        Deferred: written soon, off the event loop, and the brokers told then (`DeferredWrites.write_soon`; a
        caller that must not answer before, such as AlterPartition, awaits the writer's `durable()`); a failed
        write is not undone (the controller's view keeps it, the next write puts it on disk)."""
        self.version += 1
        if self._writes is not None:
            self.dirty = True
            self._writes.write_soon()
            return
        self.store.save(self.snapshot())
        self.durable_version = self.version

    # -- deferred writes (see the class comment) ---------------------------------
    def defer_writes(self, writes: DeferredWrites | None) -> None:
        """From now on changes are written by `writes` (None: at once again, as before)."""
        self._writes = writes
        self._durable_snapshot = json.dumps(self.snapshot()) if self.version == self.durable_version else None
        if writes is not None and self.dirty:  # (the first write, deferred)
            writes.changed()

    @property
    def deferred(self) -> bool:
        return self._writes is not None

    def take_pending(self) -> PendingWrite:
        """The next write: everything changed so far (the caller writes it, then says `written` or
        `write_failed`; or `dirty = True` again when it did not even try)."""
        self.dirty = False
        return PendingWrite(self.version, self.snapshot(), self._pending_pid_block)

    def write(self, pending: PendingWrite) -> str:
        """Put `pending` on disk (any thread: it touches nothing of this object's but the store) -> its JSON text,
        for `written`."""
        if pending.producer_id_block is not None:
            self.store.save_producer_id_block(*pending.producer_id_block)
        text = self.store.save(pending.snapshot)
        return text if isinstance(text, str) else json.dumps(pending.snapshot)

    def published_snapshot(self) -> dict:
        """What the brokers are told (with the live brokers): deferred, the last snapshot on disk, so that no client
        sees a change a crash could still take back; else the current one."""
        if self._writes is None or self.version == self.durable_version or self._durable_snapshot is None:
            return self.snapshot(include_brokers=True)
        return {**json.loads(self._durable_snapshot), "brokers": [vars(b).copy() for b in self.brokers.values()]}

    def written(self, pending: PendingWrite, text: str | None = None) -> None:
        """`pending` is on disk (`text`: its JSON, `write`'s answer): its changes are durable and can no longer be
        undone."""
        if pending.version > self.durable_version:
            self._durable_snapshot = text if text is not None else json.dumps(pending.snapshot)
        self.durable_version = max(self.durable_version, pending.version)
        self._undos = [(v, fn) for v, fn in self._undos if v > self.durable_version]
        if pending.producer_id_block is not None and self._pending_pid_block == pending.producer_id_block:
            self._pending_pid_block = None

    def write_failed(self) -> None:
        """The write failed: every change not durable is undone, newest first (their callers answer the error)."""
        undos, self._undos = self._undos, []
        for _, fn in reversed(undos):
            fn()
        self.dirty = False

    def allocate_producer_id(self, block_size: int = 1000) -> int:
        """A producer id never handed out before, also across restarts (the block is persisted first,
        see the module comment). Deferred: the id may be answered once `producer_id_block_version` is durable."""
        if self._pid_next >= self._pid_end:
            start, end = self.producer_id_next_block, self.producer_id_next_block + block_size
            # the block file first: when it cannot be written (OSError) nothing has changed; when the
            # snapshot then fails, memory is undone and the block's ids are skipped, never reused
            if self._writes is None:
                self.store.save_producer_id_block(start, end - 1, self.node_id)
            else:  # written first by the next write
                self._pending_pid_block = (start, end - 1, self.node_id)
            before = (self._pid_next, self._pid_end, self.producer_id_next_block, self.producer_id_block_version)
            self._pid_next, self._pid_end, self.producer_id_next_block = start, end, end

            def undo() -> None:
                self._pid_next, self._pid_end, self.producer_id_next_block, self.producer_id_block_version = before
                self._pending_pid_block = None
            self._persist_or_undo(undo)
            self.producer_id_block_version = self.version
        pid = self._pid_next
        self._pid_next += 1
        return pid

    def raise_producer_id_floor(self, floor: int) -> None:
        """No producer id below `floor` is handed out from the next block on (the ids a lost
        snapshot forgot: the block file's, or the highest one in the logs, plus one)."""
        self.producer_id_next_block = max(self.producer_id_next_block, floor)
        if floor > self._pid_next:  # the block in use would reach below the floor: take a new one
            self._pid_next = self._pid_end = 0

    # -- brokers -------------------------------------------------------------
    def register_broker(self, info: BrokerInfo) -> None:
        self.brokers[info.node_id] = info

    def unregister_broker(self, node_id: int) -> None:
        self.brokers.pop(node_id, None)

    @property
    def live_broker_ids(self) -> list[int]:
        return sorted(self.brokers)

    # -- lookups -------------------------------------------------------------
    def topic(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def partition(self, name: str, index: int) -> PartitionInfo | None:
        t = self.topics.get(name)
        if t is None or not 0 <= index < len(t.partitions):
            return None
        return t.partitions[index]

    # -- placement -----------------------------------------------------------
    def _place(self, start: int, count: int, rf: int, start_index: int = 0) -> list[list[int]]:
        """Kafka's rack-unaware placement: partition i's replicas start at broker
        (i + offset) % k and follow in broker order."""
        brokers = self.live_broker_ids
        k = len(brokers)
        out = []
        for i in range(start_index, start_index + count):
            first = (i + start) % k
            out.append([brokers[(first + j) % k] for j in range(rf)])
        return out

    # -- topic changes ------------------------------------------------------
    def check_create_topic(self, name: str, num_partitions: int, replication_factor: int,
                           assignments: dict[int, list[int]] | None, configs: dict[str, str | None],
                           default_partitions: int, default_rf: int, max_records: int = MAX_RECORDS_PER_USER_OP
                           ) -> tuple[int, int, list[list[int]]]:
        """Validate a CreateTopics entry like Kafka; returns (partitions, rf, replica lists). BatchTooLarge when
        the topic would take more than `max_records` metadata records (what is left of the request's)."""
        validate_topic_name(name)
        if name in self.topics:
            raise MetadataError(E.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        key = collision_key(name)
        for other in self.topics:
            if collision_key(other) == key:
                raise MetadataError(E.INVALID_TOPIC_EXCEPTION,
                                    f"Topic '{name}' collides with existing topic: {other}")
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise MetadataError(E.INVALID_REQUEST,
                                    "Both numPartitions or replicationFactor and replicasAssignments were set. "
                                    "Both cannot be used at the same time.")
            idx = sorted(assignments)
            if idx != list(range(len(idx))):
                raise MetadataError(E.INVALID_REPLICATION_ASSIGNMENT,
                                    "Partitions should be a consecutive 0-based integer sequence")
            if 1 + len(idx) + len(configs) > max_records:
                raise BatchTooLarge()
            replicas = [list(assignments[i]) for i in idx]
            for r in replicas:
                if not r or len(set(r)) != len(r):
                    raise MetadataError(E.INVALID_REPLICATION_ASSIGNMENT,
                                        "Duplicate or empty replica ids in the assignment")
                unknown = [b for b in r if b not in self.brokers]
                if unknown:
                    raise MetadataError(E.INVALID_REPLICATION_ASSIGNMENT,
                                        f"Unknown broker id(s) in the assignment: {unknown}")
            rf = len(replicas[0])
            n = len(replicas)
        else:
            n = default_partitions if num_partitions == -1 else num_partitions
            rf = default_rf if replication_factor == -1 else replication_factor
            if n <= 0:
                raise MetadataError(E.INVALID_PARTITIONS,
                                    "Number of partitions was set to an invalid non-positive value.")
            if rf <= 0:
                raise MetadataError(E.INVALID_REPLICATION_FACTOR,
                                    "Replication factor must be larger than 0, or -1 to use the default value.")
            live = len(self.brokers)
            if rf > live:
                raise MetadataError(
                    E.INVALID_REPLICATION_FACTOR,
                    f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} "
                    f"cannot be reached because only {live} broker(s) are registered.")
            replicas = None
        try:
            validate_topic_configs(configs)
        except ConfigError as exc:
            raise MetadataError(E.INVALID_CONFIG, str(exc)) from None
        if 1 + n + len(configs) > max_records:  # checked before anything is placed
            raise BatchTooLarge()
        if replicas is None:
            replicas = self._place(self._start_offset(name), n, rf)
        return n, rf, replicas

    def _start_offset(self, name: str) -> int:
        # Kafka picks a random start broker; we derive it from the name so placement is reproducible.
        import zlib
        return zlib.crc32(name.encode()) % max(1, len(self.brokers))

    def create_topic(self, name: str, replicas: list[list[int]], configs: dict[str, str],
                     topic_id: uuid.UUID | None = None) -> TopicInfo:
        parts = []
        for i, reps in enumerate(replicas):
            live = [b for b in reps if b in self.brokers]
            parts.append(PartitionInfo(index=i, replicas=list(reps), leader=live[0] if live else -1,
                                       leader_epoch=0, isr=live or []))
        t = TopicInfo(name=name, topic_id=topic_id or uuid.uuid4(), partitions=parts,
                      configs={k: v for k, v in configs.items() if v is not None})
        self.topics[name] = t
        self._by_id[t.topic_id] = t
        self._persist_or_undo(lambda: self.forget_topic(name))
        return t

    def forget_topic(self, name: str) -> None:
        """Drop a topic from memory only (undoing a change; the caller persists when it can)."""
        t = self.topics.pop(name, None)
        if t is not None:
            self._by_id.pop(t.topic_id, None)

    def _persist_or_undo(self, undo) -> None:
        """Persist the change just made; when that fails (OSError: a full disk...), undo it and raise,
        so that what is visible is always what is persisted. Deferred: the change waits for the next write,
        and `undo` is kept until it is durable (`write_failed` calls it)."""
        if self._writes is not None:
            self.version += 1
            self._undos.append((self.version, undo))
            self.dirty = True
            self._writes.changed()
            return
        try:
            self.persist()
        except OSError:
            undo()
            raise

    def delete_topic(self, name: str) -> TopicInfo:
        t = self.topics[name]
        self.forget_topic(name)

        def undo() -> None:
            self.topics[name] = t
            self._by_id[t.topic_id] = t
        self._persist_or_undo(undo)
        return t

    def check_create_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                                max_records: int = MAX_RECORDS_PER_USER_OP) -> list[list[int]]:
        t = self.topics.get(name)
        if t is None:
            raise MetadataError(E.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        cur = len(t.partitions)
        if count < cur:
            raise MetadataError(E.INVALID_PARTITIONS,
                                f"Topic currently has {cur} partitions, which is higher than the requested {count}.")
        if count == cur:
            raise MetadataError(E.INVALID_PARTITIONS, f"Topic already has {cur} partitions.")
        rf = len(t.partitions[0].replicas)
        if assignments is not None and len(assignments) != count - cur:
            raise MetadataError(
                E.INVALID_REPLICATION_ASSIGNMENT,
                f"Increasing the number of partitions by {count - cur} but {len(assignments)} "
                "assignments provided.")
        if assignments is not None:
            for r in assignments:
                if [b for b in r if b not in self.brokers] or len(set(r)) != len(r) or len(r) != rf:
                    raise MetadataError(E.INVALID_REPLICATION_ASSIGNMENT,
                                        f"Invalid replica assignment {r} for a topic with replication factor {rf}")
        elif rf > len(self.brokers):
            raise MetadataError(E.INVALID_REPLICATION_FACTOR,
                                f"Unable to replicate the partition {rf} time(s): only {len(self.brokers)} "
                                "broker(s) are registered.")
        if count - cur > max_records:  # one PartitionRecord each; checked before anything is placed
            raise BatchTooLarge()
        if assignments is not None:
            return [list(r) for r in assignments]
        return self._place(self._start_offset(name), count - cur, rf, start_index=cur)

    def add_partitions(self, name: str, replicas: list[list[int]]) -> None:
        t = self.topics[name]
        before = len(t.partitions)
        for reps in replicas:
            live = [b for b in reps if b in self.brokers]
            t.partitions.append(PartitionInfo(index=len(t.partitions), replicas=list(reps),
                                              leader=live[0] if live else -1, isr=live))
        self._persist_or_undo(lambda: self.remove_partitions(name, before))

    def remove_partitions(self, name: str, count: int) -> None:
        """Back to `count` partitions, in memory only (undoing a change; the caller persists when it can)."""
        del self.topics[name].partitions[count:]

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        t = self.topics[name]
        old, t.configs = t.configs, dict(configs)

        def undo() -> None:
            t.configs = old
        self._persist_or_undo(undo)

    # -- users (SCRAM credentials) ---------------------------------------------
    def apply_user_configs(self, changes: dict[str, dict[str, str]]) -> None:
        """New configs of users, in memory only (an empty one removes the user)."""
        for user, config in changes.items():
            if config:
                self.users[user] = dict(config)
            else:
                self.users.pop(user, None)

    def set_user_configs(self, changes: dict[str, dict[str, str]]) -> None:
        """New configs of users, persisted (undone and OSError raised when that fails)."""
        before = {u: self.users.get(u) for u in changes}
        self.apply_user_configs(changes)

        def undo() -> None:
            self.apply_user_configs({u: c or {} for u, c in before.items()})
        self._persist_or_undo(undo)

    # -- groups' own configs (coordinator/group_config.py) ----------------------
    def apply_group_configs(self, changes: dict[str, dict[str, str]]) -> None:
        """New configs of groups, in memory only (an empty one: the group has none)."""
        for group, config in changes.items():
            if config:
                self.group_configs[group] = dict(config)
            else:
                self.group_configs.pop(group, None)

    def set_group_configs(self, changes: dict[str, dict[str, str]]) -> None:
        """New configs of groups, persisted (undone and OSError raised when that fails)."""
        before = {g: self.group_configs.get(g) for g in changes}
        self.apply_group_configs(changes)

        def undo() -> None:
            self.apply_group_configs({g: c or {} for g, c in before.items()})
        self._persist_or_undo(undo)

    # -- ACLs (security/authorizer.py) ------------------------------------------
    def apply_resource_acls(self, resources: dict) -> None:
        """In memory only (ZooKeeper mode, which keeps them in /kafka-acl): the ACLs of each (resource type, name,
        pattern type) given replace those it had."""
        keep = {a for a in self.acls if (a.resource_type, a.name, a.pattern_type) not in resources}
        self.acls = frozenset(keep.union(*resources.values()))

    def set_acls(self, acls) -> None:
        """The cluster's ACLs, persisted (undone and OSError raised when that fails)."""
        before, self.acls = self.acls, frozenset(acls)

        def undo() -> None:
            self.acls = before
        self._persist_or_undo(undo)

    def scram_credential(self, user: str, mechanism: str):
        from ..security.scram import user_credential
        return user_credential(self.users, user, mechanism)
