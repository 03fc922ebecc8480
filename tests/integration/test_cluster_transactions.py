"""Transactions in the in-process cluster: a transaction over partitions led by different brokers commits (and
aborts) atomically, its markers going to each leader over the inter-broker listeners (WriteTxnMarkers), and the
transaction coordinator moves with its __transaction_state partition."""
from __future__ import annotations

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from helpers import kp_read, wait_until
from kafkite.coordinator.hashing import partition_for
from kafkite.storage.batch import iter_batches
from kafkite.testing import KafkiteCluster



def txn_coordinator(cluster, tid):
    return cluster.leader("__transaction_state", partition_for(tid, 50))


def markers(cluster, broker_id, topic, partition):
    lg = cluster.replica_log(broker_id, topic, partition)
    data = lg.read(lg.log_start_offset, 1 << 24)
    return [h.producer_id for _, h in iter_batches(data) if h.is_control]


def read(bs, topic, n, iso, want):
    c = KafkaConsumer(bootstrap_servers=bs, isolation_level=iso, auto_offset_reset="earliest")
    c.assign([TopicPartition(topic, i) for i in range(n)])
    out = sorted(m.value for m in kp_read(c, want))
    c.close()
    return out


def test_a_transaction_across_leaders_commits_atomically():
    with KafkiteCluster(brokers=3) as cluster:
        bs = cluster.bootstrap_servers
        admin = KafkaAdminClient(bootstrap_servers=bs)
        admin.create_topics([NewTopic("multi", 3, 3)])
        admin.close()
        ids = cluster.node_ids
        for i in range(3):  # partition i led by the i-th broker
            wait_until(lambda i=i: cluster.isr("multi", i) and len(cluster.isr("multi", i)) == 3, what="ISR")
            if cluster.leader("multi", i) != ids[i]:
                cluster.move_leader("multi", i, ids[i])
        assert sorted(cluster.leader("multi", i) for i in range(3)) == sorted(ids)
        p = KafkaProducer(bootstrap_servers=bs, transactional_id="tx-multi", acks="all")
        p.init_transactions()
        coordinator = txn_coordinator(cluster, "tx-multi")
        committed = []
        for t in range(4):
            p.begin_transaction()
            vals = [b"%d-%d" % (t, i) for i in range(9)]
            for i, v in enumerate(vals):
                p.send("multi", value=v, partition=i % 3)
            p.flush()
            if t == 1:
                p.abort_transaction()
            else:
                p.commit_transaction()
                committed += vals
        pid = p._transaction_manager.producer_id_and_epoch.producer_id
        p.close()
        # every leader wrote a marker per transaction, and its followers copied them
        for i in range(3):
            wait_until(lambda i=i: all(len(markers(cluster, b, "multi", i)) == 4 for b in ids), what="markers")
            assert set(markers(cluster, ids[i], "multi", i)) == {pid}
        assert sum(1 for i in range(3) if cluster.leader("multi", i) != coordinator) == 2  # two went over the wire
        assert read(bs, "multi", 3, "read_committed", len(committed)) == sorted(committed)
        assert len(read(bs, "multi", 3, "read_uncommitted", 36)) == 36


def test_the_transaction_coordinator_fails_over():
    with KafkiteCluster(brokers=3, overrides={"transaction.state.log.replication.factor": "3"}) as cluster:
        bs = cluster.bootstrap_servers
        admin = KafkaAdminClient(bootstrap_servers=bs)
        admin.create_topics([NewTopic("fo", 3, 3)])
        admin.close()
        from confluent_kafka import Producer  # librdkafka finds a moved transaction coordinator again
        p = Producer({"bootstrap.servers": bs, "transactional.id": "tx-fo", "transaction.timeout.ms": 60000})
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(6):
            p.produce("fo", value=b"a%d" % i, partition=i % 3)
        p.commit_transaction(30)
        old = txn_coordinator(cluster, "tx-fo")
        tp = partition_for("tx-fo", 50)
        wait_until(lambda: len(cluster.isr("__transaction_state", tp)) == 3, what="the coordinator's ISR")
        cluster.stop_broker(old)
        wait_until(lambda: txn_coordinator(cluster, "tx-fo") not in (old, -1), what="a new coordinator")
        # the producer finds the new coordinator, which loaded the transactional id from its replica
        p.begin_transaction()
        for i in range(6):
            p.produce("fo", value=b"b%d" % i, partition=i % 3)
        p.commit_transaction(60)
        p.flush(10)
        got = read(bs, "fo", 3, "read_committed", 12)
        assert got == sorted([b"a%d" % i for i in range(6)] + [b"b%d" % i for i in range(6)])
        cluster.start_broker(old)
