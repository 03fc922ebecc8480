"""The in-process cluster's controller: election, epoch fencing, failover, metadata agreement."""
from __future__ import annotations

from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.metadata import MetadataRequest

from kafkite.controller.controller import MetadataUpdate
from kafkite.testing.cluster import KafkiteCluster
from kafkite.testing.wire_client import WireClient
from kafkite.wire.errors import E

from helpers import wait_until


def views_agree(cluster):
    views = list(cluster.metadata_views().values())
    strip = [{k: v for k, v in view.items() if k != "node_id"} for view in views]
    return all(s == strip[0] for s in strip)


def test_failover_and_fencing():
    with KafkiteCluster(brokers=3, overrides={"leader.imbalance.check.interval.seconds": "1"}) as cluster:
        assert cluster.controller_id in (1, 2, 3)
        epoch0 = cluster.controller_epoch
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        admin.create_topics([NewTopic("orders", 6, 3)])
        admin.close()
        leaders = {p: cluster.leader("orders", p) for p in range(6)}
        assert set(leaders.values()) == {1, 2, 3}  # spread over the brokers
        assert views_agree(cluster)

        # stop the leader of partition 0: leadership moves, the leader epoch goes up
        victim = leaders[0]
        e0 = cluster.leader_epoch("orders", 0)
        cluster.stop_broker(victim)
        assert cluster.leader("orders", 0) not in (victim, -1)
        assert cluster.leader_epoch("orders", 0) == e0 + 1
        assert all(cluster.leader("orders", p) != victim for p in range(6))
        assert views_agree(cluster)

        # a request to the old leader's replacement view: every live broker answers metadata alike
        for b in cluster.live_brokers:
            with WireClient.connect(cluster.bootstrap_of(b)) as w:
                md = w.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="orders")],
                                               allow_auto_topic_creation=False), 12)
                assert {x.node_id for x in md.brokers} == set(cluster.live_brokers)
                assert md.topics[0].partitions[0].leader_id == cluster.leader("orders", 0)

        # stop the controller's broker: a new controller, a higher epoch
        old_controller_id = cluster.controller_id
        old_controller = cluster.controller(old_controller_id)
        epoch1 = cluster.controller_epoch
        assert epoch1 > epoch0 or old_controller_id != victim
        cluster.stop_broker(old_controller_id)
        assert cluster.controller_id not in (-1, old_controller_id)
        assert cluster.controller_epoch == epoch1 + 1
        assert views_agree(cluster)

        # the deposed controller sends a command: rejected by epoch, nothing changes
        before = cluster.metadata_view(cluster.controller_id)
        forged = dict(before)
        forged["topics"] = []
        cmd = MetadataUpdate(old_controller_id, old_controller.epoch, forged)
        assert old_controller.epoch < cluster.controller_epoch
        answers = [cluster.call(lambda b=b: cluster.state.deliver(b, cmd)) for b in cluster.live_brokers]
        assert answers == [E.STALE_CONTROLLER_EPOCH] * len(cluster.live_brokers)
        assert cluster.metadata_view(cluster.controller_id) == before
        assert old_controller.active_controller() is None

        # bring both back: they catch up and rejoin every ISR, then the preferred leaders are restored (the
        # auto leader rebalance check), everyone agrees
        cluster.start_broker(victim)
        cluster.start_broker(old_controller_id)
        assert sorted(cluster.live_brokers) == [1, 2, 3]
        wait_until(lambda: all(sorted(cluster.isr("orders", p)) == [1, 2, 3] for p in range(6)), timeout=20,
                   what="the restarted brokers back in every ISR")
        wait_until(lambda: {p: cluster.leader("orders", p) for p in range(6)} == leaders, timeout=20,
                   what="the preferred leaders restored")
        wait_until(lambda: views_agree(cluster), timeout=30, what="every broker's view the same")


def test_move_leader_and_not_leader_error():
    with KafkiteCluster(brokers=2) as cluster:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        admin.create_topics([NewTopic("mv", 1, 2)])
        admin.close()
        lead = cluster.leader("mv", 0)
        other = 1 if lead == 2 else 2
        cluster.move_leader("mv", 0, other)
        assert cluster.leader("mv", 0) == other
        assert views_agree(cluster)


def _offsets(cluster, broker_id, group, topic, parts):
    from kafka.protocol.consumer import OffsetFetchRequest
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    with WireClient.connect(cluster.bootstrap_of(broker_id)) as w:
        for _ in range(200):
            r = w.request(OffsetFetchRequest(group_id=group, topics=[T(name=topic, partition_indexes=parts)]), 5)
            if r.error_code != E.COORDINATOR_LOAD_IN_PROGRESS:
                break
        return r.error_code, {p.partition_index: p.committed_offset for t in r.topics for p in t.partitions}


def test_coordinator_failover_reloads_offsets():
    from confluent_kafka import Consumer, TopicPartition
    from kafkite.coordinator.hashing import partition_for
    with KafkiteCluster(brokers=3) as cluster:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        admin.create_topics([NewTopic("events", 3, 3)])
        admin.close()
        c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "fg"})
        c.commit(offsets=[TopicPartition("events", p, 10 * (p + 1)) for p in range(3)], asynchronous=False)
        c.close()
        coord = cluster.coordinator("fg")
        assert _offsets(cluster, coord, "fg", "events", [0, 1, 2]) == (0, {0: 10, 1: 20, 2: 30})

        # leadership of the group's __consumer_offsets partition moves: new leader loads, old one lets go
        p = partition_for("fg", 50)
        target = next(b for b in (1, 2, 3) if b != coord)
        cluster.move_leader("__consumer_offsets", p, target)
        assert cluster.coordinator("fg") == target
        assert _offsets(cluster, coord, "fg", "events", [0])[0] == E.NOT_COORDINATOR
        assert _offsets(cluster, target, "fg", "events", [0, 1, 2]) == (0, {0: 10, 1: 20, 2: 30})

        # the coordinator's broker stops: FindCoordinator follows the new leader, offsets intact
        cluster.stop_broker(target)
        new = cluster.coordinator("fg")
        assert new not in (target, -1)
        assert _offsets(cluster, new, "fg", "events", [0, 1, 2]) == (0, {0: 10, 1: 20, 2: 30})
        from kafka.protocol.metadata import FindCoordinatorRequest
        with WireClient.connect(cluster.bootstrap_of(new)) as w:
            assert w.request(FindCoordinatorRequest(key="fg", key_type=0), 3).node_id == new


def test_inject_error_and_latency():
    from kafka.protocol.metadata import MetadataRequest as MR
    with KafkiteCluster(brokers=1) as cluster:
        from kafka.protocol.metadata import FindCoordinatorRequest
        cluster.inject_error("Metadata", E.LEADER_NOT_AVAILABLE, count=1)
        cluster.inject_error("FindCoordinator", E.COORDINATOR_NOT_AVAILABLE, count=2)
        with WireClient.connect(cluster.bootstrap_servers) as w:
            req = MR(topics=[MR.MetadataRequestTopic(name="x")], allow_auto_topic_creation=True)
            assert w.request(req, 12).topics[0].error_code == E.LEADER_NOT_AVAILABLE
            assert w.request(req, 12).topics[0].error_code == 0  # only the next one
            fc = FindCoordinatorRequest(key="g", key_type=0)
            assert [w.request(fc, 3).error_code for _ in range(3)] == [E.COORDINATOR_NOT_AVAILABLE] * 2 + [0]
        cluster.set_latency(1, 200)
        import time
        with WireClient.connect(cluster.bootstrap_servers) as w:
            t0 = time.monotonic()
            w.request(MR(topics=None), 12)
            assert time.monotonic() - t0 >= 0.19


async def test_cluster_from_a_trio_test():
    import trio
    from kafka.protocol.metadata import MetadataRequest as MR
    async with KafkiteCluster(brokers=2) as cluster:
        def metadata():
            with WireClient.connect(cluster.bootstrap_of(2)) as w:
                return w.request(MR(topics=None), 12)
        md = await trio.to_thread.run_sync(metadata)
        assert {b.node_id for b in md.brokers} == {1, 2}
        await trio.to_thread.run_sync(cluster.stop_broker, 1)
        assert cluster.live_brokers == [2] and cluster.controller_id == 2


def test_acks_all_needs_min_insync_replicas():
    from test_data_versions import batch, produce
    with KafkiteCluster(brokers=3) as cluster:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        admin.create_topics([NewTopic("isr", 1, 3, topic_configs={"min.insync.replicas": "2"})])
        admin.close()
        lead = cluster.leader("isr", 0)
        others = [b for b in (1, 2, 3) if b != lead]
        with WireClient.connect(cluster.bootstrap_of(lead)) as w:
            assert produce(w, "isr", batch(1)).error_code == 0
        cluster.stop_broker(others[0])
        with WireClient.connect(cluster.bootstrap_of(lead)) as w:
            assert produce(w, "isr", batch(1)).error_code == 0  # ISR 2 of 3: still enough
        cluster.stop_broker(others[1])
        with WireClient.connect(cluster.bootstrap_of(lead)) as w:
            assert produce(w, "isr", batch(1)).error_code == E.NOT_ENOUGH_REPLICAS
            assert produce(w, "isr", batch(1), acks=1).error_code == 0  # acks=1 does not wait for the ISR
        cluster.start_broker(others[0])
        # it copies what it missed and the leader adds it back to the ISR: acks=all works again
        wait_until(lambda: len(cluster.isr("isr", 0)) == 2, timeout=20, what="the restarted broker in the ISR")
        with WireClient.connect(cluster.bootstrap_of(cluster.leader("isr", 0))) as w:
            assert produce(w, "isr", batch(1)).error_code == 0


def test_not_leader_and_fenced_leader_epoch():
    from test_data_versions import batch, fetch, produce
    with KafkiteCluster(brokers=2) as cluster:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        admin.create_topics([NewTopic("fence", 1, 2)])
        admin.close()
        lead = cluster.leader("fence", 0)
        follower = 1 if lead == 2 else 2
        with WireClient.connect(cluster.bootstrap_of(follower)) as w:
            assert produce(w, "fence", batch(1)).error_code == E.NOT_LEADER_OR_FOLLOWER
            assert fetch(w, "fence", 0, version=10).error_code == E.NOT_LEADER_OR_FOLLOWER
            assert fetch(w, "fence", 0, version=12).error_code == 0  # v11+: a follower serves consumers (KIP-392)
        cluster.move_leader("fence", 0, follower)  # leader epoch 0 -> 1
        with WireClient.connect(cluster.bootstrap_of(follower)) as w:
            assert fetch(w, "fence", 0, leader_epoch=0).error_code == E.FENCED_LEADER_EPOCH
            assert fetch(w, "fence", 0, leader_epoch=1).error_code == 0
            assert fetch(w, "fence", 0, leader_epoch=2).error_code == E.UNKNOWN_LEADER_EPOCH
