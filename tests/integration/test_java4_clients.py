"""What the Java kafka-clients 4.x API adds over 3.9, against Kafkite with the real 4.3.0 client
(tests/clients/java/Kafka4Driver.java): a consumer subscribed with a SubscriptionPattern (KIP-848's broker-side
regex), the Admin's GROUP config resource, and Admin.listGroups (KIP-1043) with its type filter. The scenarios
every Java client runs are in the suites the `java_client` fixture runs twice (tests/conftest.py)."""
from __future__ import annotations

import json
import subprocess
import threading
import time

import pytest

from clients.drivers import java4_argv, need, run_java, run_java4
from clients.group_scenario import produce_batch
from test_consumer_group_clients import describe
from test_groups_clients import create


@pytest.fixture
def proc_broker():
    from kafkite.testing.process import BrokerProcess
    # heartbeats every 500 ms: a topic created or deleted reaches the consumer within a second
    with BrokerProcess(overrides={"group.consumer.heartbeat.interval.ms": "500",
                                  "group.consumer.min.heartbeat.interval.ms": "100"}) as b:
        yield b


class JavaMember:
    """The driver's regex-group consumer, its lines read in a thread: records and assignments."""

    def __init__(self, bs: str, pattern: str, group: str):
        self.proc = subprocess.Popen(java4_argv("regex-group", bs, pattern, group), stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        self.records: list[tuple[str, int, int]] = []
        self.assigned: list[list[str]] = []
        self.lines: list[dict] = []
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            if line.startswith("{"):
                d = json.loads(line)
                with self.lock:
                    self.lines.append(d)
                    if "rec" in d:
                        self.records.append(tuple(d["rec"]))
                    elif "assigned" in d:
                        self.assigned.append(d["assigned"])

    def wait(self, pred, what: str, timeout: float = 60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if pred():
                    return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        with self.lock:
            raise AssertionError(f"{what}: not within {timeout}s; exit {self.proc.poll()}, "
                                 f"{len(self.records)} records, the last lines {self.lines[-5:]}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()  # leaves the group, says {"closed": true}; the JVM may linger in its hook
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(5)


def test_a_subscription_pattern_is_resolved_by_the_broker_and_follows_topics(proc_broker):
    """Java 4.3's consumer.subscribe(SubscriptionPattern("j4rx-.*")) sends the regex as it is (ConsumerGroupDescribe
    shows it and no names); Kafkite resolves it: the matching topic's records are read, a topic created later is
    picked up, one that does not match is not, and a deleted topic leaves the assignment."""
    need("java4")
    bs = proc_broker.bootstrap_servers
    create(bs, "j4rx-a", 2)
    create(bs, "j4other", 1)
    produce_batch(bs, "j4rx-a", 0, 40)
    produce_batch(bs, "j4other", 0, 10)
    m = JavaMember(bs, "j4rx-.*", "g-j4rx")
    try:
        m.wait(lambda: len(m.records) >= 40, "the first topic's 40 records")
        d = describe(bs, "g-j4rx")
        assert d.error_code == 0 and [(x.subscribed_topic_regex, x.subscribed_topic_names) for x in d.members] == [
            ("j4rx-.*", [])]
        create(bs, "j4rx-b", 3)
        produce_batch(bs, "j4rx-b", 0, 30)
        m.wait(lambda: len(m.records) >= 70, "the new topic's 30 records")
        with m.lock:
            assert {t for t, _, _ in m.records} == {"j4rx-a", "j4rx-b"}
            assert len(set(m.records)) == len(m.records) == 70  # each record once
        from confluent_kafka.admin import AdminClient
        admin = AdminClient({"bootstrap.servers": bs})  # held: the future fails once the client is destroyed
        admin.delete_topics(["j4rx-a"])["j4rx-a"].result(30)
        m.wait(lambda: m.assigned and m.assigned[-1] == ["j4rx-b-0", "j4rx-b-1", "j4rx-b-2"],
               "the deleted topic's partitions leaving the assignment")
        m.stop()
        assert {"closed": True} in m.lines
        assert not [x for x in m.lines if "error" in x], [x for x in m.lines if "error" in x]
        # what it committed after each poll: the end of each partition of the topic left
        offsets = run_java("admin-group-offsets", bs, "g-j4rx")[0]["offsets"]
        b = {k: v for k, v in offsets.items() if k.startswith("j4rx-b:")}
        assert set(b) <= {"j4rx-b:0", "j4rx-b:1", "j4rx-b:2"} and sum(b.values()) == 30, offsets
    finally:
        m.stop()


def test_the_admins_group_config_resource(broker):
    """Java 4.3's Admin on ConfigResource(GROUP, g): incrementalAlterConfigs sets and deletes a group's
    consumer.session.timeout.ms and consumer.heartbeat.interval.ms, describeConfigs shows them as
    DYNAMIC_GROUP_CONFIG, and a value outside the broker's bounds is Kafka's InvalidConfigurationException."""
    need("java4")
    bs = broker.bootstrap_servers
    got = run_java4("group-configs", bs, "g-j4cfg", "consumer.session.timeout.ms=50000",
                    "consumer.heartbeat.interval.ms=6000")[0]
    assert got["configs"]["consumer.session.timeout.ms"] == {"value": "50000", "source": "DYNAMIC_GROUP_CONFIG"}
    assert got["configs"]["consumer.heartbeat.interval.ms"] == {"value": "6000", "source": "DYNAMIC_GROUP_CONFIG"}
    got = run_java4("group-configs", bs, "g-j4cfg", "--delete", "consumer.heartbeat.interval.ms")[0]
    assert got["configs"]["consumer.session.timeout.ms"]["source"] == "DYNAMIC_GROUP_CONFIG"
    hb = got["configs"]["consumer.heartbeat.interval.ms"]
    assert hb["source"] != "DYNAMIC_GROUP_CONFIG" and hb["value"] == "5000"  # the broker's default again
    bad = run_java4("group-configs", bs, "g-j4cfg", "consumer.session.timeout.ms=1")[0]
    assert bad["error"] == "InvalidConfigurationException", bad
    assert "consumer.session.timeout.ms must be greater than or equal to" in bad["message"], bad
    # the refused change left the group's value alone
    got = run_java4("group-configs", bs, "g-j4cfg")[0]
    assert got["configs"]["consumer.session.timeout.ms"] == {"value": "50000", "source": "DYNAMIC_GROUP_CONFIG"}


def test_admin_list_groups_by_type(proc_broker):
    """Java 4.3's Admin.listGroups (ListGroups v5): a classic group and a consumer group with their types, states
    and protocols; withTypes(CONSUMER) lists the consumer group only, withTypes(CLASSIC) the classic one only."""
    need("java4")
    from confluent_kafka import Consumer
    bs = proc_broker.bootstrap_servers
    create(bs, "j4lg", 2)
    consumers = []
    try:
        for group, protocol in (("g-j4-classic", "classic"), ("g-j4-consumer", "consumer")):
            c = Consumer({"bootstrap.servers": bs, "group.id": group, "group.protocol": protocol,
                          "auto.offset.reset": "earliest"})
            c.subscribe(["j4lg"])
            consumers.append(c)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(c.assignment() for c in consumers):
            for c in consumers:
                c.poll(0.1)
        assert all(c.assignment() for c in consumers)
        groups = {g["group"]: g for g in run_java4("list-groups", bs)[0]["groups"]}
        assert groups["g-j4-classic"] == {"group": "g-j4-classic", "type": "CLASSIC", "state": "STABLE",
                                          "protocol": "consumer"}
        assert groups["g-j4-consumer"] == {"group": "g-j4-consumer", "type": "CONSUMER", "state": "STABLE",
                                           "protocol": "consumer"}
        assert [g["group"] for g in run_java4("list-groups", bs, "--type", "consumer")[0]["groups"]] == [
            "g-j4-consumer"]
        assert [g["group"] for g in run_java4("list-groups", bs, "--type", "classic")[0]["groups"]] == [
            "g-j4-classic"]
    finally:
        for c in consumers:
            c.close()
