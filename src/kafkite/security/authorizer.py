"""ACLs and the authorizer, with Kafka's semantics (AclAuthorizer / StandardAuthorizer). Sans-IO.

An ACL binding is a resource pattern (resource type, name, pattern type LITERAL or PREFIXED) and an entry
(principal, host, operation, ALLOW or DENY). A request of `principal` from `host` may perform `operation` on a
resource when:

- the principal is one of `super.users`; else
- no ACL's pattern matches the resource (a LITERAL one of that name or "*", a PREFIXED one the name starts
  with): `allow.everyone.if.no.acl.found` decides (default false); else
- no DENY ACL of the principal (or User:*), host (or "*") and operation (or ALL) matches, and an ALLOW one
  does, where an ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, and ALTER_CONFIGS allows
  DESCRIBE_CONFIGS (DENY beats ALLOW).

Filters (DescribeAcls, DeleteAcls) match as Kafka's AclBindingFilter: ANY fields match everything, MATCH
pattern type matches the patterns that would apply to the named resource.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Iterable

CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
ANONYMOUS = "User:ANONYMOUS"
AUTHORIZER_CLASSES = ("kafka.security.authorizer.AclAuthorizer",
                      "org.apache.kafka.metadata.authorizer.StandardAuthorizer")


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Op(enum.IntEnum):  # Kafka's AclOperation
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# The operations each resource type supports (Kafka's AclEntry.supportedOperations), for KIP-430's fields.
SUPPORTED_OPS: dict[int, frozenset[int]] = {
    ResourceType.TOPIC: frozenset({Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER,
                                   Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({Op.READ, Op.DESCRIBE, Op.DELETE}),
    ResourceType.CLUSTER: frozenset({Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                                     Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({Op.DESCRIBE, Op.WRITE}),
}
# an ALLOW of any of these allows the key too (Kafka's implied operations)
_IMPLIED_BY = {Op.DESCRIBE: (Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER),
               Op.DESCRIBE_CONFIGS: (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS)}


class AclError(ValueError):
    """An ACL or filter Kafka refuses (INVALID_REQUEST, with Kafka's message)."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def to_json(self) -> list:
        return [int(self.resource_type), self.name, int(self.pattern_type), self.principal, self.host,
                int(self.operation), int(self.permission)]

    @classmethod
    def from_json(cls, v: list) -> "AclBinding":
        return cls(*v)

    def describe(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={Op(self.operation).name}, "
                f"permissionType={Permission(self.permission).name}) on "
                f"{ResourceType(self.resource_type).name}:{PatternType(self.pattern_type).name}:{self.name}")


@dataclass(frozen=True, slots=True)
class AclFilter:
    resource_type: int
    name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        pt = self.pattern_type
        if pt not in (PatternType.ANY, PatternType.MATCH) and pt != b.pattern_type:
            return False
        if self.name is not None:
            if pt in (PatternType.ANY, b.pattern_type):
                if self.name != b.name:
                    return False
            elif b.pattern_type == PatternType.LITERAL:  # MATCH
                if self.name != b.name and b.name != WILDCARD:
                    return False
            elif not self.name.startswith(b.name):  # MATCH a PREFIXED pattern
                return False
        return ((self.principal is None or self.principal == b.principal)
                and (self.host is None or self.host == b.host)
                and (self.operation == Op.ANY or self.operation == b.operation)
                and (self.permission == Permission.ANY or self.permission == b.permission))


def _enum(cls, code: int):
    try:
        return cls(code)
    except ValueError:
        return cls.UNKNOWN


def validate_binding(b: AclBinding) -> None:
    """Kafka's checks of a new ACL (AclApis, StandardAuthorizer's AclControlManager.validateNewAcl)."""
    rt = _enum(ResourceType, b.resource_type)
    if rt in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise AclError(f"Invalid resourceType {b.resource_type}")
    if rt in (ResourceType.DELEGATION_TOKEN, ResourceType.USER):
        raise AclError(f"ACLs on {rt.name} resources are not supported by Kafkite")
    if _enum(PatternType, b.pattern_type) not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise AclError(f"Invalid patternType {b.pattern_type}")
    if _enum(Op, b.operation) in (Op.UNKNOWN, Op.ANY):
        raise AclError(f"Invalid operation {b.operation}")
    if _enum(Permission, b.permission) not in (Permission.DENY, Permission.ALLOW):
        raise AclError(f"Invalid permissionType {b.permission}")
    if rt == ResourceType.CLUSTER and b.name != CLUSTER_NAME:
        raise AclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not b.name:
        raise AclError("Invalid empty resource name")
    if ":" not in (b.principal or ""):
        raise AclError(f"Could not parse principal from `{b.principal}` (no colon is present separating the "
                       "principal type from the principal name)")
    if not b.host:
        raise AclError("Invalid empty host")


def validate_filter(f: AclFilter) -> None:
    """A filter with an UNKNOWN element is refused (Kafka: "Filter contain UNKNOWN elements")."""
    if (_enum(ResourceType, f.resource_type) == ResourceType.UNKNOWN
            or _enum(PatternType, f.pattern_type) == PatternType.UNKNOWN
            or _enum(Op, f.operation) == Op.UNKNOWN or _enum(Permission, f.permission) == Permission.UNKNOWN):
        raise AclError("Filter contain UNKNOWN elements")


class Authorizer:
    """The ACL store (as loaded from the cluster metadata) and the authorize() decision."""

    def __init__(self, super_users: Iterable[str] = (), allow_if_no_acl: bool = False,
                 acls: Iterable[AclBinding] = ()) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self.load(acls)

    @classmethod
    def from_config(cls, config, acls: Iterable[AclBinding] = ()) -> "Authorizer | None":
        """The configured authorizer (`authorizer.class.name`), or None when none is: everything is allowed."""
        name = (config.get("authorizer.class.name") or "").strip()
        if not name:
            return None
        if name not in AUTHORIZER_CLASSES:
            from ..config import ConfigError
            raise ConfigError(f"authorizer.class.name={name} is not an authorizer Kafkite has: use one of "
                              f"{', '.join(AUTHORIZER_CLASSES)} (Kafka's ACL authorizers), or leave it empty")
        supers = [s.strip() for s in (config.get("super.users") or "").split(";") if s.strip()]
        return cls(supers, bool(config.get("allow.everyone.if.no.acl.found")), acls)

    # -- the store ---------------------------------------------------------------
    def load(self, acls: Iterable[AclBinding]) -> None:
        self.acls: frozenset[AclBinding] = frozenset(acls)
        literal: dict[tuple[int, str], list[AclBinding]] = {}
        prefixed: dict[tuple[int, str], list[AclBinding]] = {}
        lengths: dict[int, set[int]] = {}  # the prefixes' lengths, by resource type: a name is looked up once each
        for a in self.acls:
            if a.pattern_type == PatternType.PREFIXED:
                prefixed.setdefault((a.resource_type, a.name), []).append(a)
                lengths.setdefault(a.resource_type, set()).add(len(a.name))
            else:
                literal.setdefault((a.resource_type, a.name), []).append(a)
        self._literal, self._prefixed = literal, prefixed
        self._prefix_lengths = {rt: sorted(ls) for rt, ls in lengths.items()}

    def matching(self, flt: AclFilter) -> list[AclBinding]:
        return sorted((a for a in self.acls if flt.matches(a)), key=AclBinding.to_json)

    # -- the decision --------------------------------------------------------------
    def _resource_acls(self, resource_type: int, name: str) -> list[AclBinding]:
        out = list(self._literal.get((resource_type, name), ()))
        if name != WILDCARD:
            out += self._literal.get((resource_type, WILDCARD), ())
        for n in self._prefix_lengths.get(resource_type, ()):
            if n > len(name):
                break
            out += self._prefixed.get((resource_type, name[:n]), ())
        return out

    def authorize(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        if principal in self.super_users:
            return True
        acls = self._resource_acls(resource_type, name)
        if not acls:
            return self.allow_if_no_acl
        mine = [a for a in acls if a.principal in (principal, WILDCARD_PRINCIPAL) and a.host in (host, WILDCARD)]
        if any(a.permission == Permission.DENY and a.operation in (operation, Op.ALL) for a in mine):
            return False
        allowing = _IMPLIED_BY.get(operation, (operation,))
        return any(a.permission == Permission.ALLOW and (a.operation == Op.ALL or a.operation in allowing)
                   for a in mine)

    def authorized_operations(self, principal: str, host: str, resource_type: int, name: str) -> set[int]:
        """KIP-430: the operations of the resource type this principal may perform on the resource."""
        return {op for op in SUPPORTED_OPS.get(resource_type, ())
                if self.authorize(principal, host, op, resource_type, name)}

    def authorize_any(self, principal: str, host: str, operation: int, resource_type: int) -> bool:
        """Kafka's Authorizer.authorizeByResourceType (its default method): may the principal perform the operation
        on at least one resource of the type? Allowed as on a resource named "hardcode" (super users, no ACL found),
        else by an ALLOW (of that operation or ALL) of "*", or of a name or prefix that no DENY covers."""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        deny_literal, deny_prefixed, allow = set(), set(), []
        for a in self.acls:
            if (a.resource_type != resource_type or a.host not in (host, WILDCARD)
                    or a.principal not in (principal, WILDCARD_PRINCIPAL) or a.operation not in (operation, Op.ALL)):
                continue
            if a.permission == Permission.DENY:
                if a.pattern_type == PatternType.LITERAL and a.name == WILDCARD:
                    return False
                (deny_prefixed if a.pattern_type == PatternType.PREFIXED else deny_literal).add(a.name)
            elif a.permission == Permission.ALLOW:
                if a.pattern_type == PatternType.LITERAL and a.name == WILDCARD:
                    return True
                allow.append(a)
        for a in allow:
            if a.pattern_type == PatternType.LITERAL and a.name in deny_literal:
                continue
            if not any(a.name[:n] in deny_prefixed for n in range(1, len(a.name) + 1)):
                return True
        return False
