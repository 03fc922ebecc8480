"""The keys of server.properties / --override that Kafkite takes no notice of, and the warning each gets at start
(check_broker_keys, called by server/node.py): a Kafka key it does not use, with the reason, or Kafka's own wording for a key no
Kafka broker knows."""
from __future__ import annotations

import re

from .config import BROKER_CONFIGS, NOT_IMPLEMENTED_TOPIC_CONFIGS, TOPIC_CONFIGS, _parse, _topic_synonyms

_TUNING = "a tuning knob of Kafka's threads, queues and sockets (Kafkite serves from one Trio event loop)"
_REPLICATION = "not implemented by Kafkite's replica fetchers (high watermarks are not checkpointed, followers do not serve consumers)"
_SECURITY = ("Kafkite serves PLAINTEXT, SSL and SASL_PLAINTEXT/SASL_SSL (PLAIN, SCRAM, OAUTHBEARER with Kafka's "
             "unsecured validator) client listeners and ACLs; this setting is not used yet (the other ssl.* settings)")
_KRAFT = "Kafkite's controller is ZooKeeper-based (zookeeper.connect) or in-process (no KRaft quorum)"
UNUSED_BROKER_CONFIGS: dict[str, str] = {
    **dict.fromkeys(["num.network.threads", "num.io.threads", "background.threads", "queued.max.requests",
                     "socket.send.buffer.bytes", "socket.receive.buffer.bytes",
                     "socket.listen.backlog.size", "num.recovery.threads.per.data.dir",
                     "log.cleaner.threads",
                     "log.cleaner.io.buffer.size",
                     "log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second",
                     "offsets.load.buffer.size", "offsets.commit.timeout.ms", "offsets.commit.required.acks",
                     "max.connection.creation.rate"], _TUNING),
    **dict.fromkeys(["replica.socket.receive.buffer.bytes"], _REPLICATION),
    **dict.fromkeys(["process.roles", "controller.quorum.voters", "controller.quorum.bootstrap.servers",
                     "controller.listener.names", "metadata.log.dir", "inter.broker.protocol.version",
                     "broker.id.generation.enable", "reserved.broker.max.id"], _KRAFT),
    "log.dir": "the data directory is log.dirs (or --data-dir)",
}
_UNUSED_PREFIXES = {
    "zookeeper.": "ZooKeeper TLS, ACLs and client tuning are not implemented (zookeeper.connect and "
                  "zookeeper.session.timeout.ms are)",
    "ssl.": _SECURITY, "sasl.": _SECURITY, "listener.name.": _SECURITY,
    "metric.": "Kafkite has no metrics reporters", "metrics.": "Kafkite has no metrics reporters",
    "kafka.metrics.": "Kafkite has no metrics reporters", "remote.log.": "tiered storage is not implemented",
    "confluent.": "a Confluent Platform setting",
}


_LISTENER_SASL = re.compile(r"listener\.name\.[\w-]+\.(sasl\.enabled\.mechanisms|connections\.max\.reauth\.ms|"
                            r"(plain|scram-sha-256|scram-sha-512|oauthbearer)\.sasl\.jaas\.config)")
_LISTENER_KEY = re.compile(r"listener\.name\.[\w-]+\.(ssl\.[\w.]+)")


def check_broker_keys(static: dict[str, str]) -> list[tuple[str, str]]:
    """(key, message) for each supplied key Kafkite takes no notice of: a Kafka key it does not use ("... is not
    used by Kafkite: why"), a key no Kafka broker knows (Kafka's own wording), or a not-implemented topic config's
    broker-level default set to another value. (Bad values of known keys are refused by BrokerConfig.)"""
    out = []
    synonyms = _topic_synonyms()
    for key, value in static.items():
        if key in BROKER_CONFIGS and not key.startswith("sasl.kerberos."):  # kerberos: alterable, not used
            topic_key = synonyms.get(key)
            if topic_key in NOT_IMPLEMENTED_TOPIC_CONFIGS and value != "":
                d = BROKER_CONFIGS[key]
                if _parse(d.type, key, value) != _parse(d.type, key, d.default or TOPIC_CONFIGS[topic_key].default):
                    out.append((key, f"The configuration '{key}' is not used by Kafkite: "
                                     f"{NOT_IMPLEMENTED_TOPIC_CONFIGS[topic_key]}"))
            continue
        if key in synonyms:  # a topic config's broker default with no entry of its own (log.message.format.version)
            continue
        if _LISTENER_SASL.fullmatch(key):  # a SASL listener's own mechanisms and JAAS config (security/sasl.py)
            continue
        m = _LISTENER_KEY.fullmatch(key)
        if m and m.group(1) in BROKER_CONFIGS:  # a listener's own ssl.* setting (network/listeners.py)
            continue
        why = UNUSED_BROKER_CONFIGS.get(key) or next(
            (w for prefix, w in _UNUSED_PREFIXES.items() if key.startswith(prefix)), None)
        if why is not None:
            out.append((key, f"The configuration '{key}' is not used by Kafkite: {why}"))
        else:
            out.append((key, f"The configuration '{key}' was supplied but isn't a known config."))
    return out
