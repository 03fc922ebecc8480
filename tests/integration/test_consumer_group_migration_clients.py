"""The online upgrade and downgrade of a group with members (KIP-848's upgrade path) with real clients against
a broker process: two kafka-python (classic protocol) consumers share a 4-partition topic; a confluent-kafka
consumer with group.protocol=consumer joins the same group id, which becomes a consumer group; the classic
members rejoin through JoinGroup/SyncGroup and keep consuming, the partitions are spread over the three; when
the consumer-protocol member leaves, the group goes back to a classic group for the two classic members.
Every record is read exactly once across the three phases (offsets committed after each poll carry over);
with group.consumer.migration.policy=disabled the consumer-protocol member is refused as Kafka refuses it."""
from __future__ import annotations

import json
import subprocess
import threading
import time
from collections import Counter

import pytest

from clients.group_scenario import produce_batch
from helpers import ck_commit, kp_group_consumer
from test_consumer_group_clients import describe
from test_groups_clients import create

confluent_kafka = pytest.importorskip("confluent_kafka")
if confluent_kafka.libversion()[1] < 0x020a0000:
    pytest.skip("librdkafka < 2.10 has no group.protocol=consumer", allow_module_level=True)

FAST = {"group.min.session.timeout.ms": "1000", "group.initial.rebalance.delay.ms": "0",
        "group.consumer.min.heartbeat.interval.ms": "1000", "group.consumer.heartbeat.interval.ms": "1000"}


def classic_consumer(bs, group, topic):
    """A kafka-python consumer that knows the topic's partitions before it joins (helpers.kp_group_consumer)."""
    return kp_group_consumer(topic, bootstrap_servers=bs, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500)


def modern_consumer(bs, group, topic):
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    return c


class Reader(threading.Thread):
    """One consumer in a thread of its own (as an application runs it): poll, note what it read and its
    assignment, commit what it read right after the poll; closed by its own thread when told to stop."""

    def __init__(self, make, got: list, lock: threading.Lock):
        super().__init__(daemon=True)
        self.make, self.got, self.lock = make, got, lock
        self.assigned: set[int] = set()
        self.stop, self.closed, self.error = threading.Event(), threading.Event(), None

    def run(self):
        c = None
        try:
            c = self.make()
            while not self.stop.is_set():
                read = self.poll(c)
                with self.lock:
                    self.got += read
                    self.assigned = {tp.partition for tp in c.assignment()}
        except Exception as exc:  # reported by the test
            self.error = exc
        finally:
            if c is not None:
                c.close()
            self.closed.set()

    def poll(self, c):
        if hasattr(c, "consume"):  # confluent-kafka
            msgs = [m for m in c.consume(100, timeout=0.1) if not m.error()]
            if msgs:
                ck_commit(c)
            return [(m.partition(), m.offset()) for m in msgs]
        recs = [r for rs in c.poll(timeout_ms=100).values() for r in rs]
        if recs:
            c.commit()
        return [(r.partition, r.offset) for r in recs]

    def close(self):
        self.stop.set()
        assert self.closed.wait(30)


def wait_for(done, readers, got, timeout=60):
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        assert not [r.error for r in readers if r.error], [r.error for r in readers if r.error]
        time.sleep(0.05)
    assert done(), f"read {len(got)} records, {len(set(got))} distinct; " \
                   f"assigned {[sorted(r.assigned) for r in readers]}"


@pytest.fixture(scope="module")
def proc_broker():
    """One broker process for the module's librdkafka group consumers (each test its own topic and group)."""
    from kafkite.testing.process import BrokerProcess
    with BrokerProcess(overrides=FAST) as b:
        yield b


def test_a_classic_group_upgrades_online_to_a_consumer_group_and_downgrades_back(proc_broker):
    bs = proc_broker.bootstrap_servers
    create(bs, "mig", 4)
    produced = set(produce_batch(bs, "mig", 0, 200))
    got: list = []
    lock = threading.Lock()
    classic = [Reader(lambda: classic_consumer(bs, "gmig", "mig"), got, lock) for _ in range(2)]
    modern = Reader(lambda: modern_consumer(bs, "gmig", "mig"), got, lock)
    everyone = classic + [modern]
    try:
        # 1. a classic group: the two kafka-python members read everything (the second starts once the first
        # has its partitions: two kafka-python consumers of one process joining at once at times stall, one
        # of them never completing its SyncGroup, with or without this change)
        classic[0].start()
        wait_for(lambda: len(classic[0].assigned) == 4, classic, got)
        classic[1].start()
        wait_for(lambda: set(got) == produced and all(len(r.assigned) == 2 for r in classic), classic, got)
        assert describe(bs, "gmig").error_code == 69  # a classic group, not a consumer group

        # 2. a consumer-protocol member joins: a consumer group of three; the classic members keep reading
        modern.start()
        produced |= set(produce_batch(bs, "mig", 200, 200))

        def spread():
            owned = [r.assigned for r in everyone]
            return all(owned) and sorted(p for o in owned for p in o) == [0, 1, 2, 3]
        wait_for(lambda: set(got) == produced and spread(), everyone, got)
        d = describe(bs, "gmig")
        assert (d.error_code, d.group_state) == (0, "Stable")
        assert sorted(m.member_type for m in d.members) == [0, 0, 1]  # two classic members, one consumer
        produced |= set(produce_batch(bs, "mig", 400, 200))
        wait_for(lambda: set(got) == produced, everyone, got)

        # 3. the consumer-protocol member leaves: a classic group again for the two classic members
        modern.close()
        produced |= set(produce_batch(bs, "mig", 600, 200))
        wait_for(lambda: set(got) == produced and all(len(r.assigned) == 2 for r in classic), classic, got)
        assert describe(bs, "gmig").error_code == 69  # classic again

        with lock:
            dupes = [tp for tp, n in Counter(got).items() if n > 1]
            assert not dupes, f"read twice: {dupes[:10]}"
            assert len(got) == len(produced) == 800
    finally:
        for r in everyone:
            if r.is_alive():
                r.close()


def test_the_upgrade_disabled_refuses_the_consumer_protocol_member(broker_factory):
    """group.consumer.migration.policy=disabled: the ConsumerGroupHeartbeat gets GROUP_ID_NOT_FOUND with Kafka's
    message, and the classic group goes on (an in-process broker: no librdkafka group consumer here)."""
    from kafkite.testing.wire_client import WireClient
    from kafkite.wire.consumer_group_api import ConsumerGroupHeartbeatRequest
    broker = broker_factory(overrides={**FAST, "group.consumer.migration.policy": "disabled"})
    bs = broker.bootstrap_servers
    create(bs, "mig", 4)
    produced = set(produce_batch(bs, "mig", 0, 40))
    got: list = []
    reader = Reader(lambda: classic_consumer(bs, "gdis", "mig"), got, threading.Lock())
    reader.start()
    try:
        wait_for(lambda: set(got) == produced, [reader], got)
        with WireClient.connect(bs) as w:
            for _ in range(100):
                h = w.request(ConsumerGroupHeartbeatRequest(
                    group_id="gdis", member_id="m-1", member_epoch=0, instance_id=None, rack_id=None,
                    rebalance_timeout_ms=5000, subscribed_topic_names=["mig"], subscribed_topic_regex=None,
                    server_assignor=None, topic_partitions=[]), 1)
                if h.error_code not in (14, 15, 16):
                    break
                time.sleep(0.05)
        assert (h.error_code, h.error_message) == (69, "Group gdis is not a consumer group.")
        produced |= set(produce_batch(bs, "mig", 40, 40))
        wait_for(lambda: set(got) == produced, [reader], got)
        assert len(got) == 80
    finally:
        reader.close()


def test_a_java_cooperative_classic_member_revokes_for_a_consumer_protocol_member(proc_broker, java_client):
    """Java kafka-clients 3.9 and 4.3 with cooperative-sticky (subscriptions of version 3 that report what the member
    owns) in a group a librdkafka consumer-protocol member joins: the Java member gives up half of its
    partitions without stopping (revoke, then rejoin), the new member gets them once let go; when the Java
    member leaves, the consumer-protocol member takes everything. Every record is read once (both commit after
    each poll)."""
    from clients.drivers import java_argv, need
    need("java")
    bs = proc_broker.bootstrap_servers
    topic, group = f"migj-{java_client}", f"gmigj-{java_client}"  # the broker serves the module's tests
    create(bs, topic, 4)
    produced = set(produce_batch(bs, topic, 0, 200))
    got: list = []
    lock = threading.Lock()
    # the driver's long-running member: commits after each poll, leaves the group on SIGTERM
    proc = subprocess.Popen(java_argv("group", bs, topic, group, "cooperative-sticky"),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    java_got: list = []

    def read_java():
        for line in proc.stdout:
            if line.startswith("{"):
                rec = json.loads(line)
                if "rec" in rec:
                    with lock:
                        got.append(tuple(rec["rec"]))
                        java_got.append(tuple(rec["rec"]))
                elif "commit_failed" in rec or "closed" in rec:
                    java_got.append(rec)  # reported by the assertions below
    t = threading.Thread(target=read_java, daemon=True)
    t.start()
    modern = Reader(lambda: modern_consumer(bs, group, topic), got, lock)
    try:
        wait_for(lambda: set(got) == produced, [], got)  # the Java member alone read everything
        modern.start()
        wait_for(lambda: len(modern.assigned) == 2, [modern], got)  # half of the partitions, once let go
        d = describe(bs, group)
        assert sorted(m.member_type for m in d.members) == [0, 1]
        produced |= set(produce_batch(bs, topic, 200, 200))
        wait_for(lambda: set(got) == produced, [modern], got)
        with lock:
            assert not [x for x in java_got if isinstance(x, dict)], "a Java commit failed"
            assert 200 < len(java_got) < 400  # the Java member kept reading its share
        proc.terminate()  # it leaves the group, then says "closed" (its JVM lingers in a shutdown hook: killed)
        wait_for(lambda: {"closed": True} in java_got, [modern], got)
        proc.kill()
        wait_for(lambda: len(modern.assigned) == 4, [modern], got)
        produced |= set(produce_batch(bs, topic, 400, 100))
        wait_for(lambda: set(got) == produced, [modern], got)
        with lock:
            dupes = [tp for tp, n in Counter(got).items() if n > 1]
            assert not dupes, f"read twice: {dupes[:10]}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if modern.is_alive():
            modern.close()
