"""Kafka 3.x's ZooKeeper values as Kafka writes and reads them (ZkData): what Kafkite puts in ZooKeeper must be
what a Kafka tool or broker would find there, and what Kafka wrote must parse."""
from __future__ import annotations

import json

from kafkite.controller import zk_data as z
from kafkite.controller.zk_store import _decode, _encode


def test_paths():
    assert z.broker_path(3) == "/brokers/ids/3"
    assert z.topic_path("t") == "/brokers/topics/t"
    assert z.partition_state_path("t", 2) == "/brokers/topics/t/partitions/2/state"
    assert z.topic_config_path("t") == "/config/topics/t"
    assert z.delete_topic_path("t") == "/admin/delete_topics/t"
    assert {z.BROKER_IDS, z.TOPICS, z.CONFIG_TOPICS, z.DELETE_TOPICS} <= set(z.PERSISTENT_PATHS)


def test_controller_and_epoch_bytes():
    assert json.loads(_encode(z.controller(2, 1700000000123))) == {"version": 1, "brokerid": 2,
                                                                   "timestamp": "1700000000123"}
    assert z.controller_id(_decode(_encode(z.controller(7, 1)))) == 7
    assert z.controller_id(None) == -1
    assert _encode(12) == b"12"  # /controller_epoch: the number's digits, as Kafka writes it
    assert _decode(b"12") == 12
    assert _encode(None) == b"" and _decode(b"") is None  # marker nodes have no data


def test_broker_registration_v5_and_kafka_written_ones():
    v = z.broker_registration(z.BrokerRegistration(1, "127.0.0.1", 9093), now_ms=5)
    assert v == {"version": 5, "host": "127.0.0.1", "port": 9093, "endpoints": ["PLAINTEXT://127.0.0.1:9093"],
                 "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"}, "jmx_port": -1, "timestamp": "5",
                 "features": {}}
    assert z.parse_broker_registration(1, v) == z.BrokerRegistration(1, "127.0.0.1", 9093,
                                                                     protocols=(("PLAINTEXT", "PLAINTEXT"),))
    # a Kafka broker with an SSL listener and a named PLAINTEXT one, and a rack (version 4): every listener is kept
    # by name, the first (not INTERNAL) is the client one
    kafka = {"listener_security_protocol_map": {"CLIENT": "PLAINTEXT", "SECURE": "SSL"},
             "endpoints": ["SECURE://h1:9094", "CLIENT://h1:9092"], "rack": "dc1", "jmx_port": 9999,
             "host": None, "timestamp": "1", "port": -1, "version": 4}
    assert z.parse_broker_registration(4, kafka) == z.BrokerRegistration(
        4, "h1", 9094, "dc1", (("CLIENT", "h1", 9092),), "SECURE", (("SECURE", "SSL"), ("CLIENT", "PLAINTEXT")))
    # Kafkite's brokers write every listener with its protocol, the client one first (Kafka 3.x's JSON: top-level
    # host/port are the first PLAINTEXT endpoint's)
    v = z.broker_registration(z.BrokerRegistration(2, "h2", 9093, None, (("INTERNAL", "h2", 9099), ("ADMIN", "h2", 9092)),
                                                   "SECURE", (("SECURE", "SASL_SSL"), ("ADMIN", "PLAINTEXT"))), now_ms=5)
    assert (v["endpoints"], v["listener_security_protocol_map"], v["host"], v["port"]) == (
        ["SECURE://h2:9093", "INTERNAL://h2:9099", "ADMIN://h2:9092"],
        {"SECURE": "SASL_SSL", "INTERNAL": "PLAINTEXT", "ADMIN": "PLAINTEXT"}, "h2", 9099)
    back = z.parse_broker_registration(2, v)
    assert (back.listener, back.host, back.port, back.listeners) == (
        "SECURE", "h2", 9093, (("INTERNAL", "h2", 9099), ("ADMIN", "h2", 9092)))
    assert z.parse_broker_registration(5, {"version": 1, "host": "h", "port": 1, "jmx_port": -1}) == \
        z.BrokerRegistration(5, "h", 1)


def test_topic_assignment_and_state():
    v = z.topic_assignment({1: [2, 1], 0: [1, 2]}, "AbCdEfGhIjKlMnOpQrStUv")
    assert v == {"version": 3, "partitions": {"0": [1, 2], "1": [2, 1]}, "adding_replicas": {},
                 "removing_replicas": {}, "topic_id": "AbCdEfGhIjKlMnOpQrStUv"}
    assert z.parse_topic_assignment(json.loads(_encode(v))) == ({0: [1, 2], 1: [2, 1]}, "AbCdEfGhIjKlMnOpQrStUv")
    assert z.topic_assignment({0: [1]}, None)["version"] == 2
    assert z.parse_topic_assignment({"version": 1, "partitions": {"0": [3]}}) == ({0: [3]}, None)
    s = z.PartitionState(leader=2, leader_epoch=4, isr=(2, 1), controller_epoch=9)
    assert z.partition_state(s) == {"version": 1, "leader": 2, "leader_epoch": 4, "controller_epoch": 9, "isr": [2, 1]}
    assert z.parse_partition_state(json.loads(_encode(z.partition_state(s)))) == s


def test_configs_and_producer_id_block():
    assert z.topic_config({"retention.ms": 5, "cleanup.policy": "compact"}) == {
        "version": 1, "config": {"cleanup.policy": "compact", "retention.ms": "5"}}
    assert z.parse_topic_config(None) == {}
    assert z.parse_topic_config({"version": 1, "config": {"a": "b"}}) == {"a": "b"}
    assert z.config_change("t") == {"version": 2, "entity_path": "topics/t"}
    assert z.producer_id_block(1, 0, 999) == {"version": 1, "broker": 1, "block_start": "0", "block_end": "999"}
