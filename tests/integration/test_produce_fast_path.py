"""A Produce's common partition (one uncompressed batch, not transactional, a topic that keeps it) takes the one-pass
route (log_validator.prepare_simple, UnifiedLog.append_produced, a packed answer); everything else prepare_append's,
with the same answers and logs. Requests handed to an in-process broker's router, as a connection would."""
from __future__ import annotations

import struct
import time

import pytest
import structlog
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

import kafkite.server.replica_manager as rm_module
from kafkite.testing.runner import BrokerThread
from kafkite.storage.default_record import COMPILED

compiled = pytest.mark.skipif(not COMPILED, reason="the one-pass route reads records with the compiled reader (not "
                                                   "built, or KAFKITE_PURE_PYTHON set)")


def batch(n=3, codec=0, pid=-1, epoch=-1, seq=-1) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=1 << 30)
    now = int(time.time() * 1000)
    for i in range(n):
        b.append(i, timestamp=now + i, key=b"k%d" % i, value=b"v" * 30, headers=[])
    return bytes(b.build())


def frame(topic: str, parts: dict[int, bytes], acks: int = -1, version: int = 9) -> bytes:
    cls = ProduceRequest[version]
    D = cls.TopicProduceData
    req = cls(transactional_id=None, acks=acks, timeout_ms=30000, topic_data=[D(name=topic, partition_data=[
        D.PartitionProduceData(index=p, records=data) for p, data in parts.items()])])
    req.with_header(correlation_id=1, client_id="test")
    return bytes(req.encode(header=True))


@pytest.fixture(scope="module")
def bt():
    with BrokerThread() as bt:
        async def seed():
            await bt.broker.admin.create_topic("plain", 3, 1, None, {})
            await bt.broker.admin.create_topic("lat", 1, 1, None, {"message.timestamp.type": "LogAppendTime"})
        bt.call(seed)
        yield bt


@pytest.fixture
def routes(monkeypatch):
    """How many partitions each route took."""
    taken = {"simple": 0, "general": 0}
    simple, general = rm_module.prepare_simple, rm_module.prepare_append

    def counted_simple(*a, **kw):
        got = simple(*a, **kw)
        taken["simple"] += got is not None
        return got

    def counted_general(*a, **kw):
        taken["general"] += 1
        return general(*a, **kw)
    monkeypatch.setattr(rm_module, "prepare_simple", counted_simple)
    monkeypatch.setattr(rm_module, "prepare_append", counted_general)
    return taken


def produce(bt, data: bytes, version: int = 9):
    async def run():
        out, waits = await bt.broker.router.dispatch(data, "127.0.0.1:1", structlog.get_logger("test"))
        for w in waits:
            await w()
        return out() if callable(out) else out
    out = bt.call(run)
    if out is None:
        return None
    answer = ProduceResponse.decode(bytes(out)[4:], version=version, header=True)
    return {(t.name, p.index): (p.error_code, p.base_offset, p.log_append_time_ms) for t in answer.responses
            for p in t.partition_responses}


def log_offsets(bt, topic: str, partition: int) -> list[int]:
    data = bt.broker.apis.replica_manager.logs[(topic, partition)].read(0, 1 << 20)
    out, pos = [], 0
    while pos < len(data):
        size = struct.unpack_from(">i", data, pos + 8)[0] + 12
        out += [r.offset for r in DefaultRecordBatch(data[pos:pos + size])]
        pos += size
    return out


@compiled
def test_the_common_partitions_take_the_one_pass_route(bt, routes):
    before = {p: len(log_offsets(bt, "plain", p)) for p in range(3)}
    got = produce(bt, frame("plain", {0: batch(3), 1: batch(2)}))
    assert got == {("plain", 0): (0, before[0], -1), ("plain", 1): (0, before[1], -1)}
    assert routes == {"simple": 2, "general": 0}
    got = produce(bt, frame("plain", {0: batch(4)}, acks=1, version=3), version=3)
    assert got == {("plain", 0): (0, before[0] + 3, -1)}
    assert produce(bt, frame("plain", {0: batch(1)}, acks=0)) is None
    assert routes == {"simple": 4, "general": 0}
    assert log_offsets(bt, "plain", 0) == list(range(before[0] + 8))


@pytest.mark.parametrize("case", ["compressed", "two batches", "bad crc", "LogAppendTime topic"])
def test_anything_else_takes_prepare_appends_route(bt, routes, case):
    topic = "lat" if case == "LogAppendTime topic" else "plain"
    p = 2 if topic == "plain" else 0
    start = len(log_offsets(bt, topic, p))
    data = {"compressed": batch(3, codec=1), "two batches": batch(2) + batch(2), "LogAppendTime topic": batch(3)}.get(case)
    if case == "bad crc":
        data = bytearray(batch(3))
        data[-1] ^= 1
        data = bytes(data)
    (code, base, lat), = produce(bt, frame(topic, {p: data})).values()
    assert routes == {"simple": 0, "general": 1}
    if case == "two batches":
        assert (code, base) == (87, -1)  # INVALID_RECORD
    elif case == "bad crc":
        assert (code, base) == (2, -1)  # CORRUPT_MESSAGE
    else:
        assert (code, base) == (0, start) and log_offsets(bt, topic, p) == list(range(start + 3))
        assert (lat > 0) == (case == "LogAppendTime topic")


@compiled
def test_an_unknown_partition_is_answered_as_before(bt, routes):
    got = produce(bt, frame("plain", {0: batch(1), 9: batch(1)}))
    assert got[("plain", 9)][:2] == (3, -1) and got[("plain", 0)][0] == 0  # UNKNOWN_TOPIC_OR_PARTITION
    assert routes == {"simple": 1, "general": 0}


def idempotent_answers(bt, topic: str, p: int, pid: int) -> list[tuple[int, int]]:
    """An idempotent producer's batches to topic-p: its first two, a retry of the second, one out of order, the one
    expected, one without a sequence -> (error code, base offset from the partition's start)."""
    start = len(log_offsets(bt, topic, p))
    out = []
    for n, seq in ((2, 0), (3, 2), (3, 2), (1, 9), (1, 5), (1, -1)):
        (code, base, _), = produce(bt, frame(topic, {p: batch(n, pid=pid, epoch=0, seq=seq)})).values()
        out.append((code, base - start if base >= 0 else base))
    return out


@compiled
def test_an_idempotent_producers_batches_take_the_one_pass_route_with_prepare_appends_answers(bt, routes,
                                                                                              monkeypatch):
    """The same sequence to two partitions, through the one-pass route and through prepare_append's alone
    (prepare_simple made to answer None): the same answers and the same records in the log, the retry acknowledged
    with its first offset and not written again, the batch out of order refused."""
    bt.call(bt.broker.admin.create_topic, "idem", 2, 1, None, {})
    one_pass = idempotent_answers(bt, "idem", 0, 7001)
    assert routes == {"simple": 5, "general": 1}  # (the batch without a sequence: prepare_append's INVALID_RECORD)
    monkeypatch.setattr(rm_module, "prepare_simple", lambda *a: None)
    general = idempotent_answers(bt, "idem", 1, 7002)
    assert one_pass == general == [(0, 0), (0, 2), (0, 2), (45, -1), (0, 5), (87, -1)]  # 45: OUT_OF_ORDER_SEQUENCE
    assert log_offsets(bt, "idem", 0) == log_offsets(bt, "idem", 1) == list(range(6))
