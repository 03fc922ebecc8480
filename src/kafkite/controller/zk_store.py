"""The coordination store on a real ZooKeeper, through kazoo (what KafkaZkClient is to Kafka 3.x).

The same protocol as `InProcessStore` (store.py), so the controller above it is one:
`create` (NodeExists), `get` -> (value, version) or None, `set` with an expected version
(BadVersion, NoNode), `delete`, `children`, one-shot `watch` and ephemeral nodes of this
store's session. Values are JSON, as Kafka keeps them in ZooKeeper (zk_data.py has its layout).

Differences the protocol allows, stated:
- Each broker has its own store and its own ZooKeeper session; `ephemeral_owner` must be
  this store's `owner` (its broker id) and `end_session(owner)` ends this session only.
  Another broker's session ends when that broker's process goes away (after
  `session_timeout_ms`), not by a call.
- A watch on a prefix ending in "/" is a ZooKeeper child watch: it fires when a child is
  created or deleted (not when a child's value changes), with the parent's path.
- A watch fires on kazoo's thread. It is never run there: `deliver` receives a callable to
  run where the broker's state lives (the broker passes one that sends it into the Trio
  world through a channel). Without `deliver`, callables queue up in the store and
  `run_pending()` runs them in the caller's thread. Session events (lost, reconnected) go
  the same way to `on_session_event`.
- Every ZooKeeper call is a network round trip bounded by `op_timeout` (seconds); callers
  keep them off the event loop.
"""
from __future__ import annotations

import json
import queue
from typing import Any, Callable

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.protocol.states import KazooState

from .store import BadVersion, NodeExists, NoNode, Watch

Deliver = Callable[[Callable[[], None]], None]


def split_connect(connect: str) -> tuple[str, str]:
    """`zookeeper.connect` -> (hosts, chroot): "h1:2181,h2:2181/kafka" -> ("h1:2181,h2:2181", "/kafka")."""
    hosts, slash, root = connect.partition("/")
    return hosts, ("/" + root.strip("/")) if slash and root.strip("/") else ""


class ZooKeeperStore:
    def __init__(self, connect: str, *, owner: int, session_timeout_ms: int = 18000, op_timeout: float = 15.0,
                 deliver: Deliver | None = None,
                 on_session_event: Callable[[str], None] | None = None) -> None:
        self.owner = owner
        self.op_timeout = op_timeout
        self._pending: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._deliver: Deliver = deliver or self._pending.put
        self._on_session_event = on_session_event
        hosts, self.chroot = split_connect(connect)
        if self.chroot:  # Kafka creates the chroot path when it is missing (KafkaZkClient.createChrootIfNecessary)
            root = KazooClient(hosts=hosts, timeout=session_timeout_ms / 1000)
            root.start(timeout=op_timeout)
            try:
                root.ensure_path(self.chroot)
            finally:
                root.stop()
                root.close()
        self._closed = False
        self.client = KazooClient(hosts=hosts + self.chroot, timeout=session_timeout_ms / 1000)
        self.client.add_listener(self._state_changed)
        self.client.start(timeout=op_timeout)

    # -- the protocol -------------------------------------------------------------------------------
    def create(self, path: str, value: Any, *, ephemeral_owner: int | None = None) -> None:
        if ephemeral_owner is not None and ephemeral_owner != self.owner:
            raise ValueError(f"broker {self.owner}'s store cannot create an ephemeral node for {ephemeral_owner}")
        try:
            self._wait(self.client.create_async(path, _encode(value), ephemeral=ephemeral_owner is not None,
                                                makepath=True))
        except NodeExistsError:
            raise NodeExists(path) from None

    def get(self, path: str) -> tuple[Any, int] | None:
        try:
            data, stat = self._wait(self.client.get_async(path))
        except NoNodeError:
            return None
        return _decode(data), stat.version

    def set(self, path: str, value: Any, *, expected_version: int) -> int:
        try:
            stat = self._wait(self.client.set_async(path, _encode(value), version=expected_version))
        except NoNodeError:
            raise NoNode(path) from None
        except BadVersionError:
            raise BadVersion(f"{path}: not at expected version {expected_version}") from None
        return stat.version

    def delete(self, path: str, *, expected_version: int = -1) -> None:
        try:
            self._wait(self.client.delete_async(path, version=expected_version))
        except NoNodeError:
            raise NoNode(path) from None
        except BadVersionError:
            raise BadVersion(path) from None

    def children(self, prefix: str) -> list[str]:
        try:
            return sorted(self._wait(self.client.get_children_async(prefix.rstrip("/") or "/")))
        except NoNodeError:
            return []

    def watch(self, path: str, fn: Watch) -> None:
        """One-shot: the next create/set/delete of `path`, or creation/deletion of a child for "prefix/"."""
        def fired(event) -> None:  # kazoo's thread: hand over, never run here
            self._deliver(lambda: fn(event.path))

        if path.endswith("/"):
            parent = path.rstrip("/") or "/"
            try:
                self._wait(self.client.get_children_async(parent, watch=fired))
            except NoNodeError:  # no parent yet: watch for it, then for its children
                self._wait(self.client.exists_async(parent, watch=fired))
        else:
            self._wait(self.client.exists_async(path, watch=fired))

    def end_session(self, owner: int) -> None:
        """This broker's session ends: ZooKeeper deletes its ephemeral nodes at once."""
        if owner != self.owner:
            raise ValueError(f"broker {self.owner}'s store cannot end broker {owner}'s session")
        self.close()

    # -- beyond the protocol ------------------------------------------------------------------------
    def get_with_czxid(self, path: str) -> tuple[Any, int, int] | None:
        """(value, version, the zxid that created the node): a broker registration's czxid is Kafka's broker epoch."""
        try:
            data, stat = self._wait(self.client.get_async(path))
        except NoNodeError:
            return None
        return _decode(data), stat.version, stat.czxid

    def czxid(self, path: str) -> int | None:
        got = self.get_with_czxid(path)
        return None if got is None else got[2]

    def run_pending(self, timeout: float | None = None) -> int:
        """Without `deliver`: run the watch callbacks that arrived (waiting up to `timeout` for the first)."""
        ran = 0
        try:
            item = self._pending.get(timeout=timeout) if timeout else self._pending.get_nowait()
            while True:
                item()
                ran += 1
                item = self._pending.get_nowait()
        except queue.Empty:
            return ran

    @property
    def session_id(self) -> int | None:
        sid = self.client.client_id
        return None if sid is None else sid[0]

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.client.stop()
            self.client.close()

    def _state_changed(self, state: str) -> None:  # kazoo's thread
        if self._on_session_event is not None and not self._closed:
            name = {KazooState.LOST: "lost", KazooState.SUSPENDED: "suspended",
                    KazooState.CONNECTED: "connected"}.get(state, str(state))
            cb = self._on_session_event
            self._deliver(lambda: cb(name))

    def _wait(self, async_result):
        return async_result.get(timeout=self.op_timeout)


def _encode(value: Any) -> bytes:
    """JSON; None is an empty node (Kafka's marker nodes, e.g. /admin/delete_topics/<topic>, have no data)."""
    return b"" if value is None else json.dumps(value, separators=(",", ":")).encode()


def _decode(data: bytes) -> Any:
    return json.loads(data) if data else None
