"""Kafka 3.x's ZooKeeper layout: the paths and the values kept at them (Kafka's ZkData), as plain
data for a coordination store (which keeps values as JSON; a bare number is written as its digits,
as Kafka writes /controller_epoch, and None as an empty node, as Kafka's marker nodes are).

    /cluster/id                                     {"version":"1","id":<cluster id>}
    /controller                      ephemeral      {"version":1,"brokerid":N,"timestamp":"<ms>"}
    /controller_epoch                               N
    /brokers/ids/<id>                ephemeral      {"version":5,"host","port","endpoints":[...],
                                                     "listener_security_protocol_map",
                                                     "jmx_port":-1,"timestamp":"<ms>","features":{}}
    /brokers/topics/<topic>                         {"version":2|3,"partitions":{"0":[1,2]},
                                                     "adding_replicas":{},"removing_replicas":{},
                                                     "topic_id":<id>}
    /brokers/topics/<topic>/partitions/<p>/state    {"version":1,"leader","leader_epoch",
                                                     "controller_epoch","isr":[...]}
    /config/topics/<topic>                          {"version":1,"config":{k: v}}
    /config/users/<sanitized user>                  {"version":1,"config":{"SCRAM-SHA-512":"salt=...,
                                                     stored_key=...,server_key=...,iterations=4096"}}
    /config/groups/<sanitized group>                {"version":1,"config":{"consumer.session.timeout.ms":"50000"}}
                                                     (Kafkite's: Kafka's ZooKeeper mode had no group configs;
                                                     KRaft keeps them as GROUP ConfigRecords)
    /config/changes/config_change_<seq>             {"version":2,"entity_path":"topics/<topic>"}
                                                     (or "brokers/<id>", "users/<sanitized user>",
                                                     "groups/<sanitized group>")
    /admin/delete_topics/<topic>                    (empty)
    /latest_producer_id_block                       {"version":1,"broker":N,"block_start":"s",
                                                     "block_end":"e"}

Sans-IO: callers pass the time (`now_ms`) where Kafka stamps one.
"""
from __future__ import annotations

from dataclasses import dataclass

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONFIG_TOPICS = "/config/topics"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
DELETE_TOPICS = "/admin/delete_topics"
CONFIG_BROKERS = "/config/brokers"
CONFIG_USERS = "/config/users"
CONFIG_GROUPS = "/config/groups"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"

# the persistent parents Kafka creates at start-up (KafkaZkClient.createTopLevelPaths), so watches on
# their children can be set before the first child exists
PERSISTENT_PATHS = ("/consumers", BROKER_IDS, TOPICS, CONFIG_CHANGES, CONFIG_TOPICS, "/config/clients",
                    CONFIG_USERS, CONFIG_BROKERS, DELETE_TOPICS, "/brokers/seqid", "/isr_change_notification",
                    "/latest_producer_id_block", "/log_dir_event_notification")


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


DEFAULT_BROKER_ENTITY = "<default>"  # Kafka's ZooKeeper name for the cluster-wide dynamic broker configs


def user_config_path(sanitized_user: str) -> str:
    """/config/users/<user, sanitized as Kafka's Sanitizer: URL-encoded>."""
    return f"{CONFIG_USERS}/{sanitized_user}"


def group_config_path(sanitized_group: str) -> str:
    """/config/groups/<group id, sanitized as a user name is (URL-encoded): a group id may hold any character>."""
    return f"{CONFIG_GROUPS}/{sanitized_group}"


def broker_config_path(entity: str) -> str:
    """/config/brokers/<id> or /config/brokers/<default>."""
    return f"{CONFIG_BROKERS}/{entity}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


# -- values -------------------------------------------------------------------------------------------
def cluster_id(cid: str) -> dict:
    return {"version": "1", "id": cid}


def controller(broker_id: int, now_ms: int) -> dict:
    return {"version": 1, "brokerid": broker_id, "timestamp": str(now_ms)}


def controller_id(value: dict | None) -> int:
    """The broker id in a /controller value (-1 when there is none)."""
    return int(value["brokerid"]) if isinstance(value, dict) and "brokerid" in value else -1


@dataclass(frozen=True)
class BrokerRegistration:
    broker_id: int
    host: str
    port: int
    rack: str | None = None
    # more listeners than the client one: (name, host, port), e.g. ("INTERNAL", h, p) for inter-broker traffic
    listeners: tuple[tuple[str, str, int], ...] = ()
    listener: str = "PLAINTEXT"  # the client listener's name (host, port)
    protocols: tuple[tuple[str, str], ...] = ()  # (listener name, security protocol); PLAINTEXT when absent


def broker_registration(b: BrokerRegistration, now_ms: int) -> dict:
    """Version 5, as Kafka 3.x writes it: every listener as `NAME://host:port` (the client one first), its security
    protocol in listener_security_protocol_map, and the top-level host/port those of the first PLAINTEXT endpoint
    (null/-1 when none is PLAINTEXT)."""
    protocols = dict(b.protocols)
    eps = [(b.listener, b.host, b.port)] + list(b.listeners)
    proto = {name: protocols.get(name, "PLAINTEXT") for name, _, _ in eps}
    plaintext = next(((h, p) for name, h, p in eps if proto[name] == "PLAINTEXT"), (None, -1))
    out = {"version": 5, "host": plaintext[0], "port": plaintext[1],
           "endpoints": [f"{name}://{h}:{p}" for name, h, p in eps],
           "listener_security_protocol_map": proto, "jmx_port": -1,
           "timestamp": str(now_ms), "features": {}}
    if b.rack is not None:
        out["rack"] = b.rack
    return out


def parse_endpoints(value: dict) -> list[tuple[str, str, str, int]]:
    """(listener name, security protocol, host, port) of each endpoint of a /brokers/ids/<id> value."""
    out = []
    for ep in value.get("endpoints") or ():
        name, _, hostport = ep.partition("://")
        proto = (value.get("listener_security_protocol_map") or {}).get(name, name)
        host, _, p = hostport.rpartition(":")
        out.append((name, proto, host.strip("[]"), int(p)))
    return out


INTER_BROKER_LISTENER = "INTERNAL"


def parse_broker_registration(broker_id: int, value: dict) -> BrokerRegistration:
    """A /brokers/ids/<id> value of any version >= 1: the client endpoint is the first that is not the inter-broker
    one (INTERNAL; Kafkite writes its primary client listener first), else the top-level host/port; the others are
    its `listeners`."""
    host, port = value.get("host"), value.get("port", -1)
    eps = parse_endpoints(value)
    client = next((e for e in eps if e[0] != INTER_BROKER_LISTENER), None)
    name = "PLAINTEXT"
    if client is not None:
        name, host, port = client[0], client[2], client[3]
    others = tuple((n, h, p) for n, _, h, p in eps if client is None or n != client[0])
    protocols = tuple((n, proto) for n, proto, _, _ in eps)
    return BrokerRegistration(broker_id, host or "", int(port), value.get("rack"), others, name, protocols)


def topic_assignment(partitions: dict[int, list[int]], topic_id: str | None) -> dict:
    out = {"version": 3 if topic_id else 2, "partitions": {str(p): list(r) for p, r in sorted(partitions.items())},
           "adding_replicas": {}, "removing_replicas": {}}
    if topic_id:
        out["topic_id"] = topic_id
    return out


def parse_topic_assignment(value: dict) -> tuple[dict[int, list[int]], str | None]:
    parts = {int(p): [int(r) for r in reps] for p, reps in (value.get("partitions") or {}).items()}
    return dict(sorted(parts.items())), value.get("topic_id")


@dataclass(frozen=True)
class PartitionState:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int


def partition_state(s: PartitionState) -> dict:
    return {"version": 1, "leader": s.leader, "leader_epoch": s.leader_epoch,
            "controller_epoch": s.controller_epoch, "isr": list(s.isr)}


def parse_partition_state(value: dict) -> PartitionState:
    return PartitionState(int(value["leader"]), int(value["leader_epoch"]), tuple(int(b) for b in value["isr"]),
                          int(value["controller_epoch"]))


def topic_config(config: dict[str, str]) -> dict:
    return {"version": 1, "config": {k: str(v) for k, v in sorted(config.items())}}


def parse_topic_config(value: dict | None) -> dict[str, str]:
    return {k: str(v) for k, v in ((value or {}).get("config") or {}).items()}


def config_change(name: str, entity_type: str = "topics") -> dict:
    """A /config/changes notification: entity_path "topics/<topic>" or "brokers/<id or <default>>"."""
    return {"version": 2, "entity_path": f"{entity_type}/{name}"}


def producer_id_block(broker_id: int, start: int, end: int) -> dict:
    return {"version": 1, "broker": broker_id, "block_start": str(start), "block_end": str(end)}
