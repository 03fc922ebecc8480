"""Issue acceptance: a Java idempotent producer and a confluent-kafka consumer group keep working while the
leader of partition 0 and then the controller's broker stop and come back."""
from __future__ import annotations

import subprocess

from clients import drivers
from clients.group_scenario import python_consumer, wait_for
from kafkite.testing.cluster import KafkiteCluster

N = 30_000


def views_agree(cluster):
    views = list(cluster.metadata_views().values())
    strip = [{k: v for k, v in view.items() if k != "node_id"} for view in views]
    return all(s == strip[0] for s in strip)


def records_in(cluster, topic: str, partitions: int) -> int:
    """Records in the topic now: per partition its leader's log end offset (0 while it has none)."""
    return sum(cluster.log_end_offsets(topic, p).get(cluster.leader(topic, p), 0) for p in range(partitions))


def test_producer_and_group_survive_leader_and_controller_failover():
    drivers.need("java")
    from kafka.admin import KafkaAdminClient, NewTopic
    from helpers import ck_consume_all
    with KafkiteCluster(brokers=3, overrides={"group.min.session.timeout.ms": "1000"}) as cluster:
        bs = cluster.bootstrap_servers
        a = KafkaAdminClient(bootstrap_servers=bs)
        a.create_topics([NewTopic("fo", 6, 3)])
        a.close()
        consumers = [python_consumer("confluent", bs, "fo", "fo-group") for _ in range(2)]
        producer = subprocess.Popen(drivers.java_argv("produce", bs, "fo", str(N), "lz4", "true", "300"),
                                    stdout=subprocess.PIPE, text=True)
        def processed() -> int:
            return sum(len(c.processed) for c in consumers)

        def landed_mid_traffic(what: str, appended_before: int, processed_before: int) -> None:
            """The fault came while records were flowing (the producer still running, records appended and
            consumed before it), and they flowed on after it: both counts grow past what they were."""
            assert producer.poll() is None, f"the producer had finished before {what}"
            assert appended_before > 0 and processed_before > 0, what
            wait_for(lambda: records_in(cluster, "fo", 6) > appended_before + 500
                     and processed() > processed_before + 500, 60, f"records produced and consumed after {what}")

        try:
            wait_for(lambda: processed() > 2000, 60, "consumption started")
            epoch0 = cluster.controller_epoch
            leader0 = cluster.leader("fo", 0)
            appended, consumed = records_in(cluster, "fo", 6), processed()
            cluster.stop_broker(leader0)
            assert cluster.leader("fo", 0) not in (leader0, -1)
            landed_mid_traffic(f"stopping partition 0's leader {leader0}", appended, consumed)
            controller = cluster.controller_id
            if controller == leader0:  # already moved with the first stop
                assert cluster.controller_epoch == epoch0 + 1
                epoch0 += 1
                controller = cluster.controller_id
            appended, consumed = records_in(cluster, "fo", 6), processed()
            cluster.stop_broker(controller)
            assert cluster.controller_id not in (-1, controller)
            assert cluster.controller_epoch == epoch0 + 1
            landed_mid_traffic(f"stopping the controller's broker {controller}", appended, consumed)
            cluster.start_broker(leader0)
            cluster.start_broker(controller)
            assert cluster.live_brokers == [1, 2, 3]
            assert views_agree(cluster)
            out, _ = producer.communicate(timeout=240)
        finally:
            if producer.poll() is None:
                producer.kill()
        import json
        assert records_in(cluster, "fo", 6) == N
        result = json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])
        assert result["acked"] == N and result["errors"] == 0
        # every acknowledged record is there exactly once (the log holds N records: records_in above), read until
        # all came (not a fixed 10 s read for N + 10, which a loaded machine could end short)
        got = ck_consume_all(bs, "fo", N, timeout=60)
        values = [g[4] for g in got]
        assert len(values) == N and len(set(values)) == N
        # the group saw everything and its committed positions reach the end
        produced = {(g[0], g[1]) for g in got}
        wait_for(lambda: produced <= {r for c in consumers for r in c.processed}, 120, "group consumed everything")
        from kafka import KafkaConsumer, TopicPartition
        from kafka.admin import KafkaAdminClient as KA
        kc = KafkaConsumer(bootstrap_servers=bs)
        ends = kc.end_offsets([TopicPartition("fo", p) for p in range(6)])
        kc.close()
        ka = KA(bootstrap_servers=bs)
        wait_for(lambda: {tp.partition: om.offset for tp, om in ka.list_group_offsets("fo-group")["fo-group"].items()}
                 == {tp.partition: o for tp, o in ends.items()}, 60, "committed positions at the end")
        ka.close()
        for c in consumers:
            c.leave()
        assert views_agree(cluster)
