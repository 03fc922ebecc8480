"""A secured broker for tests, and ready client configs for it (issue "Security as Kafka has it", item 6).

    with SecuredBroker() as sb:                      # or the pytest fixture `kafkite_secured_broker`
        Producer(sb.confluent())                      # alice over SASL_SSL with SCRAM-SHA-512
        Producer(sb.confluent(listener="SSL"))        # alice's client certificate on the SSL listener
        KafkaConsumer("t", **sb.kafka_python(user="admin"))

What it starts: a certificate authority made with trustme, a broker certificate for 127.0.0.1/localhost and a
client certificate per user (subject `CN=<user>,...`, mapped to `User:<user>` by ssl.principal.mapping.rules), and
a broker (a child process by default, as confluent-kafka group consumers need; `process=False`: a BrokerThread)
with two listeners:

- SASL_SSL: SCRAM-SHA-512 only, the users' credentials written into the data dir before the start (kafka-storage
  format --add-scram's role);
- SSL: `ssl.client.auth=required`, trusting the CA.

Kafka's AclAuthorizer is on, `super.users=User:admin`, `allow.everyone.if.no.acl.found=false`, and the ordinary
user `alice` holds ALLOW ALL on every topic, group and transactional id (`*`) and IDEMPOTENT_WRITE on the cluster.
`sb.users` maps user -> password; `sb.pki` holds the files (ca.pem, <user>.pem, <user>.key, <user>.chain.pem).

Each client method takes `user` (default alice), `listener` ("SASL_SSL" or "SSL") and `password` (default the
user's; pass a wrong one to test a refusal), and answers with that client's own option names: `confluent()`
(librdkafka properties, also for kcat through `kcat_args()`), `kafka_python()` / `aiokafka()` (keyword arguments;
aiokafka's carries an `ssl.SSLContext`), `kafkajs()` (the `new Kafka({...})` config, PEMs inline), `java()`
(kafka-clients properties; `java_properties_file()` writes them) and `spark()` (the `kafka.`-prefixed options of
Spark's Kafka source and sink).
"""
from __future__ import annotations

import shutil
import socket
import ssl
import tempfile
from pathlib import Path

SCRAM = "SCRAM-SHA-512"
USERS = {"admin": "admin-secret", "alice": "alice-secret"}
PRINCIPAL_RULES = "RULE:^CN=([^,]+),.*$/$1/,DEFAULT"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _jaas(user: str, password: str) -> str:
    return f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" password="{password}";'


class SecuredBroker:
    def __init__(self, *, process: bool = True, users: dict[str, str] | None = None,
                 overrides: dict[str, str] | None = None, data_dir: str | Path | None = None):
        self.process = process
        self.users = dict(users or USERS)
        assert "admin" in self.users, "the super user is admin"
        self.extra = dict(overrides or {})
        self._own_dir = data_dir is None
        self.dir = Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="kafkite-secured-"))
        self.pki: dict[str, Path] = {}
        self.broker = None
        self.ports: dict[str, int] = {}

    # -- start / stop --------------------------------------------------------------------------------------
    def _make_pki(self) -> None:
        import trustme
        from cryptography.hazmat.primitives import serialization
        d = self.dir / "pki"
        d.mkdir(parents=True, exist_ok=True)
        ca = trustme.CA()
        ca.cert_pem.write_to_path(str(d / "ca.pem"))
        self.pki["ca"] = d / "ca.pem"
        server = ca.issue_cert("localhost", "127.0.0.1")
        (d / "broker.pem").write_bytes(server.private_key_pem.bytes()
                                       + b"".join(c.bytes() for c in server.cert_chain_pems))
        self.pki["broker"] = d / "broker.pem"
        for user in self.users:
            leaf = ca.issue_cert(f"{user}@example.com", common_name=user, organization_name="Kafkite",
                                 organization_unit_name="Tests")
            # PKCS#8 ("BEGIN PRIVATE KEY"): the form Java's PEM keystore reads; librdkafka, Python, node take it too
            key = serialization.load_pem_private_key(leaf.private_key_pem.bytes(), None)
            pkcs8 = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption())
            chain = b"".join(c.bytes() for c in leaf.cert_chain_pems)
            (d / f"{user}.key").write_bytes(pkcs8)
            (d / f"{user}.pem").write_bytes(chain)
            (d / f"{user}.chain.pem").write_bytes(pkcs8 + chain)
            self.pki[user] = d / f"{user}.pem"

    def _seed_metadata(self, node_id: int) -> None:
        """The SCRAM users and alice's ACLs, written before the start (kafka-storage format --add-scram's role)."""
        from ..controller.metadata import ClusterMetadata, FileMetadataStore
        from ..security.authorizer import AclBinding, Op, PatternType, Permission, ResourceType
        from ..users_cli import add_scram
        add_scram(self.dir / "data", node_id, [f"{SCRAM}=[name={u},password={p}]" for u, p in self.users.items()])
        md = ClusterMetadata(FileMetadataStore(self.dir / "data"), node_id=node_id)
        acls = {AclBinding(rt, "*", PatternType.LITERAL, f"User:{u}", "*", Op.ALL, Permission.ALLOW)
                for u in self.users if u != "admin"
                for rt in (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID)}
        acls |= {AclBinding(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, f"User:{u}", "*",
                            Op.IDEMPOTENT_WRITE, Permission.ALLOW) for u in self.users if u != "admin"}
        md.set_acls(md.acls | acls)

    def broker_config(self) -> dict[str, str]:
        """The broker's server.properties (ports chosen when started)."""
        return {
            "listeners": f"SASL_SSL://127.0.0.1:{self.ports['SASL_SSL']},SSL://127.0.0.1:{self.ports['SSL']}",
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.pki["broker"]),
            "listener.name.ssl.ssl.client.auth": "required",
            "listener.name.ssl.ssl.truststore.type": "PEM",
            "listener.name.ssl.ssl.truststore.location": str(self.pki["ca"]),
            "ssl.principal.mapping.rules": PRINCIPAL_RULES,
            "sasl.enabled.mechanisms": SCRAM,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin", "allow.everyone.if.no.acl.found": "false",
            "group.min.session.timeout.ms": "1000",
            **self.extra,
        }

    def start(self) -> "SecuredBroker":
        from ..config import BrokerConfig
        self._make_pki()
        # the first listener's port 0 is bound by the broker and read back from its bootstrap (a BrokerProcess runs
        # `serve --port 0`, which sets the first listener's port); the second is a free port chosen here
        self.ports = {"SASL_SSL": 0, "SSL": _free_port()}
        config = self.broker_config()
        self._seed_metadata(BrokerConfig(static=config).node_id)
        if self.process:
            from .process import BrokerProcess
            self.broker = BrokerProcess(data_dir=self.dir / "data", overrides=config).start()
        else:
            from .runner import BrokerThread
            self.broker = BrokerThread(data_dir=self.dir / "data", overrides=config).start()
        self.ports["SASL_SSL"] = int(self.broker.bootstrap_servers.split(",")[0].rsplit(":", 1)[1])
        return self

    def stop(self) -> None:
        if self.broker is not None:
            self.broker.stop()
            self.broker = None
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "SecuredBroker":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- client configs ------------------------------------------------------------------------------------
    def bootstrap(self, listener: str = "SASL_SSL") -> str:
        return f"127.0.0.1:{self.ports[listener.upper()]}"

    def _who(self, user: str, listener: str, password: str | None) -> tuple[str, str, str]:
        listener = listener.upper()
        assert listener in ("SASL_SSL", "SSL"), listener
        assert user in self.users, f"unknown user {user}: one of {sorted(self.users)}"
        return user, listener, self.users[user] if password is None else password

    def confluent(self, user: str = "alice", listener: str = "SASL_SSL", password: str | None = None) -> dict:
        """librdkafka / confluent-kafka properties (kcat takes the same as -X)."""
        user, listener, password = self._who(user, listener, password)
        conf = {"bootstrap.servers": self.bootstrap(listener), "security.protocol": listener,
                "ssl.ca.location": str(self.pki["ca"])}
        if listener == "SASL_SSL":
            conf.update({"sasl.mechanisms": SCRAM, "sasl.username": user, "sasl.password": password})
        else:
            conf.update({"ssl.certificate.location": str(self.pki[user]),
                         "ssl.key.location": str(self.dir / "pki" / f"{user}.key")})
        return conf

    def kcat_args(self, user: str = "alice", listener: str = "SASL_SSL", password: str | None = None) -> list[str]:
        """`-b BS -X k=v ...` for kcat."""
        conf = self.confluent(user, listener, password)
        args = ["-b", conf.pop("bootstrap.servers")]
        for k, v in conf.items():
            args += ["-X", f"{k}={v}"]
        return args

    def kafka_python(self, user: str = "alice", listener: str = "SASL_SSL", password: str | None = None) -> dict:
        """kafka-python keyword arguments (KafkaProducer / KafkaConsumer / KafkaAdminClient)."""
        user, listener, password = self._who(user, listener, password)
        kw = {"bootstrap_servers": self.bootstrap(listener), "security_protocol": listener,
              "ssl_cafile": str(self.pki["ca"])}
        if listener == "SASL_SSL":
            kw.update({"sasl_mechanism": SCRAM, "sasl_plain_username": user, "sasl_plain_password": password})
        else:
            kw.update({"ssl_certfile": str(self.pki[user]), "ssl_keyfile": str(self.dir / "pki" / f"{user}.key")})
        return kw

    def ssl_context(self, user: str | None = None) -> ssl.SSLContext:
        """A client SSLContext trusting the CA (with `user`'s certificate when given)."""
        ctx = ssl.create_default_context(cafile=str(self.pki["ca"]))
        if user is not None:
            ctx.load_cert_chain(str(self.pki[user]), str(self.dir / "pki" / f"{user}.key"))
        return ctx

    def aiokafka(self, user: str = "alice", listener: str = "SASL_SSL", password: str | None = None) -> dict:
        """aiokafka keyword arguments (AIOKafkaProducer / AIOKafkaConsumer)."""
        user, listener, password = self._who(user, listener, password)
        kw = {"bootstrap_servers": self.bootstrap(listener), "security_protocol": listener,
              "ssl_context": self.ssl_context(None if listener == "SASL_SSL" else user)}
        if listener == "SASL_SSL":
            kw.update({"sasl_mechanism": SCRAM, "sasl_plain_username": user, "sasl_plain_password": password})
        return kw

    def kafkajs(self, user: str = "alice", listener: str = "SASL_SSL", password: str | None = None) -> dict:
        """kafkajs' `new Kafka({...})` config (JSON-ready: the PEMs inline)."""
        user, listener, password = self._who(user, listener, password)
        tls: dict = {"ca": [self.pki["ca"].read_text()]}
        conf: dict = {"brokers": [self.bootstrap(listener)], "ssl": tls}
        if listener == "SASL_SSL":
            conf["sasl"] = {"mechanism": "scram-sha-512", "username": user, "password": password}
        else:
            tls.update({"cert": self.pki[user].read_text(),
                        "key": (self.dir / "pki" / f"{user}.key").read_text()})
        return conf

    def java(self, user: str = "alice", listener: str = "SASL_SSL", password: str | None = None) -> dict[str, str]:
        """Java kafka-clients properties (PEM truststore and keystore, Kafka 2.7+)."""
        user, listener, password = self._who(user, listener, password)
        props = {"bootstrap.servers": self.bootstrap(listener), "security.protocol": listener,
                 "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.pki["ca"])}
        if listener == "SASL_SSL":
            props.update({"sasl.mechanism": SCRAM, "sasl.jaas.config": _jaas(user, password)})
        else:
            props.update({"ssl.keystore.type": "PEM",
                          "ssl.keystore.location": str(self.dir / "pki" / f"{user}.chain.pem")})
        return props

    def java_properties_file(self, path: str | Path, **kw) -> Path:
        """java(**kw) written as a client .properties file (e.g. for --command-config)."""
        path = Path(path)
        path.write_text("".join(f"{k}={v}\n" for k, v in self.java(**kw).items()))
        return path

    def spark(self, user: str = "alice", listener: str = "SASL_SSL", password: str | None = None) -> dict[str, str]:
        """Options of Spark's Kafka source and sink (`.option(k, v)`): the Java properties prefixed `kafka.`."""
        return {f"kafka.{k}": v for k, v in self.java(user, listener, password).items()}
