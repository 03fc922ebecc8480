"""`kafkite users ...` (Kafka's `kafka-configs --entity-type users` for SCRAM credentials) and
`kafkite storage format --add-scram ...` (Kafka's `kafka-storage format --add-scram`: a first user written into
the data dir before the broker starts).

    kafkite users alter --bootstrap-server HOST:PORT --entity-name alice \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]'
    kafkite users alter --bootstrap-server HOST:PORT --entity-name alice --delete-config SCRAM-SHA-512
    kafkite users describe --bootstrap-server HOST:PORT [--entity-name alice]
    kafkite storage format --data-dir DIR --add-scram 'SCRAM-SHA-512=[name=admin,password=admin-secret]'

`--command-config FILE` takes the admin client's properties with Kafka's names (security.protocol,
sasl.mechanism, sasl.jaas.config with a PLAIN or SCRAM login module, or sasl.username/sasl.password, and
ssl.truststore.location / ssl.ca.location with a PEM file), as Kafka's tools do.
"""
from __future__ import annotations

import sys
from pathlib import Path


def _client_kwargs(path: str | None) -> dict:
    """kafka-python's admin client settings from a Kafka client properties file."""
    if not path:
        return {}
    from .config import read_properties
    from .security.sasl import parse_jaas
    props = read_properties(Path(path))
    out: dict = {}
    if "security.protocol" in props:
        out["security_protocol"] = props["security.protocol"].upper()
    if "sasl.mechanism" in props:
        out["sasl_mechanism"] = props["sasl.mechanism"].upper()
    user, password = props.get("sasl.username"), props.get("sasl.password")
    if props.get("sasl.jaas.config"):
        _, options = parse_jaas(props["sasl.jaas.config"])
        user, password = options.get("username", user), options.get("password", password)
    if user is not None:
        out["sasl_plain_username"], out["sasl_plain_password"] = user, password
    ca = props.get("ssl.truststore.location") or props.get("ssl.ca.location")
    if ca:
        out["ssl_cafile"] = ca
    return out


def _split_entries(text: str) -> list[str]:
    """`A=[x=1,y=2],B=[z=3]` -> ["A=[x=1,y=2]", "B=[z=3]"] (commas inside brackets belong to the entry)."""
    out, depth, cur = [], 0, []
    for ch in text:
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return [e.strip() for e in out if e.strip()]


def _users(args) -> int:
    from kafka.admin import (KafkaAdminClient, ScramMechanism, UserScramCredentialDeletion,
                             UserScramCredentialUpsertion)
    from .security.scram import MECHANISMS, parse_scram_option
    if args.action == "alter":
        if not args.entity_name:
            print("users alter needs --entity-name", file=sys.stderr)
            return 2
        alterations = []
        try:
            for entry in _split_entries(args.add_config or ""):
                mech, _, fields = parse_scram_option(entry, need_name=False)
                if "password" not in fields:
                    raise ValueError(f"{entry!r}: give the password (password=...)")
                alterations.append(UserScramCredentialUpsertion(
                    args.entity_name, ScramMechanism[mech.replace("-", "_")], fields["password"],
                    iterations=int(fields.get("iterations", 4096))))
        except ValueError as exc:
            print(str(exc), file=sys.stderr)
            return 2
        for mech in _split_entries(args.delete_config or ""):
            if mech.upper() not in MECHANISMS:
                print(f"Invalid config(s): {mech} (only {', '.join(MECHANISMS)} are users' configs here)",
                      file=sys.stderr)
                return 2
            alterations.append(UserScramCredentialDeletion(args.entity_name,
                                                           ScramMechanism[mech.upper().replace("-", "_")]))
        if not alterations:
            print("users alter needs --add-config or --delete-config", file=sys.stderr)
            return 2
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap_server, client_id="kafkite-cli",
                             request_timeout_ms=15000, **_client_kwargs(args.command_config))
    try:
        if args.action == "alter":
            errors = {u: e for u, e in admin.alter_user_scram_credentials(alterations).items() if e}
            if errors:
                for user, err in errors.items():
                    print(f"Error while altering the SCRAM credentials of user {user}: {err}", file=sys.stderr)
                return 1
            print(f"Completed updating config for user {args.entity_name}.")
            return 0
        got = admin.describe_user_scram_credentials([args.entity_name] if args.entity_name else None)
        status = 0
        for user, r in got.items():
            if r.get("error"):
                print(f"Error describing user {user}: {r['error']}", file=sys.stderr)
                status = 1
                continue
            creds = ", ".join(f"{i['mechanism'].name.replace('_', '-')}=iterations={i['iterations']}"
                              for i in r["credential_infos"])
            print(f"SCRAM credential configs for user-principal '{user}' are {creds}")
        return status
    finally:
        admin.close()


def add_scram(data_dir: Path, node_id: int, entries: list[str]) -> list[str]:
    """Write the `--add-scram` credentials into the data dir's metadata (created when new) -> the users written.
    ValueError when an entry does not parse."""
    from .controller.metadata import ClusterMetadata, FileMetadataStore
    from .security.scram import credential_from_option, parse_scram_option
    changes: dict[str, dict[str, str]] = {}
    parsed = [parse_scram_option(e, need_name=True) for e in entries]
    md = ClusterMetadata(FileMetadataStore(data_dir), node_id=node_id)
    for mech, name, fields in parsed:
        config = changes.setdefault(name, dict(md.users.get(name, {})))
        config[mech] = credential_from_option(mech, fields).to_string()
    md.set_user_configs(changes)
    return sorted(changes)


def _storage(args) -> int:
    from .config import BrokerConfig, ConfigError, read_properties
    static: dict[str, str] = read_properties(Path(args.config)) if args.config else {}
    for ov in args.override or []:
        k, _, v = ov.partition("=")
        static[k.strip()] = v.strip()
    try:
        node_id = BrokerConfig(static=static).node_id
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    data_dir = Path(args.data_dir or static.get("log.dirs", "./kafkite-data").split(",")[0])
    try:
        users = add_scram(data_dir, node_id, args.add_scram or [])
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    print(f"Formatting {data_dir}" + (f" with SCRAM credentials for {', '.join(users)}" if users else ""))
    return 0


def add_subparsers(sub) -> None:
    u = sub.add_parser("users", help="SCRAM credentials of users (kafka-configs --entity-type users)")
    u.add_argument("action", choices=["alter", "describe"])
    u.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    u.add_argument("--entity-name", help="the user")
    u.add_argument("--add-config", metavar="'SCRAM-SHA-512=[password=...],SCRAM-SHA-256=[iterations=8192,password=...]'")
    u.add_argument("--delete-config", metavar="SCRAM-SHA-512[,SCRAM-SHA-256]")
    u.add_argument("--command-config", metavar="FILE", help="the admin client's properties (Kafka's names)")
    u.set_defaults(func=_users)

    s = sub.add_parser("storage", help="prepare a data dir before the broker starts (kafka-storage format)")
    s.add_argument("action", choices=["format"])
    s.add_argument("--data-dir", help="the broker's data dir (default: log.dirs, or ./kafkite-data)")
    s.add_argument("--config", help="a Kafka server.properties file (node.id, log.dirs)")
    s.add_argument("--override", action="append", metavar="KEY=VALUE")
    s.add_argument("--add-scram", action="append", metavar="'SCRAM-SHA-512=[name=admin,password=admin-secret]'",
                   help="a SCRAM credential to add (repeatable; the broker must not be running)")
    s.set_defaults(func=_storage)
