"""The client matrix: the same scenarios for the Java client, kafkajs and kcat (the Python clients
run them in tests/integration). Written so they would pass against Apache Kafka too."""
from __future__ import annotations


import pytest

from clients.drivers import decode_records, run_java, run_kcat, run_node
from clients.group_scenario import ConsumerProc, run_group_scenario
from clients import drivers
from helpers import ck_consume_all, ck_produce, expected_payloads, kp_consume_all, make_records, payloads


def create(bs, name, partitions=3):
    from kafka.admin import KafkaAdminClient, NewTopic
    a = KafkaAdminClient(bootstrap_servers=bs)
    a.create_topics([NewTopic(name, partitions, 1)])
    a.close()


# -- admin ---------------------------------------------------------------------------
def test_java_client_is_the_version_it_is_named(java_client):
    assert run_java("version")[0]["version"] == {"3.9": "3.9.1", "4.3": "4.3.0"}[java_client]


@pytest.mark.usefixtures("java_client")
def test_java_admin(broker):
    bs = broker.bootstrap_servers
    r = run_java("admin", bs, "create", "jadmin", "3", "1", "retention.ms=12345")
    assert r[0]["ok"] is True
    import base64
    tid = broker.state.metadata.topic("jadmin").topic_id
    assert r[0]["topic_id"] == base64.urlsafe_b64encode(tid.bytes).decode().rstrip("=")  # Java's Uuid.toString
    assert "jadmin" in run_java("admin", bs, "list")[0]["topics"]
    d = run_java("admin", bs, "describe", "jadmin")[0]
    assert len(d["partitions"]) == 3 and d["configs"]["retention.ms"] == {"value": "12345",
                                                                          "source": "DYNAMIC_TOPIC_CONFIG"}
    assert d["configs"]["segment.bytes"]["source"] == "DEFAULT_CONFIG"
    assert run_java("admin", bs, "create", "jadmin", "3", "1")[0]["error"] == "TopicExistsException"
    assert run_java("admin", bs, "create", "bad name", "1", "1")[0]["error"] == "InvalidTopicException"
    assert run_java("admin", bs, "describe", "nope")[0]["error"] == "UnknownTopicOrPartitionException"
    assert run_java("admin", bs, "delete", "jadmin")[0]["ok"] is True
    assert run_java("admin", bs, "delete", "jadmin")[0]["error"] == "UnknownTopicOrPartitionException"
    c = run_java("admin", bs, "cluster")[0]
    assert c["cluster_id"] == broker.state.metadata.cluster_id and c["brokers"] == 1


def test_kafkajs_admin(broker):
    bs = broker.bootstrap_servers
    assert run_node("admin", bs, "create", "jsadmin", "2", "1")[0]["ok"] is True
    assert "jsadmin" in run_node("admin", bs, "list")[0]["topics"]
    d = run_node("admin", bs, "describe", "jsadmin")[0]
    assert len(d["partitions"]) == 2 and d["configs"]["cleanup.policy"] == "delete"
    assert run_node("admin", bs, "create", "jsadmin", "2", "1")[0]["ok"] is False  # kafkajs: false when it exists
    assert run_node("admin", bs, "delete", "jsadmin")[0]["ok"] is True


def test_kcat_metadata(broker):
    bs = broker.bootstrap_servers
    create(bs, "kcat-md", 4)
    r = run_kcat("-b", bs, "-L", "-t", "kcat-md")
    text = r.stdout.decode()
    assert r.returncode == 0, r.stderr
    assert 'topic "kcat-md" with 4 partitions' in text
    assert f"broker 1 at 127.0.0.1:{broker.port}" in text
    r = run_kcat("-b", bs, "-L", "-J")
    import json
    md = json.loads(r.stdout)
    assert "kcat-md" in {t["topic"] for t in md["topics"]}
    r = run_kcat("-b", bs, "-L", "-t", "no-such-topic-x", "-m", "5")
    assert "Unknown topic" in (r.stdout + r.stderr).decode() or "no-such-topic-x" in r.stdout.decode()


# -- produce / consume -------------------------------------------------------------------------
@pytest.mark.usefixtures("java_client")
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_java_produce_consume(broker, codec):
    bs = broker.bootstrap_servers
    topic = f"java-{codec}"
    create(bs, topic)
    r = run_java("produce", bs, topic, "10000", codec, "true")[0]
    assert r["acked"] == 10000 and r["errors"] == 0
    got = decode_records(run_java("consume", bs, topic, "10000"))
    assert len(got) == 10000
    ck = ck_consume_all(bs, topic, 10000)
    assert sorted(got) == sorted(ck)  # the Java client and librdkafka read the same records
    for p in {g[0] for g in got}:
        offs = sorted(g[1] for g in got if g[0] == p)
        assert offs == list(range(len(offs)))


@pytest.mark.usefixtures("java_client")
def test_java_reads_what_python_wrote(broker):
    bs = broker.bootstrap_servers
    create(bs, "py2java")
    recs = make_records(2000, prefix="py")
    ck_produce(bs, "py2java", recs, compression="lz4")
    got = decode_records(run_java("consume", bs, "py2java", "2000"))
    assert payloads(got) == expected_payloads(recs)
    assert sorted(got) == sorted(kp_consume_all(bs, "py2java", 2000))


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_kafkajs_produce_consume(broker, codec):
    bs = broker.bootstrap_servers
    topic = f"js-{codec}"
    create(bs, topic)
    assert run_node("produce", bs, topic, "10000", codec)[0]["acked"] == 10000
    got = decode_records(run_node("consume", bs, topic, "10000"))
    assert len(got) == 10000
    assert sorted(got) == sorted(ck_consume_all(bs, topic, 10000))


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_kcat_produce_consume(broker, codec):
    bs = broker.bootstrap_servers
    topic = f"kcat-{codec}"
    create(bs, topic, 1)
    lines = b"".join(b"key%d:value-%d\n" % (i % 13, i) for i in range(10000))
    r = run_kcat("-b", bs, "-P", "-t", topic, "-K", ":", "-z", codec, "-H", "src=kcat", "-X", "acks=all",
                 input=lines)
    assert r.returncode == 0, r.stderr
    r = run_kcat("-b", bs, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%k|%s|%o|%h\n", "-q")
    out = r.stdout.decode().splitlines()
    assert len(out) == 10000
    assert out[0] == "key0|value-0|0|src=kcat"
    assert out[-1] == f"key{9999 % 13}|value-9999|9999|src=kcat"
    assert len(kp_consume_all(bs, topic, 10000)) == 10000


@pytest.mark.usefixtures("java_client")
def test_seek_by_timestamp_java(broker):
    bs = broker.bootstrap_servers
    create(bs, "tsq", 1)
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bs)
    for i in range(10):
        p.send("tsq", value=b"x", timestamp_ms=1_700_000_000_000 + i * 1000, partition=0)
    p.flush()
    p.close()
    r = run_java("offsets-for-times", bs, "tsq", str(1_700_000_000_000 + 3500))[0]
    assert r["0"] == [4, 1_700_000_000_000 + 4000]  # Kafka: first offset with timestamp >= the target
    r = run_java("offsets-for-times", bs, "tsq", str(1_800_000_000_000))[0]
    assert r["0"] is None


# -- groups ---------------------------------------------------------------------------------------
@pytest.fixture
def group_broker(broker_factory):
    return broker_factory(overrides={"group.min.session.timeout.ms": "1000"})


@pytest.mark.usefixtures("java_client")
@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_java_group_scenario(group_broker, strategy):
    drivers.need("java")
    bs = group_broker.bootstrap_servers
    topic = f"jgrp-{strategy}"
    create(bs, topic, 6)
    run_group_scenario(bs, topic, f"jg-{strategy}",
                       lambda: ConsumerProc(drivers.java_argv("group", bs, topic, f"jg-{strategy}", strategy)))


def test_kafkajs_group_scenario(group_broker):
    drivers.need("node")
    bs = group_broker.bootstrap_servers
    create(bs, "jsgrp", 6)
    import os
    os.environ["KAFKITE_JS"] = str(drivers.JS_DIR)
    run_group_scenario(bs, "jsgrp", "jsg", lambda: ConsumerProc(drivers.node_argv("group", bs, "jsgrp", "jsg")),
                       session_timeout_s=6)
