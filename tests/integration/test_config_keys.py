"""Configuration keys Kafkite does not implement are warned about or refused, never silently taken; every topic
config of Kafka's table is taken (and honoured: tests/unit/test_storage_topic_configs.py); deprecated topic keys
that Kafka 3.x still accepts are accepted the same way."""
from __future__ import annotations

import collections
import signal
import subprocess
import sys

import pytest
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
from kafka.protocol.admin import CreateTopicsRequest

from kafkite.config import (NOT_IMPLEMENTED_TOPIC_CONFIGS, TOPIC_CONFIGS, BrokerConfig, ConfigError,
                            metadata_version_release, validate_topic_configs)
from kafkite.config_keys import check_broker_keys
from kafkite.testing.process import spawn_serve
from kafkite.wire.errors import E

# Apache Kafka 3.x's config/server.properties (ZooKeeper mode), its comments left out, and zookeeper.connect
# replaced by a ZooKeeper key Kafkite does not use (with zookeeper.connect the broker would join that ZooKeeper)
STOCK_SERVER_PROPERTIES = """
broker.id=0
listeners=PLAINTEXT://127.0.0.1:0
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kafka-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.retention.check.interval.ms=300000
zookeeper.connection.timeout.ms=18000
zookeeper.ssl.client.enable=false
group.initial.rebalance.delay.ms=0
"""
UNUSED = ["num.network.threads", "num.io.threads", "socket.send.buffer.bytes", "socket.receive.buffer.bytes",
          "num.recovery.threads.per.data.dir", "zookeeper.ssl.client.enable"]


def test_stock_server_properties_warns_once_per_unused_key(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text(STOCK_SERVER_PROPERTIES + "broker.rack=r1\nreplica.socket.receive.buffer.bytes=65536\nno.such.key=1\n")
    tail: collections.deque[str] = collections.deque(maxlen=500)
    proc, _ = spawn_serve(["--in-memory", "--config", str(props)], timeout=30, log_tail=tail)
    try:
        lines = [line for line in tail if "level='warning'" in line]
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    for key in UNUSED + ["replica.socket.receive.buffer.bytes"]:  # (broker.rack is used: KIP-392)
        mine = [line for line in lines if f"key='{key}'" in line]
        assert len(mine) == 1 and "is not used by Kafkite" in mine[0], (key, lines)
    unknown = [line for line in lines if "key='no.such.key'" in line]
    assert len(unknown) == 1 and "The configuration 'no.such.key' was supplied but isn't a known config." in unknown[0]
    assert len(lines) == len(UNUSED) + 2, lines  # the keys Kafkite implements are not warned about


def test_a_bad_value_is_refused_at_start():
    out = subprocess.run([sys.executable, "-m", "kafkite.cli", "serve", "--in-memory", "--port", "0",
                          "--override", "num.partitions=many"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "Invalid value many for configuration num.partitions" in out.stderr
    with pytest.raises(ConfigError, match="Invalid value 9.9 for configuration log.message.format.version"):
        BrokerConfig(static={"log.message.format.version": "9.9"})


def test_check_broker_keys():
    assert check_broker_keys({"num.partitions": "3", "log.retention.hours": "1", "node.id": "2",
                              "log.message.format.version": "2.8", "log.message.downconversion.enable": "false",
                              "log.preallocate": "false"}) == []
    # the broker-level defaults of every topic config are used, whatever their value
    assert check_broker_keys({"log.preallocate": "true", "log.segment.delete.delay.ms": "0",
                              "log.index.size.max.bytes": "4096", "log.roll.jitter.ms": "1000",
                              "log.roll.jitter.hours": "1"}) == []
    warned = dict(check_broker_keys({"zookeeper.ssl.client.enable": "true", "ssl.keystore.location": "/k",
                                     "ssl.principal.mapping.rules": "DEFAULT", "sasl.enabled.mechanisms": "PLAIN",
                                     "listener.name.sasl_plaintext.plain.sasl.jaas.config": "x",
                                     "sasl.mechanism.inter.broker.protocol": "PLAIN",
                                     "security.inter.broker.protocol": "SASL_SSL",
                                     "sasl.kerberos.service.name": "kafka", "what.is.this": "x"}))
    assert "ZooKeeper" in warned["zookeeper.ssl.client.enable"]
    # SSL and SASL listeners take these (security/ssl_context.py, security/sasl.py)
    assert not {"ssl.keystore.location", "sasl.enabled.mechanisms", "ssl.principal.mapping.rules",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config", "sasl.mechanism.inter.broker.protocol",
                "security.inter.broker.protocol"} & set(warned)
    assert check_broker_keys({"listener.name.secure.ssl.keystore.type": "PKCS12",
                              "listener.name.secure.ssl.cipher.suites": "TLS_AES_128_GCM_SHA256",
                              "listener.name.client.oauthbearer.sasl.jaas.config": "x",
                              "connections.max.reauth.ms": "1000"}) == []
    assert "not used yet" in warned["sasl.kerberos.service.name"]
    assert warned["what.is.this"] == "The configuration 'what.is.this' was supplied but isn't a known config."


@pytest.mark.parametrize("value, release", [("3.0", "3.0"), ("3.0-IV1", "3.0"), ("2.8.2", "2.8"),
                                            ("0.10.2.1", "0.10.2"), ("0.10.0-IV1", "0.10.0"), ("3.9-IV0", "3.9"),
                                            ("3.0-IV2", None), ("4.0", None), ("latest", None)])
def test_message_format_version_values_as_kafka_reads_them(value, release):
    assert metadata_version_release(value) == release


def test_every_topic_config_of_kafka_is_implemented():
    assert NOT_IMPLEMENTED_TOPIC_CONFIGS == {}
    validate_topic_configs({"preallocate": "true", "segment.index.bytes": "4", "segment.jitter.ms": "1000",
                            "file.delete.delay.ms": "0"})
    for name, value, why in [("segment.index.bytes", "3", "Value must be at least 4"),
                             ("segment.jitter.ms", "-1", "Value must be at least 0"),
                             ("file.delete.delay.ms", "-1", "Value must be at least 0")]:
        with pytest.raises(ConfigError, match=f"^Invalid value {value} for configuration {name}: {why}$"):
            validate_topic_configs({name: value})
    with pytest.raises(ConfigError, match="Invalid value maybe for configuration preallocate"):
        validate_topic_configs({"preallocate": "maybe"})
    # log.roll.jitter.hours, Kafka's second broker-level name of segment.jitter.ms, in hours
    cfg = BrokerConfig(static={"log.roll.jitter.hours": "2"})
    assert cfg.topic_default("segment.jitter.ms") == ("7200000", 4, "log.roll.jitter.hours")
    cfg = BrokerConfig(static={"log.roll.jitter.hours": "2", "log.roll.jitter.ms": "5"})
    assert cfg.topic_default("segment.jitter.ms") == ("5", 4, "log.roll.jitter.ms")
    assert TOPIC_CONFIGS["segment.jitter.ms"].synonyms == ("log.roll.jitter.ms", "log.roll.jitter.hours")


def _alter(admin, kind, name, configs, incremental=True):
    """The error text of one resource's (Incremental)AlterConfigs answer, None when it succeeded."""
    out = admin.alter_configs([ConfigResource(kind, name, configs=configs)], incremental=incremental)
    text = next(iter(next(iter(out.values())).values()))
    return None if text == "OK" else text


@pytest.mark.parametrize("incremental", [True, False])
def test_topic_keys_over_the_wire(broker, incremental):
    bs = broker.bootstrap_servers
    topic = f"legacy-{incremental}"
    a = KafkaAdminClient(bootstrap_servers=bs)
    try:
        a.create_topics([NewTopic(topic, 1, 1, topic_configs={"message.format.version": "2.8",
                                                               "message.downconversion.enable": "false"})])
        # the deprecated keys are accepted, stored and described as Kafka 3.x does
        assert _alter(a, ConfigResourceType.TOPIC, topic, {"message.format.version": "0.10.2", "retention.ms": "1000",
                                                           "message.downconversion.enable": "false"},
                      incremental) is None
        cfg = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])["topic"][topic]
        assert cfg["message.format.version"]["value"] == "0.10.2"
        assert cfg["message.downconversion.enable"]["value"] == "false"
        assert cfg["retention.ms"]["value"] == "1000"
        err = _alter(a, ConfigResourceType.TOPIC, topic, {"message.format.version": "9.9"}, incremental)
        assert "Invalid value 9.9 for configuration message.format.version: Version 9.9 is not a valid version" in err
        # the keys Kafkite once took at their default only: taken (their effect: test_storage_topic_configs.py)
        assert _alter(a, ConfigResourceType.TOPIC, topic, {"preallocate": "true", "segment.jitter.ms": "1000",
                                                           "segment.index.bytes": "4096",
                                                           "file.delete.delay.ms": "0"}, incremental) is None
        cfg = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])["topic"][topic]
        assert (cfg["preallocate"]["value"], cfg["segment.jitter.ms"]["value"], cfg["segment.index.bytes"]["value"],
                cfg["file.delete.delay.ms"]["value"]) == ("true", "1000", "4096", "0")
        err = _alter(a, ConfigResourceType.TOPIC, topic, {"segment.index.bytes": "3"}, incremental)
        assert "InvalidConfiguration" in err and "Value must be at least 4" in err
        assert _alter(a, ConfigResourceType.BROKER, "1", {"log.preallocate": "true"}, incremental) is None
        assert _alter(a, ConfigResourceType.BROKER, "1", {"log.preallocate": "false"}, incremental) is None
        # Kerberos is not served, but its settings are per-broker dynamic in Kafka (librdkafka's 0081 sets one)
        assert _alter(a, ConfigResourceType.BROKER, "1", {"sasl.kerberos.min.time.before.relogin": "58000"},
                      incremental) is None
        assert "sasl.kerberos.min.time.before.relogin" in _alter(
            a, ConfigResourceType.BROKER, "1", {"sasl.kerberos.min.time.before.relogin": "x"}, incremental)
    finally:
        a.close()


def test_create_topics_takes_the_configs_once_refused(wire):
    T = CreateTopicsRequest.CreatableTopic

    def create(name, key, value):
        r = wire.request(CreateTopicsRequest(topics=[T(name=name, num_partitions=1, replication_factor=1,
                                                       assignments=[], configs=[T.CreatableTopicConfig(
                                                           name=key, value=value)])],
                                             timeout_ms=10000, validate_only=False), 5)
        return r.topics[0].error_code, r.topics[0].error_message
    assert create("jittered", "segment.jitter.ms", "5") == (0, None)
    code, message = create("tiny-index", "segment.index.bytes", "2")
    assert code == E.INVALID_CONFIG
    assert message == "Invalid value 2 for configuration segment.index.bytes: Value must be at least 4"


def _describe_broker_key(w, node_id: int, key: str):
    from kafka.protocol.admin import DescribeConfigsRequest
    R = DescribeConfigsRequest.DescribeConfigsResource
    d = w.request(DescribeConfigsRequest(resources=[R(resource_type=4, resource_name=str(node_id),
                                                      configuration_keys=[key])], include_synonyms=True), 4)
    e = d.results[0].configs[0]
    return e.value, e.config_source, [(s.value, s.source) for s in e.synonyms]


def _incremental_broker(w, name: str, key: str, value: str | None, op: int = 0) -> int:
    from kafka.protocol.admin import IncrementalAlterConfigsRequest
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    r = w.request(IncrementalAlterConfigsRequest(resources=[R(resource_type=4, resource_name=name, configs=[
        R.AlterableConfig(name=key, config_operation=op, value=value)])], validate_only=False), 1)
    return r.responses[0].error_code


def test_broker_configs_per_broker_over_the_cluster_default(broker_factory):
    """Kafka's layers of a broker config: dynamic for this broker (the resource named by its id) over the
    dynamic cluster-wide default (the empty name) over the static file, over Kafka's default."""
    from kafka.protocol.metadata import MetadataRequest
    from kafkite.testing.wire_client import WireClient
    b = broker_factory(overrides={"num.partitions": "2"})
    node = b.broker.node_id
    with WireClient.connect(b.bootstrap_servers) as w:
        assert _describe_broker_key(w, node, "num.partitions") == ("2", 4, [("2", 4), ("1", 5)])
        assert _incremental_broker(w, "", "num.partitions", "3") == 0
        assert _incremental_broker(w, str(node), "num.partitions", "5") == 0
        assert _incremental_broker(w, str(node + 1), "num.partitions", "7") == E.INVALID_REQUEST
        assert _describe_broker_key(w, node, "num.partitions") == ("5", 2, [("5", 2), ("3", 3), ("2", 4), ("1", 5)])

        def auto_created(name: str) -> int:
            m = w.request(MetadataRequest[4](topics=[name], allow_auto_topic_creation=True), 4)
            return len(m.topics[0].partitions)
        assert auto_created("dyn-five") == 5
        # this broker's own value deleted: the cluster-wide default shows through again
        assert _incremental_broker(w, str(node), "num.partitions", None, op=1) == 0
        assert _describe_broker_key(w, node, "num.partitions")[:2] == ("3", 3)
        assert auto_created("dyn-three") == 3
