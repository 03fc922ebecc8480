"""The control plane's faults that act on the brokers rather than on one request (issue "Fault injection and
inspection from any language"): a Metadata topic error (librdkafka's rd_kafka_mock_topic_set_error), a leaderless
partition (rd_kafka_mock_partition_set_leader -1) and the broker's log clock, each through the in-process API (a
BrokerThread) and over HTTP (a `kafkite serve --control-port` process driven by the `kafkite control` CLI); and
replication cut between two brokers of an in-process cluster (its methods and the CLI)."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import MetadataRequest

from helpers import wait_until
from kafkite.testing.cluster import KafkiteCluster
from kafkite.testing.process import BrokerProcess
from kafkite.testing.runner import BrokerThread
from kafkite.wire.errors import E
from test_control_model import (ApiDoor, CliDoor, _produce_request, consume, control, create, deliver, ok, producer,
                                topic_name, wire)
from test_control_plane import http


class BrokerApiDoor(ApiDoor):
    """The in-process API: the BrokerThread's faults and its broker controls."""

    def __init__(self, broker: BrokerThread) -> None:
        super().__init__(broker)
        self.b = broker

    def leaderless(self, topic, partition):
        self.b.make_leaderless(topic, partition)

    def restore(self, topic=None, partition=None):
        self.b.restore_leader(topic, partition)

    def advance_clock(self, ms):
        return self.b.advance_clock(ms)

    def clocks(self):
        from kafkite.control import views
        return self.b.call(views.clock, self.b.node.brokers)

    def retention(self, topic):
        from kafkite.control import views
        return self.b.call(views.apply_retention, self.b.node.brokers, topic, None)


class BrokerCliDoor(CliDoor):
    def leaderless(self, topic, partition):
        out = ok(control(self.url, "leaderless", topic, str(partition)))
        assert {"topic": topic, "partition": partition} in out["leaderless"]
        assert out["partitions"][0]["leader"] == -1, out

    def restore(self, topic=None, partition=None):
        ok(control(self.url, "restore-leader", *[str(x) for x in (topic, partition) if x is not None]))

    def advance_clock(self, ms):
        return ok(control(self.url, "clock", "--advance-ms", str(ms)))["clock"]

    def clocks(self):
        return ok(control(self.url, "clock"))["clock"]

    def retention(self, topic):
        return ok(control(self.url, "retention", "--topic", topic))["retention"]


@pytest.fixture(scope="module")
def in_process():
    with BrokerThread() as b:
        yield b


@pytest.fixture(scope="module")
def served():
    with BrokerProcess(control=True) as b:
        yield b


@pytest.fixture(params=["api", "http"])
def door(request):
    """(door, bootstrap servers): every control starts cleared."""
    b = request.getfixturevalue("in_process" if request.param == "api" else "served")
    d = BrokerApiDoor(b) if request.param == "api" else BrokerCliDoor(b.control_url)
    d.reset()
    yield d, b.bootstrap_servers
    d.reset()
    d.restore()


def _metadata(bs: str, topics: list[str] | None, version: int = 9):
    req = MetadataRequest(topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t)
                                                              for t in topics],
                          allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    with wire(bs) as w:
        return {t.name: t for t in w.request(req, version).topics}


# -- Metadata topic errors ----------------------------------------------------------------------------------------
def test_a_metadata_topic_error_and_a_partitions(door):
    """An error rule for Metadata with a topic: that topic's entry answers the error with no partitions, in the
    answers naming it and in those for every topic, the other topics served; with a partition, that partition's
    entry. confluent-kafka fails a message to a topic answered TOPIC_AUTHORIZATION_FAILED at once, and delivers one
    to a partition answered LEADER_NOT_AVAILABLE once the rule is spent."""
    d, bs = door
    topic, other = topic_name("md-err"), topic_name("md-ok")
    create(bs, topic, 2)
    create(bs, other)
    d.error("Metadata", "TOPIC_AUTHORIZATION_FAILED", topic=topic, count=-1)
    named = _metadata(bs, [topic, other])
    assert (named[topic].error_code, named[topic].partitions) == (E.TOPIC_AUTHORIZATION_FAILED, [])
    assert named[other].error_code == 0 and len(named[other].partitions) == 1
    every = _metadata(bs, None, 1)
    assert every[topic].error_code == E.TOPIC_AUTHORIZATION_FAILED and every[other].error_code == 0
    md = AdminClient({"bootstrap.servers": bs}).list_topics(topic=topic, timeout=10)
    assert md.topics[topic].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    p = producer(bs)
    errs = []
    p.produce(topic, value=b"denied", on_delivery=lambda err, msg: errs.append(err))
    assert p.flush(30) == 0 and [e.code() for e in errs] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    del p
    d.clear()
    rid = d.error("Metadata", "LEADER_NOT_AVAILABLE", topic=topic, partition=1, count=-1)
    [rule] = d.state()["errors"]
    assert (rule["id"], rule["topic"], rule["partition"], rule["remaining"]) == (rid, topic, 1, -1)
    parts = {x.partition_index: x for x in _metadata(bs, [topic])[topic].partitions}
    assert (parts[1].error_code, parts[1].leader_id) == (E.LEADER_NOT_AVAILABLE, -1)
    assert (parts[0].error_code, parts[0].leader_id) == (0, 1)
    d.clear()
    d.error("Metadata", "LEADER_NOT_AVAILABLE", topic=topic, partition=1)
    deliver(producer(bs), topic, b"after", partition=1)  # librdkafka asks again (a second later) and delivers
    assert d.state()["errors"] == []
    injected = [r for r in d.requests("Metadata") if r["error"] == "LEADER_NOT_AVAILABLE"]
    assert len(injected) == 2 and all(r["injected"] for r in injected)


# -- a leaderless partition ---------------------------------------------------------------------------------------
def _fetch(topic: str, partition: int) -> FetchRequest:
    T = FetchRequest.FetchTopic
    return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
                        session_epoch=-1, topics=[T(topic=topic, topic_id=None, partitions=[T.FetchPartition(
                            partition=partition, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                            log_start_offset=-1, partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id="")


def test_a_leaderless_partition_and_a_producer_that_delivers_after_the_restore(door):
    """A partition made leaderless: Metadata lists it with leader -1 and LEADER_NOT_AVAILABLE (v1 and v9) at a new
    leader epoch, Produce and Fetch to it answer NOT_LEADER_OR_FOLLOWER, the other partition is served; a
    confluent-kafka producer's records wait (retrying) and are delivered once it is restored, each once."""
    d, bs = door
    topic = topic_name("leaderless")
    create(bs, topic, 2)
    p = producer(bs, **{"message.timeout.ms": 60000})
    deliver(p, topic, b"before", partition=0)
    epoch = _metadata(bs, [topic])[topic].partitions[0].leader_epoch
    d.leaderless(topic, 0)
    for v in (1, 9):
        parts = {x.partition_index: x for x in _metadata(bs, [topic], v)[topic].partitions}
        assert (parts[0].error_code, parts[0].leader_id) == (E.LEADER_NOT_AVAILABLE, -1)
        assert (parts[1].error_code, parts[1].leader_id) == (0, 1)
    assert parts[0].leader_epoch == epoch + 1
    with wire(bs) as w:
        resp = w.request(_produce_request(topic, [0, 1]), 9)
        got = {x.index: x.error_code for t in resp.responses for x in t.partition_responses}
        assert got == {0: E.NOT_LEADER_OR_FOLLOWER, 1: 0}
        [pd] = w.request(_fetch(topic, 0), 12).responses[0].partitions
        assert pd.error_code == E.NOT_LEADER_OR_FOLLOWER
    acked = []
    for i in range(5):
        p.produce(topic, value=b"while-%d" % i, partition=0, on_delivery=lambda err, msg: acked.append(err))
    assert p.flush(0.5) == 5 and acked == []  # waiting: nothing delivered, nothing failed
    d.restore(topic, 0)
    assert p.flush(30) == 0 and acked == [None] * 5
    parts = {x.partition_index: x for x in _metadata(bs, [topic])[topic].partitions}
    assert (parts[0].error_code, parts[0].leader_id, parts[0].leader_epoch) == (0, 1, epoch + 2)
    got = sorted(v for _, v in consume(bs, topic, [0], 6))
    assert got == sorted([b"before"] + [b"while-%d" % i for i in range(5)])


def test_leaderless_bad_input_and_the_list(served):
    url = served.control_url
    assert http(url, "POST", "/v1/leaderless", {"topic": "no-such-topic", "partition": 0}) == (
        400, {"error": "no partition no-such-topic-0"})
    assert http(url, "POST", "/v1/leaderless", {"topic": "t"})[0] == 400
    assert http(url, "DELETE", "/v1/leaderless", {"partition": 0})[0] == 400
    code, out = control(url, "leaderless", "t")
    assert code == 1
    assert ok(control(url, "leaderless")) == {"leaderless": []}
    topic = topic_name("listed")
    create(served.bootstrap_servers, topic, 2)
    ok(control(url, "leaderless", topic, "1"))
    assert ok(control(url, "leaderless"))["leaderless"] == [{"topic": topic, "partition": 1}]
    out = ok(control(url, "restore-leader"))
    assert out["leaderless"] == []
    [part] = [p for p in ok(control(url, "partitions", "--topic", topic))["partitions"] if p["partition"] == 1]
    assert part["leader"] == 1
    ok(control(url, "leaderless", topic, "0"))  # a deleted topic's partition is not held, nor one of its name later
    admin = AdminClient({"bootstrap.servers": served.bootstrap_servers})
    admin.delete_topics([topic])[topic].result(30)
    assert ok(control(url, "leaderless")) == {"leaderless": []}
    create(served.bootstrap_servers, topic, 1)
    wait_until(lambda: ok(control(url, "partitions", "--topic", topic))["partitions"][0]["leader"] == 1, 30,
               what="a leader for the topic of the same name")


def test_a_leaderless_partition_on_an_in_process_cluster_outlives_elections():
    """KafkiteCluster: a leaderless partition stays so through a broker's stop and start and the preferred-leader
    check (the controller keeps it), every broker's Metadata says leader -1; restored, a live ISR member leads and
    the records produced with retries meanwhile are there, once."""
    with KafkiteCluster(brokers=3, control=True) as cluster:
        bs, url = cluster.bootstrap_servers, cluster.control_url
        topic = topic_name("offline")
        create(bs, topic, 1, replication=3)
        wait_until(lambda: len(cluster.isr(topic, 0)) == 3, 30, what="a full ISR")
        p = producer(bs, **{"acks": "all", "enable.idempotence": True, "message.timeout.ms": 60000})
        deliver(p, topic, b"before")
        ok(control(url, "leaderless", topic, "0"))
        assert cluster.leader(topic, 0) == -1 and cluster.isr(topic, 0) != []
        acked = []
        for i in range(3):
            p.produce(topic, value=b"while-%d" % i, on_delivery=lambda err, msg: acked.append(err))
        other = next(b for b in (1, 2, 3) if b not in cluster.isr(topic, 0)[:1])
        cluster.stop_broker(other)
        cluster.start_broker(other)
        assert cluster.call(lambda: cluster.state.active_controller().check_preferred_leaders()) == 0
        for b in (1, 2, 3):
            with wire(cluster.bootstrap_of(b)) as w:
                [pm] = w.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                                 allow_auto_topic_creation=False), 4).topics[0].partitions
                assert (pm.error_code, pm.leader_id) == (E.LEADER_NOT_AVAILABLE, -1), b
        assert p.flush(0.5) == 3 and acked == []
        cluster.restore_leader(topic)
        assert cluster.leader(topic, 0) in (1, 2, 3)
        assert p.flush(30) == 0 and acked == [None] * 3
        assert sorted(v for _, v in consume(bs, topic, [0], 4)) == [b"before", b"while-0", b"while-1", b"while-2"]
        cluster.make_leaderless(topic, 0)  # the in-process door, and a move brings it back (as librdkafka's)
        assert ok(control(url, "leaderless"))["leaderless"] == [{"topic": topic, "partition": 0}]
        wait_until(lambda: len(cluster.isr(topic, 0)) == 3, 30, what="a full ISR")
        cluster.move_leader(topic, 0, 2)
        assert cluster.leader(topic, 0) == 2 and ok(control(url, "leaderless"))["leaderless"] == []


# -- replication cut between two brokers --------------------------------------------------------------------------
def test_replication_cut_between_two_brokers_shrinks_only_that_leaders_isr():
    """`kafkite control cut-replication 3 1`: broker 3 stops fetching from broker 1 only. It leaves the ISR of the
    partition broker 1 leads after replica.lag.time.max.ms and stays in that of the partition broker 2 leads (it goes
    on copying from it); healed, it catches up and rejoins. The in-process methods do the same."""
    overrides = {"replica.lag.time.max.ms": "600", "replica.fetch.backoff.ms": "100"}
    with KafkiteCluster(brokers=3, control=True, overrides=overrides) as cluster:
        bs, url = cluster.bootstrap_servers, cluster.control_url
        a, b = topic_name("cut-a"), topic_name("cut-b")
        from kafka.admin import KafkaAdminClient, NewTopic as KNewTopic
        admin = KafkaAdminClient(bootstrap_servers=bs)
        admin.create_topics([KNewTopic(a, replica_assignments={0: [1, 2, 3]}),
                             KNewTopic(b, replica_assignments={0: [2, 1, 3]})])
        admin.close()
        wait_until(lambda: len(cluster.isr(a, 0)) == 3 == len(cluster.isr(b, 0)), 30, what="full ISRs")
        assert (cluster.leader(a, 0), cluster.leader(b, 0)) == (1, 2)
        out = ok(control(url, "cut-replication", "3", "1"))
        assert {"broker": 3, "paused": False, "cut_from": [1]} in out["replication"]
        p = producer(bs, acks="1")
        deliver(p, a, b"a1")
        deliver(p, b, b"b1")
        wait_until(lambda: 3 not in cluster.isr(a, 0), 15, what="broker 3 out of the ISR of the partition 1 leads")
        assert cluster.log_end_offsets(a, 0)[3] == 0
        wait_until(lambda: cluster.log_end_offsets(b, 0)[3] == 1, 15, what="broker 3 copying from broker 2")
        assert sorted(cluster.isr(b, 0)) == [1, 2, 3]
        ok(control(url, "heal-replication", "3", "1"))
        wait_until(lambda: 3 in cluster.isr(a, 0), 15, what="broker 3 back in the ISR")
        assert cluster.log_end_offsets(a, 0)[3] == 1
        assert ok(control(url, "replication"))["replication"] == [
            {"broker": i, "paused": False, "cut_from": []} for i in (1, 2, 3)]
        cluster.cut_replication(2, 1)  # the in-process door
        deliver(p, a, b"a2")
        wait_until(lambda: 2 not in cluster.isr(a, 0), 15, what="broker 2 out of the ISR")
        cluster.heal_replication(2, 1)
        wait_until(lambda: 2 in cluster.isr(a, 0), 15, what="broker 2 back")
        # bad input: nothing changes
        assert http(url, "POST", "/v1/replication/cut", {"follower": 3, "leader": 3})[0] == 400
        code, out = control(url, "cut-replication", "3", "9")
        assert code == 1 and "unknown broker 9" in out["error"]
        assert http(url, "POST", "/v1/replication/cut", {"follower": 3})[0] == 400
        assert all(r["cut_from"] == [] for r in ok(control(url, "replication"))["replication"])
        # the cluster's log clocks: one per broker, moved together or one at a time
        cluster.advance_clock(1000)
        cluster.advance_clock(500, broker_id=2)
        assert [(c["broker"], c["advanced_ms"]) for c in ok(control(url, "clock"))["clock"]] == [
            (1, 1000), (2, 1500), (3, 1000)]


def test_replication_cut_needs_a_replicating_broker(served):
    code, out = control(served.control_url, "cut-replication", "1", "1")
    assert code == 1 and "does not replicate from itself" in out["error"]
    assert ok(control(served.control_url, "replication")) == {"replication": []}


# -- the log clock ------------------------------------------------------------------------------------------------
def _list_offset(bs: str, topic: str, timestamp: int) -> tuple[int, int]:
    T = ListOffsetsRequest.ListOffsetsTopic
    req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[T(name=topic, partitions=[
        T.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=timestamp)])])
    with wire(bs) as w:
        part = w.request(req, 7).topics[0].partitions[0]
    return part.offset, part.timestamp


def test_the_log_clock_stamps_log_append_time_and_drives_retention(door):
    """The broker's log clock advanced an hour: records of a LogAppendTime topic are stamped an hour ahead (a
    consumer reads those timestamps; ListOffsets by timestamp finds them in the time index), and retention now
    deletes what is older than retention.ms by that clock (no waiting, no advance_ms)."""
    d, bs = door
    hour = 3_600_000
    topic, kept = topic_name("clock"), topic_name("clock-create")
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([
            NewTopic(topic, 1, 1, config={"message.timestamp.type": "LogAppendTime", "retention.ms": str(hour // 2)}),
            NewTopic(kept, 1, 1, config={"retention.ms": str(2 * hour)})]).values():
        f.result(30)
    p = producer(bs)
    deliver(p, topic, b"old")
    deliver(p, kept, b"create-time")
    t0 = int(time.time() * 1000)
    clocks = d.advance_clock(hour)
    assert [c["broker"] for c in clocks] == [1] and clocks[0]["advanced_ms"] >= hour
    assert clocks[0]["now_ms"] >= t0 + hour
    deliver(p, topic, b"new")
    c = Consumer({"bootstrap.servers": bs, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got, deadline = [], time.monotonic() + 30
    while len(got) < 2 and time.monotonic() < deadline:
        got += [(m.value(), m.timestamp()) for m in c.consume(10, timeout=0.3) if not m.error()]
    c.close()
    (old, (old_type, old_ts)), (new, (new_type, new_ts)) = got
    assert (old, new) == (b"old", b"new") and old_type == new_type == 2  # TIMESTAMP_LOG_APPEND_TIME
    assert old_ts < t0 + 1000 and t0 + hour <= new_ts < time.time() * 1000 + hour + 60_000, (old_ts, new_ts, t0)
    assert _list_offset(bs, topic, t0 + hour // 2) == (1, new_ts)  # the time index: the first at or after
    [row] = d.retention(topic)  # "old" is an hour old by the log clock: past retention.ms
    assert row["log_start_offset"] == 0  # ... but in the active segment with "new", which is not
    [row] = d.retention(kept)  # CreateTime an hour ago by the log clock, retention.ms two hours: kept
    assert row["log_start_offset"] == 0
    d.advance_clock(2 * hour)
    [row] = d.retention(kept)
    assert row["log_start_offset"] == 1, row
    [clock] = d.clocks()
    assert clock["advanced_ms"] >= 3 * hour and clock["now_ms"] >= time.time() * 1000 + 3 * hour - 1000
    assert http_or_api_refuses_going_back(d)


def http_or_api_refuses_going_back(d) -> bool:
    if isinstance(d, BrokerCliDoor):
        code, out = http(d.url, "POST", "/v1/clock", {"advance_ms": -1})
        return code == 400 and ">= 0" in out["error"]
    with pytest.raises(ValueError, match="only goes forward"):
        d.advance_clock(-1)
    return True
