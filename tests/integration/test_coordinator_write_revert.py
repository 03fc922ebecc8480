"""A coordinator write that fails after its append reverts the shard's state and the partition serves on
(server/coordinator_runtime.py, coordinator/timeline.py), on a two-broker cluster: an offset commit that does not
reach the ISR in time (REQUEST_TIMED_OUT), then, with min.insync.replicas=2 and the followers no longer fetching
(the ISR shrinks to the leader), an offset commit, a KIP-848 member's join and a transactional producer's EndTxn
that fail with NOT_ENOUGH_REPLICAS_AFTER_APPEND. The clients see COORDINATOR_NOT_AVAILABLE; the group's offsets,
the consumer group's epochs, members and assignments and the transaction's state stay exactly as they were; once
the followers catch up, the clients' retries succeed."""
from __future__ import annotations

import copy
import threading

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.consumer import OffsetCommitRequest

from helpers import wait_until
from kafkite.coordinator.transaction import TxnState
from kafkite.server import coordinator_runtime
from kafkite.testing import KafkiteCluster
from kafkite.testing.wire_client import WireClient
from kafkite.wire.errors import E

INTERNAL = ("__consumer_offsets", "__transaction_state")


def member(bs):
    c = Consumer({"bootstrap.servers": bs, "group.id": "cg", "group.protocol": "consumer", "enable.auto.commit": False})
    c.subscribe(["t"])
    return c


def polled(consumers, pred):
    def check():
        for c in consumers:
            c.poll(0.05)
        return pred()
    return check


def commit_fails(consumer, offset):
    try:
        consumer.commit(offsets=[TopicPartition("t", 0, offset)], asynchronous=False)
    except KafkaException as exc:
        assert exc.args[0].code() == KafkaError.COORDINATOR_NOT_AVAILABLE, exc
    else:
        raise AssertionError("the commit should fail")


def raw_commit(w: WireClient, offset: int) -> int:
    """OffsetCommit v7 of group g, answered once (librdkafka retries a COORDINATOR_NOT_AVAILABLE a few times)."""
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    req = OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                              retention_time_ms=-1, topics=[T(name="t", partitions=[T.OffsetCommitRequestPartition(
                                  partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                                  commit_timestamp=-1, committed_metadata="")])])
    return w.request(req, 7).topics[0].partitions[0].error_code


def test_failed_coordinator_writes_revert_and_the_clients_retries_succeed(monkeypatch):
    overrides = {"min.insync.replicas": "2", "replica.lag.time.max.ms": "400", "offsets.topic.num.partitions": "1",
                 "transaction.state.log.num.partitions": "1", "transaction.state.log.replication.factor": "2"}
    with KafkiteCluster(brokers=2, overrides=overrides) as cluster:
        bs = cluster.bootstrap_servers
        admin = KafkaAdminClient(bootstrap_servers=bs)
        admin.create_topics([NewTopic("t", 1, 2)])
        admin.close()
        consumer = Consumer({"bootstrap.servers": bs, "group.id": "g", "enable.auto.commit": False})
        consumer.assign([TopicPartition("t", 0)])
        consumer.commit(offsets=[TopicPartition("t", 0, 5)], asynchronous=False)
        wait_until(lambda: len(cluster.isr(INTERNAL[0], 0)) == 2, what="__consumer_offsets' ISR")
        groups = cluster.brokers[cluster.leader(INTERNAL[0], 0)].groups
        shard_state = lambda: copy.deepcopy(groups.coordinator.shards[0].groups)  # noqa: E731
        before = cluster.call(shard_state)
        assert before["g"].offsets[("t", 0)].offset == 5
        # the ISR not reached in time (REQUEST_TIMED_OUT; no time at all here): undone, COORDINATOR_NOT_AVAILABLE
        monkeypatch.setattr(coordinator_runtime, "REPLICATION_TIMEOUT_S", 0.0)
        commit_fails(consumer, 7)
        monkeypatch.setattr(coordinator_runtime, "REPLICATION_TIMEOUT_S", 5.0)
        assert groups.runtime.reverted_writes >= 1 and cluster.call(shard_state) == before  # librdkafka retried it
        assert consumer.committed([TopicPartition("t", 0)], timeout=10)[0].offset == 5

        producer = Producer({"bootstrap.servers": bs, "transactional.id": "tx", "transaction.timeout.ms": 60000})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce("t", value=b"v")
        producer.flush(10)  # in the transaction (AddPartitionsToTxn written), before the ISR shrinks
        m1 = member(bs)  # a KIP-848 consumer group with one member
        wait_until(polled([m1], lambda: m1.assignment()), what="the first member's assignment")
        for topic in INTERNAL:
            wait_until(lambda topic=topic: len(cluster.isr(topic, 0)) == 2, what=f"{topic}'s ISR")
        txns = cluster.brokers[cluster.leader(INTERNAL[1], 0)].transactions

        def cg_state():  # the consumer group's state (its timers aside)
            g = groups.coordinator.shards[0].consumer_groups["cg"]
            return copy.deepcopy((g.group_epoch, g.assignment_epoch, g.members, g.static_members, g.target,
                                  g.subscription_metadata, g.resolved_regexes))
        cg_before = cluster.call(cg_state)
        assert cg_before[0] >= 1 and len(cg_before[2]) == 1

        for b in cluster.node_ids:
            cluster.pause_replication(b)
        for topic in INTERNAL:
            wait_until(lambda topic=topic: len(cluster.isr(topic, 0)) == 1, what=f"{topic}'s ISR shrunk")
        # the commit is appended, then fails (NOT_ENOUGH_REPLICAS_AFTER_APPEND): the client sees Kafka's error, the
        # shard is as it was, still loaded
        failed = groups.runtime.reverted_writes
        with WireClient.connect(cluster.bootstrap_of(cluster.leader(INTERNAL[0], 0))) as w:
            assert raw_commit(w, 9) == E.COORDINATOR_NOT_AVAILABLE
        assert groups.runtime.reverted_writes > failed
        assert cluster.call(shard_state) == before and 0 in groups.coordinator.shards
        assert consumer.committed([TopicPartition("t", 0)], timeout=10)[0].offset == 5
        # a second member's join (a new group epoch, its member and assignment records) fails and is undone
        m2, failed = member(bs), groups.runtime.reverted_writes
        wait_until(polled([m1, m2], lambda: groups.runtime.reverted_writes > failed), what="the join's failed write")
        assert cluster.call(cg_state) == cg_before
        # EndTxn's PrepareCommit fails the same way; librdkafka retries it, and the transaction stays Ongoing
        done: list = []
        committer = threading.Thread(target=lambda: done.append(producer.commit_transaction(60)))
        committer.start()
        wait_until(lambda: txns.runtime.reverted_writes >= 2, what="EndTxn's failed writes")
        state = cluster.call(lambda: txns.coordinator.describe("tx")[1].state)
        assert state == TxnState.ONGOING and not done

        for b in cluster.node_ids:
            cluster.resume_replication(b)
        for topic in INTERNAL:
            wait_until(lambda topic=topic: len(cluster.isr(topic, 0)) == 2, what=f"{topic}'s ISR back")
        consumer.commit(offsets=[TopicPartition("t", 0, 9)], asynchronous=False)
        assert consumer.committed([TopicPartition("t", 0)], timeout=10)[0].offset == 9
        committer.join(60)
        wait_until(polled([m1, m2], lambda: len(cluster.call(cg_state)[2]) == 2), what="the second member joined")
        assert done == [None]
        wait_until(lambda: cluster.call(lambda: txns.coordinator.describe("tx")[1].state) == TxnState.COMPLETE_COMMIT,
                   what="the transaction completed")
        reader = Consumer({"bootstrap.servers": bs, "group.id": "r", "isolation.level": "read_committed",
                           "auto.offset.reset": "earliest"})
        reader.assign([TopicPartition("t", 0, 0)])
        msg = None
        for _ in range(50):
            msg = reader.poll(0.2)
            if msg is not None and not msg.error():
                break
        assert msg is not None and msg.value() == b"v"
        reader.close()
        for c in (consumer, m1, m2):
            c.close()
