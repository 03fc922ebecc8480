"""The control model (issue "Fault injection and inspection from any language"): every control is a value in one
model (kafkite.control.model.Faults); each test runs twice, through the in-process API (a BrokerThread's `faults`)
and through HTTP (a `kafkite serve --control-port` process driven by the `kafkite control` CLI, whose JSON the test
parses), with real clients: error sequences and their filters, per-partition errors, holds, latency per API, drops
before and after handling, version caps."""
from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer import ProduceRequest

from helpers import kp_group_consumer, wait_until
from kafkite.storage.batch import build_batch
from kafkite.testing.process import BrokerProcess
from kafkite.testing.runner import BrokerThread
from kafkite.testing.wire_client import WireClient
from kafkite.wire.errors import E


def control(url: str, *args: str) -> tuple[int, object]:
    """`kafkite control --url URL ARGS`: (exit code, the JSON it printed)."""
    p = subprocess.run([sys.executable, "-m", "kafkite.cli", "control", "--url", url, *args], capture_output=True,
                       text=True, timeout=60)
    return p.returncode, json.loads((p.stdout if p.returncode == 0 else p.stderr).strip().splitlines()[-1])


class ApiDoor:
    """The in-process API: the broker's own Faults object."""

    def __init__(self, broker: BrokerThread) -> None:
        self.f = broker.faults

    def reset(self):
        self.f.reset()

    def error(self, api, *errors, count=1, **kw):
        return self.f.inject_error(api, list(errors), count=count, **kw)  # names or codes

    def clear(self):
        self.f.clear()

    def state(self):
        return self.f.state()

    def requests(self, api=None):
        return [r for r in self.f.requests if api in (None, r["api"])]

    def drop(self, api, before=False):
        self.f.drop_response(api, handled=not before)

    def latency(self, ms, api=None):
        self.f.set_latency(None, ms, api=api)

    def hold(self, api):
        self.f.hold(api)

    def held(self):
        return self.f.holding()

    def release(self, api=None):
        return self.f.release(api)

    def unhold(self, api=None):
        return self.f.unhold(api)

    def versions(self, api, max_version=None, remove=False):
        if remove:
            self.f.remove_api(api)
        else:
            self.f.set_api_versions(api, max_version=max_version)


def ok(result):
    code, out = result
    assert code == 0, out
    return out


class CliDoor:
    """HTTP, through the `kafkite control` CLI (one process per call, its JSON parsed)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def reset(self):
        ok(control(self.url, "reset"))

    def error(self, api, *errors, count=1, rtt_ms=None, **kw):
        flags = [x for k, v in kw.items() for x in (f"--{k.replace('_', '-')}", str(v))]
        flags += [x for ms in (rtt_ms or []) for x in ("--rtt", str(ms))]
        return ok(control(self.url, "error", api, *errors, "--count", str(count), *flags))["id"]

    def clear(self):
        ok(control(self.url, "clear"))

    def state(self):
        return ok(control(self.url, "faults"))

    def requests(self, api=None):
        return ok(control(self.url, "requests", *(["--api", api] if api else [])))["requests"]

    def drop(self, api, before=False):
        ok(control(self.url, "drop", api, *(["--before"] if before else [])))

    def latency(self, ms, api=None):
        ok(control(self.url, "latency", str(ms), *(["--api", api] if api else [])))

    def hold(self, api):
        ok(control(self.url, "hold", api))

    def held(self):
        return ok(control(self.url, "holds"))["held"]

    def release(self, api=None):
        return ok(control(self.url, "release", *([api] if api else [])))["released"]

    def unhold(self, api=None):
        return ok(control(self.url, "unhold", *([api] if api else [])))["removed"]

    def versions(self, api, max_version=None, remove=False):
        ok(control(self.url, "versions", api, *(["--remove"] if remove else ["--max", str(max_version)])))


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
    if request.param == "api":
        b = request.getfixturevalue("in_process")
        d = ApiDoor(b)
    else:
        b = request.getfixturevalue("served")
        d = CliDoor(b.control_url)
    d.reset()
    yield d, b.bootstrap_servers
    d.reset()


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create(bs: str, topic: str, partitions: int = 1, replication: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bs})  # kept alive until the answer came
    admin.create_topics([NewTopic(topic, partitions, replication)])[topic].result(30)


def producer(bs: str, **conf) -> Producer:
    return Producer({"bootstrap.servers": bs, "retry.backoff.ms": 50, "linger.ms": 0, **conf})


def deliver(p: Producer, topic: str, value: bytes, partition: int = -1, timeout: float = 30) -> None:
    errs = []
    p.produce(topic, value=value, partition=partition, on_delivery=lambda err, msg: errs.append(err))
    assert p.flush(timeout) == 0 and errs == [None], errs


def consume(bs: str, topic: str, partitions: list[int], expected: int, timeout: float = 30) -> list[tuple]:
    """(partition, value) of every record, read by an assigned confluent-kafka consumer (no group)."""
    c = Consumer({"bootstrap.servers": bs, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < expected and time.monotonic() < deadline:
        for m in c.consume(100, timeout=0.3):
            assert not m.error(), m.error()
            out.append((m.partition(), m.value()))
    # a little longer: nothing more (a duplicate) arrives
    end = time.monotonic() + 0.5
    while time.monotonic() < end:
        out += [(m.partition(), m.value()) for m in c.consume(100, timeout=0.1) if not m.error()]
    c.close()
    return out


def wire(bs: str) -> WireClient:
    return WireClient.connect(bs.split(",")[0])


# -- errors -----------------------------------------------------------------------------------
def test_an_error_sequence_is_answered_in_turn(door):
    d, bs = door
    topic = topic_name("seq")
    p = producer(bs)
    deliver(p, topic, b"warm-up")
    d.error("Produce", "NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT", "NONE")
    rule = d.state()["errors"][0]
    assert rule["errors"] == ["NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT", "NONE"] and rule["remaining"] == 3
    before = max([r["seq"] for r in d.requests()], default=0)
    deliver(p, topic, b"through-the-sequence")
    produces = [r for r in d.requests("Produce") if r["seq"] > before]
    assert [r["error"] for r in produces] == ["NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT", None], produces
    assert d.state()["errors"] == []  # used up
    assert sorted(v for _, v in consume(bs, topic, [0], 2)) == [b"through-the-sequence", b"warm-up"]


def test_filters_and_an_error_until_cleared(door):
    """client_id: only the victim's requests fail, for as long as the rule stays (count -1); version: a rule for
    another Produce version is never used, one for the client's version is."""
    d, bs = door
    topic = topic_name("filters")
    bystander, victim = producer(bs, **{"client.id": "bystander"}), producer(bs, **{"client.id": "victim"})
    deliver(bystander, topic, b"warm-up")
    version = d.requests("Produce")[-1]["version"]
    d.error("Produce", "NOT_LEADER_OR_FOLLOWER", count=-1, client_id="victim")
    deliver(bystander, topic, b"bystander")
    victim.produce(topic, value=b"victim")
    wait_until(lambda: len([r for r in d.requests("Produce") if r["client_id"] == "victim"]) >= 3, 30,
               what="the victim retrying")
    assert victim.flush(0.5) == 1  # still failing
    [rule] = d.state()["errors"]
    assert rule["remaining"] == -1 and rule["client_id"] == "victim" and rule["fired"] >= 3
    d.clear()
    assert victim.flush(30) == 0
    victims = [r for r in d.requests("Produce") if r["client_id"] == "victim"]
    assert all(r["error"] == "NOT_LEADER_OR_FOLLOWER" for r in victims[:-1]) and victims[-1]["error"] is None

    d.error("Produce", "NOT_LEADER_OR_FOLLOWER", version=version + 1 if version < 11 else version - 1)
    deliver(bystander, topic, b"other version")
    [unused] = d.state()["errors"]
    assert d.requests("Produce")[-1]["error"] is None and (unused["remaining"], unused["fired"]) == (1, 0)
    d.clear()
    d.error("Produce", "NOT_LEADER_OR_FOLLOWER", version=version)
    deliver(bystander, topic, b"this version")
    assert [r["error"] for r in d.requests("Produce")[-2:]] == ["NOT_LEADER_OR_FOLLOWER", None]


def _produce_request(topic: str, parts: list[int]) -> ProduceRequest:
    T = ProduceRequest.TopicProduceData
    return ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[T(name=topic, topic_id=None,
        partition_data=[T.PartitionProduceData(index=i, records=build_batch([(None, b"raw-%d" % i, [])],
                                                                          timestamp_ms=int(time.time() * 1000)))
                        for i in parts])])


def _end_offset(w: WireClient, topic: str, partition: int) -> int:
    T = ListOffsetsRequest.ListOffsetsTopic
    req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[T(name=topic, partitions=[
        T.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1, timestamp=-1)])])
    return w.request(req, 7).topics[0].partitions[0].offset


def test_a_partitions_produce_error_leaves_the_others_served(door):
    d, bs = door
    topic = topic_name("pp")
    create(bs, topic, 2)
    d.error("Produce", "NOT_LEADER_OR_FOLLOWER", topic=topic, partition=0)
    with wire(bs) as w:
        resp = w.request(_produce_request(topic, [0, 1]), 9)
        parts = {p.index: (p.error_code, p.base_offset) for t in resp.responses for p in t.partition_responses}
        assert parts == {0: (E.NOT_LEADER_OR_FOLLOWER, -1), 1: (0, 0)}
        assert (_end_offset(w, topic, 0), _end_offset(w, topic, 1)) == (0, 1)  # nothing appended to partition 0
    # a real producer: partition 0 fails twice and is retried, partition 1 is served the first time
    d.error("Produce", "NOT_LEADER_OR_FOLLOWER", count=2, topic=topic, partition=0)
    p = producer(bs)
    deliver(p, topic, b"p0", partition=0)
    deliver(p, topic, b"p1", partition=1)
    assert [r["error"] for r in d.requests("Produce")[-4:]] == ["NOT_LEADER_OR_FOLLOWER"] * 2 + [None, None]
    assert sorted(consume(bs, topic, [0, 1], 3)) == [(0, b"p0"), (1, b"p1"), (1, b"raw-1")]


def test_each_pushed_error_waits_its_rtt(door):
    """librdkafka's push_request_error_rtts: each error of a sequence has its own delay; the request waits it, then is
    answered (NONE: handled). A delay per error that does not match the errors is refused, changing nothing."""
    d, bs = door
    topic = topic_name("rtt")
    p = producer(bs)
    deliver(p, topic, b"warm-up")
    d.error("Produce", "NOT_LEADER_OR_FOLLOWER", "NONE", rtt_ms=[300, 0])
    assert d.state()["errors"][0]["rtts"] == [300, 0]
    with wire(bs) as w:
        t0 = time.monotonic()
        resp = w.request(_produce_request(topic, [0]), 9)
        waited = time.monotonic() - t0
    assert resp.responses[0].partition_responses[0].error_code == E.NOT_LEADER_OR_FOLLOWER and waited >= 0.3
    deliver(p, topic, b"after")  # NONE, at once
    rows = d.requests("Produce")[-2:]
    assert [(r["error"], r.get("rtt_ms")) for r in rows] == [("NOT_LEADER_OR_FOLLOWER", 300), (None, None)], rows
    assert d.state()["errors"] == []
    if isinstance(d, CliDoor):
        code, out = control(d.url, "error", "Produce", "NONE", "NONE", "--rtt", "1", "--rtt", "2", "--rtt", "3")
        assert code == 1 and "one rtt per error" in out["error"]
    else:
        with pytest.raises(ValueError, match="one rtt per error"):
            d.error("Produce", "NONE", "NONE", rtt_ms=[1, 2, 3])
    assert d.state()["errors"] == []


def test_an_add_partitions_to_txn_topic_error_and_a_transactional_producer_retries(door):
    """librdkafka's rd_kafka_mock_topic_set_error for AddPartitionsToTxn: the topic's partitions answer the error, the
    others OPERATION_NOT_ATTEMPTED (none added, as Kafka answers when one fails); a transactional confluent-kafka
    producer retries and commits."""
    from kafka.protocol.producer.transaction import AddPartitionsToTxnRequest as R
    d, bs = door
    a, b = topic_name("txn-a"), topic_name("txn-b")
    create(bs, a, 2)
    create(bs, b)
    d.error("AddPartitionsToTxn", "UNKNOWN_TOPIC_OR_PARTITION", topic=a, partition=1)
    req = R(v3_and_below_transactional_id="t", v3_and_below_producer_id=1, v3_and_below_producer_epoch=0,
            v3_and_below_topics=[R.AddPartitionsToTxnTopic(name=a, partitions=[0, 1]),
                                 R.AddPartitionsToTxnTopic(name=b, partitions=[0])])
    with wire(bs) as w:
        resp = w.request(req, 3)
    assert {(t.name, p.partition_index): p.partition_error_code for t in resp.results_by_topic_v3_and_below
            for p in t.results_by_partition} == {(a, 0): E.OPERATION_NOT_ATTEMPTED, (a, 1): E.UNKNOWN_TOPIC_OR_PARTITION,
                                                 (b, 0): E.OPERATION_NOT_ATTEMPTED}
    d.error("AddPartitionsToTxn", "UNKNOWN_TOPIC_OR_PARTITION", topic=a)
    p = producer(bs, **{"transactional.id": topic_name("tx")})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(a, value=b"in-a", partition=0)
    p.produce(b, value=b"in-b", partition=0)
    p.commit_transaction(60)
    adds = [r["error"] for r in d.requests("AddPartitionsToTxn")][-2:]
    assert adds == ["UNKNOWN_TOPIC_OR_PARTITION", None], adds
    assert [r["error"] for r in d.requests("EndTxn")][-1:] == [None]  # committed


def test_a_partitions_fetch_error_leaves_the_others_served(door):
    d, bs = door
    topic = topic_name("fp")
    create(bs, topic, 2)
    p = producer(bs)
    deliver(p, topic, b"a", partition=0)
    deliver(p, topic, b"b", partition=1)
    d.error("Fetch", "NOT_LEADER_OR_FOLLOWER", topic=topic, partition=0)
    T = FetchRequest.FetchTopic
    req = FetchRequest(replica_id=-1, max_wait_ms=5000, min_bytes=1 << 20, max_bytes=1 << 20, isolation_level=0,
                       session_id=0, session_epoch=-1, topics=[T(topic=topic, topic_id=None, partitions=[
                           T.FetchPartition(partition=i, current_leader_epoch=-1, fetch_offset=0,
                                            last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)
                           for i in (0, 1)])], forgotten_topics_data=[], rack_id="")
    with wire(bs) as w:
        t0 = time.monotonic()
        resp = w.request(req, 12)
        assert time.monotonic() - t0 < 4, "a partition error answers at once (no wait for min_bytes)"
    parts = {pd.partition_index: pd for t in resp.responses for pd in t.partitions}
    assert parts[0].error_code == E.NOT_LEADER_OR_FOLLOWER and not parts[0].records
    assert parts[1].error_code == 0 and parts[1].high_watermark == 1 and parts[1].records
    # a real consumer gets partition 0's error twice, finds the leader again and reads both
    d.error("Fetch", "NOT_LEADER_OR_FOLLOWER", count=2, topic=topic, partition=0)
    assert sorted(consume(bs, topic, [0, 1], 2)) == [(0, b"a"), (1, b"b")]
    assert d.state()["errors"] == []
    assert [r["error"] for r in d.requests("Fetch") if r["error"]] == ["NOT_LEADER_OR_FOLLOWER"] * 3


def test_list_offsets_and_offset_for_leader_epoch_partition_errors(door):
    """kfake's Fault also covers ListOffsets and OffsetForLeaderEpoch: the named partition answers the error,
    the other is answered for real; a real consumer starting from the end gets the error, retries, and reads."""
    from kafka.protocol.consumer import OffsetForLeaderEpochRequest
    d, bs = door
    topic = topic_name("lo")
    create(bs, topic, 2)
    p = producer(bs)
    deliver(p, topic, b"x", partition=0)
    deliver(p, topic, b"y", partition=1)
    d.error("ListOffsets", "NOT_LEADER_OR_FOLLOWER", topic=topic, partition=1)
    d.error("OffsetForLeaderEpoch", "FENCED_LEADER_EPOCH", topic=topic, partition=0)
    T = ListOffsetsRequest.ListOffsetsTopic
    lo = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[T(name=topic, partitions=[
        T.ListOffsetsPartition(partition_index=i, current_leader_epoch=-1, timestamp=-1) for i in (0, 1)])])
    O = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    ofle = OffsetForLeaderEpochRequest(replica_id=-1, topics=[O(topic=topic, partitions=[
        O.OffsetForLeaderPartition(partition=i, current_leader_epoch=-1, leader_epoch=0) for i in (0, 1)])])
    with wire(bs) as w:
        got = {p.partition_index: (p.error_code, p.offset) for p in w.request(lo, 7).topics[0].partitions}
        assert got == {0: (0, 1), 1: (E.NOT_LEADER_OR_FOLLOWER, -1)}
        got = {p.partition: (p.error_code, p.end_offset) for p in w.request(ofle, 4).topics[0].partitions}
        assert got == {0: (E.FENCED_LEADER_EPOCH, -1), 1: (0, 1)}
    assert d.state()["errors"] == []
    d.error("ListOffsets", "NOT_LEADER_OR_FOLLOWER", count=2, topic=topic, partition=0)
    deliver(p, topic, b"z", partition=0)
    c = Consumer({"bootstrap.servers": bs, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, -1)])  # OFFSET_END: a ListOffsets for partition 0
    deliver(p, topic, b"after", partition=0)
    wait_until(lambda: [r for r in d.requests("ListOffsets") if r["error"] is None and r["client_id"] == "rdkafka"],
               30, what="the consumer's ListOffsets after the errors")
    c.close()
    assert [r["error"] for r in d.requests("ListOffsets") if r["client_id"] == "rdkafka"][:2] == [
        "NOT_LEADER_OR_FOLLOWER"] * 2


# -- timing -----------------------------------------------------------------------------------
def test_a_held_join_group_waits_until_released(door):
    """JoinGroup is held: the consumer's join waits, while other connections (a producer) are served; once
    released, the consumer joins and reads."""
    d, bs = door
    topic, group = topic_name("hold"), topic_name("g")
    p = producer(bs)
    deliver(p, topic, b"first")
    d.hold("JoinGroup")
    c = kp_group_consumer(topic, bootstrap_servers=bs, group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False)
    try:
        deadline = time.monotonic() + 30
        while not d.held() and time.monotonic() < deadline:
            assert not c.poll(timeout_ms=100)
        [held] = d.held()
        assert held["api"] == "JoinGroup" and held["held"]
        t0 = time.monotonic()
        deliver(p, topic, b"second")  # another connection: served while the join is held
        assert time.monotonic() - t0 < 5
        assert not c.poll(timeout_ms=300) and not c.assignment()
        assert d.release("JoinGroup") == 1
        # the released JoinGroup is answered MEMBER_ID_REQUIRED (KIP-394): the rejoin with its member id is
        # held too (the hold stays); removing the hold lets it through
        wait_until(lambda: c.poll(timeout_ms=50) == {} and d.held(), 30, what="the rejoin held")
        assert d.unhold("JoinGroup") == 1 and d.state()["holds"] == []
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 2 and time.monotonic() < deadline:
            got += [m.value for ms in c.poll(timeout_ms=200).values() for m in ms]
        assert got == [b"first", b"second"]
    finally:
        d.clear()
        c.close()


def test_latency_per_api(door):
    d, bs = door
    topic = topic_name("lat")
    p = producer(bs)
    deliver(p, topic, b"warm-up")
    d.latency(3000, api="Produce")
    assert d.state()["latency"] == [{"broker": None, "api": "Produce", "ms": 3000}]
    t0 = time.monotonic()
    deliver(p, topic, b"slow")
    assert time.monotonic() - t0 >= 3.0
    t0 = time.monotonic()
    AdminClient({"bootstrap.servers": bs}).list_topics(timeout=10)  # Metadata: not delayed
    assert time.monotonic() - t0 < 2.5


@pytest.mark.parametrize("before", [True, False], ids=["before", "after"])
def test_a_dropped_connection_before_or_after_handling(door, before):
    """Cut before handling: the producer's retry is the only copy. Cut after: the first try was written, and the
    retry (without idempotence) writes a second copy."""
    d, bs = door
    topic = topic_name("drop")
    p = producer(bs, **{"enable.idempotence": False})
    deliver(p, topic, b"warm-up")
    d.drop("Produce", before=before)
    deliver(p, topic, b"once")
    assert d.state()["drops"] == []
    assert d.requests("Produce")[-2].get("dropped") is True
    values = sorted(v for _, v in consume(bs, topic, [0], 2 if before else 3))
    assert values == ([b"once", b"warm-up"] if before else [b"once", b"once", b"warm-up"])


# -- versions ---------------------------------------------------------------------------------
def test_fetch_capped_to_v4_and_an_api_removed(door):
    d, bs = door
    topic = topic_name("cap")
    p = producer(bs)
    deliver(p, topic, b"capped")
    d.versions("Fetch", max_version=4)
    d.versions("ListGroups", remove=True)
    with wire(bs) as w:
        keys = {k.api_key: (k.min_version, k.max_version) for k in w.request(ApiVersionsRequest(), 0).api_keys}
        assert keys[1] == (4, 4) and 16 not in keys and keys[0][1] == 11
    with wire(bs) as w:  # above the cap: the connection is closed, as for any unsupported version
        w.send_raw(w.encode(FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1, isolation_level=0,
                                         session_id=0, session_epoch=-1, topics=[], forgotten_topics_data=[]),
                            5)[0])
        assert w.is_closed()
    from kafka.protocol.admin import ListGroupsRequest
    with wire(bs) as w:
        w.send_raw(w.encode(ListGroupsRequest(), 0)[0])
        assert w.is_closed()
    assert consume(bs, topic, [0], 1) == [(0, b"capped")]
    fetches = d.requests("Fetch")
    assert fetches and {r["version"] for r in fetches if r["client_id"] == "rdkafka"} == {4}


def test_api_versions_above_its_cap_gets_kip_511s_answer(door):
    d, bs = door
    d.versions("ApiVersions", max_version=2)
    with wire(bs) as w:
        data, corr = w.encode(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
        w.send_raw(data)
        resp = w.read_response(18, 0, corr)
    assert resp.error_code == E.UNSUPPORTED_VERSION
    assert {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}[18] == (0, 2)
    deliver(producer(bs), topic_name("after-cap"), b"the client falls back")  # librdkafka retries with v0..2


def test_an_in_process_cluster_serves_its_one_model_over_http():
    """KafkiteCluster(control=True): the CLI and the in-process methods change the same model; a rule for broker 2
    is answered by broker 2 only."""
    from kafka.protocol.metadata import MetadataRequest
    from kafkite.testing.cluster import KafkiteCluster
    with KafkiteCluster(brokers=2, control=True) as cluster:
        url = cluster.control_url
        ok(control(url, "error", "Metadata", "LEADER_NOT_AVAILABLE", "--broker", "2", "--count", "-1"))
        assert cluster.faults.state()["errors"][0]["broker"] == 2
        cluster.hold("Produce")
        assert [h["api"] for h in ok(control(url, "holds"))["holds"]] == ["Produce"]
        assert cluster.unhold() == 1 and ok(control(url, "holds"))["holds"] == []
        req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")], allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False)
        for broker, error in ((1, E.UNKNOWN_TOPIC_OR_PARTITION), (2, E.LEADER_NOT_AVAILABLE)):
            with WireClient.connect(cluster.bootstrap_of(broker)) as w:
                assert w.request(req, 9).topics[0].error_code == error
        assert control(url, "error", "Produce", "6", "--broker", "3")[0] == 1  # no broker 3 here


def _commit_group(bs: str, topic: str, group: str, n: int) -> None:
    """A kafka-python group consumer reads n records and commits; it stays in the group (the caller closes)."""
    c = kp_group_consumer(topic, bootstrap_servers=bs, group_id=group, client_id="viewer", auto_offset_reset="earliest",
                      enable_auto_commit=False)
    got = 0
    deadline = time.monotonic() + 30
    while got < n and time.monotonic() < deadline:
        got += sum(len(ms) for ms in c.poll(timeout_ms=200).values())
    assert got == n
    c.commit()
    return c


@pytest.mark.parametrize("where", ["in-process", "serve"])
def test_partition_and_group_state_as_json(where, served):
    """GET /v1/partitions and /v1/groups (the CLI's `partitions`, `groups`) and, in-process,
    KafkiteCluster.partition_states / group_states: the same JSON."""
    from kafkite.testing.cluster import KafkiteCluster
    topic, group = topic_name("views"), topic_name("vg")
    cluster = KafkiteCluster(brokers=1, control=True).start() if where == "in-process" else None
    try:
        bs, url = (cluster.bootstrap_servers, cluster.control_url) if cluster else (served.bootstrap_servers,
                                                                                  served.control_url)
        create(bs, topic, 2)
        p = producer(bs)
        for i in range(3):
            deliver(p, topic, b"v%d" % i, partition=0)
        consumer = _commit_group(bs, topic, group, 3)
        try:
            parts = ok(control(url, "partitions", "--topic", topic))["partitions"]
            assert [(x["partition"], x["leader"], x["isr"], x["local_replicas"]["1"]["log_end_offset"])
                    for x in parts] == [(0, 1, [1], 3), (1, 1, [1], 0)]
            [g] = ok(control(url, "groups", "--group", group))["groups"]
            assert g["state"] == "Stable" and g["protocol_type"] == "consumer" and g["generation"] >= 1
            assert [m["client_id"] for m in g["members"]] == ["viewer"] and g["leader"] == g["members"][0]["member_id"]
            assert g["offsets"] == {f"{topic}-0": 3, f"{topic}-1": 0}
            assert ok(control(url, "groups", "--group", "no-such-group"))["groups"] == []
            if cluster is not None:  # the in-process door: the same views
                assert cluster.partition_states(topic) == parts
                assert cluster.group_states(group) == [g]
        finally:
            consumer.close()
    finally:
        if cluster is not None:
            cluster.stop()


def test_a_leader_moved_over_http_and_the_producer_follows():
    """POST /v1/leaders (the CLI's `leader`) on a one-process cluster: the controller moves the leader, a
    confluent-kafka producer gets NOT_LEADER_OR_FOLLOWER from the old one, refreshes and delivers to the new one."""
    from kafkite.testing.cluster import KafkiteCluster
    with KafkiteCluster(brokers=3, control=True) as cluster:
        bs, url = cluster.bootstrap_servers, cluster.control_url
        topic = topic_name("moved")
        create(bs, topic, 1, replication=3)
        p = producer(bs)
        deliver(p, topic, b"before")
        old = cluster.leader(topic, 0)
        wait_until(lambda: len(cluster.isr(topic, 0)) == 3, 30, what="a full ISR")
        new = next(b for b in cluster.isr(topic, 0) if b != old)
        [part] = ok(control(url, "leader", topic, "0", str(new)))["partitions"]
        assert part["leader"] == new == cluster.leader(topic, 0)
        deliver(p, topic, b"after")
        produces = [r for r in cluster.faults.requests if r["api"] == "Produce" and r["client_id"] == "rdkafka"]
        assert produces[-1]["broker"] == new
        assert sorted(v for _, v in consume(bs, topic, [0], 2)) == [b"after", b"before"]
        code, out = control(url, "leader", topic, "0", "9")
        assert code == 1 and "unknown broker 9" in out["error"]
        code, out = control(url, "leader", "no-such-topic", "0", str(new))
        assert code == 1 and "not a live replica" in out["error"]
