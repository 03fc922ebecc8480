"""Produce 3-11, Fetch 4-16, ListOffsets 0-8, OffsetForLeaderEpoch 2-4, InitProducerId 0-5:
every version over a real socket, with Kafka's error codes."""
from __future__ import annotations

import threading
import time
import uuid

import pytest
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kafkite.server.router import supported
from kafkite.testing.wire_client import WireClient
from kafkite.wire.errors import E

SUP = supported()


def versions(api):
    lo, hi = SUP[api]
    return list(range(lo, hi + 1))


def batch(n=3, ts=None, pid=-1, epoch=-1, seq=-1, codec=0, value_size=10, key=b"k"):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=1 << 30)
    ts = int(time.time() * 1000) if ts is None else ts
    for i in range(n):
        b.append(i, timestamp=ts + i, key=key, value=b"v" * value_size, headers=[("h", b"1")])
    return bytes(b.build())


def create(w, name, partitions=1, configs=None):
    CT = CreateTopicsRequest.CreatableTopic
    req = CreateTopicsRequest(topics=[CT(name=name, num_partitions=partitions, replication_factor=1, assignments=[],
                                         configs=[CT.CreatableTopicConfig(name=k, value=v)
                                                  for k, v in (configs or {}).items()])], timeout_ms=1000)
    assert w.request(req, 7).topics[0].error_code == 0


def produce(w, topic, records, version=9, partition=0, acks=-1, topic_id=None):
    T = ProduceRequest.TopicProduceData
    req = ProduceRequest(transactional_id=None, acks=acks, timeout_ms=5000,
                         topic_data=[T(name=topic, topic_id=topic_id,
                                       partition_data=[T.PartitionProduceData(index=partition, records=records)])])
    if acks == 0:
        data, _ = w.encode(req, version)
        w.send_raw(data)
        return None
    return w.request(req, version).responses[0].partition_responses[0]


def fetch(w, topic, offset, version=12, max_wait=0, min_bytes=1, partition=0, topic_id=None, pmax=1 << 20,
          max_bytes=50 << 20, leader_epoch=-1):
    T = FetchRequest.FetchTopic
    req = FetchRequest(replica_id=-1, max_wait_ms=max_wait, min_bytes=min_bytes, max_bytes=max_bytes,
                       isolation_level=0, session_id=0, session_epoch=-1,
                       topics=[T(topic=topic, topic_id=topic_id, partitions=[
                           T.FetchPartition(partition=partition, current_leader_epoch=leader_epoch,
                                            fetch_offset=offset, last_fetched_epoch=-1, log_start_offset=-1,
                                            partition_max_bytes=pmax)])],
                       forgotten_topics_data=[], rack_id="")
    return w.request(req, version).responses[0].partitions[0]


def records_of(data: bytes):
    out, pos = [], 0
    while pos < len(data):
        size = int.from_bytes(data[pos + 8:pos + 12], "big") + 12
        b = DefaultRecordBatch(data[pos:pos + size])
        out.extend((r.offset, r.key, r.value) for r in b)
        pos += size
    return out


@pytest.mark.parametrize("v", versions(0))
def test_produce_every_version(wire, v):
    create(wire, f"p{v}")
    r = produce(wire, f"p{v}", batch(3), version=v)
    assert r.error_code == 0 and r.base_offset == 0
    r = produce(wire, f"p{v}", batch(2), version=v)
    assert r.base_offset == 3
    if v >= 5:
        assert r.log_start_offset == 0
    assert [o for o, _, _ in records_of(fetch(wire, f"p{v}", 0).records)] == [0, 1, 2, 3, 4]
    r = produce(wire, "missing-topic!", batch(1), version=v)
    assert r.error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    r = produce(wire, f"p{v}", batch(1), version=v, partition=7)
    assert r.error_code == E.UNKNOWN_TOPIC_OR_PARTITION


def test_produce_acks_zero_sends_no_response(wire):
    create(wire, "acks0")
    produce(wire, "acks0", batch(2), acks=0)
    r = produce(wire, "acks0", batch(1))  # the next response on the wire is this one's
    assert r.base_offset == 2


def test_produce_corrupt_crc(wire):
    create(wire, "crc")
    data = bytearray(batch(3))
    data[-1] ^= 0xFF
    assert produce(wire, "crc", bytes(data)).error_code == E.CORRUPT_MESSAGE
    assert fetch(wire, "crc", 0).high_watermark == 0  # nothing written


def test_produce_too_large(wire):
    create(wire, "big", configs={"max.message.bytes": "2000"})
    assert produce(wire, "big", batch(1, value_size=5000)).error_code == E.MESSAGE_TOO_LARGE
    assert produce(wire, "big", batch(1, value_size=100)).error_code == 0


def test_produce_invalid_timestamp(wire):
    create(wire, "ts", configs={"message.timestamp.after.max.ms": "1000"})
    r = produce(wire, "ts", batch(2, ts=int(time.time() * 1000) + 3_600_000))
    assert r.error_code == E.INVALID_TIMESTAMP
    assert r.record_errors and r.record_errors[0].batch_index == 0


def test_log_append_time(wire):
    create(wire, "lat", configs={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    r = produce(wire, "lat", batch(2, ts=1000))
    assert r.log_append_time_ms >= before
    data = fetch(wire, "lat", 0).records
    b = DefaultRecordBatch(data)
    assert b.timestamp_type == 1 and all(rec.timestamp == r.log_append_time_ms for rec in b)


@pytest.mark.parametrize("v", versions(1))
def test_fetch_every_version(wire, broker, v):
    name = f"f{v}"
    create(wire, name)
    produce(wire, name, batch(5))
    tid = broker.state.metadata.topic(name).topic_id if v >= 13 else None
    p = fetch(wire, name, 0, version=v, topic_id=tid)
    assert p.error_code == 0 and p.high_watermark == 5
    assert [o for o, _, _ in records_of(p.records)] == [0, 1, 2, 3, 4]
    if v >= 5:
        assert p.log_start_offset == 0
    assert fetch(wire, name, 99, version=v, topic_id=tid).error_code == E.OFFSET_OUT_OF_RANGE
    empty = fetch(wire, name, 5, version=v, topic_id=tid)
    assert empty.error_code == 0 and not empty.records
    if v >= 13:
        assert fetch(wire, name, 0, version=v, topic_id=uuid.uuid4()).error_code == E.UNKNOWN_TOPIC_ID
    else:
        assert fetch(wire, "nope", 0, version=v).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    if v >= 9:
        assert fetch(wire, name, 0, version=v, topic_id=tid, leader_epoch=5).error_code == E.UNKNOWN_LEADER_EPOCH


def test_fetch_at_least_one_batch_and_max_bytes(wire):
    create(wire, "mb")
    for _ in range(4):
        produce(wire, "mb", batch(1, value_size=3000))
    p = fetch(wire, "mb", 0, pmax=100)  # smaller than one batch: still one whole batch
    assert [o for o, _, _ in records_of(p.records)] == [0]
    p = fetch(wire, "mb", 0, pmax=7000)
    assert [o for o, _, _ in records_of(p.records)] == [0, 1]
    p = fetch(wire, "mb", 1, pmax=1 << 20, max_bytes=100)
    assert [o for o, _, _ in records_of(p.records)] == [1]


def test_fetch_long_poll_woken_by_produce(broker, wire):
    create(wire, "lp")
    result = {}

    def poll():
        with WireClient.connect(broker.bootstrap_servers) as w2:
            t0 = time.monotonic()
            result["p"] = fetch(w2, "lp", 0, max_wait=20_000, min_bytes=1)
            result["elapsed"] = time.monotonic() - t0
    t = threading.Thread(target=poll)
    t.start()
    time.sleep(0.3)  # let the fetch park (the assertion below does not depend on it)
    produce(wire, "lp", batch(1))
    t.join(30)
    assert records_of(result["p"].records)
    assert result["elapsed"] < 15  # woken by the produce, not by max_wait_ms


def test_fetch_min_bytes_waits_for_max_wait(wire):
    create(wire, "mw")
    produce(wire, "mw", batch(1))
    t0 = time.monotonic()
    p = fetch(wire, "mw", 0, max_wait=300, min_bytes=1 << 20)
    assert time.monotonic() - t0 >= 0.25
    assert records_of(p.records)  # what there is, after max_wait


@pytest.mark.parametrize("v", versions(2))
def test_list_offsets_every_version(wire, v):
    name = f"lo{v}"
    create(wire, name)
    produce(wire, name, batch(3, ts=1_000))
    produce(wire, name, batch(3, ts=5_000))
    LT = ListOffsetsRequest.ListOffsetsTopic

    def lo(ts):
        req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[LT(name=name, partitions=[
            LT.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=ts, max_num_offsets=1)])])
        return wire.request(req, v).topics[0].partitions[0]

    def off(p):
        return p.old_style_offsets[0] if v == 0 else p.offset
    assert off(lo(-2)) == 0
    assert off(lo(-1)) == 6
    if v >= 1:
        p = lo(1_001)
        assert (p.offset, p.timestamp) == (1, 1_001)
        p = lo(3_000)
        assert (p.offset, p.timestamp) == (3, 5_000)
        assert lo(10_000).offset == -1
    if v >= 7:
        p = lo(-3)
        assert (p.offset, p.timestamp) == (5, 5_002)


@pytest.mark.parametrize("v", versions(23))
def test_offset_for_leader_epoch_every_version(wire, v):
    name = f"ofle{v}"
    create(wire, name)
    produce(wire, name, batch(4))
    T = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    req = OffsetForLeaderEpochRequest(replica_id=-1, topics=[T(topic=name, partitions=[
        T.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0),
        T.OffsetForLeaderPartition(partition=3, current_leader_epoch=-1, leader_epoch=0)])])
    parts = wire.request(req, v).topics[0].partitions
    assert (parts[0].error_code, parts[0].leader_epoch, parts[0].end_offset) == (0, 0, 4)
    assert parts[1].error_code == E.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("v", versions(22))
def test_init_producer_id_every_version(wire, v):
    kw = {"producer_id": -1, "producer_epoch": -1} if v >= 3 else {}
    r1 = wire.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000, **kw), v)
    r2 = wire.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000, **kw), v)
    assert r1.error_code == 0 and r1.producer_epoch == 0
    assert r2.producer_id != r1.producer_id
    if v >= 3:  # naming its id and epoch (KIP-360) still gets a new id at epoch 0, as Kafka's handleInitProducerId
        r3 = wire.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000,
                                                producer_id=r1.producer_id, producer_epoch=0), v)
        assert r3.error_code == 0 and r3.producer_epoch == 0 and r3.producer_id not in (r1.producer_id, r2.producer_id)
        r4 = wire.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000,
                                                producer_id=r3.producer_id, producer_epoch=32767), v)
        assert r4.error_code == 0 and r4.producer_epoch == 0 and r4.producer_id != r3.producer_id


def test_idempotent_retry_and_gap(wire):
    create(wire, "idem")
    r = wire.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000,
                                           producer_id=-1, producer_epoch=-1), 4)
    pid = r.producer_id
    first = produce(wire, "idem", batch(3, pid=pid, epoch=0, seq=0))
    assert (first.error_code, first.base_offset) == (0, 0)
    assert produce(wire, "idem", batch(2, pid=pid, epoch=0, seq=3)).base_offset == 3
    dup = produce(wire, "idem", batch(3, pid=pid, epoch=0, seq=0))  # a retry of the first batch
    assert (dup.error_code, dup.base_offset) == (0, 0)
    assert fetch(wire, "idem", 0).high_watermark == 5  # not written twice
    gap = produce(wire, "idem", batch(1, pid=pid, epoch=0, seq=10))
    assert gap.error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    # a bumped epoch starts again at sequence 0; the old epoch is fenced afterwards
    assert produce(wire, "idem", batch(1, pid=pid, epoch=1, seq=0)).error_code == 0
    assert produce(wire, "idem", batch(1, pid=pid, epoch=0, seq=5)).error_code == E.INVALID_PRODUCER_EPOCH


@pytest.mark.parametrize("v", versions(21))
def test_delete_records_every_version(wire, v):
    from kafka.protocol.admin import DeleteRecordsRequest
    name = f"dr{v}"
    create(wire, name)
    produce(wire, name, batch(5))
    T = DeleteRecordsRequest.DeleteRecordsTopic
    req = DeleteRecordsRequest(topics=[T(name=name, partitions=[
        T.DeleteRecordsPartition(partition_index=0, offset=3),
        T.DeleteRecordsPartition(partition_index=9, offset=1)])], timeout_ms=1000)
    parts = wire.request(req, v).topics[0].partitions
    assert (parts[0].error_code, parts[0].low_watermark) == (0, 3)
    assert parts[1].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert fetch(wire, name, 1).error_code == E.OFFSET_OUT_OF_RANGE
    assert fetch(wire, name, 3).error_code == 0
    req = DeleteRecordsRequest(topics=[T(name=name, partitions=[T.DeleteRecordsPartition(partition_index=0,
                                                                                        offset=99)])],
                               timeout_ms=1000)
    assert wire.request(req, v).topics[0].partitions[0].error_code == E.OFFSET_OUT_OF_RANGE
