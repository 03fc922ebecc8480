"""The control plane's cluster membership (issue "Fault injection and inspection from any language"): a broker added
to a running one-process cluster and one decommissioned (`kafkite control add-broker | remove-broker`, POST|DELETE
/v1/brokers; librdkafka's broker_add / broker_decommission, kfake's AddNode / RemoveNode), a broker's rack changed
(`kafkite control rack`, POST /v1/brokers/rack), seen by confluent-kafka's clients."""
from __future__ import annotations

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from helpers import wait_until
from kafkite.testing.cluster import KafkiteCluster
from test_control_model import consume, control, ok, topic_name
from test_control_plane import http
from test_control_topology import Traffic


def _brokers(admin: AdminClient) -> set[int]:
    return set(admin.list_topics(timeout=10).brokers)


def _leader(admin: AdminClient, topic: str) -> int:
    return admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader


def test_a_broker_added_then_one_decommissioned_with_acks_all_traffic_nothing_lost():
    """add-broker: the new broker is in Metadata, a topic is placed on it and a leader moved to it; remove-broker of
    a 3-replica topic's leader while an acks=all producer runs: the new broker takes its place in the replicas and
    the ISR, the leadership moves, the removed broker leaves Metadata, and every acknowledged record is read back
    once. Bad input answers 4xx and changes nothing."""
    with KafkiteCluster(brokers=3, control=True) as cluster:
        bs, url = cluster.bootstrap_servers, cluster.control_url
        admin = AdminClient({"bootstrap.servers": bs})
        big = topic_name("decommissioned")
        admin.create_topics([NewTopic(big, 1, 3, config={"min.insync.replicas": "2"})])[big].result(30)
        wait_until(lambda: len(cluster.isr(big, 0)) == 3, 30, what="a full ISR")

        out = ok(control(url, "add-broker", "--rack", "r4"))
        assert out["added"] == 4 and {"id": 4, "live": True, "port": cluster.ports[4], "rack": "r4"} in out["brokers"]
        wait_until(lambda: _brokers(admin) == {1, 2, 3, 4}, 30, what="broker 4 in Metadata")
        on_new = topic_name("on-new")
        admin.create_topics([NewTopic(on_new, 1, replica_assignment=[[1, 4]])])[on_new].result(30)
        wait_until(lambda: cluster.isr(on_new, 0) == [1, 4], 30, what="broker 4 in the ISR")
        assert http(url, "POST", "/v1/leaders", {"topic": on_new, "partition": 0, "broker": 4})[0] == 200
        wait_until(lambda: _leader(admin, on_new) == 4, 30, what="broker 4 leading, as the client sees it")
        with Traffic(bs, on_new) as t4:
            wait_until(lambda: len(t4.acked) >= 20, 30, what="records to the new broker")
        assert t4.failed == [] and cluster.log_end_offsets(on_new, 0)[4] == len(t4.acked)

        victim = cluster.leader(big, 0)
        with Traffic(bs, big) as t:
            wait_until(lambda: len(t.acked) >= 50, 30, what="traffic")
            out = ok(control(url, "remove-broker", str(victim)))
            assert out["removed"] == victim and victim not in {b["id"] for b in out["brokers"]}
            [row] = [m for m in out["moved"] if m["topic"] == big]
            assert sorted(row["replicas"]) == sorted({1, 2, 3, 4} - {victim}) and row["leader"] not in (victim, -1)
            assert 4 in row["isr"]
            n = len(t.acked)
            wait_until(lambda: len(t.acked) >= n + 50, 30, what="traffic after the removal")
        assert t.failed == []
        wait_until(lambda: _brokers(admin) == {1, 2, 3, 4} - {victim}, 30, what="the removed broker out of Metadata")
        assert victim not in cluster.node_ids and cluster.leader(big, 0) != victim
        got = [v for _, v in consume(bs, big, [0], len(t.acked), timeout=60)]
        assert sorted(got) == sorted(t.acked) and len(set(got)) == len(got)

        # the rack at run time: DescribeCluster (and Metadata) show it
        ok(control(url, "rack", "4", "zone-b"))
        wait_until(lambda: {n.id: n.rack for n in admin.describe_cluster().result(10).nodes}.get(4) == "zone-b", 30,
                   what="the new rack in DescribeCluster")
        code, out = http(url, "POST", "/v1/brokers/rack", {"broker": 4, "rack": None})
        assert code == 200 and out["brokers"][-1]["rack"] is None

        # bad input: nothing changes
        before = cluster.node_ids
        assert control(url, "remove-broker", str(victim))[1] == {
            "error": f"unknown broker {victim}: this process runs brokers {before}"}
        code, err = http(url, "POST", "/v1/brokers", {"broker": 4})
        assert code == 400 and "broker 4 exists" in err["error"]
        assert http(url, "DELETE", "/v1/brokers", {})[0] == 400
        assert http(url, "POST", "/v1/brokers", {"broker": -1})[0] == 400
        assert http(url, "POST", "/v1/brokers/rack", {"broker": 4})[0] == 400
        assert cluster.node_ids == before and _brokers(admin) == set(before)


def test_the_last_broker_is_not_removed_and_a_single_broker_takes_none():
    with KafkiteCluster(brokers=2, control=True) as cluster:
        url = cluster.control_url
        assert http(url, "POST", "/v1/brokers/stop", {"broker": 2})[0] == 200
        code, err = control(url, "remove-broker", "1")
        assert code == 1 and "last live broker" in err["error"]
        assert cluster.node_ids == [1, 2]
        assert http(url, "DELETE", "/v1/brokers", {"broker": 2})[0] == 200  # a stopped broker is removed too
        assert cluster.node_ids == [1]
    with KafkiteCluster(brokers=1, control=True) as single:
        code, err = http(single.control_url, "POST", "/v1/brokers", {})
        assert code == 400 and "one-process clusters of several brokers" in err["error"]
        code, err = control(single.control_url, "cut-controller", "1")
        assert code == 1 and "its own controller" in err["error"]
        assert single.node_ids == [1]


def _metadata_leader(cluster, broker_id: int, topic: str) -> tuple[int, int]:
    """(leader, leader epoch) of partition 0 as broker `broker_id` answers Metadata."""
    from kafka.protocol.metadata import MetadataRequest

    from kafkite.testing.wire_client import WireClient
    c = WireClient.connect(cluster.bootstrap_of(broker_id))
    try:
        resp = c.request(MetadataRequest[9](topics=[MetadataRequest[9].MetadataRequestTopic(name=topic)],
                                            allow_auto_topic_creation=False), 9)
    finally:
        c.close()
    [t] = resp.topics
    [p] = t.partitions
    return p.leader_id, p.leader_epoch


def test_the_controller_connection_cut_a_broker_misses_a_leader_change_and_catches_up_once_healed():
    """cut-controller B: the leader moves to C, B's Metadata still names the old leader at the old epoch and its copy
    stops growing (it follows the old leader, which no longer leads); heal-controller B: B learns the new leader,
    copies what it missed from it and is back in the ISR."""
    with KafkiteCluster(brokers=3, control=True) as cluster:
        bs, url = cluster.bootstrap_servers, cluster.control_url
        topic = topic_name("controller-cut")
        admin = AdminClient({"bootstrap.servers": bs})  # (kept alive until the answer came)
        admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
        wait_until(lambda: len(cluster.isr(topic, 0)) == 3, 30, what="a full ISR")
        old, epoch = cluster.leader(topic, 0), cluster.leader_epoch(topic, 0)
        b, c = [i for i in (1, 2, 3) if i != old]
        assert ok(control(url, "cut-controller", str(b)))["cut"] == [b]
        ok(control(url, "leader", topic, "0", str(c)))
        assert _metadata_leader(cluster, c, topic) == (c, epoch + 1)
        assert _metadata_leader(cluster, b, topic) == (old, epoch)  # it missed the change
        p = Producer({"bootstrap.servers": cluster.bootstrap_of(c), "acks": "1", "linger.ms": 0})
        for i in range(20):
            p.produce(topic, value=b"%d" % i)
        assert p.flush(30) == 0
        wait_until(lambda: cluster.log_end_offsets(topic, 0)[old] == 20, 30, what="the old leader following")
        assert cluster.log_end_offsets(topic, 0)[b] == 0 and ok(control(url, "controller"))["cut"] == [b]
        assert ok(control(url, "heal-controller", str(b)))["cut"] == []
        assert _metadata_leader(cluster, b, topic) == (c, epoch + 1)
        wait_until(lambda: cluster.log_end_offsets(topic, 0)[b] == 20, 30, what="the healed broker caught up")
        wait_until(lambda: len(cluster.isr(topic, 0)) == 3, 30, what="a full ISR again")
        # bad input: nothing changes
        assert control(url, "cut-controller", "9")[0] == 1 and ok(control(url, "controller"))["cut"] == []
        assert http(url, "POST", "/v1/controller/cut", {"broker": "2"})[0] == 400


def test_leaders_shuffled_and_coordinators_rehashed():
    """shuffle-leaders (kfake's ShufflePartitionLeaders): every partition whose ISR has another live member gets one
    of them as leader, the client follows; --coordinators (kfake's RehashCoordinators): the group's coordinator moves
    and its committed offsets are served by the new one."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    with KafkiteCluster(brokers=3, control=True) as cluster:
        bs, url = cluster.bootstrap_servers, cluster.control_url
        admin = AdminClient({"bootstrap.servers": bs})
        topic, group = topic_name("shuffled"), topic_name("g")
        admin.create_topics([NewTopic(topic, 4, 3)])[topic].result(30)
        wait_until(lambda: all(len(cluster.isr(topic, i)) == 3 for i in range(4)), 30, what="full ISRs")
        before = {i: cluster.leader(topic, i) for i in range(4)}
        moved = ok(control(url, "shuffle-leaders", topic, "--seed", "7"))["moved"]
        assert sorted(m["partition"] for m in moved) == [0, 1, 2, 3]
        assert all(m["leader"] != before[m["partition"]] == m["old"] for m in moved)
        assert {i: cluster.leader(topic, i) for i in range(4)} == {m["partition"]: m["leader"] for m in moved}
        p = Producer({"bootstrap.servers": bs, "linger.ms": 0})
        for i in range(4):
            p.produce(topic, value=b"after", partition=i)
        assert p.flush(30) == 0

        for f in admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
                group, [TopicPartition(topic, 0, 5)])]).values():
            f.result(30)
        coordinator = cluster.coordinator(group)
        moved = ok(control(url, "shuffle-leaders", "--coordinators"))["moved"]
        assert {m["topic"] for m in moved} == {"__consumer_offsets"} and cluster.coordinator(group) != coordinator

        # a new admin client: librdkafka 2.x's ListConsumerGroupOffsets crashes on a NOT_COORDINATOR answer (its
        # rd_kafka_handle_OffsetFetch re-queries a consumer group's coordinator the admin client does not have,
        # librdkafka issue 5040), which the first client, knowing the old coordinator, would get
        fresh = AdminClient({"bootstrap.servers": bs})
        fs = fresh.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])])
        assert fs[group].result(30).topic_partitions[0].offset == 5  # served by the new coordinator
        # bad input: nothing changes
        leaders = {i: cluster.leader(topic, i) for i in range(4)}
        assert control(url, "shuffle-leaders", "no-such-topic")[0] == 1
        assert http(url, "POST", "/v1/leaders/shuffle", {"topics": [topic], "coordinators": True})[0] == 400
        assert http(url, "POST", "/v1/leaders/shuffle", {"topics": topic})[0] == 400
        assert {i: cluster.leader(topic, i) for i in range(4)} == leaders


def test_a_partition_reassigned_its_log_copied_and_its_leader_moved(tmp_path):
    """replicas T P B...: the new replica copies the log and joins the ISR before the old one leaves; the leader that
    leaves hands over (kfake's SetFollowers: the brokers serving a partition); the replica removed has its log
    directory deleted, as Kafka's StopReplica(deletePartition=true) has it."""
    with KafkiteCluster(brokers=3, control=True, data_dir=tmp_path) as cluster:
        bs, url = cluster.bootstrap_servers, cluster.control_url
        admin = AdminClient({"bootstrap.servers": bs})
        topic = topic_name("reassigned")
        admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 2]])])[topic].result(30)
        p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 0})
        for i in range(10):
            p.produce(topic, value=b"%d" % i)
        assert p.flush(30) == 0
        dirs = {b: tmp_path / f"broker-{b}" / f"{topic}-0" for b in (1, 2, 3)}
        assert dirs[1].is_dir() and not dirs[3].exists()
        [part] = ok(control(url, "replicas", topic, "0", "3", "2"))["partitions"]
        assert (part["replicas"], part["leader"], sorted(part["isr"])) == ([3, 2], 3, [2, 3])
        wait_until(lambda: not dirs[1].exists() and not any((tmp_path / "broker-1").glob(f"{topic}-0.*-delete")),
                   30, what="the removed replica's log directory deleted")
        assert dirs[2].is_dir() and dirs[3].is_dir()
        assert cluster.log_end_offsets(topic, 0)[3] == 10 and cluster.leader(topic, 0) == 3
        wait_until(lambda: _leader(admin, topic) == 3, 30, what="the client seeing the new leader")
        for i in range(10, 15):
            p.produce(topic, value=b"%d" % i)
        assert p.flush(30) == 0
        got = [v for _, v in consume(bs, topic, [0], 15)]
        assert got == [b"%d" % i for i in range(15)]
        # bad input: nothing changes
        code, err = control(url, "replicas", topic, "0", "9")
        assert code == 1 and "a replica added must be a live broker" in err["error"]
        assert http(url, "POST", "/v1/replicas", {"topic": topic, "partition": 0, "replicas": [3, 3]})[0] == 400
        assert http(url, "POST", "/v1/replicas", {"topic": "no-such", "partition": 0, "replicas": [1]})[0] == 400
        assert http(url, "POST", "/v1/replicas", {"topic": topic, "partition": 0, "replicas": []})[0] == 400
        assert cluster.partition_states(topic)[0]["replicas"] == [3, 2]


def test_the_same_controls_through_the_in_process_api():
    """KafkiteCluster's methods are the same controls as the routes above."""
    with KafkiteCluster(brokers=2) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        topic = topic_name("api")
        admin.create_topics([NewTopic(topic, 2, 2)])[topic].result(30)
        assert cluster.add_broker(rack="r3") == 3 and cluster.node_ids == [1, 2, 3]
        cluster.set_rack(3, "r3b")
        wait_until(lambda: {n.id: n.rack for n in admin.describe_cluster().result(10).nodes}.get(3) == "r3b", 30,
                   what="the rack")
        old = cluster.leader(topic, 0)
        part = cluster.reassign(topic, 0, [3, 1])  # a leader kept stays; else the caught-up new replica leads
        assert (part["replicas"], part["leader"]) == ([3, 1], 1 if old == 1 else 3) and 3 in part["isr"]
        before = {i: cluster.leader(topic, i) for i in (0, 1)}
        moved = cluster.shuffle_leaders([topic], seed=1)
        assert {m["partition"]: m["leader"] for m in moved} == {i: cluster.leader(topic, i) for i in (0, 1)} != before
        assert cluster.rehash_coordinators() == []  # no group or transaction yet
        cluster.cut_controller(2)
        cluster.move_leader(topic, 1, 2 if cluster.leader(topic, 1) != 2 else 1)
        views = cluster.metadata_views()  # (both at one instant)
        assert views[2]["topics"] != views[1]["topics"]
        cluster.heal_controller(2)
        views = cluster.metadata_views()
        assert views[2]["topics"] == views[1]["topics"]
        moved = cluster.remove_broker(3)
        assert [m["replicas"] for m in moved if m["topic"] == topic] == [[1, 2]] and cluster.node_ids == [1, 2]
