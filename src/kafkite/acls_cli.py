"""`kafkite acls ...`: Kafka's kafka-acls against any Kafka-compatible cluster (CreateAcls / DescribeAcls / DeleteAcls).

    kafkite acls --bootstrap-server HOST:PORT --add --allow-principal User:alice --operation Read --operation Write \\
        --topic orders [--resource-pattern-type prefixed]
    kafkite acls --bootstrap-server HOST:PORT --add --allow-principal User:alice --consumer --topic orders --group g
    kafkite acls --bootstrap-server HOST:PORT --add --deny-principal User:bob --operation All --cluster
    kafkite acls --bootstrap-server HOST:PORT --list [--topic orders] [--principal User:alice]
    kafkite acls --bootstrap-server HOST:PORT --remove --allow-principal User:alice --operation Read --topic orders

--command-config FILE takes the admin client's properties (security.protocol, sasl.mechanism, sasl.jaas.config...),
as users_cli.py reads them. --remove does not ask for a confirmation (kafka-acls does unless --force).
"""
from __future__ import annotations

import sys

_OPS = {"READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS",
        "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS", "ALL"}


def _op_name(text: str) -> str:
    """kafka-acls' names (Read, ClusterAction, DescribeConfigs, ...) or Kafka's enum names -> the enum name."""
    flat = text.replace("-", "").replace("_", "").upper()
    for name in _OPS:
        if name.replace("_", "") == flat:
            return name
    raise ValueError(f"Invalid operation {text!r}: one of Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
                     "DescribeConfigs, AlterConfigs, IdempotentWrite, All")


def _resources(args, ResourceType) -> list[tuple]:
    out = [(ResourceType.TOPIC, t) for t in args.topic or []]
    out += [(ResourceType.GROUP, g) for g in args.group or []]
    out += [(ResourceType.TRANSACTIONAL_ID, x) for x in args.transactional_id or []]
    if args.cluster:
        out.append((ResourceType.CLUSTER, "kafka-cluster"))
    return out


def _bindings(args, k) -> list:
    """The ACLs --add / --remove name: every principal x host x operation x resource."""
    resources = _resources(args, k.ResourceType)
    pattern = k.ACLResourcePatternType[args.resource_pattern_type.upper()]
    ops_by_resource: dict = {}
    if args.producer or args.consumer:  # kafka-acls' conveniences
        for rt, name in resources:
            ops = []
            if rt == k.ResourceType.TOPIC:
                ops = (["WRITE", "DESCRIBE", "CREATE"] if args.producer else []) + (
                    ["READ", "DESCRIBE"] if args.consumer else [])
            elif rt == k.ResourceType.GROUP and args.consumer:
                ops = ["READ"]
            elif rt == k.ResourceType.TRANSACTIONAL_ID and args.producer:
                ops = ["WRITE", "DESCRIBE"]
            ops_by_resource[(rt, name)] = list(dict.fromkeys(ops))
        if args.producer and args.idempotent:
            resources.append((k.ResourceType.CLUSTER, "kafka-cluster"))
            ops_by_resource[(k.ResourceType.CLUSTER, "kafka-cluster")] = ["IDEMPOTENT_WRITE"]
    else:
        ops = [_op_name(o) for o in args.operation or []] or ["ALL"]
        ops_by_resource = {r: ops for r in resources}
    out = []
    for perm, principals, hosts in ((k.ACLPermissionType.ALLOW, args.allow_principal, args.allow_host),
                                    (k.ACLPermissionType.DENY, args.deny_principal, args.deny_host)):
        for principal in principals or []:
            for host in hosts or ["*"]:
                for rt, name in resources:
                    for op in ops_by_resource.get((rt, name), []):
                        p = k.ResourcePattern(rt, name, k.ACLResourcePatternType.LITERAL
                                              if rt == k.ResourceType.CLUSTER else pattern)
                        out.append(k.ACL(principal, host, k.ACLOperation[op], perm, p))
    return out


def _fmt_pattern(p) -> str:
    return f"ResourcePattern(resourceType={p.resource_type.name}, name={p.resource_name}, " \
           f"patternType={p.pattern_type.name})"


def _fmt_entry(a) -> str:
    return f"(principal={a.principal}, host={a.host}, operation={a.operation.name}, " \
           f"permissionType={a.permission_type.name})"


def _print_grouped(acls, heading: str) -> None:
    grouped: dict = {}
    for a in acls:
        p = a.resource_pattern
        grouped.setdefault((p.resource_type.name, p.resource_name, p.pattern_type.name), (p, []))[1].append(a)
    for _, (p, entries) in sorted(grouped.items()):
        print(f"{heading} `{_fmt_pattern(p)}`: ")
        for a in entries:
            print(f" \t{_fmt_entry(a)} ")
        print()


def _acls(args) -> int:
    import kafka.admin as k
    from .users_cli import _client_kwargs
    if sum(map(bool, (args.add, args.remove, args.list))) != 1:
        print("Command must include exactly one action: --list, --add, --remove.", file=sys.stderr)
        return 2
    try:
        bindings = _bindings(args, k) if (args.add or args.remove) else []
    except (ValueError, KeyError) as exc:
        print(str(exc), file=sys.stderr)
        return 2
    if args.add and not bindings:
        print("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs, and a resource "
              "(--topic, --group, --cluster, --transactional-id).", file=sys.stderr)
        return 2
    resources = _resources(args, k.ResourceType)
    admin = k.KafkaAdminClient(bootstrap_servers=args.bootstrap_server, client_id="kafkite-acls",
                               request_timeout_ms=15000, **_client_kwargs(args.command_config))
    try:
        if args.add:
            _print_grouped(bindings, "Adding ACLs for resource")
            r = admin.create_acls(bindings)
            for acl, err in r["failed"]:
                print(f"Error while adding ACLs: {_fmt_entry(acl)} on {_fmt_pattern(acl.resource_pattern)}: {err}",
                      file=sys.stderr)
            if r["failed"]:
                return 1
            return 0
        if args.remove:
            filters = [k.ACLFilter(a.principal, a.host, a.operation, a.permission_type,
                                   k.ResourcePatternFilter(a.resource_pattern.resource_type,
                                                           a.resource_pattern.resource_name,
                                                           a.resource_pattern.pattern_type)) for a in bindings]
            if not (args.allow_principal or args.deny_principal):  # every ACL of the resources
                pattern = k.ACLResourcePatternType[args.resource_pattern_type.upper()]
                filters = [k.ACLFilter(None, None, k.ACLOperation.ANY, k.ACLPermissionType.ANY,
                                       k.ResourcePatternFilter(rt, name, pattern)) for rt, name in resources]
            if not filters:
                print("--remove needs a resource (--topic, --group, --cluster, --transactional-id)", file=sys.stderr)
                return 2
            status = 0
            for flt, deleted, err in admin.delete_acls(filters):
                if err is not None and getattr(err, "errno", 0):
                    print(f"Error while removing ACLs: {err}", file=sys.stderr)
                    status = 1
                _print_grouped(deleted, "Removed ACLs for resource")
            return status
        pattern = k.ACLResourcePatternType[args.resource_pattern_type.upper()] if resources else \
            k.ACLResourcePatternType.ANY
        flts = [k.ResourcePatternFilter(rt, name, pattern) for rt, name in resources] or [
            k.ResourcePatternFilter(k.ResourceType.ANY, None, k.ACLResourcePatternType.ANY)]
        status = 0
        for rf in flts:
            acls, err = admin.describe_acls(k.ACLFilter(args.principal, None, k.ACLOperation.ANY,
                                                        k.ACLPermissionType.ANY, rf))
            if getattr(err, "errno", 0):
                print(f"Error while listing ACLs: {err.__name__ if isinstance(err, type) else err}", file=sys.stderr)
                status = 1
                continue
            _print_grouped(acls, "Current ACLs for resource")
        return status
    except Exception as exc:  # the admin client raises the broker's error (e.g. SECURITY_DISABLED, authorization)
        print(f"Error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        admin.close()


def add_subparser(sub) -> None:
    a = sub.add_parser("acls", help="ACLs: add, remove, list (kafka-acls)")
    a.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    a.add_argument("--command-config", metavar="FILE", help="the admin client's properties (Kafka's names)")
    a.add_argument("--add", action="store_true")
    a.add_argument("--remove", action="store_true")
    a.add_argument("--list", action="store_true")
    a.add_argument("--force", action="store_true", help="(accepted; --remove never asks)")
    a.add_argument("--allow-principal", action="append", metavar="User:NAME")
    a.add_argument("--deny-principal", action="append", metavar="User:NAME")
    a.add_argument("--allow-host", action="append", metavar="HOST")
    a.add_argument("--deny-host", action="append", metavar="HOST")
    a.add_argument("--principal", metavar="User:NAME", help="--list: only this principal's ACLs")
    a.add_argument("--operation", action="append", metavar="OP", help="Read, Write, Create, Delete, Alter, Describe, "
                   "ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, All (default All)")
    a.add_argument("--topic", action="append")
    a.add_argument("--group", action="append")
    a.add_argument("--transactional-id", action="append")
    a.add_argument("--cluster", action="store_true")
    a.add_argument("--resource-pattern-type", default="literal",
                   choices=["literal", "prefixed", "any", "match"], type=str.lower)
    a.add_argument("--producer", action="store_true", help="WRITE, DESCRIBE, CREATE on the topics (and "
                   "WRITE, DESCRIBE on the transactional ids)")
    a.add_argument("--consumer", action="store_true", help="READ, DESCRIBE on the topics, READ on the groups")
    a.add_argument("--idempotent", action="store_true", help="with --producer: IDEMPOTENT_WRITE on the cluster")
    a.set_defaults(func=_acls)
