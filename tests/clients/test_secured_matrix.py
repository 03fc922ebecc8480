"""The client matrix on a secured broker (issue "Security as Kafka has it": item 6 and its client acceptance):
confluent-kafka, kafka-python, aiokafka, kcat, kafkajs and the Java client each produce, group-consume and commit
over SASL_SSL with SCRAM-SHA-512 and over SSL with a client certificate, with the configs that
`kafkite.testing.secured.SecuredBroker` hands out; a wrong password fails fast in each with its own
authentication error. One broker (a child process) for the module; ACLs are on, the user is the ordinary `alice`."""
from __future__ import annotations

import asyncio
import logging
import time

import pytest

from clients import drivers
from clients.drivers import records, run_java, run_kcat, run_node, summary

pytest.importorskip("trustme", reason="trustme is not installed")
LISTENERS = ("SASL_SSL", "SSL")
N = 20
WRONG_SCRAM = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"


@pytest.fixture(scope="module")
def sb():
    from kafkite.testing.secured import SecuredBroker
    with SecuredBroker() as b:
        yield b


def committed(sb, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets, read by the super user through confluent-kafka's admin client."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({**sb.confluent(user="admin"), "log_level": 0})
    fut = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])])
    res = fut[group].result(30)
    return {tp.partition: tp.offset for tp in res.topic_partitions if tp.offset >= 0}


def ck_produce(sb, listener, topic, prefix):
    from confluent_kafka import Producer
    p = Producer({**sb.confluent(listener=listener), "log_level": 0})
    for i in range(N):
        p.produce(topic, value=b"%s-%d" % (prefix, i), partition=0)
    assert p.flush(30) == 0


# -- Python clients ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("listener", LISTENERS)
def test_confluent_kafka(sb, listener):
    from confluent_kafka import Consumer
    topic, group = f"ck-{listener}", f"g-ck-{listener}"
    ck_produce(sb, listener, topic, b"ck")
    c = Consumer({**sb.confluent(listener=listener), "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "log_level": 0})
    c.subscribe([topic])
    got, deadline = [], time.monotonic() + 30
    while len(got) < N and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None:
            assert m.error() is None, m.error()
            got.append(m.value())
    assert got == [b"ck-%d" % i for i in range(N)]
    c.commit(asynchronous=False)
    c.close()
    assert committed(sb, group, topic) == {0: N}


@pytest.mark.parametrize("listener", LISTENERS)
def test_kafka_python(sb, listener):
    from kafka import KafkaConsumer, KafkaProducer
    topic, group = f"kp-{listener}", f"g-kp-{listener}"
    p = KafkaProducer(**sb.kafka_python(listener=listener))
    for i in range(N):
        p.send(topic, b"kp-%d" % i, partition=0)
    p.flush(30)
    p.close()
    c = KafkaConsumer(topic, **sb.kafka_python(listener=listener), group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False)
    got, deadline = [], time.monotonic() + 30
    while len(got) < N and time.monotonic() < deadline:
        got += [r.value for rs in c.poll(500).values() for r in rs]
    assert got == [b"kp-%d" % i for i in range(N)]
    c.commit()
    c.close()
    assert committed(sb, group, topic) == {0: N}


@pytest.mark.parametrize("listener", LISTENERS)
def test_aiokafka(sb, listener):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    topic, group = f"aio-{listener}", f"g-aio-{listener}"

    async def main():
        p = AIOKafkaProducer(**sb.aiokafka(listener=listener))
        await p.start()
        try:
            for i in range(N):
                await p.send_and_wait(topic, b"aio-%d" % i, partition=0)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(topic, **sb.aiokafka(listener=listener), group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False)
        await c.start()
        try:
            got = []
            async with asyncio.timeout(30):
                while len(got) < N:
                    got += [r.value for rs in (await c.getmany(timeout_ms=500)).values() for r in rs]
            await c.commit()
        finally:
            await c.stop()
        return got

    assert asyncio.run(main()) == [b"aio-%d" % i for i in range(N)]
    assert committed(sb, group, topic) == {0: N}


# -- kcat, the Java client, kafkajs --------------------------------------------------------------------------------
@pytest.mark.parametrize("listener", LISTENERS)
def test_kcat(sb, listener):
    drivers.need("kcat")
    topic, group = f"kcat-{listener}", f"g-kcat-{listener}"
    args = sb.kcat_args(listener=listener)
    r = run_kcat(*args, "-P", "-t", topic, "-p", "0", input=b"".join(b"kcat-%d\n" % i for i in range(N)))
    assert r.returncode == 0, r.stderr
    # a balanced (group) consumer to the end of the partition; its close commits what it consumed
    r = run_kcat(*args, "-G", group, "-X", "auto.offset.reset=earliest", "-e", "-q", topic, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split() == ["kcat-%d" % i for i in range(N)]
    assert committed(sb, group, topic) == {0: N}


@pytest.mark.parametrize("listener", LISTENERS)
def test_java(sb, listener):
    drivers.need("java")
    topic, group = f"java-{listener}", f"g-java-{listener}"
    props = sb.java(listener=listener)
    bs = props.pop("bootstrap.servers")
    s = summary(run_java("produce", bs, topic, N, "--partition", "0", props=props, timeout=90))
    assert s["acked"] == N and s["errors"] == 0, s
    lines = run_java("consume-group", bs, topic, group, N, "--commit", props=props, timeout=90)
    s = summary(lines)
    assert len(records(lines)) == N and s["committed"] == {"0": N}, s
    assert committed(sb, group, topic) == {0: N}


@pytest.mark.parametrize("listener", LISTENERS)
def test_kafkajs(sb, listener):
    drivers.need("node")
    topic, group = f"js-{listener}", f"g-js-{listener}"
    config = sb.kafkajs(listener=listener)
    bs = ",".join(config.pop("brokers"))
    s = summary(run_node("produce", bs, topic, N, "--partition", "0", config=config, timeout=90))
    assert s["acked"] == N and s["errors"] == 0, s
    lines = run_node("consume-group", bs, topic, group, N, "--commit", config=config, timeout=90)
    s = summary(lines)
    assert len(records(lines)) == N and s["committed"] == {"0": N}, s
    assert committed(sb, group, topic) == {0: N}


# -- a wrong password fails fast, with each client's authentication error -------------------------------------------
def test_wrong_password_fails_fast_in_every_client(sb, caplog):
    from confluent_kafka import KafkaError, KafkaException, Producer
    bound = 30

    # confluent-kafka: the error callback gets _AUTHENTICATION with Kafka's message
    t0 = time.monotonic()
    errors: list = []
    p = Producer({**sb.confluent(password="wrong"), "error_cb": errors.append, "log_level": 0})
    while not errors and time.monotonic() - t0 < bound:
        try:
            p.list_topics(timeout=0.5)
        except KafkaException:
            pass
        p.poll(0.1)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION and WRONG_SCRAM in errors[0].str(), errors
    assert time.monotonic() - t0 < bound

    # kafka-python: the bootstrap ends in its timeout, each refusal logged as SaslAuthenticationFailedError
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as KPError
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="kafka"), pytest.raises(KPError):
        KafkaProducer(**sb.kafka_python(password="wrong"), bootstrap_timeout_ms=5000)
    assert f"SaslAuthenticationFailedError: {WRONG_SCRAM}" in caplog.text
    assert time.monotonic() - t0 < bound

    # aiokafka: start() gives up the bootstrap at once (KafkaConnectionError), having logged the refusal
    caplog.clear()
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError as AIOError

    async def aio():
        prod = AIOKafkaProducer(**sb.aiokafka(password="wrong"), request_timeout_ms=10000)
        try:
            await prod.start()
        finally:
            await prod.stop()
    t0 = time.monotonic()
    with caplog.at_level(logging.ERROR, logger="aiokafka"), pytest.raises(AIOError):
        asyncio.run(aio())
    assert f"SaslAuthenticationFailed: {WRONG_SCRAM}" in caplog.text
    assert time.monotonic() - t0 < bound

    # kcat: exits non-zero with librdkafka's authentication failure
    if drivers.kcat_available():
        t0 = time.monotonic()
        r = run_kcat(*sb.kcat_args(password="wrong"), "-L", "-m", "20", timeout=bound)
        assert r.returncode != 0 and b"Authentication failed" in r.stderr + r.stdout, r.stderr
        assert time.monotonic() - t0 < bound

    # the Java client: SaslAuthenticationException
    if drivers.java_available():
        props = sb.java(password="wrong")
        bs = props.pop("bootstrap.servers")
        t0 = time.monotonic()
        out = run_java("produce", bs, "nope", 1, props=props, timeout=bound, check=False)
        text = str(out)
        assert "SaslAuthenticationException" in text and WRONG_SCRAM in text, out
        assert time.monotonic() - t0 < bound

    # kafkajs: KafkaJSSASLAuthenticationError
    if drivers.node_available():
        config = sb.kafkajs(password="wrong")
        bs = ",".join(config.pop("brokers"))
        t0 = time.monotonic()
        out = run_node("produce", bs, "nope", 1, config=config, timeout=bound, check=False)
        assert out and out[-1].get("error") == "KafkaJSSASLAuthenticationError", out
        assert time.monotonic() - t0 < bound
