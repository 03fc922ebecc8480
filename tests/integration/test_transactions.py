"""Transactions over the wire: the coordinator's answers version by version, the last stable offset, read_committed
Fetch and ListOffsets, pending transactional offsets (KIP-447), a timed-out transaction, and the kafka-python
transactional producer and consumers end to end. Java, librdkafka and kafkajs: tests/clients/test_transactions_clients.py."""
from __future__ import annotations

import time

import pytest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest, OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest
from kafka.protocol.producer.transaction import (AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest,
                                                 TxnOffsetCommitRequest)

from helpers import kp_read, wait_until
from kafkite.storage.batch import build_batch, iter_batches
from kafkite.testing.wire_client import WireClient
from kafkite.wire.errors import E


def create(bs, topic, partitions=1):
    from kafka.admin import KafkaAdminClient, NewTopic
    a = KafkaAdminClient(bootstrap_servers=bs)
    try:
        a.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        a.close()


def init(w, tid, v=4, timeout_ms=60000, pid=-1, epoch=-1):
    kw = {"producer_id": pid, "producer_epoch": epoch} if v >= 3 else {}
    assert w.request(FindCoordinatorRequest(key=tid, key_type=1), 2).error_code == 0  # creates __transaction_state
    for _ in range(100):  # the coordinator's partition loads first (COORDINATOR_LOAD_IN_PROGRESS)
        r = w.request(InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=timeout_ms, **kw), v)
        if r.error_code not in (E.COORDINATOR_LOAD_IN_PROGRESS, E.CONCURRENT_TRANSACTIONS, E.NOT_COORDINATOR):
            return r
        time.sleep(0.05)
    return r


def add(w, tid, pid, epoch, parts, v=3):
    T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    topics: dict[str, list[int]] = {}
    for t, p in parts:
        topics.setdefault(t, []).append(p)
    r = w.request(AddPartitionsToTxnRequest(v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                                            v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
                                                T(name=t, partitions=ps) for t, ps in topics.items()]), v)
    return {(t.name, p.partition_index): p.partition_error_code for t in r.results_by_topic_v3_and_below
            for p in t.results_by_partition}


def end(w, tid, pid, epoch, commit, v=3):
    return w.request(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit),
                     v).error_code


def produce_txn(w, topic, pid, epoch, seq, n, tid, partition=0, v=9):
    data = build_batch([(b"k", b"v%d" % i, []) for i in range(n)], timestamp_ms=int(time.time() * 1000),
                       producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, is_transactional=True)
    T = ProduceRequest.TopicProduceData
    r = w.request(ProduceRequest(transactional_id=tid, acks=-1, timeout_ms=5000, topic_data=[
        T(name=topic, partition_data=[T.PartitionProduceData(index=partition, records=data)])]), v)
    return r.responses[0].partition_responses[0]


def fetch(w, topic, isolation, offset=0, v=12):
    T = FetchRequest.FetchTopic
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=isolation,
                       session_id=0, session_epoch=-1, topics=[T(topic=topic, partitions=[T.FetchPartition(
                           partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                           log_start_offset=-1, partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id="")
    return w.request(req, v).responses[0].partitions[0]


def batches(p):
    data = bytes(p.records or b"")
    return [h for _, h in iter_batches(data)]


def latest(w, topic, isolation):
    T = ListOffsetsRequest.ListOffsetsTopic
    r = w.request(ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[T(name=topic, partitions=[
        T.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)])]), 5)
    return r.topics[0].partitions[0].offset


def test_find_coordinator_for_a_transactional_id(broker, wire):
    r = wire.request(FindCoordinatorRequest(key="tx-a", key_type=1), 2)
    assert r.error_code == 0 and r.node_id == broker.broker.node_id
    md = broker.broker.metadata.topic("__transaction_state")
    assert md is not None and len(md.partitions) == 50
    assert md.configs["cleanup.policy"] == "compact" and md.configs["min.insync.replicas"] == "1"  # min(rf, 2)
    r = wire.request(FindCoordinatorRequest(coordinator_keys=["tx-a", ""], key_type=1), 4)
    assert [c.error_code for c in r.coordinators] == [0, E.INVALID_REQUEST]
    assert wire.request(FindCoordinatorRequest(key="g", key_type=2), 2).error_code == E.INVALID_REQUEST


def test_last_stable_offset_read_committed_and_markers(broker, wire):
    bs = broker.bootstrap_servers
    create(bs, "lso")
    r = init(wire, "tx-lso")
    assert r.error_code == 0 and r.producer_epoch == 0
    pid = r.producer_id
    assert add(wire, "tx-lso", pid, 0, [("lso", 0)]) == {("lso", 0): 0}
    assert produce_txn(wire, "lso", pid, 0, 0, 3, "tx-lso").error_code == 0
    # open: read_uncommitted sees the records, read_committed stops at the transaction's first offset
    unc = fetch(wire, "lso", 0)
    com = fetch(wire, "lso", 1)
    assert unc.high_watermark == 3 and unc.last_stable_offset == 0 and len(batches(unc)) == 1
    assert com.last_stable_offset == 0 and batches(com) == []
    assert unc.aborted_transactions is None
    assert latest(wire, "lso", 1) == 0 and latest(wire, "lso", 0) == 3
    assert end(wire, "tx-lso", pid, 0, False) == 0  # abort
    wait_until(lambda: fetch(wire, "lso", 1).last_stable_offset == 4, what="the abort marker")
    com = fetch(wire, "lso", 1)
    hs = batches(com)
    assert [h.is_control for h in hs] == [False, True] and hs[1].producer_id == pid
    assert [(a.producer_id, a.first_offset) for a in com.aborted_transactions] == [(pid, 0)]
    assert fetch(wire, "lso", 0).aborted_transactions is None
    assert fetch(wire, "lso", 1, offset=4).aborted_transactions == []  # past the abort marker
    assert latest(wire, "lso", 1) == 4
    # a committed one: no aborted transaction reported for it
    wait_until(lambda: add(wire, "tx-lso", pid, 0, [("lso", 0)]) == {("lso", 0): 0}, what="CompleteAbort")
    assert produce_txn(wire, "lso", pid, 0, 3, 2, "tx-lso").error_code == 0
    assert end(wire, "tx-lso", pid, 0, True) == 0
    wait_until(lambda: fetch(wire, "lso", 1).last_stable_offset == 7, what="the commit marker")
    assert [(a.producer_id, a.first_offset) for a in fetch(wire, "lso", 1, offset=4).aborted_transactions] == []


@pytest.mark.parametrize("v", [1, 2, 3])
def test_fencing_error_per_version(broker, wire, v):
    create(broker.bootstrap_servers, "fence")
    first = init(wire, "tx-f")
    second = init(wire, "tx-f")
    assert (second.producer_id, second.producer_epoch) == (first.producer_id, first.producer_epoch + 1)
    want = E.INVALID_PRODUCER_EPOCH if v < 2 else E.PRODUCER_FENCED
    assert add(wire, "tx-f", first.producer_id, first.producer_epoch, [("fence", 0)], v=v) == {("fence", 0): want}
    assert end(wire, "tx-f", first.producer_id, first.producer_epoch, True, v=v) == want
    r = wire.request(AddOffsetsToTxnRequest(transactional_id="tx-f", producer_id=first.producer_id,
                                            producer_epoch=first.producer_epoch, group_id="g"), v)
    assert r.error_code == want
    assert add(wire, "tx-f", 999999, 0, [("fence", 0)], v=v) == {("fence", 0): E.INVALID_PRODUCER_ID_MAPPING}
    assert add(wire, "tx-f", second.producer_id, second.producer_epoch, [("nope", 0)], v=v) == \
        {("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert end(wire, "tx-f", second.producer_id, second.producer_epoch, True, v=v) == E.INVALID_TXN_STATE


def test_init_producer_id_versions(broker, wire):
    old = init(wire, "tx-v", v=3)
    assert old.error_code == 0
    assert init(wire, "tx-v", v=3, pid=old.producer_id, epoch=old.producer_epoch + 5).error_code == \
        E.INVALID_PRODUCER_EPOCH
    assert init(wire, "tx-v", v=4, pid=old.producer_id, epoch=old.producer_epoch + 5).error_code == \
        E.PRODUCER_FENCED
    assert init(wire, "tx-v", timeout_ms=900001).error_code == E.INVALID_TRANSACTION_TIMEOUT
    bumped = init(wire, "tx-v", v=4, pid=old.producer_id, epoch=old.producer_epoch)  # KIP-360
    assert (bumped.producer_id, bumped.producer_epoch) == (old.producer_id, old.producer_epoch + 1)
    again = init(wire, "tx-v", v=4, pid=old.producer_id, epoch=old.producer_epoch)  # its retry
    assert (again.producer_id, again.producer_epoch) == (bumped.producer_id, bumped.producer_epoch)
    for v in (0, 2, 5):
        assert init(wire, f"tx-v{v}", v=v).error_code == 0


def test_txn_offset_commit_is_pending_until_the_marker(broker, wire):
    create(broker.bootstrap_servers, "in")
    r = init(wire, "tx-o")
    pid, epoch = r.producer_id, r.producer_epoch
    r = wire.request(AddOffsetsToTxnRequest(transactional_id="tx-o", producer_id=pid, producer_epoch=epoch,
                                            group_id="grp"), 3)
    assert r.error_code == 0
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    commit = TxnOffsetCommitRequest(transactional_id="tx-o", group_id="grp", producer_id=pid, producer_epoch=epoch,
                                    generation_id=-1, member_id="", group_instance_id=None, topics=[
                                        T(name="in", partitions=[T.TxnOffsetCommitRequestPartition(
                                            partition_index=0, committed_offset=42, committed_leader_epoch=-1,
                                            committed_metadata="m")])])
    # AddOffsetsToTxn creates nothing: the client finds the group's coordinator (creating __consumer_offsets)
    assert wire.request(FindCoordinatorRequest(key="grp", key_type=0), 2).error_code == 0
    for _ in range(100):
        resp = wire.request(commit, 3)
        code = resp.topics[0].partitions[0].error_code
        if code not in (E.COORDINATOR_LOAD_IN_PROGRESS, E.NOT_COORDINATOR):
            break
        time.sleep(0.05)
    assert code == 0
    # bad membership: a generation for a group that does not exist
    bad = TxnOffsetCommitRequest(transactional_id="tx-o", group_id="grp", producer_id=pid, producer_epoch=epoch,
                                 generation_id=5, member_id="m-1", group_instance_id=None, topics=commit.topics)
    assert wire.request(bad, 3).topics[0].partitions[0].error_code == E.ILLEGAL_GENERATION

    def offset_fetch(stable):
        OT = OffsetFetchRequest.OffsetFetchRequestTopic
        r = wire.request(OffsetFetchRequest(group_id="grp", topics=[OT(name="in", partition_indexes=[0])],
                                            require_stable=stable), 7)
        p = r.topics[0].partitions[0]
        return p.error_code, p.committed_offset
    assert offset_fetch(True) == (E.UNSTABLE_OFFSET_COMMIT, -1)
    assert offset_fetch(False) == (0, -1)
    assert end(wire, "tx-o", pid, epoch, True) == 0
    wait_until(lambda: offset_fetch(True) == (0, 42), what="the committed transactional offset")
    # an aborted one leaves the committed offset as it was
    wait_until(lambda: wire.request(AddOffsetsToTxnRequest(transactional_id="tx-o", producer_id=pid,
                                                           producer_epoch=epoch, group_id="grp"), 3).error_code == 0,
               what="CompleteCommit")
    commit.topics[0].partitions[0].committed_offset = 99
    assert wire.request(commit, 3).topics[0].partitions[0].error_code == 0
    assert end(wire, "tx-o", pid, epoch, False) == 0
    wait_until(lambda: offset_fetch(True) == (0, 42), what="the aborted offset dropped")


def test_a_timed_out_transaction_is_aborted_and_its_producer_fenced(broker_factory, tmp_path):
    b = broker_factory(overrides={"transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"})
    with WireClient.connect(b.bootstrap_servers) as w:
        create(b.bootstrap_servers, "slow")
        r = init(w, "tx-t", timeout_ms=300)
        pid, epoch = r.producer_id, r.producer_epoch
        assert add(w, "tx-t", pid, epoch, [("slow", 0)]) == {("slow", 0): 0}
        assert produce_txn(w, "slow", pid, epoch, 0, 2, "tx-t").error_code == 0
        wait_until(lambda: fetch(w, "slow", 1).last_stable_offset == 3, timeout=30, what="the timeout's abort")
        assert [(a.producer_id, a.first_offset) for a in fetch(w, "slow", 1).aborted_transactions] == [(pid, 0)]
        assert end(w, "tx-t", pid, epoch, True) == E.PRODUCER_FENCED
        assert produce_txn(w, "slow", pid, epoch, 2, 1, "tx-t").error_code == E.INVALID_PRODUCER_EPOCH


def test_kafka_python_transactions_end_to_end(broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    bs = broker.bootstrap_servers
    create(bs, "kp", 3)
    p = KafkaProducer(bootstrap_servers=bs, transactional_id="tx-kp")
    p.init_transactions()
    committed = []
    for i in range(6):
        p.begin_transaction()
        vals = [b"%d-%d" % (i, j) for j in range(6)]
        for j, val in enumerate(vals):
            p.send("kp", value=val, partition=j % 3)
        p.flush()
        if i % 2:
            p.abort_transaction()
        else:
            p.commit_transaction()
            committed += vals
    p.close()
    tps = [TopicPartition("kp", i) for i in range(3)]

    def read(iso, want):
        c = KafkaConsumer(bootstrap_servers=bs, isolation_level=iso, auto_offset_reset="earliest")
        c.assign(tps)
        out = [m.value for m in kp_read(c, want)]
        c.close()
        return out
    assert sorted(read("read_committed", len(committed))) == sorted(committed)
    assert len(read("read_uncommitted", 36)) == 36
    # each partition: 6 batches + 6 markers
    rm = broker.broker.replicas
    assert [rm.get("kp", i).log_end_offset for i in range(3)] == [18, 18, 18]


def test_describe_list_transactions_producers_and_the_cli(broker, wire):
    import subprocess
    import sys
    from kafka.admin import KafkaAdminClient
    from kafka.protocol.admin.transactions import (DescribeProducersRequest, DescribeTransactionsRequest,
                                                   ListTransactionsRequest)
    bs = broker.bootstrap_servers
    create(bs, "desc")
    r = init(wire, "tx-d")
    pid, epoch = r.producer_id, r.producer_epoch
    add(wire, "tx-d", pid, epoch, [("desc", 0)])
    assert produce_txn(wire, "desc", pid, epoch, 0, 3, "tx-d").error_code == 0
    d = wire.request(DescribeTransactionsRequest(transactional_ids=["tx-d", "nope"]), 0).transaction_states
    assert (d[0].error_code, d[0].transaction_state, d[0].producer_id, d[0].transaction_timeout_ms) == \
        (0, "Ongoing", pid, 60000)
    assert [(t.topic, list(t.partitions)) for t in d[0].topics] == [("desc", [0])] and d[0].transaction_start_time_ms > 0
    assert d[1].error_code == E.TRANSACTIONAL_ID_NOT_FOUND
    lt = wire.request(ListTransactionsRequest(state_filters=["Ongoing", "Bogus"], producer_id_filters=[]), 0)
    assert [(t.transactional_id, t.transaction_state) for t in lt.transaction_states] == [("tx-d", "Ongoing")]
    assert lt.unknown_state_filters == ["Bogus"]
    lt = wire.request(ListTransactionsRequest(state_filters=[], producer_id_filters=[], duration_filter=3600000), 1)
    assert lt.transaction_states == []  # not running for an hour
    T = DescribeProducersRequest.TopicRequest
    dp = wire.request(DescribeProducersRequest(topics=[T(name="desc", partition_indexes=[0, 7])]), 0)
    p0, p7 = dp.topics[0].partitions
    assert [(s.producer_id, s.producer_epoch, s.last_sequence, s.current_txn_start_offset)
            for s in p0.active_producers] == [(pid, epoch, 2, 0)]
    assert p0.active_producers[0].coordinator_epoch == -1 and p0.active_producers[0].last_timestamp > 0
    assert p7.error_code == E.UNKNOWN_TOPIC_OR_PARTITION and p7.active_producers == []
    unknown = wire.request(DescribeProducersRequest(topics=[T(name="no-such", partition_indexes=[0])]), 0)
    assert unknown.topics[0].partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    a = KafkaAdminClient(bootstrap_servers=bs)
    try:
        assert a.describe_transactions(["tx-d"])["tx-d"].producer_id == pid
    finally:
        a.close()
    out = subprocess.run([sys.executable, "-m", "kafkite.cli", "transactions", "list", "--bootstrap-server", bs],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "tx-d" in out.stdout and "Ongoing" in out.stdout, out.stderr
    out = subprocess.run([sys.executable, "-m", "kafkite.cli", "transactions", "describe", "tx-d",
                          "--bootstrap-server", bs], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "desc-0" in out.stdout and str(pid) in out.stdout, out.stderr
    # as Kafka's ProducerStateManager: the marker ends the transaction and leaves its coordinator epoch (the
    # __transaction_state partition's leader epoch)
    assert end(wire, "tx-d", pid, epoch, True) == 0
    txn_epoch = broker.broker.metadata.partition("__transaction_state",
                                                 broker.broker.transactions.coordinator.partition_of("tx-d")).leader_epoch
    wait_until(lambda: wire.request(DescribeProducersRequest(topics=[T(name="desc", partition_indexes=[0])]), 0)
               .topics[0].partitions[0].active_producers[0].current_txn_start_offset == -1, what="the commit marker")
    s0 = wire.request(DescribeProducersRequest(topics=[T(name="desc", partition_indexes=[0])]), 0) \
        .topics[0].partitions[0].active_producers[0]
    assert (s0.producer_id, s0.producer_epoch, s0.coordinator_epoch) == (pid, epoch, txn_epoch)
