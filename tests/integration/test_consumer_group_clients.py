"""KIP-848 with a real client: confluent-kafka (librdkafka >= 2.10) with group.protocol=consumer against a
broker process (ARCHITECTURE.md: confluent-kafka group consumers need one). Three consumers on a 6-partition
topic get two partitions each; 30,000 records are consumed across a join, a static member's restart, a SIGKILLed
member fenced after the session timeout and a leave, exactly once but for the killed member's uncommitted tail,
while the members that keep partitions go on consuming them (no stop-the-world; an eager classic group fails it);
committed offsets and the group itself (epochs, a static member's assignment) come back after a broker restart.
Java kafka-clients 3.9 and 4.3 members (one JVM) split, join and leave the same way."""
from __future__ import annotations

import collections
import subprocess
import time

import pytest

from clients.group_scenario import produce_batch, wait_for
from helpers import ck_commit
from test_groups_clients import create

confluent_kafka = pytest.importorskip("confluent_kafka")
if confluent_kafka.libversion()[1] < 0x020a0000:
    pytest.skip("librdkafka < 2.10 has no group.protocol=consumer", allow_module_level=True)


class Member:
    """One consumer; what it processed, committed synchronously after every batch (so a revocation,
    which happens inside consume(), never finds processed records that are not committed); when it received
    each record and, at every poll, its assignment (for the no-stop-the-world checks)."""

    def __init__(self, bs: str, group: str, topic: str, **extra):
        from confluent_kafka import Consumer
        self.c = Consumer({"bootstrap.servers": bs, "group.id": group, "group.protocol": "consumer",
                           "auto.offset.reset": "earliest", "enable.auto.commit": False, **extra})
        self.c.subscribe([topic])
        self.got: list[tuple[int, int]] = []
        self.received: list[tuple[float, int]] = []  # (monotonic time, partition) of every record
        self.seen: list[tuple[float, frozenset[int]]] = []  # (monotonic time, assignment) at every poll

    def poll(self) -> None:
        msgs = [m for m in self.c.consume(500, timeout=0.05) if not m.error()]
        now = time.monotonic()
        self.seen.append((now, frozenset(self.assigned())))
        if msgs:
            self.got.extend((m.partition(), m.offset()) for m in msgs)
            self.received.extend((now, m.partition()) for m in msgs)
            ck_commit(self.c)

    def assigned(self) -> list[int]:
        return sorted(tp.partition for tp in self.c.assignment())

    def kept_consuming(self, kept: set[int], t0: float, t1: float) -> None:
        """No stop-the-world between t0 and t1: at every poll its assignment held the partitions `kept` (it never
        went empty), and it received records of them in that window."""
        during = [a for t, a in self.seen if t0 <= t <= t1]
        assert during and all(a >= kept for a in during), (kept, sorted(set(during), key=sorted))
        assert any(t0 <= t <= t1 and p in kept for t, p in self.received), (kept, t0, t1)


class Feed:
    """One confluent Producer for the whole run (small values), fed a little at every poll so that records keep
    arriving on every partition while the group rebalances; the acknowledged (partition, offset)s."""

    def __init__(self, bs: str, topic: str, total: int):
        from confluent_kafka import Producer
        self.p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5})
        self.topic, self.total, self.n = topic, total, 0
        self.acked: set[tuple[int, int]] = set()

    def _cb(self, err, msg) -> None:
        assert err is None, err
        self.acked.add((msg.partition(), msg.offset()))

    def send(self, n: int) -> None:
        for _ in range(min(n, self.total - self.n)):
            self.p.produce(self.topic, key=b"%d" % self.n, value=b"v", on_delivery=self._cb)
            self.n += 1
        self.p.poll(0)

    def flush(self) -> set[tuple[int, int]]:
        assert self.p.flush(30) == 0
        return self.acked


def run_until(members, pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for m in members:
            m.poll()
        if pred():
            return
    raise AssertionError(f"timed out: {what}; assignments {[m.assigned() for m in members]}")


def settle(members, fed, secs: float = 1.5) -> float:
    """Go on polling (and feeding) for secs more; the time it ends."""
    t = time.monotonic() + secs
    run_until(members, fed(lambda: time.monotonic() >= t), secs + 60, "a pause")
    return time.monotonic()


def describe(bs, group):
    from kafkite.wire.consumer_group_api import ConsumerGroupDescribeRequest
    from kafkite.testing.wire_client import WireClient
    with WireClient.connect(bs) as w:
        for _ in range(200):
            d = w.request(ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False),
                          1).groups[0]
            if d.error_code not in (14, 15, 16):  # loading / not available / not coordinator yet
                return d
            time.sleep(0.05)
        return d


@pytest.fixture
def proc_broker():
    from kafkite.testing.process import BrokerProcess
    with BrokerProcess() as b:
        yield b


SESSION_MS = 5000  # group.consumer.session.timeout.ms of the 30,000-record run (Kafka's default is 45 s)


@pytest.fixture
def short_session_broker():
    """A broker process whose consumer groups time a member out after SESSION_MS and ask for a heartbeat every
    500 ms (Kafka's minimum bounds lowered to allow it)."""
    from kafkite.testing.process import BrokerProcess
    overrides = {"group.consumer.session.timeout.ms": str(SESSION_MS), "group.consumer.min.session.timeout.ms": "1000",
                 "group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "100"}
    with BrokerProcess(overrides=overrides) as b:
        yield b


def test_three_consumers_two_partitions_each_exactly_once_across_join_and_leave(short_session_broker):
    """30,000 records across a join (2 -> 3 members), a static member's restart within its session timeout, a
    fourth member in its own process SIGKILLed and fenced after the session timeout, and a leave (3 -> 2), with
    records produced all along. Every record is read; each exactly once, except that what the killed member had
    processed after its last commit (or whose commit was refused) is read again by the partition's next owner: at
    least once, no gaps, duplicates only after the last commit, as Kafka promises a consumer that commits after
    processing. No stop-the-world: while a member joins or leaves, the members that keep partitions never lose
    them and go on receiving records of them; the static member comes back to its own partitions and nothing else
    moves."""
    from clients.group_scenario import python_consumer
    bs = short_session_broker.bootstrap_servers
    create(bs, "kip848", 6)
    feed = Feed(bs, "kip848", 30_000)
    feed.send(6_000)
    a, b = Member(bs, "g848", "kip848"), Member(bs, "g848", "kip848")
    members, gone = [a, b], []
    run_until(members, lambda: sorted(len(m.assigned()) for m in members) == [3, 3], 60, "two members, 3 + 3")
    # a join: the two keep two of their three partitions each and go on consuming them while the third moves
    t_join = time.monotonic()
    c = Member(bs, "g848", "kip848", **{"group.instance.id": "c848"})
    members.append(c)

    def fed(pred):
        def check():
            feed.send(100)
            return pred()
        return check
    run_until(members, fed(lambda: [len(m.assigned()) for m in members] == [2, 2, 2]), 60, "three members, 2 each")
    assert sorted(p for m in members for p in m.assigned()) == list(range(6))
    # the rebalance takes about a second (500 ms heartbeats): the window looked at runs 1.5 s past it, so that
    # records (fed all along) have time to arrive
    t_joined = settle(members, fed)
    for m in (a, b):
        m.kept_consuming(set(m.assigned()), t_join, t_joined)
    d = describe(bs, "g848")
    assert d.group_state == "Stable" and len(d.members) == 3 and d.assignor_name == "uniform"
    assert {len(m.assignment.topic_partitions[0].partitions) for m in d.members} == {2}
    feed.send(6_000)
    produced = set(feed.flush())
    run_until(members, lambda: {x for m in members for x in m.got} >= produced, 60, "all records so far read")
    # the static member restarts within its session timeout: it leaves with epoch -2, its partitions wait for it,
    # and it gets them back (resuming from its commits) while the other two keep theirs
    before = {m: set(m.assigned()) for m in members}
    t_restart = time.monotonic()
    c.c.close()
    members.remove(c)
    gone.append(c)
    c2 = Member(bs, "g848", "kip848", **{"group.instance.id": "c848"})
    members.append(c2)
    run_until(members, fed(lambda: set(c2.assigned()) == before[c]), 60, "the static member back with its partitions")
    for m in (a, b):  # nothing moved to or from the other two (the restart takes well under a second here)
        assert {x for t, x in m.seen if t >= t_restart} == {frozenset(before[m])}
    feed.send(6_000)
    produced = set(feed.flush())
    run_until(members, lambda: {x for m in members + gone for x in m.got} >= produced, 60, "all records so far read")
    # a fourth member in its own process (confluent, group.protocol=consumer) takes partitions and processes some
    # of their records; SIGKILLed, it sends no leave: the broker fences it after the session timeout and the three
    # take its partitions back from its last commit
    k = python_consumer("confluent", bs, "kip848", "g848", "consumer-protocol")
    try:
        run_until(members, fed(lambda: sorted(len(m.assigned()) for m in members) in ([1, 1, 2], [1, 2, 2])
                               and len(k.processed) > 100), 60, "a fourth member with partitions of its own, records processed")
        k.crash()
        t_kill = time.monotonic()
        run_until(members, fed(lambda: [len(m.assigned()) for m in members] == [2, 2, 2]), 60,
                  "the killed member fenced, the three with two partitions each")
        fenced_after = time.monotonic() - t_kill
        assert SESSION_MS / 1000 * 0.6 <= fenced_after < 30, fenced_after  # the session timeout, not at once
        feed.send(3_000)
        produced = set(feed.flush())
        run_until(members, lambda: {x for m in members + gone for x in m.got} | set(k.processed) >= produced, 60,
                  "all records so far read")
    finally:
        k.stop()
    # a leave: the two left keep their two partitions each, go on consuming them, and take one of b's each, from
    # its committed offsets
    kept = {m: set(m.assigned()) for m in (a, c2)}
    t_leave = time.monotonic()
    b.c.close()
    members.remove(b)
    gone.append(b)
    run_until(members, fed(lambda: sorted(len(m.assigned()) for m in members) == [3, 3]), 60, "two members, 3 + 3")
    t_left = settle(members, fed)
    for m in (a, c2):
        m.kept_consuming(kept[m], t_leave, t_left)
    feed.send(30_000)
    produced = set(feed.flush())
    run_until(members, lambda: {x for m in members + gone for x in m.got} | set(k.processed) >= produced, 60,
              "the two left read the rest")
    everything = [x for m in members + gone for x in m.got] + k.processed
    assert set(everything) == produced and len(produced) == 30_000  # none lost
    again = {x for x, n in collections.Counter(everything).items() if n > 1}
    assert again <= set(k.uncommitted()) | k.unconfirmed, "only the killed member's uncommitted tail is read twice"
    assert len(everything) - len(produced) == len(again)  # those at most twice; everything else exactly once
    for m in members:
        m.c.close()


def test_committed_offsets_and_the_group_survive_a_broker_restart(tmp_path):
    from kafkite.testing.process import BrokerProcess
    data = tmp_path / "data"
    with BrokerProcess(data_dir=data) as broker:
        bs = broker.bootstrap_servers
        create(bs, "kip848r", 4)
        produced = set(produce_batch(bs, "kip848r", 0, 200))
        # a static member: its close leaves with epoch -2, keeping its place and partitions for its session
        m = Member(bs, "g848r", "kip848r", **{"group.instance.id": "s1"})
        run_until([m], lambda: set(m.got) >= produced, 60, "the first 200 records")
        m.c.close()
        before = describe(bs, "g848r")
        assert [(x.instance_id, x.member_epoch) for x in before.members] == [("s1", -2)]
    with BrokerProcess(data_dir=data) as broker:
        bs = broker.bootstrap_servers
        after = describe(bs, "g848r")
        # the group was replayed from __consumer_offsets: epochs, the static member, its assignment
        assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
        assert [(x.instance_id, x.member_epoch) for x in after.members] == [("s1", -2)]
        assert sorted(p for x in after.members for p in x.assignment.topic_partitions[0].partitions) == [0, 1, 2, 3]
        later = set(produce_batch(bs, "kip848r", 200, 100))
        m = Member(bs, "g848r", "kip848r", **{"group.instance.id": "s1"})
        run_until([m], lambda: set(m.got) >= later, 60, "the records produced after the restart")
        assert set(m.got) == later  # resumed from the committed offsets: nothing read twice
        m.c.close()


class JavaMembers:
    """One JVM running the Java driver's `group --control`: Java kafka-clients 3.9 and 4.3 consumers with
    group.protocol=consumer (its ConsumerGroupHeartbeat v0 is Kafka 4's v0), each in its own thread; `add` and
    `close` make one join or leave; what each reported (records, commits, assignments) is read here."""

    def __init__(self, bs: str, topic: str, group: str, *extra: str):
        import tempfile
        import threading
        from clients.drivers import java_argv, need
        need("java")
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(java_argv("group", bs, topic, group, "--protocol", "consumer", "--control", *extra),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self.got: dict[str, list[tuple[int, int]]] = {}
        self.committed_upto: dict[str, int] = {}  # per member: how many of its records its last commit covered
        self.unconfirmed: set[tuple[int, int]] = set()  # read, then their commit refused
        self.assigned: dict[str, list[int]] = {}
        self.seen: list[tuple[float, str, frozenset[int]]] = []  # (time read, member, its new assignment)
        self.received: list[tuple[float, str, int]] = []  # (time read, member, partition) of every record
        self.events: list[dict] = []  # errors, refused commits, closes
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self) -> None:
        import json
        for line in self.proc.stdout:
            if not line.startswith("{"):
                continue
            ev, now = json.loads(line), time.monotonic()
            m = ev.get("m")
            if "rec" in ev:
                self.got.setdefault(m, []).append(tuple(ev["rec"]))
                self.received.append((now, m, ev["rec"][0]))
            elif "assigned" in ev:
                self.assigned[m] = ev["assigned"]
                self.seen.append((now, m, frozenset(ev["assigned"])))
            elif "commit" in ev:
                self.committed_upto[m] = ev["commit"]
            else:
                if "commit_failed" in ev:  # refused in a rebalance: those records may be read again by another
                    self.unconfirmed.update(self.got[m][self.committed_upto.get(m, 0):ev["commit_failed"]])
                self.events.append(ev)

    def send(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def split(self) -> list[int]:
        return sorted(len(ps) for m, ps in self.assigned.items() if ps)

    def kept_consuming(self, m: str, kept: set[int], t0: float, t1: float) -> None:
        """Member m never lost `kept` between t0 and t1, and received records of them meanwhile."""
        assert all(a >= kept for t, x, a in self.seen if x == m and t0 <= t <= t1), (m, kept, self.seen)
        assert any(t0 <= t <= t1 and x == m and p in kept for t, x, p in self.received), (m, kept)

    def close(self) -> str:
        """Every member leaves (EOF on its stdin), the JVM exits; its stderr."""
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._t.join(30)  # the rest of its lines
        self.stderr.seek(0)
        return self.stderr.read()


@pytest.mark.usefixtures("java_client")
def test_java_consumers_with_group_protocol_consumer_split_join_and_leave_exactly_once(broker_factory):
    """Java kafka-clients 3.9 and 4.3 with group.protocol=consumer and group.remote.assignor=range, three members in one
    JVM on a 6-partition topic: two members take 3 + 3; a third joins and each has two (OffsetCommit v9 with the
    member epoch, a moved partition resumed from its commit) while the two that keep partitions go on receiving
    records of them; one leaves and the two left take 3 + 3; every record is read, and read once unless a commit
    of it was refused: Java 3.9 commits with the member epoch it knows, and a commit racing the heartbeat that
    bumps it gets STALE_MEMBER_EPOCH, from Kafka 4.0 too (KIP-1251 relaxes that later). The driver commits in
    onPartitionsRevoked and seeks to the committed offsets in onPartitionsAssigned (without that, Java 3.9
    re-reads: README). Once all have left the
    group is Empty. A 500 ms heartbeat interval (the broker's setting) keeps the rebalances short."""
    broker = broker_factory(overrides={"group.consumer.heartbeat.interval.ms": "500",
                                       "group.consumer.min.heartbeat.interval.ms": "100"})
    bs = broker.bootstrap_servers
    create(bs, "kip848j", 6)
    feed = Feed(bs, "kip848j", 3_000)
    feed.send(600)
    produced = set(feed.flush())
    g = JavaMembers(bs, "kip848j", "g848j", "--remote-assignor", "range")
    try:
        def everything_read():
            return {x for got in g.got.values() for x in got} >= produced

        def fed(pred):
            def check():
                feed.send(30)
                return pred()
            return check

        g.send("add a")
        g.send("add b")
        wait_for(lambda: g.split() == [3, 3] and everything_read(), 90, "two Java members, 3 + 3, the first 600 read")
        kept = {m: set(g.assigned[m]) for m in ("a", "b")}
        t_join = time.monotonic()
        g.send("add c")
        wait_for(fed(lambda: g.split() == [2, 2, 2]), 60, "three Java members, two partitions each")
        assert sorted(p for ps in g.assigned.values() for p in ps) == list(range(6))
        t_settled = time.monotonic() + 1.0  # records go on arriving: the window looked at runs 1 s more
        wait_for(fed(lambda: time.monotonic() >= t_settled), 60, "a pause")
        t_joined = time.monotonic()
        for m in ("a", "b"):
            g.kept_consuming(m, kept[m] & set(g.assigned[m]), t_join, t_joined)
        d = describe(bs, "g848j")
        assert (d.group_state, d.assignor_name, len(d.members)) == ("Stable", "range", 3)
        assert sorted(len(x.assignment.topic_partitions[0].partitions) for x in d.members) == [2, 2, 2]
        feed.send(600)
        produced = set(feed.flush())
        wait_for(everything_read, 60, "the records so far read by the three")
        g.send("close b")
        wait_for(fed(lambda: sorted(len(g.assigned[m]) for m in ("a", "c")) == [3, 3]), 60, "two left, 3 + 3")
        feed.send(3_000)
        produced = set(feed.flush())
        wait_for(everything_read, 60, "the two left read the rest")
        everything = [x for got in g.got.values() for x in got]
        assert set(everything) == produced  # none lost
        again = {x for x, n in collections.Counter(everything).items() if n > 1}
        assert len(produced) == 3_000 and again <= g.unconfirmed, "only records whose commit was refused are read twice"
        assert set(g.got["b"]) and set(g.got["c"])  # each took part
        assert not [e for e in g.events if "closed" not in e and "commit_failed" not in e], g.events
        assert all("StaleMemberEpoch" in e["error"] or "stale member epoch" in e["error"]
                   for e in g.events if "commit_failed" in e), g.events
    finally:
        err = g.close()
    assert sorted(e["m"] for e in g.events if e.get("closed")) == ["a", "b", "c"], (g.proc.returncode, g.events,
                                                                                   err[-2000:])
    d = describe(bs, "g848j")
    assert (d.error_code, d.group_state, d.members) == (0, "Empty", [])  # each left (epoch -1) on close


def test_a_classic_and_a_consumer_group_side_by_side_and_admin_describes_both(proc_broker):
    """confluent-kafka's describe_consumer_groups asks ConsumerGroupDescribe first: the consumer group answers
    there (type CONSUMER, the uniform assignor), the classic one answers GROUP_ID_NOT_FOUND there and is
    described by DescribeGroups (type CLASSIC), as against Kafka 4; list_consumer_groups (ListGroups v5) gives
    each its type; OffsetDelete keeps the subscribed topics' offsets."""
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient
    bs = proc_broker.bootstrap_servers
    create(bs, "kip848a", 6)
    produced = set(produce_batch(bs, "kip848a", 0, 120))
    new = Member(bs, "g-new", "kip848a")
    old = Consumer({"bootstrap.servers": bs, "group.id": "g-old", "auto.offset.reset": "earliest"})
    old.subscribe(["kip848a"])
    got_old: set = set()

    def both_read_all():
        got_old.update((m.partition(), m.offset()) for m in old.consume(200, timeout=0.05) if not m.error())
        return set(new.got) >= produced and got_old >= produced
    run_until([new], both_read_all, 60, "both groups read everything")
    admin = AdminClient({"bootstrap.servers": bs})  # kept: a destroyed handle fails its pending futures
    groups = admin.describe_consumer_groups(["g-new", "g-old"])
    d_new, d_old = groups["g-new"].result(30), groups["g-old"].result(30)
    assert (d_new.type.name, d_new.state.name, d_new.partition_assignor) == ("CONSUMER", "STABLE", "uniform")
    assert sorted(tp.partition for m in d_new.members for tp in m.assignment.topic_partitions) == list(range(6))
    assert (d_old.type.name, d_old.state.name, d_old.partition_assignor) == ("CLASSIC", "STABLE", "range")
    listed = {g.group_id: (g.type.name, g.state.name) for g in admin.list_consumer_groups().result(30).valid}
    assert listed == {"g-new": ("CONSUMER", "STABLE"), "g-old": ("CLASSIC", "STABLE")}
    # OffsetDelete on a consumer group: the topics its members subscribe to answer GROUP_SUBSCRIBED_TO_TOPIC,
    # others are deleted (Kafka's ConsumerGroup.isSubscribedToTopic; librdkafka's 0081 checks it)
    # (confluent-kafka has no DeleteConsumerGroupOffsets: kafka-python's admin asks)
    from kafka import KafkaAdminClient, TopicPartition
    create(bs, "kip848-other", 1)
    kp = KafkaAdminClient(bootstrap_servers=bs)
    try:
        res = kp.delete_group_offsets("g-new", [TopicPartition("kip848a", 0), TopicPartition("kip848-other", 0)])
    finally:
        kp.close()
    assert {tp.topic: err.__name__ for tp, err in res.items()} == {
        "kip848a": "GroupSubscribedToTopicError", "kip848-other": "NoError"}
    new.c.close()
    old.close()
