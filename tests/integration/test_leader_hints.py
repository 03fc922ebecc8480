"""KIP-951 (Kafka 3.7+): a Produce v10+ partition answered NOT_LEADER_OR_FOLLOWER, and a Fetch v16+ partition
answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH, carry CurrentLeader (leader id and epoch) and the response
the leader's endpoint (NodeEndpoints); older versions carry neither (server/handlers/leader_hints.py). And the
follower a test sends consumers to (POST /v1/followers)."""
from __future__ import annotations

import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from helpers import wait_until
from test_control_model import consume, control, ok
from test_control_plane import http
from kafkite.testing.cluster import KafkiteCluster
from kafkite.testing.wire_client import WireClient
from kafkite.wire.errors import E


def _batch() -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    b.append(0, timestamp=int(time.time() * 1000), key=b"k", value=b"v", headers=[])
    return bytes(b.build())


def _produce(w: WireClient, topic: str, version: int):
    T = ProduceRequest.TopicProduceData
    req = ProduceRequest(transactional_id=None, acks=1, timeout_ms=30000, topic_data=[
        T(name=topic, topic_id=None, partition_data=[T.PartitionProduceData(index=0, records=_batch())])])
    return w.request(req, version)


def _fetch(w: WireClient, topic: str, topic_id, version: int, epoch: int = -1):
    T = FetchRequest.FetchTopic
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                       session_id=0, session_epoch=-1, topics=[T(topic=topic, topic_id=topic_id, partitions=[
                           T.FetchPartition(partition=0, current_leader_epoch=epoch, fetch_offset=0,
                                            last_fetched_epoch=-1, log_start_offset=-1,
                                            partition_max_bytes=1 << 20)])],
                       forgotten_topics_data=[], rack_id="")
    return w.request(req, version)


def test_not_leader_answers_name_the_current_leader_and_a_producer_follows_a_moved_leader():
    with KafkiteCluster(brokers=2) as cluster:
        bs = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        topic, one = "kip951", "kip951-one"  # one: a single replica on broker 1 (broker 2 hosts none)
        for name, replicas in ((topic, [1, 2]), (one, [1])):
            admin.create_topics([NewTopic(name, 1, replica_assignment=[replicas])])[name].result(30)
        wait_until(lambda: sorted(cluster.isr(topic, 0)) == [1, 2], 30, what="both replicas in the ISR")
        epoch = cluster.leader_epoch(one, 0)
        leader_port = cluster.ports[1]
        one_id = cluster.brokers[2].metadata.topic(one).topic_id
        with WireClient.connect(cluster.bootstrap_of(2)) as w:
            r = _produce(w, topic, 10)  # broker 2 follows
            p = r.responses[0].partition_responses[0]
            assert p.error_code == E.NOT_LEADER_OR_FOLLOWER
            assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (1, cluster.leader_epoch(topic, 0))
            assert [(n.node_id, n.port) for n in r.node_endpoints] == [(1, leader_port)]
            old = _produce(w, topic, 9)  # before v10: no such fields
            assert old.responses[0].partition_responses[0].error_code == E.NOT_LEADER_OR_FOLLOWER
            assert getattr(old.responses[0].partition_responses[0], "current_leader", None) is None
            r = _fetch(w, one, one_id, 16)  # broker 2 is no replica (a consumer may read a follower from v11)
            p = r.responses[0].partitions[0]
            assert p.error_code == E.NOT_LEADER_OR_FOLLOWER
            assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (1, epoch)
            assert [(n.node_id, n.port) for n in r.node_endpoints] == [(1, leader_port)]
            r = _fetch(w, one, one_id, 15)
            assert r.responses[0].partitions[0].error_code == E.NOT_LEADER_OR_FOLLOWER
            assert r.responses[0].partitions[0].current_leader is None and not r.node_endpoints
        topic_id = cluster.brokers[1].metadata.topic(topic).topic_id
        with WireClient.connect(cluster.bootstrap_of(1)) as w:  # the leader, asked at an old epoch: fenced
            old_epoch = cluster.leader_epoch(topic, 0)
            cluster.move_leader(topic, 0, 2)
            cluster.move_leader(topic, 0, 1)
            new = cluster.leader_epoch(topic, 0)
            assert new > old_epoch
            r = _fetch(w, topic, topic_id, 16, epoch=old_epoch)
            p = r.responses[0].partitions[0]
            assert p.error_code == E.FENCED_LEADER_EPOCH
            assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (1, new)
        # confluent-kafka (librdkafka reads KIP-951's fields): with broker 1's Metadata answers held, a producer still
        # finds the moved leader from the NOT_LEADER_OR_FOLLOWER answer and delivers (without KIP-951 it waits for
        # Metadata from broker 1, its only connection, and delivers nothing until the hold goes)
        prod = Producer({"bootstrap.servers": cluster.bootstrap_of(1), "acks": "all", "linger.ms": 0})
        for i in range(3):
            prod.produce(topic, value=b"%d" % i)
        assert prod.flush(30) == 0
        cluster.faults.hold("Metadata", broker_id=1)
        try:
            cluster.move_leader(topic, 0, 2)
            for i in range(3, 6):
                prod.produce(topic, value=b"%d" % i)
            assert prod.flush(30) == 0
            assert cluster.log_end_offsets(topic, 0)[2] == 6
            produced = [e["broker"] for e in cluster.faults.requests if e["api"] == "Produce"]
            assert produced[-1] == 2, produced
        finally:
            cluster.faults.clear()


def test_consumers_sent_to_the_follower_a_test_sets_over_http_and_the_cli():
    """POST /v1/followers (`kafkite control follower T P B`, KafkiteCluster.set_follower; librdkafka's mock
    partition_set_follower): the leader names that replica the preferred read replica, a confluent-kafka consumer
    fetches from it and reads everything; removed, it fetches from the leader again."""
    with KafkiteCluster(brokers=2, control=True) as cluster:
        bs, url = cluster.bootstrap_servers, cluster.control_url
        admin = AdminClient({"bootstrap.servers": bs})
        topic = "followed"
        admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 2]])])[topic].result(30)
        prod = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 0})
        for i in range(5):
            prod.produce(topic, value=b"%d" % i)
        assert prod.flush(30) == 0
        assert ok(control(url, "follower", topic, "0", "2")) == {"followers": [
            {"topic": topic, "partition": 0, "broker": 2}]}
        cluster.faults.clear_requests()
        assert [v for _, v in consume(bs, topic, [0], 5)] == [b"%d" % i for i in range(5)]
        fetched = {e["broker"] for e in cluster.faults.requests if e["api"] == "Fetch"}
        assert 2 in fetched, fetched
        topic_id = cluster.brokers[1].metadata.topic(topic).topic_id
        with WireClient.connect(cluster.bootstrap_of(1)) as w:  # the leader: no records, the follower named
            p = _fetch(w, topic, topic_id, 16).responses[0].partitions[0]
            assert (p.error_code, p.preferred_read_replica, p.records) == (0, 2, b"")
            p = _fetch(w, topic, topic_id, 10).responses[0].partitions[0]  # before v11: served by the leader
            assert p.error_code == 0 and p.records
            cluster.set_follower(topic, 0, None)  # the in-process API
            assert cluster.faults.state()["followers"] == []
            p = _fetch(w, topic, topic_id, 16).responses[0].partitions[0]
            assert (p.error_code, p.preferred_read_replica) == (0, -1) and p.records
        # bad input: 4xx, nothing set
        assert http(url, "POST", "/v1/followers", {"topic": topic, "partition": 0, "broker": 9})[0] == 400
        assert http(url, "POST", "/v1/followers", {"topic": "no-such", "partition": 0, "broker": 1})[0] == 400
        assert http(url, "POST", "/v1/followers", {"topic": topic, "partition": 0})[0] == 400
        assert http(url, "POST", "/v1/followers", {"topic": topic, "partition": -1, "broker": 1})[0] == 400
        assert ok(control(url, "followers")) == {"followers": []}
        ok(control(url, "follower", topic, "0", "1"))
        assert http(url, "DELETE", "/v1/followers", None)[1] == {"followers": []}


def test_metadata_answers_name_a_pushed_leader_in_turn_over_http_and_the_cli():
    """POST /v1/metadata/leaders (`kafkite control push-leader T P L E`, KafkiteCluster.push_metadata_leader;
    librdkafka's mock partition_push_leader_response): the next Metadata answers name that leader and epoch, one
    each, then the real one again; the partition is unchanged."""
    from kafka.protocol.metadata import MetadataRequest
    with KafkiteCluster(brokers=2, control=True) as cluster:
        bs, url = cluster.bootstrap_servers, cluster.control_url
        admin = AdminClient({"bootstrap.servers": bs})
        topic = "pushed"
        admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 2]])])[topic].result(30)
        epoch = cluster.leader_epoch(topic, 0)
        assert ok(control(url, "push-leader", topic, "0", "2", "7", "--count", "2"))["metadata_leaders"] == [
            {"topic": topic, "partition": 0, "leader": 2, "leader_epoch": 7}] * 2
        cluster.push_metadata_leader(topic, 0, -1, 8)  # the in-process API: after those two
        T = MetadataRequest.MetadataRequestTopic

        def leader():
            with WireClient.connect(cluster.bootstrap_of(1)) as w:
                r = w.request(MetadataRequest(topics=[T(name=topic, topic_id=None)], allow_auto_topic_creation=False,
                                              include_topic_authorized_operations=False), 9)
                p = r.topics[0].partitions[0]
                return p.leader_id, p.leader_epoch
        assert [leader() for _ in range(4)] == [(2, 7), (2, 7), (-1, 8), (1, epoch)]
        assert cluster.leader(topic, 0) == 1 and cluster.leader_epoch(topic, 0) == epoch
        assert http(url, "GET", "/v1/metadata/leaders")[1] == {"metadata_leaders": []}
        ok(control(url, "push-leader", topic, "0", "2", "9"))
        assert http(url, "DELETE", "/v1/metadata/leaders")[1] == {"metadata_leaders": []}
        assert leader() == (1, epoch)
        # bad input: 4xx, nothing pushed
        body = {"topic": topic, "partition": 0, "leader": 2, "leader_epoch": 1}
        assert http(url, "POST", "/v1/metadata/leaders", {**body, "topic": "no-such"})[0] == 400
        assert http(url, "POST", "/v1/metadata/leaders", {**body, "leader": -2})[0] == 400
        assert http(url, "POST", "/v1/metadata/leaders", {**body, "count": 0})[0] == 400
        assert http(url, "POST", "/v1/metadata/leaders", {"topic": topic, "partition": 0})[0] == 400
        assert http(url, "GET", "/v1/metadata/leaders")[1] == {"metadata_leaders": []}
