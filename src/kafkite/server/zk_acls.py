"""ACLs in ZooKeeper, in Kafka 3.x's layout (ZkData's ZkAclStore / ZkAclChangeStore, AclEntry's JSON):

    /kafka-acl/<ResourceType>/<name>                     LITERAL patterns
    /kafka-acl-extended/prefixed/<ResourceType>/<name>   PREFIXED patterns
        {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}
    /kafka-acl-changes/acl_changes_<10-digit seq>              "Topic:orders" (a LITERAL resource changed)
    /kafka-acl-extended-changes/acl_changes_<10-digit seq>     {"version":1,"resourceType":"Topic","name":"app-",
                                                                 "patternType":"Prefixed"}

Resource types, operations and permissions are written in Kafka's PascalCase (Topic, TransactionalId, ClusterAction,
Allow). A change reads the resource's node, applies the additions and removals and writes it back with its version
(retrying when another broker wrote meanwhile; a resource left without ACLs loses its node), then adds the change
notification that every broker follows (it reloads that resource's node). Everything here runs on the ZooKeeper
event thread.
"""
from __future__ import annotations

import json
from typing import Callable, Iterable

from ..controller.store import BadVersion, NoNode, NodeExists
from ..security.authorizer import AclBinding, Op, PatternType, Permission, ResourceType

LITERAL_ROOT, PREFIXED_ROOT = "/kafka-acl", "/kafka-acl-extended/prefixed"
LITERAL_CHANGES, EXTENDED_CHANGES = "/kafka-acl-changes", "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
Resource = tuple[int, str, int]  # resource type, name, pattern type


def _pascal(name: str) -> str:
    return "".join(p.capitalize() for p in name.split("_"))


_TYPE = {int(t): _pascal(t.name) for t in ResourceType if t >= ResourceType.TOPIC}
_TYPE_CODE = {v: k for k, v in _TYPE.items()}
_OP = {int(o): _pascal(o.name) for o in Op if o >= Op.ALL}
_OP_CODE = {v: k for k, v in _OP.items()}
_PERM = {int(Permission.ALLOW): "Allow", int(Permission.DENY): "Deny"}
_PERM_CODE = {v: k for k, v in _PERM.items()}


def resource_of(b: AclBinding) -> Resource:
    return (b.resource_type, b.name, b.pattern_type)


def resource_path(r: Resource) -> str:
    root = PREFIXED_ROOT if r[2] == PatternType.PREFIXED else LITERAL_ROOT
    return f"{root}/{_TYPE[r[0]]}/{r[1]}"


def encode(bindings: Iterable[AclBinding]) -> dict:
    return {"version": 1, "acls": [{"principal": b.principal, "permissionType": _PERM[b.permission],
                                    "operation": _OP[b.operation], "host": b.host}
                                   for b in sorted(bindings, key=AclBinding.to_json)]}


def decode(r: Resource, data) -> set[AclBinding]:
    out = set()
    for e in (data or {}).get("acls", []):
        try:
            out.add(AclBinding(r[0], r[1], r[2], e["principal"], e["host"], _OP_CODE[e["operation"]],
                               _PERM_CODE[e["permissionType"]]))
        except (KeyError, TypeError):
            continue  # an entry Kafkite does not know: left out, as Kafka would fail to parse it
    return out


class ZkAclStore:
    def __init__(self, store) -> None:
        self.store = store
        self._last: dict[str, int | None] = {LITERAL_CHANGES: None, EXTENDED_CHANGES: None}

    def load_all(self) -> set[AclBinding]:
        out: set[AclBinding] = set()
        for root, pattern in ((LITERAL_ROOT, PatternType.LITERAL), (PREFIXED_ROOT, PatternType.PREFIXED)):
            for tname in self.store.children(root):
                if tname not in _TYPE_CODE:
                    continue
                for name in self.store.children(f"{root}/{tname}"):
                    out |= self.resource_acls((_TYPE_CODE[tname], name, int(pattern)))
        return out

    def resource_acls(self, r: Resource) -> set[AclBinding]:
        got = self.store.get(resource_path(r))
        return decode(r, got[0]) if got else set()

    def alter(self, add: Iterable[AclBinding], remove: Iterable[AclBinding]) -> dict[Resource, set[AclBinding]]:
        """Apply the changes resource by resource (Kafka's AclAuthorizer.updateResourceAcls) -> each changed
        resource's ACLs now."""
        changes: dict[Resource, tuple[set, set]] = {}
        for b in add:
            changes.setdefault(resource_of(b), (set(), set()))[0].add(b)
        for b in remove:
            changes.setdefault(resource_of(b), (set(), set()))[1].add(b)
        out = {}
        for r, (plus, minus) in changes.items():
            out[r] = self._update(r, plus, minus)
            self._notify(r)
        return out

    def _update(self, r: Resource, plus: set, minus: set) -> set[AclBinding]:
        path = resource_path(r)
        while True:
            got = self.store.get(path)
            current = decode(r, got[0]) if got else set()
            new = (current | plus) - minus
            try:
                if got is None:
                    if new:
                        self.store.create(path, encode(new))
                elif not new:
                    self.store.delete(path, expected_version=got[1])
                elif new != current:
                    self.store.set(path, encode(new), expected_version=got[1])
                return new
            except (BadVersion, NodeExists, NoNode):
                continue  # another broker wrote it meanwhile: read again

    def _notify(self, r: Resource) -> None:
        if r[2] == PatternType.PREFIXED:
            path = EXTENDED_CHANGES
            data = json.dumps({"version": 1, "resourceType": _TYPE[r[0]], "name": r[1],
                               "patternType": "Prefixed"}, separators=(",", ":")).encode()
        else:
            path, data = LITERAL_CHANGES, f"{_TYPE[r[0]]}:{r[1]}".encode()
        self.store.client.create(f"{path}/{CHANGE_PREFIX}", data, sequence=True, makepath=True)

    def watch(self, apply: Callable[[dict[Resource, set[AclBinding]]], None]) -> None:
        """Follow both change paths: each new notification reloads its resource, handed to `apply`."""
        for path in (LITERAL_CHANGES, EXTENDED_CHANGES):
            self._watch(path, apply)

    def _watch(self, path: str, apply) -> None:
        def fired(_path: str) -> None:
            self._watch(path, apply)
        self.store.watch(path + "/", fired)  # the watch first: nothing made in between is missed
        seqs = sorted(int(c[len(CHANGE_PREFIX):]) for c in self.store.children(path) if c.startswith(CHANGE_PREFIX))
        last = self._last[path]
        if last is None:  # at start-up every ACL was loaded: older notifications are done with
            self._last[path] = seqs[-1] if seqs else -1
            return
        resources = set()
        for seq in seqs:
            if seq <= last:
                continue
            r = self._parse(path, f"{path}/{CHANGE_PREFIX}{seq:010d}")
            if r is not None:
                resources.add(r)
            self._last[path] = seq
        if resources:
            apply({r: self.resource_acls(r) for r in resources})

    def _parse(self, path: str, node: str) -> Resource | None:
        try:
            data, _ = self.store.client.get(node)
        except Exception:  # purged meanwhile
            return None
        text = data.decode("utf-8", "replace")
        if path == LITERAL_CHANGES:
            tname, _, name = text.partition(":")
            pattern = PatternType.LITERAL
        else:
            try:
                got = json.loads(text)
                tname, name = got["resourceType"], got["name"]
            except (ValueError, KeyError, TypeError):
                return None
            pattern = PatternType.PREFIXED
        return (_TYPE_CODE[tname], name, int(pattern)) if tname in _TYPE_CODE else None
