"""The socket server's limits, with Kafka's config names: idle connections closed
(connections.max.idle.ms), connection counts (max.connections, max.connections.per.ip[.overrides]),
memory held by partly received requests (queued.max.request.bytes), long-poll Fetches of clients
that went away, and KRaft's bound on the partitions one CreateTopics/CreatePartitions may make."""
from __future__ import annotations

import itertools
import os
import socket
import struct
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import wait_until
from kafka.protocol.admin import CreatePartitionsRequest, CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkite.testing.process import BrokerProcess
from kafkite.testing.runner import BrokerThread
from kafkite.testing.wire_client import WireClient
from kafkite.wire.errors import E

BIG_BATCH = "Unable to perform excessively large batch operation."
MiB = 1 << 20


def api_versions(w: WireClient) -> None:
    r = w.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
    assert r.error_code == 0


class SourcedClient(WireClient):
    """A WireClient whose connection leaves from a given local address (127.0.0.2 is another client ip)."""

    def __init__(self, b, source: str | None = None, timeout: float = 10.0):
        host, port = b.bootstrap_servers.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout,
                                             source_address=(source, 0) if source else None)
        self.client_id = "limits"
        self._corr = itertools.count(1)


def connect(b, source: str | None = None, timeout: float = 10.0) -> WireClient:
    return SourcedClient(b, source, timeout)


def produce(w: WireClient, topic: str, value: bytes) -> int:
    records = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    records.append(0, timestamp=int(time.time() * 1000), key=b"k", value=value, headers=[])
    T = ProduceRequest.TopicProduceData
    r = w.request(ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        T(name=topic, topic_id=None, partition_data=[
            T.PartitionProduceData(index=0, records=bytes(records.build()))])]), 9)
    return r.responses[0].partition_responses[0].error_code


def served(b, source: str | None = None) -> bool:
    """A new connection gets an answer (False when the broker closed it at once)."""
    try:
        with connect(b, source) as w:
            api_versions(w)
        return True
    except (ConnectionError, OSError):
        return False


def create_topics(w, topics, *, validate_only=False, version=5):
    """topics: (name, partitions, configs) -> [(name, error code, message)]."""
    CT = CreateTopicsRequest.CreatableTopic
    req = CreateTopicsRequest(topics=[CT(name=n, num_partitions=p, replication_factor=1, assignments=[],
                                         configs=[CT.CreatableTopicConfig(name=k, value=v) for k, v in c.items()])
                                      for n, p, c in topics], timeout_ms=30000, validate_only=validate_only)
    return [(t.name, t.error_code, t.error_message) for t in w.request(req, version).topics]


def topic_partitions(w, names):
    T = MetadataRequest.MetadataRequestTopic
    r = w.request(MetadataRequest(topics=[T(name=n) for n in names], allow_auto_topic_creation=False), 4)
    return {t.name: (t.error_code, len(t.partitions)) for t in r.topics}


# -- connections.max.idle.ms ----------------------------------------------------------------------------------
def test_idle_connection_closed():
    with BrokerThread(overrides={"connections.max.idle.ms": "800"}) as b:
        silent = connect(b)
        used = connect(b)
        api_versions(used)
        busy = connect(b)
        t0 = time.monotonic()
        for _ in range(12):  # a request every 150 ms: never idle for 800 ms
            api_versions(busy)
            time.sleep(0.15)
        assert time.monotonic() - t0 > 1.6
        assert silent.is_closed(timeout=30) and used.is_closed(timeout=30)
        api_versions(busy)  # the active one was kept
        for w in (silent, used, busy):
            w.close()
        assert wait_until(lambda: not b.broker.connections, timeout=30, what="connections closed")


def test_idle_default_is_kafkas():
    with BrokerThread() as b:
        assert b.config.get("connections.max.idle.ms") == 600000
        assert b.config.get("max.connections") == b.config.get("max.connections.per.ip") == 2**31 - 1


# -- max.connections.per.ip, max.connections ------------------------------------------------------------------
def test_max_connections_per_ip():
    overrides = {"max.connections.per.ip": "3", "max.connections.per.ip.overrides": "127.0.0.2:1"}
    with BrokerThread(overrides=overrides) as b:
        kept = [connect(b) for _ in range(3)]
        for w in kept:
            api_versions(w)
        extra = [connect(b) for _ in range(5)]  # beyond the limit: accepted, then closed at once
        for w in extra:
            assert w.is_closed(timeout=30)
            w.close()
        for w in kept:  # the connections within the limit keep working
            api_versions(w)
        # another address has its own count (and its override: 1)
        other = connect(b, "127.0.0.2")
        api_versions(other)
        assert not served(b, "127.0.0.2")
        # a freed slot is reusable
        kept.pop().close()
        wait_until(lambda: served(b), timeout=30, what="a freed slot taken")
        for w in kept + [other]:
            w.close()
        assert wait_until(lambda: b.broker.connection_quotas.total == 0, timeout=30, what="counts back to 0")


def test_max_connections_blocks_acceptance_until_a_slot_frees():
    with BrokerThread(overrides={"max.connections": "3"}) as b:
        kept = [connect(b) for _ in range(3)]
        for w in kept:
            api_versions(w)
        # Kafka stops accepting at the broker-wide limit: the connection waits in the listen backlog, unserved
        waiting = connect(b, timeout=0.5)
        data, corr = waiting.encode(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
        waiting.send_raw(data)
        with pytest.raises(socket.timeout):
            waiting.recv_frame()
        for w in kept:  # existing connections keep working
            api_versions(w)
        kept.pop().close()  # a slot frees: the waiting connection is accepted and its request answered
        waiting.sock.settimeout(10)
        assert waiting.read_response(18, 3, corr).error_code == 0
        for w in kept + [waiting]:
            api_versions(w)
            w.close()


def test_connection_limit_config_checks():
    from kafkite.config import BrokerConfig, ConfigError
    with pytest.raises(ConfigError, match="max.connections.per.ip can be set to zero only if"):
        BrokerConfig(static={"max.connections.per.ip": "0"})
    BrokerConfig(static={"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "127.0.0.1:5"})
    with pytest.raises(ConfigError, match="Value must be at least 0"):
        BrokerConfig(static={"max.connections": "-1"})
    with pytest.raises(ConfigError, match="Error parsing configuration property 'max.connections.per.ip.overrides'"):
        BrokerConfig(static={"max.connections.per.ip.overrides": "127.0.0.1"})
    with pytest.raises(ConfigError, match="queued.max.request.bytes must be larger or equal to socket.request.max"):
        BrokerConfig(static={"queued.max.request.bytes": "1000"})
    BrokerConfig(static={"queued.max.request.bytes": "-1"})  # Kafka's unbounded


# -- queued.max.request.bytes -----------------------------------------------------------------------------------
def send_partial_frames(b, n: int, frame_size: int, sent: int) -> list[socket.socket]:
    """n connections, each sending the size of a frame_size request and `sent` bytes of it (as much as the
    broker takes within a second: a muted connection stops reading)."""
    host, port = b.bootstrap_servers.rsplit(":", 1)
    body = struct.pack(">hhi", 0, 9, 1) + b"\0" * (sent - 8)

    def one(_):
        s = socket.create_connection((host, int(port)))
        s.settimeout(1.0)
        try:
            s.sendall(struct.pack(">i", frame_size) + body)
        except socket.timeout:
            pass
        return s
    with ThreadPoolExecutor(n) as ex:
        return list(ex.map(one, range(n)))


def test_partial_frames_hold_bounded_memory():
    limit = 4 * MiB
    with BrokerThread(overrides={"socket.request.max.bytes": str(limit),
                                 "queued.max.request.bytes": str(limit)}) as b:
        pool = b.broker.memory_pool
        socks = send_partial_frames(b, 10, limit, limit - MiB)  # 10 x 3 MiB of a 4 MiB request
        try:
            # one request's body is being read; the 9 other connections are muted until memory is released
            wait_until(lambda: pool.waiting == 9, timeout=30, what="9 connections muted")
            assert 0 < pool.used <= 2 * limit  # Kafka's non-strict pool: its size plus one request at most
            # everyone else is served meanwhile: small requests, and a real produce + fetch
            with WireClient.connect(b.bootstrap_servers) as w:
                api_versions(w)
                assert create_topics(w, [("alive", 1, {})]) == [("alive", 0, None)]
                assert produce(w, "alive", b"v") == 0
        finally:
            for s in socks:
                s.close()
        # closing releases every reservation
        wait_until(lambda: pool.used == 0 and pool.waiting == 0, timeout=30, what="pool released")


def test_large_requests_go_through_one_after_another():
    """Memory is released once a request has been handled: large requests beyond what the pool holds at once wait
    their turn, and all are served."""
    limit = MiB
    with BrokerThread(overrides={"socket.request.max.bytes": str(limit),
                                 "queued.max.request.bytes": str(limit)}) as b:
        with WireClient.connect(b.bootstrap_servers) as w:
            assert create_topics(w, [("big", 1, {})]) == [("big", 0, None)]

        def producer(i):
            with WireClient.connect(b.bootstrap_servers) as w:
                return [produce(w, "big", bytes([i]) * 700_000) for _ in range(3)]
        with ThreadPoolExecutor(6) as ex:
            assert list(ex.map(producer, range(6))) == [[0, 0, 0]] * 6
        assert b.broker.memory_pool.used == 0
        assert b.state.replicas.get("big", 0).high_watermark == 18


def test_frame_reader_tells_the_size_before_the_body():
    from kafkite.wire.frame import FrameReader
    r = FrameReader(10 * MiB)
    r.feed(struct.pack(">i", 5 * MiB)[:3])
    assert r.pending_size is None and r.next_frame() is None
    r.feed(struct.pack(">i", 5 * MiB)[3:] + b"a" * 1000)
    assert r.pending_size == 5 * MiB and r.buffered == 1000  # only what arrived is held
    for _ in range(5 * 1024 - 1):
        r.feed(b"b" * 1024)
    assert r.next_frame() is None
    r.feed(b"c" * 24 + struct.pack(">i", 2) + b"xy")
    frame = r.next_frame()
    assert len(frame) == 5 * MiB and frame[:1000] == b"a" * 1000 and frame[-24:] == b"c" * 24
    assert r.pending_size == 2 and r.next_frame() == b"xy" and r.pending_size is None and r.buffered == 0


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def test_partial_frames_do_not_pin_their_size_in_rss():
    """The issue's scenario scaled down: 10 connections each holding most of a large request must not pin
    10 x that much memory in the broker process (before: 10 x 90 MB of 100 MB frames pinned 945 MB)."""
    limit = 8 * MiB
    with BrokerProcess(overrides={"socket.request.max.bytes": str(limit),
                                  "queued.max.request.bytes": str(limit)}) as b:
        with WireClient.connect(b.bootstrap_servers) as w:
            api_versions(w)
        before = rss_kib(b.pid)
        socks = send_partial_frames(b, 10, limit, 7 * MiB)  # 70 MiB sent in all
        try:
            time.sleep(0.5)  # let the broker read what it will
            grown_mib = (rss_kib(b.pid) - before) / 1024
            with WireClient.connect(b.bootstrap_servers) as w:
                api_versions(w)
        finally:
            for s in socks:
                s.close()
        assert grown_mib < 30, f"RSS grew by {grown_mib:.0f} MiB"


# -- Fetch long polls of clients that went away -------------------------------------------------------------------
def fetch_request(topic: str, offset: int, max_wait_ms: int) -> FetchRequest:
    T = FetchRequest.FetchTopic
    return FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                        session_id=0, session_epoch=-1, topics=[T(topic=topic, topic_id=None, partitions=[
                            T.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=offset,
                                             last_fetched_epoch=-1, log_start_offset=-1,
                                             partition_max_bytes=1 << 20)])],
                        forgotten_topics_data=[], rack_id="")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_abandoned_long_poll_fetches_release_their_fds():
    with BrokerProcess() as b:
        # a client that stays: its long poll still ends with the data produced
        live = WireClient.connect(b.bootstrap_servers)
        assert create_topics(live, [("poll", 1, {})]) == [("poll", 0, None)]
        data, live_corr = live.encode(fetch_request("poll", 0, 60000), 12)
        live.send_raw(data)
        base = open_fds(b.pid)
        clients = []
        for _ in range(100):  # fetches waiting up to 24 days
            w = WireClient.connect(b.bootstrap_servers)
            w.send_raw(w.encode(fetch_request("poll", 0, 2**31 - 1), 12)[0])
            clients.append(w)
        wait_until(lambda: open_fds(b.pid) >= base + 100, timeout=30, what="connections accepted")
        clients[0].sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        for w in clients:  # the clients go away (the first with a reset, the others with a FIN)
            w.close()
        wait_until(lambda: open_fds(b.pid) <= base, timeout=30, what="abandoned fetches released")
        with WireClient.connect(b.bootstrap_servers) as w:
            assert produce(w, "poll", b"v") == 0
        p = live.read_response(1, 12, live_corr).responses[0].partitions[0]
        assert p.error_code == 0 and p.high_watermark == 1 and p.records
        live.close()


def test_reset_during_long_poll_closes_connection():
    with BrokerThread() as b:
        with WireClient.connect(b.bootstrap_servers) as w:
            assert create_topics(w, [("rst", 1, {})]) == [("rst", 0, None)]
        w = WireClient.connect(b.bootstrap_servers)
        w.send_raw(w.encode(fetch_request("rst", 0, 600000), 12)[0])
        wait_until(lambda: len(b.broker.connections) == 1, timeout=30, what="connection open")
        time.sleep(0.2)  # the fetch is waiting
        w.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        w.close()  # RST
        wait_until(lambda: not b.broker.connections, timeout=30, what="connection closed")


# -- partitions per CreateTopics / CreatePartitions ---------------------------------------------------------------
def test_create_topics_over_the_bound_is_a_policy_violation(broker):
    with WireClient.connect(broker.bootstrap_servers) as w:
        for n in (10000, 100000, 2000000, 2**31 - 1):
            assert create_topics(w, [("huge", n, {})]) == [("huge", E.POLICY_VIOLATION, BIG_BATCH)]
        # one batch of records per request: a TopicRecord + a PartitionRecord per partition + ConfigRecords
        assert create_topics(w, [("a", 5000, {}), ("b", 4999, {})]) == [
            ("a", E.POLICY_VIOLATION, BIG_BATCH), ("b", E.POLICY_VIOLATION, BIG_BATCH)]
        assert create_topics(w, [("c", 9998, {"retention.ms": "1000", "segment.ms": "1000"})],
                             validate_only=True) == [("c", E.POLICY_VIOLATION, BIG_BATCH)]
        # at the bound exactly (10000 records): fine
        assert create_topics(w, [("d", 9999, {})], validate_only=True) == [("d", 0, None)]
        assert create_topics(w, [("e", 4999, {}), ("f", 4999, {})], validate_only=True) == [
            ("e", 0, None), ("f", 0, None)]
        # a topic answered with its own error makes no records
        assert create_topics(w, [("g", 9999, {}), ("h", 5, {"no.such": "1"})], validate_only=True) == [
            ("g", 0, None), ("h", E.INVALID_CONFIG, "Unknown topic config name: no.such")]
        got = topic_partitions(w, ["huge", "a", "b", "c", "d", "e", "f", "g"])
        assert all(err == E.UNKNOWN_TOPIC_OR_PARTITION for err, _ in got.values()), got
        assert len(broker.state.metadata.topics) == 0 and not broker.state.replicas.logs


def test_create_partitions_over_the_bound(broker):
    P = CreatePartitionsRequest.CreatePartitionsTopic
    with WireClient.connect(broker.bootstrap_servers) as w:
        assert create_topics(w, [("p1", 1, {}), ("p2", 1, {})]) == [("p1", 0, None), ("p2", 0, None)]

        def grow(counts, validate_only=False):
            r = w.request(CreatePartitionsRequest(topics=[P(name=n, count=c, assignments=None) for n, c in counts],
                                                  timeout_ms=30000, validate_only=validate_only), 3)
            return [(x.name, x.error_code, x.error_message) for x in r.results]

        assert grow([("p1", 10002), ("p2", 2**31 - 1)]) == [
            ("p1", E.POLICY_VIOLATION, BIG_BATCH), ("p2", E.POLICY_VIOLATION, BIG_BATCH)]
        # the bound is for the request: the first topic within it is done, the next one over it is refused
        assert grow([("p1", 6001), ("p2", 6001)], validate_only=True) == [
            ("p1", 0, None), ("p2", E.POLICY_VIOLATION, BIG_BATCH)]
        assert grow([("p1", 10001)], validate_only=True) == [("p1", 0, None)]
        assert grow([("p1", 3)]) == [("p1", 0, None)]
        assert topic_partitions(w, ["p1", "p2"]) == {"p1": (0, 3), "p2": (0, 1)}


def test_huge_create_topics_on_disk_then_restart(tmp_path):
    """Before, one CreateTopics of 100,000 partitions ran the process out of fds and the data dir never started
    again; now it is refused and the data dir restarts."""
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import PolicyViolationError
    with BrokerThread(data_dir=tmp_path) as b:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        try:
            with pytest.raises(PolicyViolationError, match="excessively large batch"):
                admin.create_topics([NewTopic("huge", 100000, 1)])
            admin.create_topics([NewTopic("ok", 3, 1)])
        finally:
            admin.close()
    assert not list(tmp_path.glob("huge-*"))
    with BrokerThread(data_dir=tmp_path) as b:
        with WireClient.connect(b.bootstrap_servers) as w:
            assert topic_partitions(w, ["ok", "huge"]) == {"ok": (0, 3), "huge": (E.UNKNOWN_TOPIC_OR_PARTITION, 0)}


def test_confluent_admin_gets_policy_violation(broker):
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    fut = admin.create_topics([NewTopic("huge", 100000, 1)])["huge"]
    with pytest.raises(ck.KafkaException) as info:
        fut.result(30)
    code = info.value.args[0].code()
    del admin, fut, info  # the client's threads end before the broker stops
    assert code == ck.KafkaError.POLICY_VIOLATION
    assert not broker.state.metadata.topics

