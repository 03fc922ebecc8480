"""Bad input never enters the log: Produce requests built byte by byte, each breaking one rule
of Kafka's LogValidator (CRC kept right, so only that rule fails), per codec. Each is refused
with Kafka's error -- record errors (KIP-467) where Kafka gives them -- the log end offset does
not move, and a real consumer (kafka-python) reads every good record produced around them.
A zstd batch that expands past the bound is refused while the broker keeps answering, and
appends to one partition keep their order while a large batch is validated in a worker."""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import InvalidRecordError
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest

import kafkite.server.replica_manager as replica_manager
import raw_batches as rb
from kafkite.testing.runner import BrokerThread
from kafkite.testing.wire_client import WireClient
from kafkite.wire.errors import E

UNKNOWN_SERVER_ERROR = -1
NOW = int(time.time() * 1000)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread(data_dir=tmp_path_factory.mktemp("data")) as b:
        yield b


@pytest.fixture(scope="module")
def admin(broker):
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    yield a
    a.close()


@pytest.fixture
def wire(broker):
    with WireClient.connect(broker.bootstrap_servers, timeout=60) as w:
        yield w


def produce(w, topic, data, version=9):
    T = ProduceRequest.TopicProduceData
    req = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[
        T(name=topic, topic_id=None, partition_data=[T.PartitionProduceData(index=0, records=data)])])
    return w.request(req, version).responses[0].partition_responses[0]


def list_offset(w, topic, ts=-1):
    LT = ListOffsetsRequest.ListOffsetsTopic
    req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[LT(name=topic, partitions=[
        LT.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=ts, max_num_offsets=1)])])
    p = w.request(req, 7).topics[0].partitions[0]
    assert p.error_code == 0
    return p


def metadata(w):
    T = MetadataRequest.MetadataRequestTopic
    assert w.request(MetadataRequest(topics=[T(name="bomb")], allow_auto_topic_creation=False), 4).topics[0] \
        .error_code == 0


def consume(bootstrap, topic, n):
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=10000)
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        out = []
        deadline = time.monotonic() + 20
        while len(out) < n and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=500).values():
                out.extend(recs)
        return out
    finally:
        c.close()


def bad_cases(codec):
    """name -> (batch, Kafka's error code)"""
    r = rb.record
    three = rb.records(3)
    cases = {
        "count below the records": (rb.batch(three, 2, codec=codec, base_ts=NOW), E.INVALID_RECORD),
        "count above the records": (rb.batch(three, 4, codec=codec, base_ts=NOW), E.INVALID_RECORD),
        "negative record length": (rb.batch(r(0) + r(1, length=-3), 2, codec=codec, base_ts=NOW), E.INVALID_RECORD),
        "record length past the end": (rb.batch(r(0) + r(1, length=900), 2, codec=codec, base_ts=NOW),
                                       E.INVALID_RECORD),
        "garbage record": (rb.batch(r(0) + b"\x0cgarbage!\xff\xff\xff", 2, codec=codec, base_ts=NOW),
                           E.INVALID_RECORD),
        "negative header count": (rb.batch(r(0) + rb.varint(6) + b"\x00\x00\x02\x02k\x01\x0f", 2, codec=codec,
                                           base_ts=NOW), E.INVALID_RECORD),
    }
    if codec != rb.NONE:
        cases["invalid compressed bytes"] = (rb.batch(b"\x01\x02\x03 not " + rb.CODEC_NAMES[codec].encode() * 5, 3,
                                                      codec=codec, compressed=True, base_ts=NOW), UNKNOWN_SERVER_ERROR)
        whole = rb.compress(codec, rb.records(40, value=b"x" * 200))
        cases["truncated compressed bytes"] = (rb.batch(whole[:len(whole) // 2], 40, codec=codec, compressed=True,
                                                        base_ts=NOW), None)  # INVALID_RECORD or UNKNOWN
    return cases


@pytest.mark.parametrize("codec", rb.CODECS, ids=lambda c: rb.CODEC_NAMES[c])
def test_bad_batches_are_refused_and_consumers_read_on(broker, admin, wire, codec):
    topic = f"bad-{rb.CODEC_NAMES[codec]}"
    admin.create_topics([NewTopic(topic, 1, 1)])
    good_values = []

    def good():
        value = b"good %d" % len(good_values)
        assert produce(wire, topic, rb.batch(rb.record(0, 0, b"k", value), 1, codec=codec, base_ts=NOW)).error_code == 0
        good_values.append(value)

    good()
    for name, (data, code) in bad_cases(codec).items():
        end = list_offset(wire, topic).offset
        r = produce(wire, topic, data)
        if code is None:
            assert r.error_code in (E.INVALID_RECORD, UNKNOWN_SERVER_ERROR), name
        else:
            assert r.error_code == code, (name, r)
        # Kafka's InvalidRecordException / KafkaException: no record errors, no message, the log start offset
        assert r.record_errors == [] and r.error_message is None and r.base_offset == -1, (name, r)
        assert r.log_start_offset == 0, (name, r)
        assert list_offset(wire, topic).offset == end, f"{name}: something was appended"
        good()
    got = consume(broker.bootstrap_servers, topic, len(good_values))
    assert [m.value for m in got] == good_values


def test_magic_3_is_corrupt_message_and_magic_1_invalid_record(admin, wire):
    admin.create_topics([NewTopic("magic", 1, 1)])
    r = produce(wire, "magic", rb.batch(rb.records(1), 1, magic=3))
    assert (r.error_code, r.log_start_offset, r.error_message) == (E.CORRUPT_MESSAGE, -1, None)
    assert produce(wire, "magic", rb.batch(rb.records(1), 1, magic=1)).error_code == E.INVALID_RECORD
    assert produce(wire, "magic", rb.batch(rb.records(1), 1, attributes=6)).error_code == UNKNOWN_SERVER_ERROR
    assert produce(wire, "magic", rb.good(1, rb.ZSTD), version=6).error_code == E.UNSUPPORTED_COMPRESSION_TYPE
    assert list_offset(wire, "magic").offset == 0


@pytest.mark.parametrize("codec", rb.CODECS, ids=lambda c: rb.CODEC_NAMES[c])
def test_null_key_on_compacted_topic_gets_record_errors(admin, wire, codec):
    topic = f"compact-{rb.CODEC_NAMES[codec]}"
    admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"cleanup.policy": "compact"})])
    payload = rb.record(0, 0, b"a") + rb.record(1, 1, None) + rb.record(2, 2, b"c") + rb.record(3, 3, None)
    r = produce(wire, topic, rb.batch(payload, 4, codec=codec, base_ts=NOW))
    assert r.error_code == E.INVALID_RECORD
    msg = f"Compacted topic cannot accept message without key in topic partition {topic}-0"
    assert [(e.batch_index, e.batch_index_error_message) for e in r.record_errors] == [(1, msg), (3, msg)]
    assert r.error_message.startswith("One or more records have been rejected due to 2 record errors in total")
    assert list_offset(wire, topic).offset == 0
    assert produce(wire, topic, rb.good(2, codec, base_ts=NOW)).error_code == 0


def test_max_timestamp_is_the_records(admin, wire):
    admin.create_topics([NewTopic("maxts", 1, 1)])
    for codec in rb.CODECS:  # each claims a maxTimestamp far above its records'
        assert produce(wire, "maxts", rb.batch(rb.records(3), 3, codec=codec, base_ts=NOW + codec,
                                               max_ts=NOW + 10**9)).error_code == 0
    p = list_offset(wire, "maxts", ts=-3)  # the record with the largest timestamp
    assert (p.timestamp, p.offset) == (NOW + 4 + 2, 14)


def test_kafka_python_producer_sees_invalid_record_on_compacted_topic(broker, admin):
    admin.create_topics([NewTopic("compact-client", 1, 1, topic_configs={"cleanup.policy": "compact"})])
    p = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, retries=0)
    try:
        with pytest.raises(InvalidRecordError):
            p.send("compact-client", value=b"no key").get(timeout=30)
        assert p.send("compact-client", key=b"k", value=b"keyed").get(timeout=30).offset == 0
    finally:
        p.close()


def peak_rss_kib(pid: int) -> int:
    """A process's peak resident set size (VmHWM), KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmHWM in /proc/{pid}/status")


def reset_peak_rss(pid: int) -> bool:
    """Sets VmHWM back to the current RSS (Linux: `5` into clear_refs), so the peak measured is this test's."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def test_zip_bomb_is_refused_while_the_broker_keeps_answering(tmp_path):
    # bound: 64 x max.message.bytes = 16 MiB; each bomb expands to 256 MiB. The broker runs in a child process
    # of its own, so its peak RSS (VmHWM) is the broker's alone: not this pytest process's, which may have
    # peaked higher earlier and would hide a bomb expanded in full.
    from kafkite.testing.process import BrokerProcess
    bomb = rb.batch(rb.zstd_bomb(256 << 20), 1, codec=rb.ZSTD, compressed=True, base_ts=NOW)
    legal = rb.batch(rb.zstd_bomb(8 << 20), 1, codec=rb.ZSTD, compressed=True, base_ts=NOW)
    assert len(bomb) < 64 << 10
    with BrokerProcess(data_dir=tmp_path / "data") as bp:
        bs = bp.bootstrap_servers
        admin = KafkaAdminClient(bootstrap_servers=bs)
        try:
            admin.create_topics([NewTopic("bomb", 1, 1, topic_configs={"max.message.bytes": str(256 << 10)})])
        finally:
            admin.close()
        with WireClient.connect(bs, timeout=30) as w:  # warmed up: the first produce's imports and buffers
            assert produce(w, "bomb", rb.good(1, base_ts=NOW)).error_code == 0
        reset_peak_rss(bp.pid)
        rss_before = peak_rss_kib(bp.pid)
        done, answers = threading.Event(), []

        def producer():
            try:
                with WireClient.connect(bs, timeout=60) as w:
                    for _ in range(8):
                        answers.append(produce(w, "bomb", bomb))
                    answers.append(produce(w, "bomb", legal))
            finally:
                done.set()
        t = threading.Thread(target=producer)
        t.start()
        latencies = []
        with WireClient.connect(bs, timeout=30) as w:
            while not done.is_set():
                t0 = time.monotonic()
                metadata(w)
                latencies.append(time.monotonic() - t0)
            t.join()
            assert [a.error_code for a in answers] == [E.MESSAGE_TOO_LARGE] * 8 + [0]
            assert answers[0].log_start_offset == -1 and answers[0].error_message is None
            assert list_offset(w, "bomb").offset == 2  # the warm-up record and the legal batch only
        grown_mib = (peak_rss_kib(bp.pid) - rss_before) / 1024
    assert latencies and max(latencies) < 0.5, sorted(latencies)[-5:]
    # a bomb expanded in full would add 256 MiB; the legal batch's 8 MiB and the bounded stream fit under this
    assert grown_mib < 100, f"the broker's peak RSS grew by {grown_mib:.0f} MiB"


def test_appends_keep_arrival_order_while_a_large_batch_is_validated(broker, admin, monkeypatch):
    """A large batch is validated in a worker; a small produce to the same partition arriving
    meanwhile waits its turn instead of overtaking it."""
    admin.create_topics([NewTopic("order", 1, 1)])
    in_worker = threading.Event()
    real = replica_manager.prepare_append

    def slow_in_worker(*a, inline=False, **kw):
        if not inline:
            in_worker.set()
            time.sleep(0.3)
        return real(*a, inline=inline, **kw)
    monkeypatch.setattr(replica_manager, "prepare_append", slow_in_worker)
    from kafkite.storage import log_validator
    monkeypatch.setattr(log_validator, "INLINE_RECORDS_COMPILED", log_validator.INLINE_RECORDS)  # 6000: a worker's
    big = rb.good(6000, base_ts=NOW)
    results = {}

    def send(name, data):
        with WireClient.connect(broker.bootstrap_servers, timeout=60) as w:
            results[name] = produce(w, "order", data)
    a = threading.Thread(target=send, args=("big", big))
    a.start()
    assert in_worker.wait(10)
    send("small", rb.good(1, base_ts=NOW))
    a.join()
    assert (results["big"].error_code, results["small"].error_code) == (0, 0)
    assert (results["big"].base_offset, results["small"].base_offset) == (0, 6000)


@pytest.mark.parametrize("timestamp_type", ["CreateTime", "LogAppendTime"])
def test_producer_log_append_time_flag_is_invalid_timestamp(admin, wire, timestamp_type):
    """A producer must not flag its batch LogAppendTime: Kafka's LogValidator answers INVALID_TIMESTAMP with a record
    error per record, on either kind of topic (the timestamp is in range, so the flag is what is checked)."""
    topic = f"lat-flag-{timestamp_type}"
    admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"message.timestamp.type": timestamp_type})])
    for codec in (rb.NONE, rb.GZIP):
        r = produce(wire, topic, rb.batch(rb.records(2), 2, codec=codec, attributes=codec | 0x08, base_ts=NOW,
                                          max_ts=NOW + 1))
        assert r.error_code == E.INVALID_TIMESTAMP, r
        assert r.error_message == "One or more records have been rejected due to invalid timestamp"
        assert [e.batch_index for e in r.record_errors] == [0, 1]
        assert all("Producer should not set timestamp type to LogAppendTime." in e.batch_index_error_message
                   for e in r.record_errors)
    assert list_offset(wire, topic).offset == 0
    assert produce(wire, topic, rb.good(1, rb.NONE, base_ts=NOW)).error_code == 0
