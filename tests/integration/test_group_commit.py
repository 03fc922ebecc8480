"""Produce on disk: the fsync runs off the event loop, pipelined produce requests share one fsync
(group commit), records stay invisible until durable, responses keep request order."""
from __future__ import annotations

import threading

import pytest
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.metadata import MetadataRequest

from kafkite.storage.unified_log import FileLog
from kafkite.testing.wire_client import WireClient
from test_data_versions import batch, create, fetch, produce, records_of
from helpers import wait_until


class GatedFsync:
    """Replaces FileLog.deferred_flush: each fsync waits for `release()` and is counted."""

    def __init__(self, monkeypatch):
        self.gate = threading.Event()
        self.started = 0
        self.ran = 0
        real = FileLog.deferred_flush

        def deferred_flush(log):
            target, run = real(log)

            def gated():
                self.started += 1
                assert self.gate.wait(30), "fsync gate never opened"
                run()
                self.ran += 1
            return target, gated
        monkeypatch.setattr(FileLog, "deferred_flush", deferred_flush)

    def release(self):
        self.gate.set()


@pytest.fixture
def disk_broker(broker_factory, tmp_path):
    return broker_factory(data_dir=tmp_path / "data")


def latest(w, topic):
    T = ListOffsetsRequest.ListOffsetsTopic
    req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        T(name=topic, partitions=[T.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                           timestamp=-1)])])
    return w.request(req, 7).topics[0].partitions[0].offset


def send_produce(w, topic, records, version=9):
    from kafka.protocol.producer import ProduceRequest
    T = ProduceRequest.TopicProduceData
    req = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        T(name=topic, topic_id=None, partition_data=[T.PartitionProduceData(index=0, records=records)])])
    data, corr = w.encode(req, version)
    w.send_raw(data)
    return corr


def read_produce(w, corr, version=9):
    return w.read_response(0, version, corr).responses[0].partition_responses[0]


def test_records_stay_invisible_until_fsynced(disk_broker, monkeypatch):
    gate = GatedFsync(monkeypatch)
    bs = disk_broker.bootstrap_servers
    with WireClient.connect(bs) as admin, WireClient.connect(bs) as prod, WireClient.connect(bs) as other:
        create(admin, "gc1")
        corr = send_produce(prod, "gc1", batch(3))
        wait_until(lambda: gate.started == 1, what="the deferred fsync started")
        lg = disk_broker.state.replicas.get("gc1", 0)
        assert lg.log_end_offset == 3
        # appended but not durable: above the high watermark, so no reader sees it
        assert latest(other, "gc1") == 0
        part = fetch(other, "gc1", 0)
        assert part.high_watermark == 0 and not part.records
        # the event loop is not blocked by the fsync: another connection is answered meanwhile
        assert other.request(MetadataRequest[0](topics=None), 0).brokers
        prod.sock.settimeout(0.3)
        with pytest.raises(OSError):  # no acknowledgement before the fsync
            prod.recv_frame()
        prod.sock.settimeout(10)
        gate.release()
        r = read_produce(prod, corr)
        assert r.error_code == 0 and r.base_offset == 0
        assert latest(other, "gc1") == 3
        assert [o for o, _, _ in records_of(fetch(other, "gc1", 0).records)] == [0, 1, 2]


def test_pipelined_produces_share_an_fsync_and_answer_in_order(disk_broker, monkeypatch):
    gate = GatedFsync(monkeypatch)
    bs = disk_broker.bootstrap_servers
    with WireClient.connect(bs) as admin, WireClient.connect(bs) as prod:
        create(admin, "gc2")
        corrs = [send_produce(prod, "gc2", batch(2))]
        wait_until(lambda: gate.started == 1, what="the first fsync started")
        corrs += [send_produce(prod, "gc2", batch(2)) for _ in range(3)]
        lg = disk_broker.state.replicas.get("gc2", 0)
        # the next produce requests are appended while the first fsync runs
        wait_until(lambda: lg.log_end_offset == 8, what="pipelined produce requests appended")
        # a Metadata request behind them waits its turn: its answer comes after theirs
        meta, meta_corr = prod.encode(MetadataRequest[0](topics=None), 0)
        prod.send_raw(meta)
        gate.release()
        offsets = [read_produce(prod, c).base_offset for c in corrs]  # correlation ids checked in order
        assert offsets == [0, 2, 4, 6]
        assert prod.read_response(3, 0, meta_corr).brokers
        # one fsync for the first request, one for the three that arrived meanwhile
        assert gate.ran == 2
        assert lg.high_watermark == 8


def test_acks_zero_appends_are_written_by_a_worker(disk_broker, monkeypatch):
    """acks=0: nobody waits for the answer, but the write and fsync still go through the deferred flush in a worker
    (not inline on the event loop), and the records become visible once it ran."""
    gate = GatedFsync(monkeypatch)
    bs = disk_broker.bootstrap_servers
    with WireClient.connect(bs) as w:
        create(w, "gc3")
        produce(w, "gc3", batch(2), acks=0)
        wait_until(lambda: gate.started == 1, what="the worker's write")
        assert latest(w, "gc3") == 0  # not written yet: not visible
        gate.release()
        wait_until(lambda: latest(w, "gc3") == 2, what="acks=0 records visible")
        assert gate.ran == 1


def test_memory_broker_needs_no_fsync(broker, monkeypatch):
    gate = GatedFsync(monkeypatch)
    with WireClient.connect(broker.bootstrap_servers) as w:
        create(w, "gc4")
        assert produce(w, "gc4", batch(2)).base_offset == 0
        assert latest(w, "gc4") == 2 and gate.started == 0


def test_restart_after_pipelined_produces_keeps_every_acknowledged_record(broker_factory, tmp_path):
    b = broker_factory(data_dir=tmp_path / "data")
    with WireClient.connect(b.bootstrap_servers) as w:
        create(w, "gc5")
        corrs = [send_produce(w, "gc5", batch(5)) for _ in range(20)]
        assert [read_produce(w, c).base_offset for c in corrs] == list(range(0, 100, 5))
    b.stop()
    b2 = broker_factory(data_dir=tmp_path / "data")
    with WireClient.connect(b2.bootstrap_servers) as w:
        assert latest(w, "gc5") == 100
        assert produce(w, "gc5", batch(1)).base_offset == 100



@pytest.mark.parametrize("bound", ["requests", "bytes"])
def test_pipelined_produces_waiting_for_their_fsync_are_bounded_per_connection(disk_broker, monkeypatch, bound):
    """A client that sends without waiting (librdkafka's non-idempotent window is 1,000,000 requests) has at most
    PIPELINED_PRODUCE_MAX requests, or PIPELINED_PRODUCE_BYTES of them, handled while the disk is behind; the rest wait
    unread on the socket until responses leave, then every one is answered in order."""
    from kafka.protocol.producer import ProduceRequest
    from kafkite.network import connection
    gate = GatedFsync(monkeypatch)
    bs = disk_broker.bootstrap_servers
    with WireClient.connect(bs) as admin, WireClient.connect(bs) as prod:
        create(admin, "gc6")
        if bound == "requests":
            monkeypatch.setattr(connection, "PIPELINED_PRODUCE_MAX", 4)
            handled = 4
        else:  # three requests' bytes reach the bound: the fourth waits
            T = ProduceRequest.TopicProduceData
            req = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
                T(name="gc6", topic_id=None, partition_data=[T.PartitionProduceData(index=0, records=batch(1))])])
            frame_bytes = len(prod.encode(req, 9)[0]) - 4  # without the size prefix
            monkeypatch.setattr(connection, "PIPELINED_PRODUCE_BYTES", 3 * frame_bytes)
            handled = 3
        lg = disk_broker.state.replicas.get("gc6", 0)
        corrs = [send_produce(prod, "gc6", batch(1)) for _ in range(40)]
        try:
            wait_until(lambda: lg.log_end_offset == handled, what=f"{handled} pipelined requests appended")
            wait_until(lambda: gate.started == 1, what="the first fsync started")  # it holds them all
            # the connection reads no more while they wait: nothing else is appended
            with pytest.raises(AssertionError):
                wait_until(lambda: lg.log_end_offset > handled, timeout=0.5, what="more appended")
        finally:
            gate.release()
        assert [read_produce(prod, c).base_offset for c in corrs] == list(range(40))
        assert lg.log_end_offset == 40 and lg.high_watermark == 40
