"""KIP-848 regex subscriptions with a real client: confluent-kafka (librdkafka >= 2.10) with
group.protocol=consumer subscribing to "^rxc-.*" sends the pattern as SubscribedTopicRegex, "(^rxc-.*)" (it does not
resolve it itself: ConsumerGroupDescribe shows the regex and no names), a topic created after the
consumer started is picked up (its records are consumed), and a deleted topic's partitions leave the
assignment."""
from __future__ import annotations

import time

import pytest

from clients.group_scenario import produce_batch
from test_consumer_group_clients import describe
from test_groups_clients import create

confluent_kafka = pytest.importorskip("confluent_kafka")
if confluent_kafka.libversion()[1] < 0x020a0000:
    pytest.skip("librdkafka < 2.10 has no group.protocol=consumer", allow_module_level=True)


@pytest.fixture
def proc_broker():
    from kafkite.testing.process import BrokerProcess
    # heartbeats every 500 ms: a topic created or deleted reaches the consumer within a second
    with BrokerProcess(overrides={"group.consumer.heartbeat.interval.ms": "500",
                                  "group.consumer.min.heartbeat.interval.ms": "100"}) as b:
        yield b


def consume_until(c, pred, timeout, got):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for m in c.consume(200, timeout=0.1):
            if not m.error():
                got.add((m.topic(), m.partition(), m.offset()))
        if pred():
            return
    raise AssertionError(f"timed out; got {len(got)} records, assignment {c.assignment()}")


def test_a_regex_subscription_picks_up_a_topic_created_after_the_consumer_started(proc_broker):
    from confluent_kafka import Consumer
    bs = proc_broker.bootstrap_servers
    create(bs, "rxc-a", 2)
    create(bs, "other", 1)
    produce_batch(bs, "rxc-a", 0, 50)
    produce_batch(bs, "other", 0, 10)
    c = Consumer({"bootstrap.servers": bs, "group.id": "grx", "group.protocol": "consumer",
                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["^rxc-.*"])
        got: set = set()
        consume_until(c, lambda: len(got) >= 50, 60, got)
        d = describe(bs, "grx")
        # librdkafka wraps each pattern in parentheses (several are joined with "|")
        assert d.error_code == 0 and [m.subscribed_topic_regex for m in d.members] == ["(^rxc-.*)"]
        assert [m.subscribed_topic_names for m in d.members] == [[]]
        create(bs, "rxc-b", 3)
        produce_batch(bs, "rxc-b", 0, 30)
        consume_until(c, lambda: len(got) >= 80, 60, got)
        assert {t for t, _, _ in got} == {"rxc-a", "rxc-b"} and len(got) == 80
        d = describe(bs, "grx")
        assert sorted(tp.topic_name for m in d.members for tp in m.assignment.topic_partitions) == [
            "rxc-a", "rxc-b"]
        # the first topic deleted: its partitions leave the consumer's assignment, the new topic's stay
        from confluent_kafka.admin import AdminClient
        admin = AdminClient({"bootstrap.servers": bs})
        admin.delete_topics(["rxc-a"])["rxc-a"].result(30)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and {(tp.topic, tp.partition) for tp in c.assignment()} != {
                ("rxc-b", p) for p in range(3)}:
            c.poll(0.1)
        assert {(tp.topic, tp.partition) for tp in c.assignment()} == {("rxc-b", p) for p in range(3)}
        d = describe(bs, "grx")
        assert sorted((tp.topic_name, sorted(tp.partitions)) for m in d.members
                      for tp in m.assignment.topic_partitions) == [("rxc-b", [0, 1, 2])]
    finally:
        c.close()


def test_several_patterns_and_a_name_make_one_subscription(proc_broker):
    """librdkafka joins its patterns into one regex, "(^a.*)|(^b.*)", and sends the plain names beside it:
    the member gets the union -- the named topic in the first answer, the regex's topics at a later heartbeat,
    as Kafka 4 resolves a new regex after the heartbeat in its executor (librdkafka's own test
    0045_resubscribe_with_regex expects exactly these two assignments)."""
    from confluent_kafka import Consumer
    bs = proc_broker.bootstrap_servers
    for t in ("a1", "b1", "plain", "c1"):
        create(bs, t, 1)
    c = Consumer({"bootstrap.servers": bs, "group.id": "gx", "group.protocol": "consumer"})
    try:
        assigns = []
        c.subscribe(["^a.*", "^b.*", "plain"],
                    on_assign=lambda _c, ps: assigns.append(sorted(tp.topic for tp in ps)))
        deadline = time.monotonic() + 30
        while len(c.assignment()) < 3 and time.monotonic() < deadline:
            c.poll(0.1)
        assert sorted(tp.topic for tp in c.assignment()) == ["a1", "b1", "plain"]
        assert assigns == [["plain"], ["a1", "b1"]]
        d = describe(bs, "gx")
        assert [(m.subscribed_topic_regex, m.subscribed_topic_names) for m in d.members] == [
            ("(^a.*)|(^b.*)", ["plain"])]
    finally:
        c.close()
