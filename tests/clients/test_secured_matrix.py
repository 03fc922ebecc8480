"""The client matrix on a secured broker (issue "Security as Kafka has it": item 6 and its client acceptance):
confluent-kafka, kafka-python, aiokafka, kcat, kafkajs and the Java client each produce, group-consume and commit
over SASL_SSL with SCRAM-SHA-512 and over SSL with a client certificate, with the configs that
`kafkite.testing.secured.SecuredBroker` hands out; a wrong password fails fast in each with its own
authentication error. One broker (a child process) for the module; ACLs are on, the user is the ordinary `alice`.
Also confluent-kafka and kafka-python over SASL_PLAINTEXT with PLAIN and with OAUTHBEARER (unsecured tokens)."""
from __future__ import annotations

import asyncio
import logging
import time

import pytest

from clients import drivers
from clients.drivers import records, run_java, run_kcat, run_node, summary
from helpers import kp_group_consumer

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
    from kafka import KafkaProducer
    topic, group = f"kp-{listener}", f"g-kp-{listener}"
    p = KafkaProducer(**sb.kafka_python(listener=listener))
    for i in range(N):
        p.send(topic, b"kp-%d" % i, partition=0)
    p.flush(30)
    p.close()
    c = kp_group_consumer(topic, **sb.kafka_python(listener=listener), group_id=group, auto_offset_reset="earliest",
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
def test_java(sb, listener, java_client):
    drivers.need("java")
    topic, group = f"java-{java_client}-{listener}", f"g-java-{java_client}-{listener}"
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
    assert time.monotonic() - t0 < bound, time.monotonic() - t0

    # kafka-python: the bootstrap ends in its timeout, each refusal logged as SaslAuthenticationFailedError
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as KPError
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="kafka"), pytest.raises(KPError):
        KafkaProducer(**sb.kafka_python(password="wrong"), bootstrap_timeout_ms=5000)
    assert f"SaslAuthenticationFailedError: {WRONG_SCRAM}" in caplog.text
    assert time.monotonic() - t0 < bound, time.monotonic() - t0

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
    assert time.monotonic() - t0 < bound, time.monotonic() - t0

    # kcat: its producer ends at once ("All broker connections are down: terminating") after librdkafka's SASL
    # authentication error (`-L` instead waits out its metadata timeout, -m, while librdkafka reconnects)
    if drivers.kcat_available():
        t0 = time.monotonic()
        r = run_kcat(*sb.kcat_args(password="wrong"), "-P", "-t", "nope", input=b"x\n", timeout=bound)
        assert r.returncode != 0 and f"SASL authentication error: {WRONG_SCRAM}".encode() in r.stderr, r.stderr
        assert time.monotonic() - t0 < bound, time.monotonic() - t0

    # the Java client: SaslAuthenticationException
    if drivers.java_available():
        props = sb.java(password="wrong")
        bs = props.pop("bootstrap.servers")
        t0 = time.monotonic()
        out = run_java("produce", bs, "nope", 1, props=props, timeout=bound, check=False)
        text = str(out)
        assert "SaslAuthenticationException" in text and WRONG_SCRAM in text, out
        assert time.monotonic() - t0 < bound, time.monotonic() - t0

    # kafkajs: KafkaJSSASLAuthenticationError
    if drivers.node_available():
        config = sb.kafkajs(password="wrong")
        bs = ",".join(config.pop("brokers"))
        t0 = time.monotonic()
        out = run_node("produce", bs, "nope", 1, config=config, timeout=bound, check=False)
        assert out and out[-1].get("error") == "KafkaJSSASLAuthenticationError", out
        assert time.monotonic() - t0 < bound, time.monotonic() - t0


# -- SASL_PLAINTEXT with PLAIN and with OAUTHBEARER: confluent-kafka and kafka-python --------------------------------
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
OAUTH_JAAS = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
              'unsecuredLoginStringClaim_sub="admin";')


@pytest.fixture(scope="module")
def plain_oauth_broker():
    from kafkite.testing.process import BrokerProcess
    with BrokerProcess(overrides={"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                                  "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
                                  "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
                                  "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
                                  "group.min.session.timeout.ms": "1000"}) as b:
        yield b


def _unsecured_jws(sub: str) -> str:
    import base64
    import json

    def part(d):
        return base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()
    now = int(time.time())
    return f"{part({'alg': 'none'})}.{part({'sub': sub, 'iat': now, 'exp': now + 3600})}."


@pytest.mark.parametrize("mech", ["PLAIN", "OAUTHBEARER"])
def test_confluent_and_kafka_python_over_sasl_plaintext(plain_oauth_broker, mech):
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaProducer
    from kafka.net.sasl.oauth import AbstractTokenProvider
    bs = plain_oauth_broker.bootstrap_servers

    class Unsecured(AbstractTokenProvider):
        def token(self):
            return _unsecured_jws("alice")
    if mech == "PLAIN":
        ck = {"sasl.mechanisms": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"}
        kp = {"sasl_mechanism": "PLAIN", "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"}
    else:
        ck = {"sasl.mechanisms": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
              "sasl.oauthbearer.config": "principal=alice"}
        kp = {"sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": Unsecured()}
    ck = {"bootstrap.servers": bs, "security.protocol": "SASL_PLAINTEXT", "log_level": 0, **ck}
    kp = {"bootstrap_servers": bs, "security_protocol": "SASL_PLAINTEXT", **kp}
    topic = f"sasl-pt-{mech}"
    p = Producer(ck)
    for i in range(N):
        p.produce(topic, value=b"ck-%d" % i, partition=0)
    assert p.flush(30) == 0
    c = Consumer({**ck, "group.id": f"g-ck-{mech}", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got, deadline = [], time.monotonic() + 30
    while len(got) < N and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None:
            assert m.error() is None, m.error()
            got.append(m.value())
    c.commit(asynchronous=False)
    c.close()
    assert got == [b"ck-%d" % i for i in range(N)]
    prod = KafkaProducer(**kp)
    for i in range(N):
        prod.send(topic, b"kp-%d" % i, partition=0)
    prod.flush(30)
    prod.close()
    kc = kp_group_consumer(topic, **kp, group_id=f"g-kp-{mech}", auto_offset_reset="earliest", enable_auto_commit=False)
    got, deadline = [], time.monotonic() + 30
    while len(got) < 2 * N and time.monotonic() < deadline:
        got += [r.value for rs in kc.poll(500).values() for r in rs]
    kc.commit()
    kc.close()
    assert len(got) == 2 * N
    admin = AdminClient(ck)
    for group, want in ((f"g-ck-{mech}", N), (f"g-kp-{mech}", 2 * N)):
        fut = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])])
        assert [tp.offset for tp in fut[group].result(30).topic_partitions] == [want]


# -- the fixture ------------------------------------------------------------------------------------------------------
def test_the_fixture_its_super_user_and_its_ordinary_user(kafkite_secured_broker, tmp_path):
    from kafka.admin import ACLFilter, ACLOperation, ACLPermissionType, KafkaAdminClient, ResourcePatternFilter
    from kafka.admin import ResourceType, ACLResourcePatternType
    from kafka.errors import ClusterAuthorizationFailedError
    sb = kafkite_secured_broker
    text = sb.java_properties_file(tmp_path / "admin.properties", user="admin", listener="SSL").read_text()
    assert "security.protocol=SSL\n" in text and "ssl.keystore.type=PEM\n" in text
    flt = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                    ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))
    # admin (a super user, here by its certificate) sees alice's ACLs; alice may not describe ACLs
    admin = KafkaAdminClient(**sb.kafka_python(user="admin", listener="SSL"))
    acls, _ = admin.describe_acls(flt)
    admin.close()
    assert {(a.principal, a.resource_pattern.resource_type.name, a.resource_pattern.resource_name) for a in acls} == {
        ("User:alice", "TOPIC", "*"), ("User:alice", "GROUP", "*"), ("User:alice", "TRANSACTIONAL_ID", "*"),
        ("User:alice", "CLUSTER", "kafka-cluster")}
    alice = KafkaAdminClient(**sb.kafka_python())
    with pytest.raises(ClusterAuthorizationFailedError):
        alice.describe_acls(flt)
    alice.close()
