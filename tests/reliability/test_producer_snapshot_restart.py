"""Disk mode: an idempotent producer whose batches retention deleted is still known after a clean restart (its
state comes back from the partition's producer snapshot, as Kafka's): a retried duplicate is answered with the
original offsets and not appended twice, and its sequence goes on where it was."""
from __future__ import annotations

from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest

from helpers import wait_until
from kafkite.storage.batch import build_batch
from kafkite.testing.runner import BrokerThread
from kafkite.testing.wire_client import WireClient

TOPIC = "snapdup"


def produce(w, data):
    T = ProduceRequest.TopicProduceData
    req = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[
        T(name=TOPIC, topic_id=None, partition_data=[T.PartitionProduceData(index=0, records=data)])])
    return w.request(req, 9).responses[0].partition_responses[0]


def batch(pid, seq, n=1):
    return build_batch([(None, b"v%d" % (seq + i), []) for i in range(n)], timestamp_ms=1_700_000_000_000,
                       producer_id=pid, producer_epoch=0, base_sequence=seq)


def test_a_retention_deleted_producers_duplicate_after_a_restart(tmp_path):
    data = tmp_path / "data"
    with BrokerThread(data_dir=data, overrides={"log.retention.check.interval.ms": "100"}) as b:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        admin.create_topics([NewTopic(TOPIC, 1, 1, topic_configs={
            "segment.bytes": "200", "retention.bytes": "1", "file.delete.delay.ms": "0"})])
        admin.close()
        with WireClient.connect(b.bootstrap_servers, timeout=30) as w:
            a, other = (w.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 1)
                        .producer_id for _ in range(2))
            first = batch(a, 0, 3)
            r = produce(w, first)
            assert (r.error_code, r.base_offset) == (0, 0)
            for i in range(6):  # another producer's batches roll segments past producer a's
                assert produce(w, batch(other, i)).error_code == 0
            lg = b.state.replicas.get(TOPIC, 0)
            wait_until(lambda: lg.log_start_offset > 3, timeout=30, what="retention deleting producer a's segment")
            end = lg.log_end_offset
    with BrokerThread(data_dir=data) as b:
        lg = b.state.replicas.get(TOPIC, 0)
        assert lg.log_start_offset > 3 and lg.log_end_offset == end
        with WireClient.connect(b.bootstrap_servers, timeout=30) as w:
            r = produce(w, first)  # the retry of a batch whose answer was lost
            assert (r.error_code, r.base_offset) == (0, 0)  # a duplicate: its original offset, nothing appended
            assert lg.log_end_offset == end
            assert produce(w, batch(a, 5)).error_code == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER: it expects 3
            r = produce(w, batch(a, 3))
            assert (r.error_code, r.base_offset) == (0, end)
