"""KIP-890 part 1, the broker-side verification of transactional writes (Kafka 3.6+, on by default): a transactional
Produce to a partition its producer has not added to the transaction, or from a fenced producer, is refused with
Kafka's answers and appends nothing, so no hanging transaction is left (the last stable offset does not stick).
The partition leader asks the transaction coordinator in place, or with AddPartitionsToTxn v4 (verify only) when the
coordinator is another broker."""
from __future__ import annotations

import time

import pytest
from kafka.protocol.producer.transaction import AddPartitionsToTxnRequest

from helpers import wait_until
from kafkite.testing.cluster import KafkiteCluster
from kafkite.testing.wire_client import WireClient
from kafkite.wire.errors import E
from test_transactions import add, create, end, fetch, init, produce_txn


def test_a_partition_not_added_to_the_transaction_is_refused(broker, wire):
    bs = broker.bootstrap_servers
    create(bs, "verify", partitions=2)
    r = init(wire, "tx-verify")
    pid, epoch = r.producer_id, r.producer_epoch
    assert add(wire, "tx-verify", pid, epoch, [("verify", 0)]) == {("verify", 0): 0}
    # Produce v11 knows TRANSACTION_ABORTABLE; older versions get INVALID_TXN_STATE with Kafka's message
    p = produce_txn(wire, "verify", pid, epoch, 0, 2, "tx-verify", partition=1, v=11)
    assert (p.error_code, p.base_offset) == (E.TRANSACTION_ABORTABLE, -1), p
    p = produce_txn(wire, "verify", pid, epoch, 0, 2, "tx-verify", partition=1, v=9)
    assert (p.error_code, p.error_message) == (E.INVALID_TXN_STATE, "Partition was not added to the transaction")
    part1 = fetch_partition(wire, "verify", 1)
    assert part1.high_watermark == 0 and part1.last_stable_offset == 0, "something was appended"
    # the added partition takes the write; after the commit nothing hangs on partition 1
    assert produce_txn(wire, "verify", pid, epoch, 0, 2, "tx-verify", partition=0).error_code == 0
    assert end(wire, "tx-verify", pid, epoch, True) == 0
    wait_until(lambda: fetch(wire, "verify", 1).last_stable_offset == 3, what="the commit marker")
    assert fetch_partition(wire, "verify", 1).last_stable_offset == 0


def test_a_fenced_producer_cannot_start_writing_to_a_partition(broker, wire):
    create(broker.bootstrap_servers, "fenced")
    r = init(wire, "tx-fenced")
    old_pid, old_epoch = r.producer_id, r.producer_epoch
    r2 = init(wire, "tx-fenced")  # a second producer with the same transactional id bumps the epoch
    assert (r2.producer_id, r2.producer_epoch) == (old_pid, old_epoch + 1)
    p = produce_txn(wire, "fenced", old_pid, old_epoch, 0, 1, "tx-fenced")
    assert p.error_code == E.INVALID_PRODUCER_EPOCH and p.base_offset == -1
    # an unknown producer id for the transactional id
    p = produce_txn(wire, "fenced", old_pid + 1000, 0, 0, 1, "tx-fenced")
    assert p.error_code == E.INVALID_PRODUCER_ID_MAPPING
    assert fetch(wire, "fenced", 0).high_watermark == 0


def fetch_partition(w, topic, partition):
    from kafka.protocol.consumer import FetchRequest
    T = FetchRequest.FetchTopic
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=1,
                       session_id=0, session_epoch=-1, topics=[T(topic=topic, partitions=[T.FetchPartition(
                           partition=partition, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                           log_start_offset=-1, partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id="")
    return w.request(req, 12).responses[0].partitions[0]


def test_verification_asks_a_coordinator_on_another_broker():
    """In a 3-broker cluster the partition's leader is not the transaction coordinator: it asks with
    AddPartitionsToTxn v4 (verify only) over the coordinator's inter-broker listener."""
    with KafkiteCluster(brokers=3) as c:
        with WireClient.connect(c.bootstrap_of(c.node_ids[0])) as w:
            from kafka.protocol.metadata import FindCoordinatorRequest
            tid = "tx-remote"
            coordinator = w.request(FindCoordinatorRequest(key=tid, key_type=1), 2).node_id
        create(c.bootstrap_servers, "remote", partitions=6)
        with WireClient.connect(c.bootstrap_of(coordinator)) as wc:
            r = init(wc, tid)
            pid, epoch = r.producer_id, r.producer_epoch
            parts = [p for p in range(6) if c.leader("remote", p) != coordinator]
            assert parts, "every partition led by the coordinator"
            added, other = parts[0], parts[1] if len(parts) > 1 else None
            assert add(wc, tid, pid, epoch, [("remote", added)]) == {("remote", added): 0}
        leader = c.leader("remote", added)
        with WireClient.connect(c.bootstrap_of(leader)) as wl:
            assert produce_txn(wl, "remote", pid, epoch, 0, 2, tid, partition=added).error_code == 0
        refused = [p for p in range(6) if p != added]
        for p in refused:
            with WireClient.connect(c.bootstrap_of(c.leader("remote", p))) as wl:
                out = produce_txn(wl, "remote", pid, epoch, 0, 1, tid, partition=p, v=11)
                assert out.error_code == E.TRANSACTION_ABORTABLE, (p, out)
        # the brokers' form is not advertised to clients: v4 on a client listener closes the connection
        with WireClient.connect(c.bootstrap_of(leader)) as wl:
            T = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
            data, _ = wl.encode(AddPartitionsToTxnRequest(transactions=[T(
                transactional_id=tid, producer_id=pid, producer_epoch=epoch, verify_only=True,
                topics=[T.AddPartitionsToTxnTopic(name="remote", partitions=[added])])]), 4)
            wl.send_raw(data)
            assert wl.is_closed()
        with WireClient.connect(c.bootstrap_of(coordinator)) as wc:
            assert end(wc, tid, pid, epoch, False) == 0


@pytest.mark.parametrize("v", [2, 3, 4])
def test_txn_offset_commit_of_a_fenced_producer_or_a_group_not_added(broker, wire, v):
    """TxnOffsetCommit is verified like a Produce (Kafka's handleTxnCommitOffsets): the group's __consumer_offsets
    partition must be in the producer's transaction at its current epoch. A producer fenced by a newer one with its
    transactional id gets PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v3), a group not added with AddOffsetsToTxn
    INVALID_TXN_STATE; nothing is committed, not even pending."""
    from kafka.protocol.metadata import FindCoordinatorRequest
    from kafka.protocol.consumer import OffsetFetchRequest
    from kafka.protocol.producer.transaction import AddOffsetsToTxnRequest, TxnOffsetCommitRequest
    tid, group = f"tx-oc-{v}", f"g-oc-{v}"
    create(broker.bootstrap_servers, f"in-{v}")
    wait_until(lambda: wire.request(FindCoordinatorRequest(key=group, key_type=0), 2).error_code == 0,
               what="the group coordinator")
    first = init(wire, tid)
    pid, epoch = first.producer_id, first.producer_epoch
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic

    def commit(producer_epoch, offset=7):
        req = TxnOffsetCommitRequest(transactional_id=tid, group_id=group, producer_id=pid,
                                     producer_epoch=producer_epoch, generation_id=-1, member_id="",
                                     group_instance_id=None, topics=[T(name=f"in-{v}", partitions=[
                                         T.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                                                           committed_leader_epoch=-1,
                                                                           committed_metadata="")])])
        for _ in range(100):
            code = wire.request(req, v).topics[0].partitions[0].error_code
            if code not in (E.COORDINATOR_LOAD_IN_PROGRESS, E.NOT_COORDINATOR):
                return code
            time.sleep(0.05)
        return code

    def committed():
        OT = OffsetFetchRequest.OffsetFetchRequestTopic
        r = wire.request(OffsetFetchRequest(group_id=group, topics=[OT(name=f"in-{v}", partition_indexes=[0])],
                                            require_stable=False), 7)
        return r.topics[0].partitions[0].committed_offset

    assert commit(epoch) == E.INVALID_TXN_STATE  # AddOffsetsToTxn first
    assert wire.request(AddOffsetsToTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                               group_id=group), 3).error_code == 0
    second = init(wire, tid)  # fences the first producer: its transaction is aborted at a bumped epoch
    assert second.producer_id == pid and second.producer_epoch > epoch
    assert commit(epoch) == (E.PRODUCER_FENCED if v >= 3 else E.INVALID_PRODUCER_EPOCH)
    assert committed() == -1
    # the new producer, once it added the group, commits
    assert wire.request(AddOffsetsToTxnRequest(transactional_id=tid, producer_id=pid,
                                               producer_epoch=second.producer_epoch, group_id=group), 3).error_code == 0
    assert commit(second.producer_epoch, 9) == 0
    assert end(wire, tid, pid, second.producer_epoch, True) == 0
    wait_until(lambda: committed() == 9, what="the committed offset")
    # the old epoch stays fenced after the commit
    assert commit(epoch) == (E.PRODUCER_FENCED if v >= 3 else E.INVALID_PRODUCER_EPOCH)




def test_a_marker_from_a_zombie_coordinator_is_fenced():
    """WriteTxnMarkers from a transaction coordinator whose epoch is older than the one that last ended the producer's
    transaction on the partition answers TRANSACTION_COORDINATOR_FENCED and appends nothing (Kafka's
    appendEndTxnMarker); one of an older producer epoch INVALID_PRODUCER_EPOCH. The coordinator epoch survives a
    restart of the partition's log (it is read back from the markers)."""
    from kafka.protocol.producer.transaction import WriteTxnMarkersRequest
    M = WriteTxnMarkersRequest.WritableTxnMarker
    with KafkiteCluster(brokers=3) as c:
        create(c.bootstrap_of(c.node_ids[0]), "zombie")
        leader = c.leader("zombie", 0)
        b = c.state.brokers[leader]
        host, port = next((h, p) for n, h, p in b.cache.brokers[leader].listeners if n == "INTERNAL")

        def marker(producer_epoch, coordinator_epoch, pid=4242):
            req = WriteTxnMarkersRequest(markers=[M(
                producer_id=pid, producer_epoch=producer_epoch, transaction_result=False, coordinator_epoch=coordinator_epoch,
                topics=[M.WritableTxnMarkerTopic(name="zombie", partition_indexes=[0])])])
            with WireClient(host, port) as w:
                return w.request(req, 1).markers[0].topics[0].partitions[0].error_code

        def log_end():
            return b.replicas.get("zombie", 0).log_end_offset

        assert marker(3, 7) == 0
        end_offset = log_end()
        assert marker(3, 6) == E.TRANSACTION_COORDINATOR_FENCED
        assert marker(2, 7) == E.INVALID_PRODUCER_EPOCH
        assert log_end() == end_offset, "a fenced marker was appended"
        assert marker(3, 7) == 0 and marker(4, 8) == 0
        assert marker(4, 7) == E.TRANSACTION_COORDINATOR_FENCED
        assert marker(4, 0, pid=4243) == 0  # another producer: its own coordinator epoch
