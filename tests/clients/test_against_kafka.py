"""The same scenarios against Kafkite and, where a Docker engine is available, against Apache Kafka
(testcontainers). They assert Kafka's behaviour, so both targets must pass them."""
from __future__ import annotations

import shutil
import subprocess
import time
import uuid

import pytest

from helpers import ck_consume_all, ck_produce, expected_payloads, kp_consume_all, make_records, payloads


def docker_engine() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True).returncode == 0


@pytest.fixture(scope="module", params=["kafkite", "apache-kafka"])
def target(request):
    if request.param == "kafkite":
        from kafkite.testing.runner import BrokerThread
        with BrokerThread() as b:
            yield b.bootstrap_servers
        return
    if not docker_engine():
        pytest.skip("no Docker engine on this machine: the Apache Kafka (testcontainers) run is skipped")
    try:
        from testcontainers.kafka import KafkaContainer
    except ImportError:
        pytest.skip("testcontainers is not installed")
    with KafkaContainer() as kafka:
        yield kafka.get_bootstrap_server()


def name(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_admin_errors(target):
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import InvalidTopicError, TopicAlreadyExistsError, UnknownTopicOrPartitionError
    a = KafkaAdminClient(bootstrap_servers=target)
    t = name("adm")
    a.create_topics([NewTopic(t, 2, 1)])
    with pytest.raises(TopicAlreadyExistsError):
        a.create_topics([NewTopic(t, 2, 1)])
    with pytest.raises(InvalidTopicError):
        a.create_topics([NewTopic("bad name", 1, 1)])
    a.delete_topics([t])
    with pytest.raises(UnknownTopicOrPartitionError):
        a.delete_topics([t])
    a.close()


def test_produce_consume_across_clients(target):
    from kafka.admin import KafkaAdminClient, NewTopic
    t = name("x")
    a = KafkaAdminClient(bootstrap_servers=target)
    a.create_topics([NewTopic(t, 3, 1)])
    a.close()
    recs = make_records(1000, prefix="tc")
    ck_produce(target, t, recs, compression="lz4")
    got = ck_consume_all(target, t, 1000)
    assert payloads(got) == expected_payloads(recs)
    assert sorted(got) == sorted(kp_consume_all(target, t, 1000))


def test_offsets_for_times(target):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic
    t = name("ts")
    a = KafkaAdminClient(bootstrap_servers=target)
    a.create_topics([NewTopic(t, 1, 1)])
    a.close()
    p = KafkaProducer(bootstrap_servers=target)
    base = int(time.time() * 1000) - 60_000
    for i in range(10):
        p.send(t, value=b"x", timestamp_ms=base + i * 1000, partition=0)
    p.flush()
    p.close()
    c = KafkaConsumer(bootstrap_servers=target)
    tp = TopicPartition(t, 0)
    found = c.offsets_for_times({tp: base + 3500})[tp]
    assert (found.offset, found.timestamp) == (4, base + 4000)
    assert c.offsets_for_times({tp: base + 60_000})[tp] is None
    c.close()


def test_simple_consumer_commit_and_fetch(target):
    from confluent_kafka import Consumer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic
    t = name("cm")
    a = KafkaAdminClient(bootstrap_servers=target)
    a.create_topics([NewTopic(t, 2, 1)])
    c = Consumer({"bootstrap.servers": target, "group.id": name("g")})
    c.commit(offsets=[TopicPartition(t, 0, 5), TopicPartition(t, 1, 9)], asynchronous=False)
    got = c.committed([TopicPartition(t, 0), TopicPartition(t, 1)], timeout=30)
    assert [x.offset for x in got] == [5, 9]
    c.close()
    a.close()
