"""Broker and topic configuration with Kafka's names, types and defaults.

Broker settings come from a `server.properties` file and `--override k=v`
pairs, exactly as Kafka's `kafka-server-start.sh` takes them. Topic settings use
Kafka's topic config names; each has a broker-level synonym that supplies its
default (`retention.ms` <- `log.retention.ms` <- `log.retention.minutes` <-
`log.retention.hours`), which DescribeConfigs reports as synonyms.

Defaults are Kafka's, except where a test broker is better served (documented in
README): `flush.messages` defaults to 1 (fsync on every append: an acknowledged
write survives a power cut, not just a process crash); `queued.max.request.bytes`
defaults to 100 MiB rather than unbounded (partly received requests cannot pin
more than that plus one request).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

LONG_MAX = 9223372036854775807
INT_MAX = 2147483647
QUEUED_MAX_REQUEST_BYTES_DEFAULT = 104857600  # Kafka's is -1 (unbounded); see README "Limits"


class ConfigType(enum.IntEnum):
    """DescribeConfigs v3+ config types."""
    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(enum.IntEnum):
    """DescribeConfigs v1+ config sources."""
    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ConfigError(ValueError):
    pass


class NotDynamic(ConfigError):
    """A broker config that cannot be changed while the broker runs (Kafka answers INVALID_REQUEST)."""


def _parse(kind: ConfigType, name: str, raw: str) -> Any:
    raw = raw.strip()
    try:
        if kind == ConfigType.BOOLEAN:
            low = raw.lower()
            if low not in ("true", "false"):
                raise ValueError
            return low == "true"
        if kind in (ConfigType.INT, ConfigType.SHORT, ConfigType.LONG):
            v = int(raw)
            lim = {ConfigType.INT: INT_MAX, ConfigType.SHORT: 32767, ConfigType.LONG: LONG_MAX}[kind]
            if not -lim - 1 <= v <= lim:
                raise ValueError
            return v
        if kind == ConfigType.DOUBLE:
            return float(raw)
        if kind == ConfigType.LIST:
            return [x.strip() for x in raw.split(",") if x.strip()]
        return raw
    except ValueError:
        raise ConfigError(f"Invalid value {raw} for configuration {name}") from None


def _in(*choices: str) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        vals = v if isinstance(v, list) else [v]
        bad = [x for x in vals if x not in choices]
        return f"String must be one of: {', '.join(choices)}" if bad or not vals else None
    return check


def _at_least(lo: float) -> Callable[[Any], str | None]:
    return lambda v: None if v >= lo else f"Value must be at least {lo}"


def _between(lo: float, hi: float) -> Callable[[Any], str | None]:
    return lambda v: None if lo <= v <= hi else f"Value must be between {lo} and {hi}"


# Kafka's MetadataVersion names (inter.broker.protocol.version, and the deprecated message.format.version),
# as Kafka 3.9 knows them: release -> its IV suffixes ("" for the releases before 0.10).
_METADATA_VERSIONS = {
    "0.8.0": "", "0.8.1": "", "0.8.2": "", "0.9.0": "", "0.10.0": "01", "0.10.1": "012", "0.10.2": "0",
    "0.11.0": "012", "1.0": "0", "1.1": "0", "2.0": "01", "2.1": "012", "2.2": "01", "2.3": "01", "2.4": "01",
    "2.5": "0", "2.6": "0", "2.7": "012", "2.8": "01", "3.0": "01", "3.1": "0", "3.2": "0", "3.3": "0123",
    "3.4": "0", "3.5": "012", "3.6": "012", "3.7": "01234", "3.8": "0", "3.9": "0",
}


def metadata_version_release(value: str) -> str | None:
    """The release of a MetadataVersion string as Kafka's MetadataVersion.fromVersionString reads it ("2.8",
    "2.8-IV1", "2.8.2", "0.10.2.1", ...), or None when Kafka would refuse it."""
    parts = value.split(".")
    n = 3 if value.startswith("0.") else 2
    key = value if len(parts) <= n else ".".join(parts[:n])
    release, _, iv = key.partition("-")
    if release not in _METADATA_VERSIONS:
        return None
    if iv and not (iv[:2] == "IV" and iv[2:] in tuple(_METADATA_VERSIONS[release])):
        return None
    return release


def _metadata_version(v: Any) -> str | None:
    return None if metadata_version_release(v) is not None else f"Version {v} is not a valid version"


def message_format_below_v2(value: str) -> bool:
    """A message.format.version older than record format v2 (before 0.11.0): Kafka 3.x warns that it is ignored."""
    release = metadata_version_release(value)
    return release is not None and release.startswith(("0.8.", "0.9.", "0.10."))


@dataclass(frozen=True)
class TopicConfigDef:
    name: str
    type: ConfigType
    default: str
    synonyms: tuple[str, ...]  # broker configs, most specific first
    check: Callable[[Any], str | None] | None = None
    doc: str = ""


TOPIC_CONFIGS: dict[str, TopicConfigDef] = {d.name: d for d in [
    TopicConfigDef("cleanup.policy", ConfigType.LIST, "delete", ("log.cleanup.policy",),
                   _in("delete", "compact"), "Retention policy: delete old segments and/or compact by key."),
    TopicConfigDef("compression.type", ConfigType.STRING, "producer", ("compression.type",),
                   _in("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
                   "Final compression type of the topic; 'producer' keeps the producer's codec."),
    TopicConfigDef("delete.retention.ms", ConfigType.LONG, "86400000", ("log.cleaner.delete.retention.ms",),
                   _at_least(0), "How long tombstones are kept in compacted topics."),
    TopicConfigDef("file.delete.delay.ms", ConfigType.LONG, "60000", ("log.segment.delete.delay.ms",),
                   _at_least(0), "Time a deleted segment's files are kept, renamed .deleted, before they are "
                                 "removed from the filesystem."),
    TopicConfigDef("flush.messages", ConfigType.LONG, "1", ("log.flush.interval.messages",), _at_least(1),
                   "fsync after this many messages (Kafkite default 1: fsync every append)."),
    TopicConfigDef("flush.ms", ConfigType.LONG, str(LONG_MAX), ("log.flush.interval.ms",), _at_least(0),
                   "fsync after this much time."),
    TopicConfigDef("index.interval.bytes", ConfigType.INT, "4096", ("log.index.interval.bytes",), _at_least(0),
                   "Bytes between offset index entries."),
    TopicConfigDef("max.compaction.lag.ms", ConfigType.LONG, str(LONG_MAX),
                   ("log.cleaner.max.compaction.lag.ms",), _at_least(1), "Maximum time a message stays uncompacted."),
    TopicConfigDef("max.message.bytes", ConfigType.INT, "1048588", ("message.max.bytes",), _at_least(0),
                   "Largest record batch size allowed."),
    TopicConfigDef("message.downconversion.enable", ConfigType.BOOLEAN, "true",
                   ("log.message.downconversion.enable",), None,
                   "Whether Fetch may down-convert to an older record format (Kafka 3.x; every Fetch version "
                   "Kafkite serves reads record format v2, so nothing is ever down-converted)."),
    TopicConfigDef("message.format.version", ConfigType.STRING, "3.0-IV1", ("log.message.format.version",),
                   _metadata_version,
                   "Deprecated since Kafka 3.0 and ignored, as by Kafka 3.x with an inter-broker protocol version "
                   ">= 3.0: records are stored in format v2."),
    TopicConfigDef("message.timestamp.after.max.ms", ConfigType.LONG, "3600000",
                   ("log.message.timestamp.after.max.ms",), _at_least(0),
                   "How far in the future a record's timestamp may be (CreateTime)."),
    TopicConfigDef("message.timestamp.before.max.ms", ConfigType.LONG, str(LONG_MAX),
                   ("log.message.timestamp.before.max.ms",), _at_least(0),
                   "How far in the past a record's timestamp may be (CreateTime)."),
    TopicConfigDef("message.timestamp.type", ConfigType.STRING, "CreateTime", ("log.message.timestamp.type",),
                   _in("CreateTime", "LogAppendTime"), "Whether record timestamps are the producer's or the broker's."),
    TopicConfigDef("min.cleanable.dirty.ratio", ConfigType.DOUBLE, "0.5", ("log.cleaner.min.cleanable.ratio",),
                   _between(0, 1), "Minimum dirty ratio before the log is compacted."),
    TopicConfigDef("min.compaction.lag.ms", ConfigType.LONG, "0", ("log.cleaner.min.compaction.lag.ms",),
                   _at_least(0), "Minimum time a message stays uncompacted."),
    TopicConfigDef("min.insync.replicas", ConfigType.INT, "1", ("min.insync.replicas",), _at_least(1),
                   "Minimum in-sync replicas for acks=all."),
    TopicConfigDef("preallocate", ConfigType.BOOLEAN, "false", ("log.preallocate",), None,
                   "Preallocate a new segment's .log file to segment.bytes (trimmed when it rolls)."),
    TopicConfigDef("retention.bytes", ConfigType.LONG, "-1", ("log.retention.bytes",), None,
                   "Maximum partition size before old segments are deleted (-1: no limit)."),
    TopicConfigDef("retention.ms", ConfigType.LONG, "604800000",
                   ("log.retention.ms", "log.retention.minutes", "log.retention.hours"), _at_least(-1),
                   "Time old segments are kept (-1: forever)."),
    TopicConfigDef("segment.bytes", ConfigType.INT, "1073741824", ("log.segment.bytes",), _at_least(14),
                   "Segment file size."),
    TopicConfigDef("segment.index.bytes", ConfigType.INT, "10485760", ("log.index.size.max.bytes",), _at_least(4),
                   "Largest offset (and time) index file: a segment rolls when its index is full."),
    TopicConfigDef("segment.jitter.ms", ConfigType.LONG, "0", ("log.roll.jitter.ms", "log.roll.jitter.hours"),
                   _at_least(0), "Largest random jitter subtracted from segment.ms, drawn for each segment."),
    TopicConfigDef("segment.ms", ConfigType.LONG, "604800000", ("log.roll.ms", "log.roll.hours"), _at_least(1),
                   "Time after which a segment is rolled."),
    TopicConfigDef("unclean.leader.election.enable", ConfigType.BOOLEAN, "false",
                   ("unclean.leader.election.enable",), None, "Allow out-of-sync replicas to become leader."),
]}


@dataclass(frozen=True)
class BrokerConfigDef:
    name: str
    type: ConfigType
    default: str
    dynamic: bool = False  # may be changed with AlterConfigs on a broker resource
    scale_ms: int = 1  # for *.minutes / *.hours synonyms: factor to milliseconds


BROKER_CONFIGS: dict[str, BrokerConfigDef] = {d.name: d for d in [
    BrokerConfigDef("node.id", ConfigType.INT, "1"),
    BrokerConfigDef("broker.id", ConfigType.INT, "1"),
    BrokerConfigDef("listeners", ConfigType.STRING, "PLAINTEXT://127.0.0.1:9092"),
    BrokerConfigDef("advertised.listeners", ConfigType.STRING, ""),
    BrokerConfigDef("log.dirs", ConfigType.STRING, "./kafkite-data"),
    BrokerConfigDef("num.partitions", ConfigType.INT, "1", True),
    BrokerConfigDef("default.replication.factor", ConfigType.INT, "1", True),
    BrokerConfigDef("auto.create.topics.enable", ConfigType.BOOLEAN, "true"),
    BrokerConfigDef("delete.topic.enable", ConfigType.BOOLEAN, "true"),
    BrokerConfigDef("auto.leader.rebalance.enable", ConfigType.BOOLEAN, "true"),
    BrokerConfigDef("leader.imbalance.check.interval.seconds", ConfigType.LONG, "300"),
    BrokerConfigDef("leader.imbalance.per.broker.percentage", ConfigType.INT, "10"),
    # ZooKeeper mode (server/zk_mode.py): a cluster of separate broker processes on one ZooKeeper
    BrokerConfigDef("zookeeper.connect", ConfigType.STRING, ""),
    BrokerConfigDef("zookeeper.session.timeout.ms", ConfigType.INT, "18000"),
    BrokerConfigDef("zookeeper.connection.timeout.ms", ConfigType.INT, ""),
    BrokerConfigDef("inter.broker.listener.name", ConfigType.STRING, ""),
    # the inter-broker listener's protocol instead of its name (server/interbroker.py; Kafka: one or the other; unset
    # here means the INTERNAL listener) and the mechanism the brokers log in with on a SASL one
    BrokerConfigDef("security.inter.broker.protocol", ConfigType.STRING, ""),
    BrokerConfigDef("sasl.mechanism.inter.broker.protocol", ConfigType.STRING, "GSSAPI"),
    BrokerConfigDef("listener.security.protocol.map", ConfigType.STRING,
                    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"),
    # SSL listeners (security/ssl_context.py): PEM keystores and truststores
    BrokerConfigDef("ssl.keystore.type", ConfigType.STRING, "JKS"),
    BrokerConfigDef("ssl.keystore.location", ConfigType.STRING, ""),
    BrokerConfigDef("ssl.keystore.password", ConfigType.PASSWORD, ""),
    BrokerConfigDef("ssl.keystore.key", ConfigType.PASSWORD, ""),
    BrokerConfigDef("ssl.keystore.certificate.chain", ConfigType.PASSWORD, ""),
    BrokerConfigDef("ssl.key.password", ConfigType.PASSWORD, ""),
    BrokerConfigDef("ssl.truststore.type", ConfigType.STRING, "JKS"),
    BrokerConfigDef("ssl.truststore.location", ConfigType.STRING, ""),
    BrokerConfigDef("ssl.truststore.password", ConfigType.PASSWORD, ""),
    BrokerConfigDef("ssl.truststore.certificates", ConfigType.PASSWORD, ""),
    BrokerConfigDef("ssl.client.auth", ConfigType.STRING, "none"),
    BrokerConfigDef("ssl.enabled.protocols", ConfigType.LIST, "TLSv1.2,TLSv1.3"),
    BrokerConfigDef("ssl.cipher.suites", ConfigType.LIST, ""),
    BrokerConfigDef("ssl.principal.mapping.rules", ConfigType.STRING, "DEFAULT"),
    # the brokers' own TLS connections to each other check the host name (https) unless empty
    BrokerConfigDef("ssl.endpoint.identification.algorithm", ConfigType.STRING, "https"),
    # SASL listeners (security/sasl.py); listener.name.<l>.<mech>.sasl.jaas.config and
    # listener.name.<l>.sasl.enabled.mechanisms are taken too (config_keys.check_broker_keys)
    BrokerConfigDef("sasl.enabled.mechanisms", ConfigType.LIST, "GSSAPI"),
    BrokerConfigDef("sasl.jaas.config", ConfigType.PASSWORD, ""),
    # Kerberos (GSSAPI) is not served, but Kafka takes its settings, per broker and dynamically
    # (DynamicListenerConfig.ReconfigurableConfigs; librdkafka's test 0081 alters min.time.before.relogin)
    BrokerConfigDef("sasl.kerberos.service.name", ConfigType.STRING, "", dynamic=True),
    BrokerConfigDef("sasl.kerberos.kinit.cmd", ConfigType.STRING, "/usr/bin/kinit", dynamic=True),
    BrokerConfigDef("sasl.kerberos.ticket.renew.window.factor", ConfigType.DOUBLE, "0.8", dynamic=True),
    BrokerConfigDef("sasl.kerberos.ticket.renew.jitter", ConfigType.DOUBLE, "0.05", dynamic=True),
    BrokerConfigDef("sasl.kerberos.min.time.before.relogin", ConfigType.LONG, "60000", dynamic=True),
    BrokerConfigDef("sasl.kerberos.principal.to.local.rules", ConfigType.LIST, "DEFAULT", dynamic=True),
    # ACLs (security/authorizer.py): Kafka's two ACL authorizers turn them on; super.users is a ";" list
    BrokerConfigDef("authorizer.class.name", ConfigType.STRING, ""),
    BrokerConfigDef("super.users", ConfigType.STRING, ""),
    BrokerConfigDef("allow.everyone.if.no.acl.found", ConfigType.BOOLEAN, "false"),
    # KIP-368: a SASL session's longest life before the client must re-authenticate (0: no limit)
    BrokerConfigDef("connections.max.reauth.ms", ConfigType.LONG, "0"),
    # the largest frame taken before and during (re-)authentication on a SASL listener (Kafka's 512 KiB)
    BrokerConfigDef("sasl.server.max.receive.size", ConfigType.INT, "524288"),
    # KIP-306: the close after a failed authentication waits this long (the client reads the error response first)
    BrokerConfigDef("connection.failed.authentication.delay.ms", ConfigType.INT, "100"),
    BrokerConfigDef("controlled.shutdown.enable", ConfigType.BOOLEAN, "true"),
    BrokerConfigDef("controlled.shutdown.max.retries", ConfigType.INT, "3"),
    BrokerConfigDef("controlled.shutdown.retry.backoff.ms", ConfigType.LONG, "5000"),
    BrokerConfigDef("offsets.topic.num.partitions", ConfigType.INT, "50"),
    BrokerConfigDef("offsets.topic.replication.factor", ConfigType.SHORT, "3"),
    BrokerConfigDef("offsets.topic.segment.bytes", ConfigType.INT, "104857600"),
    BrokerConfigDef("offsets.retention.minutes", ConfigType.INT, "10080"),
    BrokerConfigDef("offsets.retention.check.interval.ms", ConfigType.LONG, "600000"),
    BrokerConfigDef("offset.metadata.max.bytes", ConfigType.INT, "4096"),
    BrokerConfigDef("group.initial.rebalance.delay.ms", ConfigType.INT, "3000"),
    BrokerConfigDef("group.min.session.timeout.ms", ConfigType.INT, "6000"),
    BrokerConfigDef("group.max.session.timeout.ms", ConfigType.INT, "1800000"),
    BrokerConfigDef("group.max.size", ConfigType.INT, str(INT_MAX)),
    # KIP-848 consumer groups (group.protocol=consumer), Kafka 4's keys and defaults
    BrokerConfigDef("group.coordinator.rebalance.protocols", ConfigType.LIST, "classic,consumer"),
    BrokerConfigDef("group.consumer.session.timeout.ms", ConfigType.INT, "45000"),
    BrokerConfigDef("group.consumer.min.session.timeout.ms", ConfigType.INT, "45000"),
    BrokerConfigDef("group.consumer.max.session.timeout.ms", ConfigType.INT, "60000"),
    BrokerConfigDef("group.consumer.heartbeat.interval.ms", ConfigType.INT, "5000"),
    BrokerConfigDef("group.consumer.min.heartbeat.interval.ms", ConfigType.INT, "5000"),
    BrokerConfigDef("group.consumer.max.heartbeat.interval.ms", ConfigType.INT, "15000"),
    BrokerConfigDef("group.consumer.max.size", ConfigType.INT, str(INT_MAX)),
    BrokerConfigDef("group.consumer.assignors", ConfigType.LIST, "uniform,range"),
    BrokerConfigDef("group.consumer.migration.policy", ConfigType.STRING, "bidirectional"),
    # Kafka 4.1's (internal) periodic refresh of regex subscriptions (KAFKA-18961)
    BrokerConfigDef("group.consumer.regex.refresh.interval.ms", ConfigType.INT, "600000"),
    BrokerConfigDef("message.max.bytes", ConfigType.INT, "1048588", True),
    BrokerConfigDef("socket.request.max.bytes", ConfigType.INT, "104857600"),
    # Kafkite default 100 MiB (Kafka: -1, unbounded): see check_socket_limits and network/quotas.py
    BrokerConfigDef("queued.max.request.bytes", ConfigType.LONG, str(QUEUED_MAX_REQUEST_BYTES_DEFAULT)),
    BrokerConfigDef("connections.max.idle.ms", ConfigType.LONG, "600000"),
    BrokerConfigDef("max.connections", ConfigType.INT, str(INT_MAX), True),
    BrokerConfigDef("max.connections.per.ip", ConfigType.INT, str(INT_MAX), True),
    BrokerConfigDef("max.connections.per.ip.overrides", ConfigType.STRING, "", True),
    BrokerConfigDef("compression.type", ConfigType.STRING, "producer", True),
    BrokerConfigDef("log.cleanup.policy", ConfigType.LIST, "delete", True),
    BrokerConfigDef("log.cleaner.delete.retention.ms", ConfigType.LONG, "86400000", True),
    BrokerConfigDef("log.cleaner.backoff.ms", ConfigType.LONG, "15000", True),
    BrokerConfigDef("log.cleaner.dedupe.buffer.size", ConfigType.LONG, "134217728"),
    BrokerConfigDef("log.flush.scheduler.interval.ms", ConfigType.LONG, str(LONG_MAX)),
    BrokerConfigDef("log.flush.offset.checkpoint.interval.ms", ConfigType.INT, "60000"),
    BrokerConfigDef("log.flush.start.offset.checkpoint.interval.ms", ConfigType.INT, "60000"),
    BrokerConfigDef("log.segment.delete.delay.ms", ConfigType.LONG, "60000", True),
    BrokerConfigDef("log.flush.interval.messages", ConfigType.LONG, "1", True),
    BrokerConfigDef("log.flush.interval.ms", ConfigType.LONG, str(LONG_MAX), True),
    BrokerConfigDef("log.index.interval.bytes", ConfigType.INT, "4096", True),
    BrokerConfigDef("log.cleaner.max.compaction.lag.ms", ConfigType.LONG, str(LONG_MAX), True),
    BrokerConfigDef("log.message.timestamp.after.max.ms", ConfigType.LONG, "3600000", True),
    BrokerConfigDef("log.message.timestamp.before.max.ms", ConfigType.LONG, str(LONG_MAX), True),
    BrokerConfigDef("log.message.timestamp.type", ConfigType.STRING, "CreateTime", True),
    BrokerConfigDef("log.cleaner.min.cleanable.ratio", ConfigType.DOUBLE, "0.5", True),
    BrokerConfigDef("log.cleaner.min.compaction.lag.ms", ConfigType.LONG, "0", True),
    BrokerConfigDef("min.insync.replicas", ConfigType.INT, "1", True),
    BrokerConfigDef("log.preallocate", ConfigType.BOOLEAN, "false", True),
    BrokerConfigDef("log.retention.bytes", ConfigType.LONG, "-1", True),
    BrokerConfigDef("log.retention.ms", ConfigType.LONG, "", True),
    BrokerConfigDef("log.retention.minutes", ConfigType.INT, "", False, 60_000),
    BrokerConfigDef("log.retention.hours", ConfigType.INT, "168", False, 3_600_000),
    BrokerConfigDef("log.retention.check.interval.ms", ConfigType.LONG, "300000"),
    BrokerConfigDef("log.segment.bytes", ConfigType.INT, "1073741824", True),
    BrokerConfigDef("log.index.size.max.bytes", ConfigType.INT, "10485760", True),
    BrokerConfigDef("log.roll.jitter.ms", ConfigType.LONG, "", True),
    BrokerConfigDef("log.roll.jitter.hours", ConfigType.INT, "0", False, 3_600_000),
    BrokerConfigDef("log.roll.ms", ConfigType.LONG, "", True),
    BrokerConfigDef("log.roll.hours", ConfigType.INT, "168", False, 3_600_000),
    BrokerConfigDef("unclean.leader.election.enable", ConfigType.BOOLEAN, "false", True),
    # replication (ZooKeeper mode, an in-process cluster): the replica fetchers, the ISR, the high watermarks
    BrokerConfigDef("num.replica.fetchers", ConfigType.INT, "1", True),
    BrokerConfigDef("replica.fetch.max.bytes", ConfigType.INT, "1048576"),
    BrokerConfigDef("replica.fetch.min.bytes", ConfigType.INT, "1"),
    BrokerConfigDef("replica.fetch.wait.max.ms", ConfigType.INT, "500"),
    BrokerConfigDef("replica.fetch.backoff.ms", ConfigType.INT, "1000"),
    BrokerConfigDef("replica.fetch.response.max.bytes", ConfigType.INT, "10485760"),
    BrokerConfigDef("replica.lag.time.max.ms", ConfigType.LONG, "30000"),
    BrokerConfigDef("replica.socket.timeout.ms", ConfigType.INT, "30000"),
    BrokerConfigDef("replica.high.watermark.checkpoint.interval.ms", ConfigType.LONG, "5000"),
    # KIP-392: consumers with client.rack fetch from an in-sync replica of their rack
    BrokerConfigDef("replica.selector.class", ConfigType.STRING, ""),
    BrokerConfigDef("broker.rack", ConfigType.STRING, ""),
    # transactions: the coordinator and __transaction_state
    BrokerConfigDef("transaction.max.timeout.ms", ConfigType.INT, "900000"),
    BrokerConfigDef("transaction.state.log.num.partitions", ConfigType.INT, "50"),
    BrokerConfigDef("transaction.state.log.replication.factor", ConfigType.SHORT, "3"),
    BrokerConfigDef("transaction.state.log.min.isr", ConfigType.INT, "2"),
    BrokerConfigDef("transaction.state.log.segment.bytes", ConfigType.INT, "104857600"),
    BrokerConfigDef("transactional.id.expiration.ms", ConfigType.INT, "604800000", True),
    BrokerConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", ConfigType.INT, "10000"),
    BrokerConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", ConfigType.INT, "3600000"),
    BrokerConfigDef("producer.id.expiration.ms", ConfigType.INT, "86400000", True),
    # KIP-227 incremental fetch sessions (server/fetch_session.py); 0 turns them off
    BrokerConfigDef("max.incremental.fetch.session.cache.slots", ConfigType.INT, "1000"),
]}


def read_properties(path: Path) -> dict[str, str]:
    """Java .properties, the subset Kafka's server.properties uses (k=v or k: v, # comments)."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in line:
                k, v = line.split(sep, 1)
                out[k.strip()] = v.strip()
                break
    return out


@dataclass
class BrokerConfig:
    """The broker's effective settings, most specific first: dynamic for this broker (AlterConfigs on its id),
    dynamic cluster-wide default (AlterConfigs on the empty broker name), static (file + overrides), Kafka's
    default."""
    static: dict[str, str] = field(default_factory=dict)
    dynamic: dict[str, str] = field(default_factory=dict)
    dynamic_default: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        synonyms = _topic_synonyms()
        for k, v in self.static.items():
            d = BROKER_CONFIGS.get(k)
            if d is not None and v != "":
                _parse(d.type, k, v)
            elif d is None and k in synonyms:  # the broker default of a topic config: the topic config's checks
                try:
                    validate_topic_configs({synonyms[k]: v})
                except ConfigError as exc:
                    raise ConfigError(str(exc).replace(synonyms[k], k)) from None
        check_socket_limits(self)
        check_consumer_group_configs(self)

    def raw(self, name: str) -> tuple[str | None, ConfigSource]:
        if name in self.dynamic:
            return self.dynamic[name], ConfigSource.DYNAMIC_BROKER_CONFIG
        if name in self.dynamic_default:
            return self.dynamic_default[name], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        if name in self.static:
            return self.static[name], ConfigSource.STATIC_BROKER_CONFIG
        d = BROKER_CONFIGS.get(name)
        if d is not None and d.default != "":
            return d.default, ConfigSource.DEFAULT_CONFIG
        return None, ConfigSource.UNKNOWN

    def get(self, name: str) -> Any:
        value, _ = self.raw(name)
        d = BROKER_CONFIGS[name]
        return None if value is None else _parse(d.type, name, value)

    def __getitem__(self, name: str) -> Any:
        return self.get(name)

    @property
    def node_id(self) -> int:
        if "node.id" in self.static:
            return self.get("node.id")
        return self.get("broker.id")

    # -- topic defaults ------------------------------------------------------
    def topic_default(self, topic_key: str) -> tuple[str, ConfigSource, str]:
        """(value, source, the config it came from) for a topic config at the broker level."""
        d = TOPIC_CONFIGS[topic_key]
        for syn in d.synonyms:
            value, source = self.raw(syn)
            if source in (ConfigSource.DYNAMIC_BROKER_CONFIG, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                          ConfigSource.STATIC_BROKER_CONFIG) and value:
                scale = BROKER_CONFIGS[syn].scale_ms if syn in BROKER_CONFIGS else 1
                return str(int(value) * scale) if scale != 1 else value, source, syn
        # Kafka's default for the topic config (equal to its first synonym's default).
        return d.default, ConfigSource.DEFAULT_CONFIG, d.synonyms[0]

    def topic_synonyms(self, topic_key: str) -> list[tuple[str, str, ConfigSource]]:
        """Broker-level synonyms that are set, most specific first (DescribeConfigs synonyms)."""
        out = []
        for syn in TOPIC_CONFIGS[topic_key].synonyms:
            out += [(syn, value, source) for value, source in self.layers(syn) if value]
        return out

    def layers(self, name: str) -> list[tuple[str, ConfigSource]]:
        """Every value `name` has, most specific first (Kafka's DescribeConfigs synonyms of a broker config)."""
        out = [(layer[name], source) for layer, source in (
            (self.dynamic, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (self.dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.static, ConfigSource.STATIC_BROKER_CONFIG)) if name in layer]
        d = BROKER_CONFIGS.get(name)
        if d is not None and d.default != "":
            out.append((d.default, ConfigSource.DEFAULT_CONFIG))
        return out


def parse_ip_overrides(value: str) -> dict[str, int]:
    """max.connections.per.ip.overrides, "hostName:100,127.0.0.1:200" -> {host: count} (Kafka's Csv.parseCsvMap:
    the count follows the last ':')."""
    out: dict[str, int] = {}
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        try:
            if not sep or not host.strip():
                raise ValueError
            out[host.strip()] = int(count.strip())
        except ValueError:
            raise ConfigError(f"Error parsing configuration property 'max.connections.per.ip.overrides': "
                              f"{item}") from None
    return out


def check_consumer_group_configs(config: "BrokerConfig") -> None:
    """KIP-848's group.consumer.* keys, checked at start-up as Kafka's GroupCoordinatorConfig does."""
    g = config.get
    for name in ("group.consumer.session.timeout.ms", "group.consumer.min.session.timeout.ms",
                 "group.consumer.max.session.timeout.ms", "group.consumer.heartbeat.interval.ms",
                 "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms",
                 "group.consumer.max.size"):
        if g(name) < 1:
            raise ConfigError(f"Invalid value {g(name)} for configuration {name}: Value must be at least 1")
    if g("group.consumer.regex.refresh.interval.ms") < 10000:
        raise ConfigError(f"Invalid value {g('group.consumer.regex.refresh.interval.ms')} for configuration "
                          "group.consumer.regex.refresh.interval.ms: Value must be at least 10000")
    hb, mn_hb, mx_hb = (g(f"group.consumer.{k}heartbeat.interval.ms") for k in ("", "min.", "max."))
    st, mn_st, mx_st = (g(f"group.consumer.{k}session.timeout.ms") for k in ("", "min.", "max."))
    rules = [
        (mx_hb >= mn_hb, "group.consumer.max.heartbeat.interval.ms must be greater than or equal to "
                         "group.consumer.min.heartbeat.interval.ms"),
        (hb >= mn_hb, "group.consumer.heartbeat.interval.ms must be greater than or equal to "
                      "group.consumer.min.heartbeat.interval.ms"),
        (hb <= mx_hb, "group.consumer.heartbeat.interval.ms must be less than or equal to "
                      "group.consumer.max.heartbeat.interval.ms"),
        (mx_st >= mn_st, "group.consumer.max.session.timeout.ms must be greater than or equal to "
                         "group.consumer.min.session.timeout.ms"),
        (st >= mn_st, "group.consumer.session.timeout.ms must be greater than or equal to "
                      "group.consumer.min.session.timeout.ms"),
        (st <= mx_st, "group.consumer.session.timeout.ms must be less than or equal to "
                      "group.consumer.max.session.timeout.ms"),
        (hb < st, "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms"),
    ]
    for ok, message in rules:
        if not ok:
            raise ConfigError(message)
    known = {"uniform", "range", "org.apache.kafka.coordinator.group.assignor.UniformAssignor",
             "org.apache.kafka.coordinator.group.assignor.RangeAssignor"}
    for a in g("group.consumer.assignors") or []:
        if a not in known:
            raise ConfigError(f"Invalid value {a} for configuration group.consumer.assignors: "
                              "the consumer group assignors are uniform and range")
    policy = g("group.consumer.migration.policy")
    if policy.lower() not in MIGRATION_POLICIES:  # Kafka's ConfigDef.CaseInsensitiveValidString
        raise ConfigError(f"Invalid value {policy} for configuration group.consumer.migration.policy: String must "
                          f"be one of (case insensitive): {', '.join(MIGRATION_POLICIES)}")


# Kafka's ConsumerGroupMigrationPolicy: may a non-empty classic group be upgraded online to a consumer group,
# and a consumer group left with classic members only be downgraded back
MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")


def check_socket_limits(config: "BrokerConfig") -> None:
    """Kafka's checks of the socket server limits (KafkaConfig.validateValues and the keys' ranges)."""
    for name in ("max.connections", "max.connections.per.ip", "socket.request.max.bytes",
                 "max.incremental.fetch.session.cache.slots"):
        value = config.get(name)
        low = 1 if name == "socket.request.max.bytes" else 0
        if value < low:
            raise ConfigError(f"Invalid value {value} for configuration {name}: Value must be at least {low}")
    overrides = parse_ip_overrides(config.get("max.connections.per.ip.overrides") or "")
    if config.get("max.connections.per.ip") == 0 and not overrides:
        raise ConfigError("requirement failed: max.connections.per.ip can be set to zero only if "
                          "max.connections.per.ip.overrides property is set.")
    queued, source = config.raw("queued.max.request.bytes")
    # Kafkite's own default follows socket.request.max.bytes up (see network/quotas.py); a value set is checked
    if source != ConfigSource.DEFAULT_CONFIG and 0 < int(queued) < config.get("socket.request.max.bytes"):
        raise ConfigError("requirement failed: queued.max.request.bytes must be larger or equal to "
                          "socket.request.max.bytes")


def check_dynamic_broker_config(key: str, value: str):
    """A dynamic broker config's value, parsed (Kafka's DynamicBrokerConfig checks): NotDynamic for a key that
    cannot be set dynamically, ConfigError with Kafka's wording for a value that does not parse."""
    d = BROKER_CONFIGS.get(key)
    if d is None or not d.dynamic:
        raise NotDynamic(f"Cannot update these configs dynamically: Set({key})")
    return _parse(d.type, key, value)


def validate_topic_configs(configs: dict[str, str | None]) -> None:
    """Raise ConfigError with Kafka's wording for an unknown name or a bad value."""
    for name, value in configs.items():
        d = TOPIC_CONFIGS.get(name)
        if d is None:
            raise ConfigError(f"Unknown topic config name: {name}")
        if value is None:
            raise ConfigError(f"Null value not supported for topic configs: {name}")
        parsed = _parse(d.type, name, value)
        if d.check is not None:
            msg = d.check(parsed)
            if msg:
                raise ConfigError(f"Invalid value {value} for configuration {name}: {msg}")
        if name in NOT_IMPLEMENTED_TOPIC_CONFIGS and parsed != _parse(d.type, name, d.default):
            raise ConfigError(f"Invalid value {value} for configuration {name}: {not_implemented(name)}")


# Topic configs of Kafka's table that Kafkite does not implement (name -> what Kafkite does instead): each would
# accept only its default, any other value being INVALID_CONFIG (and its broker-level synonyms would get a warning
# at start, and INVALID_CONFIG in a broker AlterConfigs). Every topic config of Kafka's table is implemented today:
# the mechanism stays for a config Kafka adds.
NOT_IMPLEMENTED_TOPIC_CONFIGS: dict[str, str] = {}


def not_implemented(topic_key: str) -> str:
    d = TOPIC_CONFIGS[topic_key]
    return (f"Kafkite does not implement {topic_key} ({NOT_IMPLEMENTED_TOPIC_CONFIGS[topic_key]}); "
            f"only its default {d.default} is accepted")


def _topic_synonyms() -> dict[str, str]:
    """Broker keys that are the broker-level default of a topic config -> that topic config."""
    return {syn: d.name for d in TOPIC_CONFIGS.values() for syn in d.synonyms}


def parse_topic_value(name: str, value: str) -> Any:
    return _parse(TOPIC_CONFIGS[name].type, name, value)
