"""Consumer groups with real clients: split, leave, crash, commits, two groups, restart."""
from __future__ import annotations

import pytest

from clients.group_scenario import python_consumer, run_group_scenario, produce_batch, wait_for


def create(bs, name, partitions=6):
    from kafka.admin import KafkaAdminClient, NewTopic
    a = KafkaAdminClient(bootstrap_servers=bs)
    a.create_topics([NewTopic(name, partitions, 1)])
    a.close()


@pytest.fixture
def group_broker(broker_factory):
    # a short minimum session timeout so a crashed member is noticed in seconds
    return broker_factory(overrides={"group.min.session.timeout.ms": "1000"})


@pytest.fixture
def proc_broker():
    """For confluent-kafka group consumers inside the test process: the broker runs in a child process
    (their rebalance callback blocks in librdkafka holding the GIL; see kafkite.testing.process)."""
    from kafkite.testing.process import BrokerProcess
    with BrokerProcess(overrides={"group.min.session.timeout.ms": "1000"}) as b:
        yield b


@pytest.mark.parametrize("client,strategy", [
    ("kafka-python", "range"), ("kafka-python", "roundrobin"), ("aiokafka", None),
    ("confluent", "range"), ("confluent", "cooperative-sticky"),
])
def test_group_split_leave_crash(group_broker, client, strategy):
    bs = group_broker.bootstrap_servers
    topic = f"grp-{client}-{strategy}"
    create(bs, topic)
    run_group_scenario(bs, topic, f"g-{client}-{strategy}",
                       lambda: python_consumer(client, bs, topic, f"g-{client}-{strategy}", strategy))


def test_two_groups_each_read_everything(proc_broker):
    from confluent_kafka import Consumer
    bs = proc_broker.bootstrap_servers
    create(bs, "two-groups", 3)
    produced = set(produce_batch(bs, "two-groups", 0, 500))
    for group in ("ga", "gb"):
        c = Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest"})
        c.subscribe(["two-groups"])
        got = set()
        wait_for(lambda: got.update((m.partition(), m.offset()) for m in c.consume(500, timeout=0.2)
                                    if not m.error()) or got >= produced, 60, f"{group} reads everything")
        c.close()
        assert got == produced


def test_static_member_restart_does_not_rebalance(proc_broker):
    """KIP-345: a static member that comes back within the session timeout gets its partitions back
    without a rebalance: the other member is never revoked or reassigned, and keeps its member id."""
    from confluent_kafka import Consumer
    from clients.group_scenario import group_members
    bs = proc_broker.bootstrap_servers
    create(bs, "static", 4)
    produce_batch(bs, "static", 0, 100)
    conf = {"bootstrap.servers": bs, "group.id": "static-g", "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000, "enable.auto.commit": False, "partition.assignment.strategy": "range"}
    a = Consumer({**conf, "group.instance.id": "a"})
    b = Consumer({**conf, "group.instance.id": "b"})
    a_events = []
    a.subscribe(["static"], on_assign=lambda c, ps: a_events.append(("assign", sorted(p.partition for p in ps))),
                on_revoke=lambda c, ps: a_events.append(("revoke", sorted(p.partition for p in ps))))
    b.subscribe(["static"])
    wait_for(lambda: [c.poll(0.1) for c in (a, b)] and len(group_members(bs, "static-g")) == 2
             and a.assignment() and b.assignment(), 60, "2 members with partitions")
    before = group_members(bs, "static-g")
    # a may have joined alone first (no initial rebalance delay here) and been rebalanced when b came:
    # what counts is what happens from now on
    a_events.clear()
    parts_a = sorted(tp.partition for tp in a.assignment())
    parts_b = sorted(tp.partition for tp in b.assignment())
    assert sorted(parts_a + parts_b) == [0, 1, 2, 3]
    b.close()  # a static member's close sends no LeaveGroup (librdkafka: it does not leave)
    b2 = Consumer({**conf, "group.instance.id": "b"})
    b2.subscribe(["static"])
    # a is polled too: had the coordinator started a rebalance, b2 could only be assigned after a rejoined
    wait_for(lambda: [c.poll(0.1) for c in (a, b2)] and len(b2.assignment()) > 0, 60, "b back")
    for _ in range(10):
        a.poll(0.1)
    assert sorted(tp.partition for tp in b2.assignment()) == parts_b
    assert a_events == []  # never revoked nor reassigned by b's restart
    after = group_members(bs, "static-g")
    a_id = next(m for m, ps in before.items() if sorted(ps) == parts_a)
    assert after.get(a_id) == set(parts_a)  # a keeps its member id and partitions
    for c in (a, b2):
        c.close()


def test_committed_offsets_and_groups_survive_kill9(tmp_path):
    import os
    import signal
    import time
    from kafka.protocol.admin import DescribeGroupsRequest
    from kafka.protocol.consumer import OffsetFetchRequest
    from confluent_kafka import Consumer, TopicPartition
    from reliability.test_kill9 import start
    from kafkite.testing.wire_client import WireClient
    proc, bs = start(tmp_path / "d")
    try:
        create(bs, "persist", 2)
        produce_batch(bs, "persist", 0, 50)
        # a static member: its close sends no LeaveGroup, so the group still has it when the broker dies
        c = Consumer({"bootstrap.servers": bs, "group.id": "pg", "auto.offset.reset": "earliest",
                      "enable.auto.commit": False, "group.instance.id": "p1", "session.timeout.ms": 60000})
        c.subscribe(["persist"])
        n = 0
        deadline = time.monotonic() + 60
        while n < 50:
            assert time.monotonic() < deadline, "the group consumer got no records"
            n += len([m for m in c.consume(50, timeout=0.5) if not m.error()])
        c.commit(offsets=[TopicPartition("persist", 0, 11), TopicPartition("persist", 1, 22)], asynchronous=False)
        c.close()
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    proc, bs = start(tmp_path / "d")
    try:
        T = OffsetFetchRequest.OffsetFetchRequestTopic
        with WireClient.connect(bs) as w:
            def fetch():
                r = w.request(OffsetFetchRequest(group_id="pg", topics=[T(name="persist", partition_indexes=[0, 1])]), 5)
                return r
            r = fetch()
            deadline = time.monotonic() + 60
            while r.error_code in (14, 15, 16) and time.monotonic() < deadline:  # loading / not yet ready
                r = fetch()
            assert {p.partition_index: p.committed_offset for p in r.topics[0].partitions} == {0: 11, 1: 22}
            d = w.request(DescribeGroupsRequest(groups=["pg"]), 5).groups[0]
            # the static member is still known (it never left) until its session times out
            assert (d.group_state, d.protocol_type, len(d.members)) == ("Stable", "consumer", 1)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)


def test_groups_cli_and_kafka_python_admin_show_members_offsets_lag(proc_broker):
    import subprocess
    import sys
    import time
    from confluent_kafka import Consumer
    from kafka.admin import KafkaAdminClient
    bs = proc_broker.bootstrap_servers
    create(bs, "cli-gt", 1)
    produce_batch(bs, "cli-gt", 0, 30)
    c = Consumer({"bootstrap.servers": bs, "group.id": "cli-g", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe(["cli-gt"])
    n = 0
    deadline = time.monotonic() + 60
    while n < 10:
        assert time.monotonic() < deadline, "the group consumer got no records"
        m = c.poll(0.5)
        if m is not None and not m.error():
            n += 1
    from confluent_kafka import TopicPartition
    c.commit(offsets=[TopicPartition("cli-gt", 0, 10)], asynchronous=False)
    try:
        a = KafkaAdminClient(bootstrap_servers=bs)
        d = a.describe_groups(["cli-g"])["cli-g"]
        assert d["group_state"] == "Stable" and len(d["members"]) == 1
        assert d["members"][0]["member_assignment"]["assigned_partitions"] == [{"topic": "cli-gt", "partitions": [0]}]
        assert {tp.partition: om.offset for tp, om in a.list_group_offsets("cli-g")["cli-g"].items()} == {0: 10}
        a.close()
        out = subprocess.run([sys.executable, "-m", "kafkite.cli", "groups", "list", "--bootstrap-server", bs],
                             capture_output=True, text=True, timeout=60).stdout
        assert "cli-g\tStable\tconsumer" in out
        out = subprocess.run([sys.executable, "-m", "kafkite.cli", "groups", "describe", "cli-g", "--bootstrap-server",
                              bs], capture_output=True, text=True, timeout=60).stdout
        row = next(line.split() for line in out.splitlines() if line.strip().startswith("cli-gt"))
        assert row[:5] == ["cli-gt", "0", "10", "30", "20"]  # topic, partition, committed, end, lag
        assert "assignment=cli-gt-0" in out
    finally:
        c.close()
