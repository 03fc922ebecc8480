"""A follower's truncation runs in a worker thread, not on the event loop (it fsyncs, rescans the cut segment and walks
every segment's headers to rebuild the producer state: seconds for a big log of small batches).

The replica fetcher is the follower log's only writer and waits for the cut; meanwhile the broker answers requests,
and a LeaderAndIsr that arrives for the partition is applied once the cut is done. Nothing is lost or duplicated.
"""
from __future__ import annotations

import threading
import time

import structlog.testing
import trio
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from helpers import kp_read, wait_until
from kafkite.storage.unified_log import UnifiedLog
from kafkite.testing.cluster import KafkiteCluster
from kafkite.testing.replicas import compare_replicas, partition_dirs
from kafkite.testing.wire_client import WireClient

TOPIC = "cut"
BOUND_S = 2.0  # a request answered meanwhile (the cut itself is held up to 20 s: on the loop, nothing would be)


def records(tag: str, n: int) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    now = int(time.time() * 1000)
    for i in range(n):
        b.append(i, timestamp=now, key=None, value=b"%s%d" % (tag.encode(), i), headers=[])
    return bytes(b.build())


def produce(w, data, acks=-1):
    T = ProduceRequest.TopicProduceData
    req = ProduceRequest(transactional_id=None, acks=acks, timeout_ms=10000, topic_data=[
        T(name=TOPIC, topic_id=None, partition_data=[T.PartitionProduceData(index=0, records=data)])])
    return w.request(req, 9).responses[0].partition_responses[0].error_code


def log_of_segments(b, n: int, configs: dict[str, str]):
    """TOPIC made on broker `b` (one partition, `configs` and 100-byte segments) with `n` batches, a segment each
    (a batch is over segment.bytes) -> its log."""
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
    admin.create_topics([NewTopic(TOPIC, 1, 1, topic_configs={"segment.bytes": "100", **configs})])
    admin.close()
    with WireClient.connect(b.bootstrap_servers, timeout=10) as w:
        for i in range(n):
            assert produce(w, records(f"r{i}-", 12)) == 0
    lg = b.state.replicas.get(TOPIC, 0)
    assert len(lg.segments) == n
    return lg


def test_a_follower_cuts_its_log_in_a_worker_while_requests_and_a_leader_change_go_on(tmp_path, monkeypatch):
    """A deposed leader comes back with 5 records nobody else has: its cut to the new leader's epoch is held (in the
    worker) until the test lets it go. Meanwhile it answers Metadata promptly, the leadership moves to the third
    broker (its LeaderAndIsr waits for the cut, then the follower truncates against the new leader too), and that
    leader takes acks=all records. After: the three copies are byte for byte the same, and a consumer reads every
    acknowledged record once, in order; no cut ran on the event loop and the watchdog saw no step hold it."""
    real_truncate = UnifiedLog.truncate_to
    started, release = threading.Event(), threading.Event()
    on_loop = []

    def held_truncate(lg, offset):
        try:
            trio.lowlevel.current_task()
            on_loop.append(offset)
        except RuntimeError:
            pass  # a worker thread
        if offset < lg.log_end_offset and not release.is_set():
            started.set()
            release.wait(20)
        return real_truncate(lg, offset)

    with KafkiteCluster(brokers=3, data_dir=tmp_path) as c:
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap_servers)
        admin.create_topics([NewTopic(TOPIC, 1, 3)])
        admin.close()
        wait_until(lambda: len(c.isr(TOPIC, 0)) == 3, timeout=15, what="the ISR")
        old = c.leader(TOPIC, 0)
        f1, f2 = [b for b in (1, 2, 3) if b != old]
        with WireClient.connect(c.bootstrap_of(old), timeout=10) as w:
            assert produce(w, records("a", 3)) == 0  # on all three
            c.pause_replication(f1)
            c.pause_replication(f2)
            assert produce(w, records("lost", 5), acks=1) == 0  # the leader's alone
        assert c.log_end_offsets(TOPIC, 0) == {old: 8, f1: 3, f2: 3}
        c.stop_broker(old)
        new = c.leader(TOPIC, 0)
        third = f2 if new == f1 else f1
        c.resume_replication(f1)
        c.resume_replication(f2)
        with WireClient.connect(c.bootstrap_of(new), timeout=10) as w:
            assert produce(w, records("b", 2)) == 0  # offsets 3 and 4, the new epoch
        wait_until(lambda: sorted(c.isr(TOPIC, 0)) == sorted([new, third]), timeout=15, what="the ISR of two")

        monkeypatch.setattr(UnifiedLog, "truncate_to", held_truncate)
        with structlog.testing.capture_logs() as logs:
            c.start_broker(old)
            assert started.wait(20), "the deposed leader never cut its log"
            lg = c.replica_log(old, TOPIC, 0)
            assert lg.busy
            epoch_before = c.brokers[old].replicas.partitions[(TOPIC, 0)].leader_epoch
            with WireClient.connect(c.bootstrap_of(old), timeout=10) as w:
                t0 = time.monotonic()
                T = MetadataRequest.MetadataRequestTopic
                assert w.request(MetadataRequest(topics=[T(name=TOPIC)], allow_auto_topic_creation=False),
                                 4).topics[0].error_code == 0
                assert time.monotonic() - t0 < BOUND_S
            c.move_leader(TOPIC, 0, third)  # the cutting broker's LeaderAndIsr (follower of `third`) waits
            assert lg.busy and c.brokers[old].replicas.partitions[(TOPIC, 0)].leader_epoch == epoch_before
            with WireClient.connect(c.bootstrap_of(third), timeout=10) as w:
                assert produce(w, records("c", 4)) == 0  # acks=all on the new leader, meanwhile
            release.set()
            wait_until(lambda: sorted(c.isr(TOPIC, 0)) == [1, 2, 3], timeout=20, what="the cut broker back in the ISR")
        monkeypatch.setattr(UnifiedLog, "truncate_to", real_truncate)
        assert not on_loop, on_loop
        assert not [e for e in logs if e.get("event") == "event_loop.blocked" and e.get("held_ms", 0) >= 1000], \
            [e for e in logs if e.get("event") == "event_loop.blocked"]
        wait_until(lambda: c.log_end_offsets(TOPIC, 0) == {1: 9, 2: 9, 3: 9}, timeout=15, what="every copy")
        assert c.brokers[old].replicas.partitions[(TOPIC, 0)].leader_epoch > epoch_before
        diff = compare_replicas(partition_dirs(c, TOPIC, 0), reference=third)
        assert diff.same, diff
        consumer = KafkaConsumer(bootstrap_servers=c.bootstrap_servers, auto_offset_reset="earliest")
        consumer.assign([TopicPartition(TOPIC, 0)])
        values = [m.value for m in kp_read(consumer, 9)]
        consumer.close()
        assert values == [b"a0", b"a1", b"a2", b"b0", b"b1", b"c0", b"c1", b"c2", b"c3"]


def test_stop_replica_closes_the_log_in_a_worker(tmp_path, monkeypatch):
    """A replica leaves a partition (a reassignment from [1, 2] to [1]: broker 2's StopReplica): its log's close --
    the last writes, the fsync and the index files -- runs in a worker thread (was: on the event loop), with every
    fsync taking 0.5 s; the broker answers Metadata meanwhile, the watchdog sees no step hold the loop for it, and a
    reassignment back to [1, 2] opens the directory again once the close is done, every record there."""
    import os
    from helpers import OnTheLoop
    with KafkiteCluster(brokers=2, data_dir=tmp_path) as c:
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap_servers)
        admin.create_topics([NewTopic(TOPIC, 1, 2)])
        admin.close()
        wait_until(lambda: len(c.isr(TOPIC, 0)) == 2, timeout=15, what="the ISR")
        with WireClient.connect(c.bootstrap_of(c.leader(TOPIC, 0)), timeout=10) as w:
            assert produce(w, records("a", 5)) == 0
        if c.leader(TOPIC, 0) != 1:
            c.move_leader(TOPIC, 0, 1)
        lifecycle = c.brokers[2].replicas.lifecycle
        real_fsync = os.fsync

        def slow(fd):
            time.sleep(0.5)
            real_fsync(fd)
        monkeypatch.setattr(os, "fsync", slow)
        with structlog.testing.capture_logs() as logs, OnTheLoop(monkeypatch) as fsyncs:
            c.reassign(TOPIC, 0, [1])
            wait_until(lambda: (TOPIC, 0) not in c.brokers[2].replicas.logs, timeout=15, what="broker 2's replica gone")
            with WireClient.connect(c.bootstrap_of(2), timeout=10) as w:
                T = MetadataRequest.MetadataRequestTopic
                assert w.request(MetadataRequest(topics=[T(name=TOPIC)], allow_auto_topic_creation=False),
                                 4).topics[0].error_code == 0
            wait_until(lambda: not lifecycle.closing, timeout=30, what="the close done")
        monkeypatch.setattr(os, "fsync", real_fsync)
        fsyncs.check(0)
        assert not [e for e in logs if e.get("event") == "event_loop.blocked" and e.get("held_ms", 0) >= 400], \
            [e for e in logs if e.get("event") == "event_loop.blocked"]
        c.reassign(TOPIC, 0, [1, 2])
        wait_until(lambda: c.log_end_offsets(TOPIC, 0) == {1: 5, 2: 5}, timeout=15, what="broker 2's copy again")


def test_retention_renames_segments_in_a_worker(tmp_path, monkeypatch):
    """Retention deleting 30 segments: the renames of their files to `.deleted` run in a worker thread (was: on the
    event loop, ~0.2 ms a segment), here with every such rename taking 10 ms; Metadata is answered meanwhile, the
    watchdog sees no step hold the loop for it, the log starts after the deleted segments, its other records are
    served, and the `.deleted` files are removed after file.delete.delay.ms. The partition's `log-start-offset` and
    leader-epoch-checkpoint files are written in the worker too (were: on the event loop)."""
    import os
    from kafka.admin import ConfigResource, ConfigResourceType
    from helpers import OnTheLoop
    from kafkite.storage import leader_epoch_file_cache, unified_log
    from kafkite.testing.runner import BrokerThread
    over = {"log.retention.check.interval.ms": "100"}
    with BrokerThread(data_dir=tmp_path / "data", overrides=over) as b:
        small = {"segment.bytes": "100", "retention.ms": str(86400000), "file.delete.delay.ms": "200"}
        lg = log_of_segments(b, 31, small)
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        real_replace = os.replace

        def slow_replace(src, dst, *a, **kw):
            if str(dst).endswith(".deleted"):
                time.sleep(0.01)
            return real_replace(src, dst, *a, **kw)
        monkeypatch.setattr(os, "replace", slow_replace)
        with structlog.testing.capture_logs() as logs, OnTheLoop(monkeypatch, os, "replace") as renames, \
                OnTheLoop(monkeypatch, unified_log, "write_atomically") as starts, \
                OnTheLoop(monkeypatch, leader_epoch_file_cache, "write_checkpoint") as epochs:
            # records 10 minutes old as far as retention is concerned: every closed segment goes
            admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC, configs={**small, "retention.ms": "1"})])
            with WireClient.connect(b.bootstrap_servers, timeout=10) as w:
                T = MetadataRequest.MetadataRequestTopic
                latencies = []
                while lg.log_start_offset < 30 * 12:
                    t0 = time.monotonic()
                    assert w.request(MetadataRequest(topics=[T(name=TOPIC)], allow_auto_topic_creation=False),
                                     4).topics[0].error_code == 0
                    latencies.append(time.monotonic() - t0)
            d = tmp_path / "data" / f"{TOPIC}-0"
            wait_until(lambda: not [p for p in d.glob("0*") if int(p.name[:20]) < 360], timeout=30,
                       what="the deleted segments' files renamed, then removed")
        admin.close()
        monkeypatch.setattr(os, "replace", real_replace)
        assert not [s for s in renames.stacks if "retire" in s], renames.stacks[:1]
        starts.check(0)
        epochs.check(0)
        d = tmp_path / "data" / f"{TOPIC}-0"
        wait_until(lambda: (d / "log-start-offset").read_text() == "372", timeout=10, what="the log start's file")
        assert (d / "leader-epoch-checkpoint").read_text() == "0\n1\n0 372\n"
        assert not [e for e in logs if e.get("event") == "event_loop.blocked" and e.get("held_ms", 0) >= 250], \
            [e for e in logs if e.get("event") == "event_loop.blocked"]
        # (as on Kafka, the active segment past retention.ms goes too, after a roll: the log is empty at its end)
        assert len(lg.segments) == 1 and lg.log_start_offset == lg.log_end_offset == 31 * 12
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC, configs=small)])  # (a day again)
        admin.close()
        with WireClient.connect(b.bootstrap_servers, timeout=10) as w:
            assert produce(w, records("r31-", 12)) == 0
        consumer = KafkaConsumer(bootstrap_servers=b.bootstrap_servers, auto_offset_reset="earliest")
        consumer.assign([TopicPartition(TOPIC, 0)])
        assert [m.value for m in kp_read(consumer, 12)] == [b"r31-%d" % i for i in range(12)]
        consumer.close()


def test_delete_records_and_the_retention_control_rename_segments_in_a_worker(tmp_path, monkeypatch):
    """DeleteRecords deleting 5 segments, then the control plane's retention (POST /v1/retention) deleting the
    others: the renames of their files to `.deleted` run in a worker thread (were: on the event loop, ~0.2 ms a
    segment), the log starts where each said, its other records are served, and the files are removed after
    file.delete.delay.ms (DeleteRecords'). So are the writes of the partition's `log-start-offset` and
    leader-epoch-checkpoint files (were: on the event loop), done before the answer."""
    import os
    from kafka.protocol.admin import DeleteRecordsRequest
    from helpers import OnTheLoop
    from kafkite.control import views
    from kafkite.storage import leader_epoch_file_cache, unified_log
    from kafkite.testing.runner import BrokerThread
    with BrokerThread(data_dir=tmp_path / "data") as b:
        lg = log_of_segments(b, 12, {"retention.ms": "3600000", "file.delete.delay.ms": "100"})
        with WireClient.connect(b.bootstrap_servers, timeout=10) as w:
            T = DeleteRecordsRequest.DeleteRecordsTopic
            d = tmp_path / "data" / f"{TOPIC}-0"
            with OnTheLoop(monkeypatch, os, "replace") as renames, \
                    OnTheLoop(monkeypatch, unified_log, "write_atomically") as starts, \
                    OnTheLoop(monkeypatch, leader_epoch_file_cache, "write_checkpoint") as epochs:
                r = w.request(DeleteRecordsRequest(topics=[T(name=TOPIC, partitions=[
                    T.DeleteRecordsPartition(partition_index=0, offset=5 * 12)])], timeout_ms=10000), 1)
                p = r.topics[0].partitions[0]
                assert (p.error_code, p.low_watermark) == (0, 60)
                assert lg.log_start_offset == 60 and lg.segments[0].base == 60
                assert (d / "log-start-offset").read_text() == "60"
                assert (d / "leader-epoch-checkpoint").read_text() == "0\n1\n0 60\n"
                consumer = KafkaConsumer(bootstrap_servers=b.bootstrap_servers, auto_offset_reset="earliest",
                                         consumer_timeout_ms=10000)
                consumer.assign([TopicPartition(TOPIC, 0)])
                served = iter(consumer)
                assert [next(served).value, next(served).value] == [b"r5-0", b"r5-1"]
                consumer.close()
                rows = b.call(views.apply_retention, b.node.brokers, TOPIC, None, 2 * 3600000)
                assert rows[0]["log_start_offset"] == 12 * 12 == lg.log_start_offset
                assert (d / "log-start-offset").read_text() == "144"
                assert (d / "leader-epoch-checkpoint").read_text() == "0\n1\n0 144\n"
            assert not [s for s in renames.stacks if "retire" in s], renames.stacks[:1]
            starts.check(0)
            epochs.check(0)
            # DeleteRecords' files removed after file.delete.delay.ms; retention's renamed (their delay counts from the
            # log clock the control advanced: two hours on)
            # (the active segment, 132, rolled and deleted by retention as on Kafka, may go before its roll wrote its
            # index files: only its .log then; and before its producer snapshot was written, as the new one's at 144)
            expected = sorted(["%020d.%s.deleted" % (base, ext) for base in range(60, 132, 12)
                               for ext in ("index", "log", "snapshot", "timeindex")]
                              + ["%020d.log.deleted" % 132, "%020d.log" % 144])
            listing = lambda: sorted(f.name for f in d.glob("0*") if f.name not in (  # noqa: E731
                "%020d.index.deleted" % 132, "%020d.timeindex.deleted" % 132, "%020d.snapshot.deleted" % 132,
                "%020d.snapshot" % 144))
            wait_until(lambda: listing() == expected, timeout=30,
                       what=lambda: f"the deleted segments' files renamed, then removed: {listing()}")


def test_a_follower_moves_its_log_start_renaming_segments_in_a_worker(tmp_path, monkeypatch):
    """DeleteRecords on the leader of a partition with 2 copies: the follower's log start follows the leader's
    (Kafka's Partition.updateFollowerFetchState -> maybeIncrementLogStartOffset), and the renames of its deleted
    segments' files to `.deleted`, with its `log-start-offset` and leader-epoch-checkpoint writes, run in a worker
    thread, not on the event loop; it goes on copying the leader's records."""
    import os
    from kafka.protocol.admin import DeleteRecordsRequest
    from helpers import OnTheLoop
    from kafkite.storage import leader_epoch_file_cache, unified_log
    with KafkiteCluster(brokers=2, data_dir=tmp_path) as c:
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap_servers)
        admin.create_topics([NewTopic(TOPIC, 1, 2, topic_configs={"segment.bytes": "100"})])
        admin.close()
        wait_until(lambda: len(c.isr(TOPIC, 0)) == 2, timeout=15, what="the ISR")
        leader = c.leader(TOPIC, 0)
        follower = 3 - leader
        with WireClient.connect(c.bootstrap_of(leader), timeout=10) as w:
            for i in range(8):
                assert produce(w, records(f"r{i}-", 12)) == 0  # acks=all: the follower has it too
            lg = c.replica_log(follower, TOPIC, 0)
            assert len(lg.segments) == 8
            d = tmp_path / f"broker-{follower}" / f"{TOPIC}-0"
            with OnTheLoop(monkeypatch, os, "replace") as renames, \
                    OnTheLoop(monkeypatch, unified_log, "write_atomically") as starts, \
                    OnTheLoop(monkeypatch, leader_epoch_file_cache, "write_checkpoint") as epochs:
                T = DeleteRecordsRequest.DeleteRecordsTopic
                r = w.request(DeleteRecordsRequest(topics=[T(name=TOPIC, partitions=[
                    T.DeleteRecordsPartition(partition_index=0, offset=5 * 12)])], timeout_ms=10000), 1)
                assert r.topics[0].partitions[0].error_code == 0
                assert produce(w, records("after-", 12)) == 0
                wait_until(lambda: lg.log_start_offset == 60 and lg.segments[0].base == 60
                           and lg.log_end_offset == 9 * 12, timeout=15, what="the follower's log start")
                wait_until(lambda: (d / "log-start-offset").exists() and (d / "log-start-offset").read_text() == "60",
                           timeout=15, what="the follower's log-start-offset file")
            assert not [s for s in renames.stacks if "retire" in s], renames.stacks[:1]
            starts.check(0)
            epochs.check(0)
            assert sorted(f.name for f in d.glob("*.log.deleted")) == ["%020d.log.deleted" % (12 * i) for i in range(5)]
            assert c.log_end_offsets(TOPIC, 0) == {leader: 108, follower: 108}
