"""Classic and consumer groups of one id, one after the other, as Kafka 4's group coordinator converts empty
groups: an empty consumer group taken by a classic JoinGroup becomes a classic group with its offsets, an
empty classic group taken by a ConsumerGroupHeartbeat becomes a consumer group with its offsets -- with real
clients (confluent-kafka with group.protocol=consumer, kafka-python's classic consumer) against a broker
process; kafka-python's classic group and a librdkafka consumer group side by side on one topic; and
`group.consumer.migration.policy` taken with Kafka's values and check."""
from __future__ import annotations

import threading
import time

import pytest

from clients.group_scenario import produce_batch
from test_consumer_group_clients import describe
from test_groups_clients import create
from helpers import ck_commit, kp_group_consumer

confluent_kafka = pytest.importorskip("confluent_kafka")
if confluent_kafka.libversion()[1] < 0x020a0000:
    pytest.skip("librdkafka < 2.10 has no group.protocol=consumer", allow_module_level=True)


@pytest.fixture
def proc_broker():
    from kafkite.testing.process import BrokerProcess
    with BrokerProcess() as b:
        yield b


def read_with_librdkafka(bs, group, topic, want, timeout=60):
    """Consume with a consumer-protocol member until `want` records, committing; close (the group empties)."""
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "group.protocol": "consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(got) < want and time.monotonic() < deadline:
            msgs = [m for m in c.consume(100, timeout=0.1) if not m.error()]
            if msgs:
                got += [(m.partition(), m.offset()) for m in msgs]
                ck_commit(c)
        return got
    finally:
        c.close()


def read_with_kafka_python(bs, group, topic, want, timeout=60):
    c = kp_group_consumer(topic, bootstrap_servers=bs, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False)
    got = []
    try:
        deadline = time.monotonic() + timeout
        while len(got) < want and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=100).values():
                got += [(r.partition, r.offset) for r in recs]
            if got:
                c.commit()
        return got
    finally:
        c.close()


def test_a_group_goes_consumer_then_classic_then_consumer_with_its_offsets(proc_broker):
    bs = proc_broker.bootstrap_servers
    create(bs, "conv", 3)
    first = set(produce_batch(bs, "conv", 0, 60))
    got = read_with_librdkafka(bs, "gconv", "conv", 60)
    assert set(got) == first
    assert describe(bs, "gconv").group_state == "Empty"

    # a classic consumer takes the empty consumer group: it starts from the committed offsets
    second = set(produce_batch(bs, "conv", 60, 30))
    got = read_with_kafka_python(bs, "gconv", "conv", 30)
    assert set(got) == second  # nothing of the first 60 again
    d = describe(bs, "gconv")  # a classic group now, empty once its consumer left
    assert (d.error_code, d.error_message) == (69, "Group gconv is not a consumer group.")

    # and back: the empty classic group is taken by a consumer-protocol member, offsets and all
    third = set(produce_batch(bs, "conv", 90, 30))
    got = read_with_librdkafka(bs, "gconv", "conv", 30)
    assert set(got) == third
    assert describe(bs, "gconv").error_code == 0


@pytest.mark.parametrize("value,ok", [("bidirectional", True), ("UPGRADE", True), ("Downgrade", True),
                                      ("disabled", True), ("sideways", False)])
def test_the_migration_policy_takes_kafkas_values_case_insensitively(value, ok):
    from kafkite.config import BrokerConfig, ConfigError
    if ok:
        cfg = BrokerConfig({"group.consumer.migration.policy": value})  # checked when made
        from kafkite.coordinator.coordinator import Config
        assert Config.from_kafka({**{k: cfg.get(k) for k in (
            "group.min.session.timeout.ms", "group.max.session.timeout.ms", "group.initial.rebalance.delay.ms",
            "group.max.size", "offsets.retention.minutes", "offsets.retention.check.interval.ms",
            "offset.metadata.max.bytes", "offsets.topic.num.partitions", "group.consumer.migration.policy")}}
        ).consumer_migration_policy == value.lower()
    else:
        with pytest.raises(ConfigError, match="Invalid value sideways for configuration group.consumer.migration."
                                              "policy: String must be one of \\(case insensitive\\): "
                                              "bidirectional, upgrade, downgrade, disabled"):
            BrokerConfig({"group.consumer.migration.policy": value})


def test_kafka_python_classic_consumers_beside_a_librdkafka_consumer_group(proc_broker):
    """Two kafka-python consumers in a classic group and two librdkafka consumers with group.protocol=consumer
    in a consumer group read one topic at the same time: each group splits the partitions among its members
    and reads every record once."""
    from confluent_kafka import Consumer
    bs = proc_broker.bootstrap_servers
    create(bs, "both", 4)
    produced = set(produce_batch(bs, "both", 0, 200))
    classic = [kp_group_consumer("both", bootstrap_servers=bs, group_id="g-classic", auto_offset_reset="earliest")
               for _ in range(2)]
    modern = [Consumer({"bootstrap.servers": bs, "group.id": "g-modern", "group.protocol": "consumer",
                        "auto.offset.reset": "earliest"}) for _ in range(2)]
    for c in modern:
        c.subscribe(["both"])
    got_c, got_m = [], []
    # each kafka-python consumer polls in a thread of its own: polled in turn with short timeouts, a leader whose
    # JoinGroup answer came between two of its polls rejoined after every SyncGroup (kafka-python 3.0.12 leaves
    # that join's result unread), a loop of rebalances seen under CI's load; the broker answered every request
    stop = threading.Event()

    def run_classic(c):
        while not stop.is_set():
            for recs in c.poll(timeout_ms=500).values():
                got_c.extend((r.partition, r.offset) for r in recs)
    threads = [threading.Thread(target=run_classic, args=(c,), daemon=True) for c in classic]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for c in modern:
                got_m += [(m.partition(), m.offset()) for m in c.consume(100, timeout=0.05) if not m.error()]
            split = all(len(c.assignment()) == 2 for c in classic) and all(len(c.assignment()) == 2 for c in modern)
            if split and set(got_c) == produced and set(got_m) == produced:
                break
        assert set(got_c) == produced and set(got_m) == produced
        assert sorted(len(c.assignment()) for c in classic) == [2, 2]
        assert sorted(len(c.assignment()) for c in modern) == [2, 2]
        assert describe(bs, "g-modern").group_state == "Stable"
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        for c in classic:
            c.close()
        for c in modern:
            c.close()
