"""`kafkite serve`, `kafkite topics ...`, `kafkite cluster describe`, `kafkite users ...`, `kafkite storage format`."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _serve(args) -> int:
    from .lazy_modules import install as lazy_libraries
    lazy_libraries()  # ssl, hashlib, asyncio...: run at their first use, not at trio's and structlog's import
    from .wire.lazy_kafka import install
    install()  # kafka.protocol without kafka-python's client half (wire/lazy_kafka.py)

    import trio

    from . import log as klog
    from .app import serve
    from .config import BrokerConfig, ConfigError, read_properties

    klog.configure(json=args.log_json, level=args.log_level)
    if args.brokers < 1:
        print(f"--brokers must be at least 1, got {args.brokers}", file=sys.stderr)
        return 2
    static: dict[str, str] = {}
    if args.config:
        static.update(read_properties(Path(args.config)))
    for ov in args.override or []:
        if "=" not in ov:
            print(f"--override expects key=value, got {ov!r}", file=sys.stderr)
            return 2
        k, v = ov.split("=", 1)
        static[k.strip()] = v.strip()
    if args.host is not None or args.port is not None:
        from .server.broker import _inter_broker_name, _listeners
        entries = _listeners(static.get("listeners", "PLAINTEXT://127.0.0.1:9092"))
        try:  # (a bad inter-broker setting is reported with the others when the broker starts)
            internal = _inter_broker_name(BrokerConfig(static={k: v for k, v in static.items() if k in (
                "inter.broker.listener.name", "security.inter.broker.protocol", "listener.security.protocol.map")}))
        except ConfigError:
            internal = "INTERNAL"
        i = next((i for i, e in enumerate(entries) if e[0] != internal), 0)
        name, host, port = entries[i]
        host = args.host if args.host is not None else host
        port = args.port if args.port is not None else port
        entries[i] = (name, host, port)  # the client listener; an inter-broker one is kept as it is
        static["listeners"] = ",".join(f"{n}://{h}:{p}" for n, h, p in entries)
    data_dir = Path(args.data_dir or static.get("log.dirs", "./kafkite-data").split(",")[0])
    try:
        config = BrokerConfig(static=static)
    except ConfigError as exc:  # Kafka's wording: "Invalid value x for configuration num.partitions"
        klog.get("kafkite").error("config.invalid", message=str(exc))
        return 1
    if args.add_scram:  # kafka-storage format --add-scram's role: the first users, before the broker starts
        if args.in_memory or config.get("zookeeper.connect"):
            print("--add-scram writes into the data dir's metadata: not with --in-memory or zookeeper.connect (add "
                  "users there with `kafkite users alter` through a listener that lets an admin in)", file=sys.stderr)
            return 2
        from .users_cli import add_scram
        try:
            add_scram(data_dir, config.node_id, args.add_scram)
        except ValueError as exc:
            print(str(exc), file=sys.stderr)
            return 2
    try:
        trio.run(lambda: serve(config, data_dir=None if args.in_memory else data_dir, in_memory=args.in_memory,
                               brokers=args.brokers, loop_watchdog_ms=args.loop_watchdog_ms,
                               gc_freeze=None if args.gc_freeze is None else args.gc_freeze == "on",
                               control=(args.control_host, args.control_port, args.control_token)
                               if args.control_port is not None else None))
    except ConfigError as exc:  # found while the brokers are made (an SSL keystore that cannot be read, ...)
        klog.get("kafkite").error("config.invalid", message=str(exc))
        return 1
    except KeyboardInterrupt:
        pass  # Ctrl-C during start-up, before serve() took the signals over
    except BaseExceptionGroup as group:
        bad_config = group.split(ConfigError)[0]
        if bad_config is not None:
            while isinstance(bad_config, BaseExceptionGroup):
                bad_config = bad_config.exceptions[0]
            klog.get("kafkite").error("config.invalid", message=str(bad_config))
            return 1
        if group.split(KeyboardInterrupt)[1] is not None:
            raise
    return 0


def _key_values(items, flag: str) -> dict[str, str] | None:
    """`key=value` arguments -> a dict; None (after a usage line on stderr) when one has no `=`."""
    bad = [c for c in items if "=" not in c]
    if bad:
        print(f"{flag} expects key=value, got {bad[0]!r}", file=sys.stderr)
        return None
    return dict(c.split("=", 1) for c in items)


def _admin(bootstrap: str):
    from kafka.admin import KafkaAdminClient
    return KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kafkite-cli", request_timeout_ms=15000)


def _topics(args) -> int:
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
    from kafka.errors import KafkaError

    configs = _key_values(args.config or [], "--config")
    if configs is None:
        return 2
    admin = _admin(args.bootstrap_server)
    try:
        if args.action == "create":
            try:
                admin.create_topics([NewTopic(args.topic, args.partitions, args.replication_factor,
                                              topic_configs=configs)])
            except KafkaError as exc:
                print(f"Error while executing topic command : {exc}", file=sys.stderr)
                return 1
            print(f"Created topic {args.topic}.")
        elif args.action == "list":
            for name in sorted(admin.list_topics()):
                print(name)
        elif args.action == "describe":
            names = [args.topic] if args.topic else sorted(admin.list_topics())
            try:
                described = admin.describe_topics(names)
            except KafkaError as exc:
                print(f"Error while executing topic command : {exc}", file=sys.stderr)
                return 1
            for t in described:
                if t.get("error_code"):
                    print(f"Error: topic {t['name']} error code {t['error_code']}", file=sys.stderr)
                    return 1
                cfg = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t["name"])])
                overrides = {k: v["value"] for k, v in cfg.get("topic", {}).get(t["name"], {}).items()}
                parts = t["partitions"]
                t["partitions"] = parts
                print(f"Topic: {t['name']}\tTopicId: {t.get('topic_id', '')}\tPartitionCount: {len(parts)}\t"
                      f"ReplicationFactor: {len(parts[0]['replica_nodes']) if parts else 0}\t"
                      f"Configs: {','.join(f'{k}={v}' for k, v in sorted(overrides.items()))}")
                for p in sorted(parts, key=lambda p: p["partition_index"]):
                    print(f"\tTopic: {t['name']}\tPartition: {p['partition_index']}\tLeader: {p['leader_id']}\t"
                          f"Replicas: {','.join(map(str, p['replica_nodes']))}\t"
                          f"Isr: {','.join(map(str, p['isr_nodes']))}")
        elif args.action == "delete":
            try:
                admin.delete_topics([args.topic])
            except KafkaError as exc:
                print(f"Error while executing topic command : {exc}", file=sys.stderr)
                return 1
            print(f"Deleted topic {args.topic}.")
    finally:
        admin.close()
    return 0


def _groups(args) -> int:
    from kafka import KafkaConsumer
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

    if args.action == "configs":
        return _group_configs(args)
    admin = _admin(args.bootstrap_server)
    try:
        if args.action == "list":
            for g in sorted(admin.list_groups(), key=lambda g: g["group_id"]):
                print(f"{g['group_id']}\t{g.get('group_state', '')}\t{g.get('protocol_type', '')}")
            return 0
        names = [args.group] if args.group else sorted(g["group_id"] for g in admin.list_groups())
        consumer = KafkaConsumer(bootstrap_servers=args.bootstrap_server, enable_auto_commit=False)
        try:
            for desc in admin.describe_groups(names).values():
                gid = desc["group_id"]
                print(f"GROUP {gid}  state={desc['group_state']}  protocol={desc.get('protocol_data', '')}  "
                      f"members={len(desc['members'])}")
                owner = {}
                for m in desc["members"]:
                    raw = m.get("member_assignment") or b""
                    parts = []
                    if isinstance(raw, (bytes, bytearray)) and raw:
                        a = ConsumerProtocolAssignment.decode(bytes(raw), version=min(int.from_bytes(raw[:2], "big"), 3))
                        parts = [(tp.topic, p) for tp in a.assigned_partitions for p in tp.partitions]
                    elif isinstance(raw, dict):  # kafka-python decodes the consumer protocol for us
                        parts = [(a["topic"], p) for a in raw.get("assigned_partitions", []) for p in a["partitions"]]
                    for tp in parts:
                        owner[tp] = m["member_id"]
                    print(f"  MEMBER {m['member_id']}  client={m['client_id']}  host={m['client_host']}  "
                          f"assignment={','.join(f'{t}-{p}' for t, p in sorted(parts))}")
                offsets = admin.list_group_offsets(gid)[gid]
                ends = consumer.end_offsets(list(offsets)) if offsets else {}
                print(f"  {'TOPIC':<24}{'PARTITION':>10}{'CURRENT-OFFSET':>16}{'LOG-END-OFFSET':>16}{'LAG':>8}  MEMBER")
                for tp, om in sorted(offsets.items()):
                    end = ends.get(tp, -1)
                    print(f"  {tp.topic:<24}{tp.partition:>10}{om.offset:>16}{end:>16}{max(0, end - om.offset):>8}  "
                          f"{owner.get((tp.topic, tp.partition), '-')}")
        finally:
            consumer.close()
    finally:
        admin.close()
    return 0


def _group_configs(args) -> int:
    """A group's own configs (KIP-848's GROUP resource), as `kafka-configs --entity-type groups` shows and alters
    them: `--add-config k=v[,k=v]` SETs, `--delete-config k[,k]` DELETEs (IncrementalAlterConfigs), then every
    key is printed with its value and source."""
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType
    if not args.group:
        print("groups configs needs a group id", file=sys.stderr)
        return 2
    added = _key_values([c for c in ",".join(args.add_config or []).split(",") if c], "--add-config")
    if added is None:
        return 2
    ops = {k: (AlterConfigOp.SET, v) for k, v in added.items()}
    ops.update({k: (AlterConfigOp.DELETE, None) for k in ",".join(args.delete_config or []).split(",") if k})
    admin = _admin(args.bootstrap_server)
    try:
        if ops:
            result = admin.alter_configs([ConfigResource(ConfigResourceType.GROUP, args.group, configs=ops)],
                                         raise_on_unknown=False, incremental=True)["group"][args.group]
            if result != "OK":
                print(f"Error while executing config command : {result}", file=sys.stderr)
                return 1
            print(f"Completed updating config for group {args.group}.")
        described = admin.describe_configs([ConfigResource(ConfigResourceType.GROUP, args.group)],
                                           config_filter="all")
        for name, entry in sorted(described.get("group", {}).get(args.group, {}).items()):
            print(f"{name}={entry['value']}\t{entry['config_source']}")
    finally:
        admin.close()
    return 0


def _transactions(args) -> int:
    """Kafka's kafka-transactions.sh list / describe: every broker's transactions, or one transactional id."""
    admin = _admin(args.bootstrap_server)
    try:
        if args.action == "list":
            print(f"{'TRANSACTIONAL-ID':<32}{'COORDINATOR':>12}{'PRODUCER-ID':>13}  STATE")
            rows = [(t.transactional_id, broker, t.producer_id, str(getattr(t.state, "value", t.state)))
                    for broker, listings in admin.list_transactions().items() for t in listings]
            for tid, broker, pid, state in sorted(rows):
                print(f"{tid:<32}{broker:>12}{pid:>13}  {state}")
            return 0
        if not args.transactional_id:
            print("transactions describe needs a transactional id", file=sys.stderr)
            return 2
        d = admin.describe_transactions([args.transactional_id])[args.transactional_id]
        parts = ",".join(f"{tp.topic}-{tp.partition}" for tp in sorted(d.topic_partitions))
        print(f"{'COORDINATOR':<12}{'TRANSACTIONAL-ID':<32}{'PRODUCER-ID':>12}{'EPOCH':>7}  {'STATE':<16}"
              f"{'TIMEOUT-MS':>11}{'START-MS':>15}  PARTITIONS")
        print(f"{d.coordinator_id:<12}{args.transactional_id:<32}{d.producer_id:>12}{d.producer_epoch:>7}  "
              f"{str(getattr(d.state, 'value', d.state)):<16}{d.transaction_timeout_ms:>11}"
              f"{d.transaction_start_time_ms:>15}  {parts}")
    finally:
        admin.close()
    return 0


def _cluster(args) -> int:
    admin = _admin(args.bootstrap_server)
    try:
        info = admin.describe_cluster()
        print(json.dumps(info, default=str, indent=1))
    finally:
        admin.close()
    return 0


class KafkiteArgumentParser(argparse.ArgumentParser):
    """One name for the bootstrap flag on every sub-command, Kafka tools' `--bootstrap-server`, with
    `--bootstrap-servers` kept as an alias (whichever spelling a sub-command declares, it gets both, and keeps
    its own `dest`). Sub-parsers (also those of `kafkite spark`) inherit this class."""

    BOOTSTRAP = ("--bootstrap-server", "--bootstrap-servers")

    def add_argument(self, *names, **kwargs):
        if names and set(names) <= set(self.BOOTSTRAP):
            kwargs.setdefault("dest", names[0].lstrip("-").replace("-", "_"))
            kwargs.setdefault("metavar", "HOST:PORT,...")
            kwargs.setdefault("help", "brokers to connect to (alias: --bootstrap-servers)")
            names = self.BOOTSTRAP
        return super().add_argument(*names, **kwargs)


COMMANDS = ("serve", "topics", "groups", "transactions", "cluster", "spark", "control", "users", "storage", "acls")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The `kafkite` command line; with only="serve", the serve sub-command alone (`kafkite serve` parses its own
    arguments with it: the ~55 parsers of every sub-command took 30 ms of its start, half of it argparse asking
    gettext for translations of its own messages)."""
    p = KafkiteArgumentParser(prog="kafkite", description="A Kafka-wire-compatible broker on Trio.")
    # (the serve-only parser's usage line names every sub-command too, as the whole one's does)
    sub = p.add_subparsers(dest="cmd", required=True, metavar="{" + ",".join(COMMANDS) + "}" if only else None)

    s = sub.add_parser("serve", help="run a broker")
    s.add_argument("--config", help="a Kafka server.properties file")
    s.add_argument("--override", action="append", metavar="KEY=VALUE", help="override a config (repeatable)")
    s.add_argument("--host", help="listen address (default from listeners: 127.0.0.1)")
    s.add_argument("--port", type=int, help="listen port (default from listeners: 9092; 0 = any free port)")
    s.add_argument("--data-dir", help="where logs and metadata live (default ./kafkite-data)")
    s.add_argument("--in-memory", action="store_true", help="keep everything in memory")
    s.add_argument("--brokers", type=int, default=1, help="run an in-process cluster of N brokers")
    s.add_argument("--log-json", action="store_true", help="JSON log lines")
    s.add_argument("--log-level", default="INFO")
    s.add_argument("--loop-watchdog-ms", type=float, default=None,
                   help="WARN when one step holds the event loop longer (default 100, or KAFKITE_LOOP_WATCHDOG_MS; "
                        "0 = off)")
    s.add_argument("--gc-freeze", choices=["on", "off"], default=None,
                   help="freeze what survives a full garbage collection, keeping later ones short (default on, or "
                        "KAFKITE_GC_FREEZE=0/1)")
    s.add_argument("--control-port", type=int, default=None,
                   help="serve the control listener (faults, request log over HTTP/JSON) on this port (0 = any)")
    s.add_argument("--control-host", default="127.0.0.1", help="the control listener's address (default 127.0.0.1)")
    s.add_argument("--control-token", default=None, help="a bearer token the control listener requires")
    s.add_argument("--add-scram", action="append", metavar="'SCRAM-SHA-512=[name=admin,password=admin-secret]'",
                   help="add a SCRAM credential to the data dir before serving (repeatable)")
    s.set_defaults(func=_serve)
    if only == "serve":
        return p

    t = sub.add_parser("topics", help="manage topics on any Kafka-compatible cluster")
    t.add_argument("action", choices=["create", "list", "describe", "delete"])
    t.add_argument("topic", nargs="?")
    t.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    t.add_argument("--partitions", type=int, default=1)
    t.add_argument("--replication-factor", type=int, default=1)
    t.add_argument("--config", action="append", metavar="KEY=VALUE")
    t.set_defaults(func=_topics)

    g = sub.add_parser("groups", help="consumer groups: members, assignments, committed offsets, lag")
    g.add_argument("action", choices=["list", "describe", "configs"])
    g.add_argument("group", nargs="?")
    g.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    g.add_argument("--add-config", action="append", metavar="KEY=VALUE[,KEY=VALUE]",
                   help="configs: set the group's own configs (consumer.session.timeout.ms, ...)")
    g.add_argument("--delete-config", action="append", metavar="KEY[,KEY]",
                   help="configs: delete the group's own configs (back to the broker's group.consumer.* value)")
    g.set_defaults(func=_groups)

    x = sub.add_parser("transactions", help="transactions: list every broker's, describe one transactional id")
    x.add_argument("action", choices=["list", "describe"])
    x.add_argument("transactional_id", nargs="?")
    x.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    x.set_defaults(func=_transactions)

    c = sub.add_parser("cluster", help="describe a Kafka-compatible cluster")
    c.add_argument("action", choices=["describe"])
    c.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    c.set_defaults(func=_cluster)

    from .spark.cli import add_subparser
    add_subparser(sub)
    from .control.cli import add_subparser as add_control
    add_control(sub)
    from .users_cli import add_subparsers as add_users
    add_users(sub)
    from .acls_cli import add_subparser as add_acls
    add_acls(sub)

    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = build_parser(only="serve" if argv[:1] == ["serve"] else None)
    args = p.parse_args(argv)
    if args.cmd == "topics" and args.action in ("create", "delete") and not args.topic:
        p.error(f"topics {args.action} needs a topic name")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
