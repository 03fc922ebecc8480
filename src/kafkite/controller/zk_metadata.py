"""Cluster metadata kept in ZooKeeper, in Kafka 3.x's layout (zk_data.py): what a ZooKeeper-mode cluster shares.

- `ZkMetadataStore`: the `MetadataStore` of the active controller's `ClusterMetadata`. `load()` reads the
  whole context (cluster id, controller epoch, topics, partition states, topic configs), as Kafka's
  KafkaController.initializeControllerContext does on election; `save(snapshot)` writes only the nodes
  that changed since the last load or save, in one ZooKeeper transaction that also checks the version
  of `/controller_epoch` the controller wrote when it was elected (Kafka's controller-epoch zkVersion
  check): a deposed controller's writes fail with `ControllerMoved` and change nothing.
  A partition that has an assignment but no state node yet (a topic just created through ZooKeeper)
  loads with leader_epoch -1: the controller elects its leader and writes its first state.
- `AdminZk`: what any broker writes for admin requests, as Kafka's AdminZkClient: a new topic's
  assignment and config nodes, the marker under /admin/delete_topics, a longer assignment for new
  partitions, topic configs plus their change notification. The controller reacts through its watches.
- Producer id blocks under /latest_producer_id_block, claimed with a versioned write (ZkProducerIdManager).

Every call here is a ZooKeeper round trip: callers run them off the event loop.
"""
from __future__ import annotations

import base64
import uuid
from typing import Any

import structlog
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from . import zk_data as z
from .metadata import new_cluster_id
from .store import BadVersion, NodeExists

log = structlog.get_logger("kafkite.zk_metadata")
PRODUCER_ID_BLOCK_SIZE = 1000


class ControllerMoved(Exception):
    """A controller write found /controller_epoch changed: another controller was elected."""


class TopicQueuedForDeletion(Exception):
    """A topic of that name is marked under /admin/delete_topics and not yet gone (Kafka: TopicExistsException)."""


def topic_id_to_zk(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def topic_id_from_zk(value: str | None) -> uuid.UUID:
    if not value:
        return uuid.uuid4()
    return uuid.UUID(bytes=base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))


def ensure_cluster_id(store) -> str:
    """/cluster/id: the one written first wins (Kafka's KafkaZkClient.getOrCreateClusterId)."""
    got = store.get(z.CLUSTER_ID)
    if got is None:
        try:
            store.create(z.CLUSTER_ID, z.cluster_id(new_cluster_id()))
        except NodeExists:
            pass
        got = store.get(z.CLUSTER_ID)
    return got[0]["id"]


def ensure_persistent_paths(store) -> None:
    for path in z.PERSISTENT_PATHS:
        if store.get(path) is None:
            try:
                store.create(path, None)
            except NodeExists:
                pass


class ZkMetadataStore:
    def __init__(self, store, node_id: int) -> None:
        self.store = store  # a ZooKeeperStore
        self.node_id = node_id
        self.epoch_zk_version: int | None = None  # set by the controller once elected: its fencing token
        self._saved: dict[str, Any] = {}  # path -> value as last read or written
        self._dirs: set[str] = set()  # partition directories found without a state node in them
        self.versions: dict[str, int] = {}  # partition state path -> its znode version (the partition epoch)
        # topics being deleted (Kafka's TopicDeletionManager): out of the controller's view, but their nodes stay,
        # as Kafka keeps them, until every replica has deleted its copy
        self.keep: set[str] = set()

    # -- MetadataStore ------------------------------------------------------------------------------
    def load(self) -> dict:
        s = self.store
        cid = ensure_cluster_id(s)
        epoch = s.get(z.CONTROLLER_EPOCH)
        saved: dict[str, Any] = {}
        self._dirs = set()
        self.versions = {}
        topics = [t for t in (self._read_topic(name, saved) for name in s.children(z.TOPICS)) if t is not None]
        self._saved = saved
        return {"cluster_id": cid, "node_id": self.node_id, "controller_epoch": epoch[0] if epoch else 0,
                "producer_id_next_block": 0, "topics": topics}

    def _read_topic(self, name: str, saved: dict[str, Any]) -> dict | None:
        """One topic's nodes (assignment, config, partition states) -> its snapshot entry; what was read goes into
        `saved`, the state nodes' versions into `versions`, directories without a state into `_dirs`."""
        s = self.store
        got = s.get(z.topic_path(name))
        if got is None:
            return None
        saved[z.topic_path(name)] = got[0]
        assignment, tid = z.parse_topic_assignment(got[0])
        cfg = s.get(z.topic_config_path(name))
        configs = z.parse_topic_config(cfg[0] if cfg else None)
        if cfg is not None:
            saved[z.topic_config_path(name)] = cfg[0]
        parts = []
        pdirs = s.children(z.topic_path(name) + "/partitions")
        if pdirs:
            self._dirs |= {z.topic_path(name) + "/partitions"} | {
                f"{z.topic_path(name)}/partitions/{q}" for q in pdirs}
        for p, replicas in assignment.items():
            st = s.get(z.partition_state_path(name, p))
            if st is None:
                parts.append({"index": p, "replicas": replicas, "leader": -1, "leader_epoch": -1, "isr": [],
                              "partition_epoch": -1})
            else:
                saved[z.partition_state_path(name, p)] = st[0]
                self.versions[z.partition_state_path(name, p)] = st[1]
                ps = z.parse_partition_state(st[0])
                parts.append({"index": p, "replicas": replicas, "leader": ps.leader,
                              "leader_epoch": ps.leader_epoch, "isr": list(ps.isr), "partition_epoch": st[1]})
        return {"name": name, "topic_id": str(topic_id_from_zk(tid)), "configs": configs, "partitions": parts}

    def load_topics(self, names) -> list[dict]:
        """Only these topics, read again (new ones, or ones given partitions): what a topic change costs, not a
        reload of the whole context."""
        out = []
        for name in names:
            mine = [q for q in self._saved if q == z.topic_path(name) or q.startswith(z.topic_path(name) + "/")
                    or q == z.topic_config_path(name)]
            for q in mine:
                del self._saved[q]
            t = self._read_topic(name, self._saved)
            if t is not None:
                out.append(t)
        return out

    def desired(self, snapshot: dict) -> dict[str, Any]:
        """path -> value of every node the snapshot's topics make (partitions never elected: no state node)."""
        out: dict[str, Any] = {}
        epoch = snapshot.get("controller_epoch", 0)
        for t in snapshot["topics"]:
            name = t["name"]
            out[z.topic_path(name)] = z.topic_assignment(
                {p["index"]: p["replicas"] for p in t["partitions"]}, topic_id_to_zk(uuid.UUID(t["topic_id"])))
            if z.topic_config_path(name) in self._saved:  # written by AdminZk; the controller only deletes it
                out[z.topic_config_path(name)] = self._saved[z.topic_config_path(name)]
            for p in t["partitions"]:
                if p["leader_epoch"] < 0:
                    continue
                path = z.partition_state_path(name, p["index"])
                old = self._saved.get(path)
                if old is not None and (old["leader"], old["leader_epoch"], list(old["isr"])) == (
                        p["leader"], p["leader_epoch"], list(p["isr"])):
                    out[path] = old  # unchanged: it keeps the controller epoch of the controller that wrote it
                else:
                    out[path] = z.partition_state(z.PartitionState(p["leader"], p["leader_epoch"], tuple(p["isr"]),
                                                                   epoch))
        return out

    def _kept(self, path: str) -> bool:
        return any(path == z.topic_path(n) or path.startswith(z.topic_path(n) + "/") or path == z.topic_config_path(n)
                   for n in self.keep)

    def save(self, snapshot: dict) -> None:
        want, have = self.desired(snapshot), self._saved
        if self.keep:
            want.update({path: v for path, v in have.items() if self._kept(path)})
        want_tree, have_tree = _tree(want), _tree(have) | self._dirs
        want_tree |= {d for d in self._dirs if self._kept(d)}
        tx = self.store.client.transaction()
        if self.epoch_zk_version is not None:
            tx.check(z.CONTROLLER_EPOCH, self.epoch_zk_version)
        ops = 0
        written: list[tuple[int, str]] = []  # (op index, state path) whose new version the results give
        for path in sorted(want_tree - have_tree):  # parents sort before their children
            tx.create(path, _encode(want.get(path)))
            ops += 1
            if path.endswith("/state"):
                written.append((-1, path))
        for path in sorted(set(want) & set(have)):
            if want[path] != have[path]:
                tx.set_data(path, _encode(want[path]))
                if path.endswith("/state"):
                    written.append((ops + (1 if self.epoch_zk_version is not None else 0), path))
                ops += 1
        for path in sorted(have_tree - want_tree, key=lambda q: (-q.count("/"), q)):  # children first
            tx.delete(path)
            ops += 1
        if not ops:
            return
        results = tx.commit()
        failed = [r for r in results if isinstance(r, Exception)]
        if failed:
            if self.epoch_zk_version is not None and isinstance(results[0], BadVersionError):
                raise ControllerMoved("/controller_epoch changed: another controller was elected")
            raise RuntimeError(f"ZooKeeper metadata write failed: {failed}")
        self._saved = dict(want)
        self._dirs &= want_tree
        for i, path in written:  # a created node is version 0; a set one's version is in its result
            self.versions[path] = 0 if i < 0 else results[i].version
        for path in [q for q in self.versions if q not in want]:
            del self.versions[path]

    def partition_epoch(self, topic: str, index: int) -> int:
        """The version of the partition's state node as last read or written (-1: none)."""
        return self.versions.get(z.partition_state_path(topic, index), -1)

    # producer ids: claimed from /latest_producer_id_block by anyone (ZkProducerIdManager)
    def load_producer_id_block(self) -> int:
        return 0

    def save_producer_id_block(self, first: int, last: int, broker: int) -> None:
        pass


def _encode(value: Any) -> bytes:
    from .zk_store import _encode as enc
    return enc(value)


def _tree(nodes: dict[str, Any]) -> set[str]:
    """The nodes' paths plus the directories a partition state node sits in (.../partitions, .../partitions/<p>)."""
    out = set(nodes)
    for path in nodes:
        if path.endswith("/state"):
            pdir = path[: -len("/state")]
            out |= {pdir, pdir.rsplit("/", 1)[0]}
    return out


class AdminZk:
    """What a broker writes for admin requests (Kafka's AdminZkClient); the controller does the rest."""

    def __init__(self, store) -> None:
        self.store = store

    def create_topic(self, name: str, replicas: list[list[int]], configs: dict[str, str],
                     topic_id: uuid.UUID) -> None:
        """Config node first, then the assignment the controller watches for (NodeExists when taken;
        TopicQueuedForDeletion while the name's old topic is still being deleted)."""
        s = self.store
        if s.get(z.delete_topic_path(name)) is not None:
            raise TopicQueuedForDeletion(name)
        if configs:
            self._set_or_create(z.topic_config_path(name), z.topic_config(configs))
        s.create(z.topic_path(name), z.topic_assignment(dict(enumerate(replicas)), topic_id_to_zk(topic_id)))

    def topic_exists(self, name: str) -> bool:
        return self.store.get(z.topic_path(name)) is not None

    def delete_topic(self, name: str) -> None:
        try:
            self.store.create(z.delete_topic_path(name), None)
        except NodeExists:
            pass  # already marked for deletion

    def add_partitions(self, name: str, new_replicas: list[list[int]]) -> None:
        got = self.store.get(z.topic_path(name))
        if got is None:
            raise KeyError(name)
        assignment, tid = z.parse_topic_assignment(got[0])
        start = len(assignment)
        for i, r in enumerate(new_replicas):
            assignment[start + i] = list(r)
        self.store.set(z.topic_path(name), z.topic_assignment(assignment, tid), expected_version=got[1])

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self._set_config(z.topic_config_path(name), configs, name, "topics")

    def topic_configs(self, name: str) -> dict[str, str]:
        return self._get_config(z.topic_config_path(name))

    def set_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        """Dynamic broker configs of one broker (`entity` its id) or of all (`<default>`), plus the notification
        every broker follows (Kafka's AdminZkClient.changeBrokerConfig; with none left the node stays, empty)."""
        self._set_config(z.broker_config_path(entity), configs, entity, "brokers")

    def broker_configs(self, entity: str) -> dict[str, str]:
        return self._get_config(z.broker_config_path(entity))

    def set_user_config(self, user: str, config: dict[str, str]) -> None:
        """A user's config (SCRAM credentials), plus the notification every broker's credential cache follows
        (Kafka's AdminZkClient.changeConfigs(ConfigType.User, ...): the node stays, empty, when nothing is left)."""
        from ..security.scram import sanitize
        name = sanitize(user)
        self._set_config(z.user_config_path(name), config, name, "users")

    def user_config(self, sanitized_user: str) -> dict[str, str]:
        return self._get_config(z.user_config_path(sanitized_user))

    def user_configs(self) -> dict[str, dict[str, str]]:
        """Every user's config: user (desanitized) -> config."""
        from ..security.scram import desanitize
        return {desanitize(n): self.user_config(n) for n in self.store.children(z.CONFIG_USERS)}

    def set_group_config(self, group: str, config: dict[str, str]) -> None:
        """A group's own configs, plus the notification every broker follows (as a user's: the node stays, empty,
        when nothing is left)."""
        node = group_node(group)
        self._set_config(z.group_config_path(node), config, node, "groups")

    def group_config(self, sanitized_group: str) -> dict[str, str]:
        return self._get_config(z.group_config_path(sanitized_group))

    def group_configs(self) -> dict[str, dict[str, str]]:
        """Every group's configs: group id (desanitized) -> configs (the groups with some)."""
        from ..security.scram import desanitize
        got = {desanitize(n): self.group_config(n) for n in self.store.children(z.CONFIG_GROUPS)}
        return {g: c for g, c in got.items() if c}

    def _get_config(self, path: str) -> dict[str, str]:
        """An entity's config node's configs ({} without the node)."""
        got = self.store.get(path)
        return z.parse_topic_config(got[0] if got else None)

    def _set_config(self, path: str, configs: dict[str, str], entity: str, entity_type: str) -> None:
        """An entity's config node (`path`, set or made), then the /config/changes notification
        "<entity_type>/<entity>" every broker follows (Kafka's AdminZkClient.changeEntityConfig)."""
        self._set_or_create(path, z.topic_config(configs))
        self.store.client.create(f"{z.CONFIG_CHANGES}/{z.CONFIG_CHANGE_PREFIX}",
                                 _encode(z.config_change(entity, entity_type)), sequence=True, makepath=True)

    def _set_or_create(self, path: str, value: Any) -> None:
        try:
            self.store.create(path, value)
        except NodeExists:
            self.store.set(path, value, expected_version=-1)


def group_node(group: str) -> str:
    """A group id's node name: sanitized as a user's (URL-encoded), and "." / ".." (which ZooKeeper refuses as
    names) with their dots encoded too."""
    from ..security.scram import sanitize
    node = sanitize(group)
    return node.replace(".", "%2E") if node in (".", "..") else node


def claim_producer_id_block(store, broker_id: int, size: int = PRODUCER_ID_BLOCK_SIZE) -> tuple[int, int]:
    """The next block of producer ids [first, last], claimed with a versioned write of
    /latest_producer_id_block (Kafka's ZkProducerIdManager.getNewProducerIdBlock)."""
    while True:
        got = store.get(z.PRODUCER_ID_BLOCK)
        if got is None or got[0] is None:
            first = 0
        else:
            first = int(got[0]["block_end"]) + 1
        value = z.producer_id_block(broker_id, first, first + size - 1)
        try:
            if got is None:
                store.create(z.PRODUCER_ID_BLOCK, value)
            else:
                store.set(z.PRODUCER_ID_BLOCK, value, expected_version=got[1])
            return first, first + size - 1
        except (NodeExists, BadVersion, NodeExistsError, BadVersionError, NoNodeError):
            continue
