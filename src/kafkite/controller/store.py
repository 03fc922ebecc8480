"""The coordination store the controller elects itself through (ZooKeeper's role).

An in-process implementation with ZooKeeper's primitives, sans-IO and
synchronous: versioned nodes, claim-if-absent (`create`), compare-and-set
(`set` with an expected version), ephemeral nodes owned by a session that vanish
when the session ends, and one-shot watches fired synchronously on change.
A kazoo-backed store for separate processes would implement the same protocol
(the `[cluster]` extra); it is later work.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol


class NodeExists(Exception):
    pass


class BadVersion(Exception):
    pass


class NoNode(Exception):
    pass


@dataclass
class Node:
    value: Any
    version: int = 0
    owner: int | None = None  # session id of an ephemeral node


Watch = Callable[[str], None]


class CoordinationStore(Protocol):
    def create(self, path: str, value: Any, *, ephemeral_owner: int | None = None) -> None: ...
    def get(self, path: str) -> tuple[Any, int] | None: ...
    def set(self, path: str, value: Any, *, expected_version: int) -> int: ...
    def delete(self, path: str, *, expected_version: int = -1) -> None: ...
    def children(self, prefix: str) -> list[str]: ...
    def watch(self, path: str, fn: Watch) -> None: ...
    def end_session(self, owner: int) -> None: ...


class InProcessStore:
    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self._watches: dict[str, list[Watch]] = {}

    def create(self, path: str, value: Any, *, ephemeral_owner: int | None = None) -> None:
        if path in self.nodes:
            raise NodeExists(path)
        self.nodes[path] = Node(value, 0, ephemeral_owner)
        self._fire(path)

    def get(self, path: str) -> tuple[Any, int] | None:
        n = self.nodes.get(path)
        return None if n is None else (n.value, n.version)

    def set(self, path: str, value: Any, *, expected_version: int) -> int:
        n = self.nodes.get(path)
        if n is None:
            raise NoNode(path)
        if expected_version != -1 and n.version != expected_version:
            raise BadVersion(f"{path}: version {n.version} != expected {expected_version}")
        n.value = value
        n.version += 1
        self._fire(path)
        return n.version

    def delete(self, path: str, *, expected_version: int = -1) -> None:
        n = self.nodes.get(path)
        if n is None:
            raise NoNode(path)
        if expected_version != -1 and n.version != expected_version:
            raise BadVersion(path)
        del self.nodes[path]
        self._fire(path)

    def children(self, prefix: str) -> list[str]:
        pre = prefix.rstrip("/") + "/"
        return sorted(p[len(pre):] for p in self.nodes if p.startswith(pre) and "/" not in p[len(pre):])

    def watch(self, path: str, fn: Watch) -> None:
        """One-shot: fires once on the next create/set/delete of `path` (or of a child, for a prefix ending in /)."""
        self._watches.setdefault(path, []).append(fn)

    def end_session(self, owner: int) -> None:
        """A broker's session ended (it stopped or crashed): its ephemeral nodes disappear."""
        for path in [p for p, n in self.nodes.items() if n.owner == owner]:
            self.delete(path)

    def _fire(self, path: str) -> None:
        targets = [path]
        parent = path.rsplit("/", 1)[0] + "/"
        targets.append(parent)
        for t in targets:
            fns = self._watches.pop(t, [])
            for fn in fns:
                fn(path)
