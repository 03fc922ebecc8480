"""Nothing slow runs on the event loop: with every fsync taking 1 s and a ~100 MB compacted log
being cleaned, Metadata and Fetch requests on another connection are still answered promptly.

The log is written first (fsync at full speed, cleaning held back by min.compaction.lag.ms), then
fsync is slowed and the topic made cleanable; while the cleaner's worker thread reads the log,
writes the cleaned segments and fsyncs them, requests are timed on a second connection.
"""
from __future__ import annotations

import os
import threading
import time

from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

import kafkite.storage.log_cleaner as log_cleaner
from helpers import OnTheLoop, wait_until
from kafkite.testing.runner import BrokerThread
from kafkite.testing.wire_client import WireClient

BOUND_S = 0.5
TOPIC = "big"


def big_batch(n=900, value_size=1000):
    """~0.9 MB: n records with keys k0..k(n-1)."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    now = int(time.time() * 1000)
    for i in range(n):
        b.append(i, timestamp=now, key=b"k%d" % i, value=os.urandom(value_size // 2).hex().encode(), headers=[])
    return bytes(b.build())


def produce(w, data, topic=TOPIC):
    T = ProduceRequest.TopicProduceData
    req = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[
        T(name=topic, topic_id=None, partition_data=[T.PartitionProduceData(index=0, records=data)])])
    resp = w.request(req, 9).responses[0].partition_responses[0]
    assert resp.error_code == 0, resp


def fetch(w, offset):
    T = FetchRequest.FetchTopic
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                       session_id=0, session_epoch=-1, topics=[T(topic=TOPIC, topic_id=None, partitions=[
                           T.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=offset,
                                            last_fetched_epoch=-1, log_start_offset=-1,
                                            partition_max_bytes=1 << 20)])],
                       forgotten_topics_data=[], rack_id="")
    p = w.request(req, 12).responses[0].partitions[0]
    assert p.error_code == 0 and p.records
    return p


def metadata(w, topic=TOPIC):
    T = MetadataRequest.MetadataRequestTopic
    r = w.request(MetadataRequest(topics=[T(name=topic)], allow_auto_topic_creation=False), 4)
    assert r.topics[0].error_code == 0


def slow_fsync(monkeypatch):
    real_fsync = os.fsync

    def slow(fd):
        time.sleep(1.0)
        real_fsync(fd)
    monkeypatch.setattr(os, "fsync", slow)
    return real_fsync


def timed_while(w, busy, calls):
    """Latencies of `calls` made in turn on `w` while busy() holds."""
    latencies = []
    while busy():
        for call in calls:
            t0 = time.monotonic()
            call()
            latencies.append(time.monotonic() - t0)
    return latencies


def test_requests_are_answered_while_fsync_is_slow_and_a_big_log_is_cleaned(tmp_path, monkeypatch):
    started, finished = threading.Event(), threading.Event()
    real_run = log_cleaner.CleanJob.run

    def observed_run(job):
        started.set()
        try:
            return real_run(job)
        finally:
            finished.set()
    monkeypatch.setattr(log_cleaner.CleanJob, "run", observed_run)

    with BrokerThread(data_dir=tmp_path / "data", overrides={"log.cleaner.backoff.ms": "100"}) as b:
        bs = b.bootstrap_servers
        admin = KafkaAdminClient(bootstrap_servers=bs)
        held = {"cleanup.policy": "compact", "segment.bytes": str(40 << 20), "min.compaction.lag.ms": str(86400000)}
        admin.create_topics([NewTopic(TOPIC, 1, 1, topic_configs=held)])
        data = big_batch()
        with WireClient.connect(bs, timeout=60) as w:
            for _ in range(110):  # ~100 MB
                produce(w, data)
        lg = b.state.replicas.get(TOPIC, 0)
        assert lg.size_bytes > 95 << 20 and len(lg.segments) >= 3 and not started.is_set()

        real_fsync = slow_fsync(monkeypatch)
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC,
                                            configs={**held, "min.compaction.lag.ms": "0"})])
        admin.close()
        wait_until(started.is_set, timeout=30, what="the cleaner to start")

        with WireClient.connect(bs, timeout=30) as w:
            latencies = timed_while(w, lambda: not finished.is_set(), [
                lambda: metadata(w), lambda: fetch(w, 0), lambda: fetch(w, lg.log_end_offset // 2)])
        assert len(latencies) >= 9, "the cleaning ended before requests could be timed during it"
        assert max(latencies) < BOUND_S, sorted(latencies)[-5:]
        monkeypatch.setattr(os, "fsync", real_fsync)
        # the cleaning is swapped in and served: one record per key in the closed segments
        wait_until(lambda: lg.size_bytes < 20 << 20, timeout=30, what="the cleaned log")
        assert lg.log_end_offset == 110 * 900


def test_segment_rolls_do_not_wait_for_fsync_on_the_event_loop(tmp_path, monkeypatch):
    """Produce into a topic rolling a segment on every request while every fsync takes 1 s:
    the rolled segment's fsync and index files go to a worker, so Metadata stays prompt."""
    with BrokerThread(data_dir=tmp_path / "data") as b:
        bs = b.bootstrap_servers
        admin = KafkaAdminClient(bootstrap_servers=bs)
        admin.create_topics([NewTopic("rolling", 1, 1, topic_configs={"segment.bytes": "3000"})])
        admin.close()
        data = big_batch(n=2, value_size=1000)
        slow_fsync(monkeypatch)
        done = threading.Event()

        def producer():
            try:
                with WireClient.connect(bs, timeout=60) as w:
                    for _ in range(2):  # the second rolls a segment (a third would only add 6 s of slow fsyncs)
                        produce(w, data, topic="rolling")
            finally:
                done.set()
        t = threading.Thread(target=producer)
        t.start()
        with WireClient.connect(bs, timeout=30) as w:
            latencies = timed_while(w, lambda: not done.is_set(), [lambda: metadata(w, "rolling")])
        t.join()
        lg = b.state.replicas.get("rolling", 0)
        assert lg.log_end_offset == 4 and len(lg.segments) == 2
        assert len(latencies) >= 5 and max(latencies) < BOUND_S, sorted(latencies)[-5:]


def test_acks0_produce_leaves_its_fsync_to_a_worker(tmp_path, monkeypatch):
    """acks=0 appends are written and fsynced in a worker like any other (they were fsynced inline, holding the
    event loop): with every fsync taking 1 s, Metadata on another connection stays prompt and the loop watchdog
    sees no produce step holding it; the records become readable although their connection closed at once."""
    with BrokerThread(data_dir=tmp_path / "data") as b:
        bs = b.bootstrap_servers
        admin = KafkaAdminClient(bootstrap_servers=bs)
        admin.create_topics([NewTopic("fire", 1, 1)])
        admin.close()
        data = big_batch(n=5, value_size=100)
        real_fsync = slow_fsync(monkeypatch)
        b.watchdog.blocked.clear()
        T = ProduceRequest.TopicProduceData
        req = ProduceRequest(transactional_id=None, acks=0, timeout_ms=30000, topic_data=[
            T(name="fire", topic_id=None, partition_data=[T.PartitionProduceData(index=0, records=data)])])
        with WireClient.connect(bs, timeout=30) as w:
            for _ in range(3):
                w.send_raw(w.encode(req, 9)[0])  # no answer comes to acks=0
        with WireClient.connect(bs, timeout=30) as w:
            t0 = time.monotonic()
            metadata(w, "fire")
            assert time.monotonic() - t0 < BOUND_S
        assert not [(t, ms) for t, ms in b.watchdog.blocked if ms >= 900], b.watchdog.blocked
        monkeypatch.setattr(os, "fsync", real_fsync)
        lg = b.state.replicas.get("fire", 0)
        wait_until(lambda: lg.log_end_offset == 15 and lg.high_watermark == 15, timeout=30,
                   what="the acks=0 records written and readable")
        with WireClient.connect(bs, timeout=30) as w:
            T2 = FetchRequest.FetchTopic
            r = w.request(FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                                       session_id=0, session_epoch=-1, topics=[T2(topic="fire", topic_id=None, partitions=[
                                           T2.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                                             last_fetched_epoch=-1, log_start_offset=-1,
                                                             partition_max_bytes=1 << 20)])],
                                       forgotten_topics_data=[], rack_id=""), 12)
            assert r.responses[0].partitions[0].high_watermark == 15


def test_creating_a_topic_makes_its_logs_in_a_worker_thread(tmp_path, monkeypatch):
    """CreateTopics of 40 partitions on disk (and a topic auto-created by Metadata): the new logs (directory, first
    segment, partition.metadata: LogLoader.load) are made in a worker thread before the metadata names them, none on
    the event loop (before: all 41, about 1 ms each); so is the metadata snapshot naming them (once for the
    request's two topics), and the one of
    CreatePartitions, AlterConfigs and a new producer id block: nothing is fsynced on the event loop (before: the
    snapshot's file and directory, each change). The topic then takes records in every partition, and survives
    a restart. The worker making the logs gives the GIL up between two (kafkite.gil_pacing.paced: here at every one),
    and so does the one closing them at the broker's stop."""
    from kafka import KafkaProducer
    from kafka.admin import NewPartitions
    from kafka.protocol.producer import InitProducerIdRequest
    import kafkite.controller.metadata_store as metadata_module
    import kafkite.gil_pacing as gil_pacing
    from kafkite.storage.log_loader import LogLoader
    data = tmp_path / "data"
    yields = []
    monkeypatch.setattr(gil_pacing, "PACE_S", 0.0)
    monkeypatch.setattr(gil_pacing, "yield_gil", lambda: yields.append(threading.current_thread().name))
    with BrokerThread(data_dir=data) as b:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        with OnTheLoop(monkeypatch, LogLoader, "load") as loads, OnTheLoop(monkeypatch) as fsyncs, \
                OnTheLoop(monkeypatch, metadata_module, "write_atomically") as snapshots:
            writes = b.state.writer.writes
            admin.create_topics([NewTopic("made", 40, 1), NewTopic("grown", 1, 1)])
            assert b.state.writer.writes == writes + 1  # both topics of the request: one write
            admin.create_partitions({"grown": NewPartitions(3)})
            admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "grown", configs={"retention.ms": "1234"})])
            with WireClient.connect(b.bootstrap_servers, timeout=30) as w:
                T = MetadataRequest.MetadataRequestTopic
                r = w.request(MetadataRequest(topics=[T(name="auto")], allow_auto_topic_creation=True), 4)
                assert r.topics[0].error_code == 0 and len(r.topics[0].partitions) == 1
                pid = w.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 1)
                assert pid.error_code == 0 and pid.producer_id >= 0
            assert b.state.writer.writes - writes >= 5  # written (in a worker thread): each change, acknowledged
        made = [y for y in yields if "make_all" in y]  # (trio names its worker thread after the job)
        assert len(made) >= 39, yields
        admin.close()
        loads.check(0)
        snapshots.check(0)
        fsyncs.check(0)
        assert len(list(data.glob("made-*"))) == 40 and (data / "auto-0").is_dir()
        p = KafkaProducer(bootstrap_servers=b.bootstrap_servers)
        for i in range(40):
            p.send("made", b"v%d" % i, partition=i)
        p.flush()
        p.close()
        assert [b.state.replicas.get("made", i).log_end_offset for i in range(40)] == [1] * 40
        before_close = len(yields)
    assert len(yields) - before_close >= 40  # the 44 logs closed
    with BrokerThread(data_dir=data) as b:
        assert [b.state.replicas.get("made", i).log_end_offset for i in range(40)] == [1] * 40
        grown = b.state.metadata.topic("grown")
        assert len(grown.partitions) == 3 and grown.configs == {"retention.ms": "1234"}
        assert b.state.metadata.producer_id_next_block > pid.producer_id  # never handed out again


def test_deleting_a_topic_fsyncs_nothing_per_partition_on_the_event_loop(tmp_path, monkeypatch):
    """DeleteTopics of a 40-partition topic (and two small ones) on disk: the logs are closed without a flush (their
    files go next), the renames to `-delete` made durable and the directories removed in a worker thread, and the
    metadata snapshot is written in a worker thread too, once for the three topics. So the event loop fsyncs nothing, whatever the partition count (before: the .log
    and both indexes of every partition and the log dir once per partition, ~160 fsyncs; then the snapshot's file
    and directory); the directories are gone and a topic of the same name starts empty."""
    import kafkite.controller.metadata_store as metadata_module
    with BrokerThread(data_dir=tmp_path / "data") as b:
        bs = b.bootstrap_servers
        admin = KafkaAdminClient(bootstrap_servers=bs)
        admin.create_topics([NewTopic("many", 40, 1), NewTopic("few", 2, 1), NewTopic("one", 1, 1)])
        with WireClient.connect(bs, timeout=30) as w:
            for _ in range(3):
                produce(w, big_batch(n=5, value_size=100), topic="many")
        log_dir = tmp_path / "data"
        assert len(list(log_dir.glob("many-*"))) == 40
        writes = b.state.writer.writes
        with OnTheLoop(monkeypatch) as fsyncs, OnTheLoop(monkeypatch, metadata_module, "write_atomically") as snaps:
            admin.delete_topics(["many", "few", "one"])
            # answered once the snapshot without them was written, one write for the three
            assert not {"many", "few", "one"} & set(b.state.metadata.topics) and b.state.writer.writes == writes + 1
            wait_until(lambda: not list(log_dir.glob("many-*")), timeout=30, what="the partition directories removed")
        snaps.check(0)
        fsyncs.check(0)
        admin.create_topics([NewTopic("many", 40, 1)])
        with WireClient.connect(bs, timeout=30) as w:
            r = w.request(FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                                       isolation_level=0, session_id=0, session_epoch=-1, topics=[
                                           FetchRequest.FetchTopic(topic="many", topic_id=None, partitions=[
                                               FetchRequest.FetchTopic.FetchPartition(
                                                   partition=0, current_leader_epoch=-1, fetch_offset=0,
                                                   last_fetched_epoch=-1, log_start_offset=-1,
                                                   partition_max_bytes=1 << 20)])],
                                       forgotten_topics_data=[], rack_id=""), 12)
            p = r.responses[0].partitions[0]
            assert p.error_code == 0 and p.high_watermark == 0 and not p.records
        admin.close()


def test_an_in_process_cluster_makes_and_recovers_its_logs_in_a_worker_thread(tmp_path, monkeypatch):
    """An in-process cluster on disk: the logs a broker opens with its partitions' first leader and ISR -- 30 new
    partitions, then, after a crash (no clean-shutdown marker), the same logs loaded and recovered -- are made in a
    worker thread (before: each on the event loop, inside the metadata writer's callback), and serve their records
    once that is done. The leader-epoch checkpoint the first records of an epoch change (leader's and follower's)
    is written by the worker writing them (before: on the event loop, one file per partition); the controller's
    metadata snapshot for an election (a broker gone) and for ISR changes (AlterPartition) is written in a worker
    thread (before: at once, on the loop), and the brokers told once it is; so is a new cluster's first snapshot."""
    from kafka import KafkaProducer
    import kafkite.controller.metadata_store as metadata_module
    import kafkite.storage.leader_epoch_file_cache as epoch_cache
    from kafkite.storage.log_loader import LogLoader
    from kafkite.testing.cluster import KafkiteCluster
    data = tmp_path / "data"
    with OnTheLoop(monkeypatch, metadata_module, "write_atomically") as first_write, \
            KafkiteCluster(brokers=2, data_dir=data) as c:
        wait_until(lambda: (data / "kafkite-metadata.json").exists() and (data / "meta.properties").exists(),
                   timeout=30, what="the new cluster's metadata")
        first_write.check(0)  # a new cluster's first metadata snapshot: by the writer too
        with OnTheLoop(monkeypatch, LogLoader, "load") as loads, \
                OnTheLoop(monkeypatch, epoch_cache, "write_checkpoint") as epoch_writes:
            admin = KafkaAdminClient(bootstrap_servers=c.bootstrap_servers)
            admin.create_topics([NewTopic("spread", 30, 2)])
            admin.close()
            p = KafkaProducer(bootstrap_servers=c.bootstrap_servers, acks="all")
            for i in range(30):
                p.send("spread", b"v%d" % i, partition=i)
            p.flush()
            p.close()
            wait_until(lambda: all(c.log_end_offsets("spread", i) == {1: 1, 2: 1} for i in range(30)), timeout=30,
                       what="every copy written")
        loads.check(0)
        epoch_writes.check(0)
        checkpoints = [(data / f"broker-{b}" / f"spread-{i}" / "leader-epoch-checkpoint").read_text().split("\n")
                       for b in (1, 2) for i in range(30)]
        assert all(lines[:3] == ["0", "1", "0 0"] for lines in checkpoints), checkpoints[:2]
        # the controller's elections and ISR changes: its metadata snapshot written off the loop too
        with OnTheLoop(monkeypatch, metadata_module, "write_atomically") as snaps:
            c.stop_broker(2)  # broker 1 leads everything, alone in the ISRs
            assert all(c.leader("spread", i) == 1 and c.isr("spread", i) == [1] for i in range(30))
            c.start_broker(2)
            wait_until(lambda: all(sorted(c.isr("spread", i)) == [1, 2] for i in range(30)), timeout=30,
                       what="broker 2 back in every ISR (AlterPartition)")
        snaps.check(0)
    for marker in data.glob("broker-*/.kafka_cleanshutdown"):
        marker.unlink()  # as after a crash: every log is recovered
    with OnTheLoop(monkeypatch, LogLoader, "load") as loads:
        with KafkiteCluster(brokers=2, data_dir=data) as c:
            wait_until(lambda: all(c.log_end_offsets("spread", i) == {1: 1, 2: 1} for i in range(30)), timeout=30,
                       what="the recovered logs served")
    loads.check(0)


def test_storage_work_with_traffic_running_holds_the_loop_no_step_long(monkeypatch):
    """benchmarks/loop_stalls.py scaled down (issue 24's acceptance at full size: 200 MB compacted and recovered,
    1,000 partitions, 100 segments, a controller failover, with traffic; the script prints its figures): an
    in-process cluster of 3 brokers on disk makes 100 partitions (replication factor 3), deletes 20 segments by
    retention, compacts a 4 MB log, loses and gets back its controller and recovers a 4 MB log whole, while a client
    (a process of its own) sends Metadata and Produce. No log is made or recovered on the event loop (counted, whatever the machine's load),
    and the watchdog logs no event_loop.blocked line for any step. Load tolerance: the watchdog threshold is 500 ms
    here, not 100 (a step's wall time includes the time the process was not scheduled, and this machine runs 4
    suites at once; at this size no step does more than ~20 ms of work); the client's latency (bounded at 200 ms
    by the script) is not asserted: it is the script's figure, not a test's."""
    import importlib.util
    import sys
    import structlog.testing
    from pathlib import Path
    from kafkite.storage.log_loader import LogLoader
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "loop_stalls.py"
    spec = importlib.util.spec_from_file_location("loop_stalls", path)
    loop_stalls = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "loop_stalls", loop_stalls)  # (its dataclasses look their module up)
    spec.loader.exec_module(loop_stalls)
    with OnTheLoop(monkeypatch, LogLoader, "load") as loads, structlog.testing.capture_logs() as logs:
        phases = loop_stalls.run(compact_mb=4, recover_mb=4, partitions=100, retention_segments=20, bound_ms=200,
                                 watchdog_ms=500, timeout=60)
    loads.check(0)
    blocked = [e for e in logs if e.get("event") == "event_loop.blocked"]
    assert not blocked, blocked
    assert sum(p.requests for p in phases.values()) > 0, phases  # traffic ran meanwhile
    assert not any(p.errors for p in phases.values()), phases


def test_opening_many_logs_looks_the_broker_defaults_up_once(monkeypatch):
    """The logs of a topic of 200 partitions opened on the event loop: the broker-level value of each topic config
    is looked up once, not once per partition (25 look-ups through the config's synonyms, ~0.1 ms a partition: a
    LeaderAndIsr of 1,000 partitions spent ~0.1 s of the loop on them); a dynamic broker default changed meanwhile
    is what the next topic's logs get."""
    from kafkite.config import TOPIC_CONFIGS, BrokerConfig
    from kafkite.testing.runner import BrokerThread
    calls = []
    real = BrokerConfig.topic_default

    def counted(self, name):
        calls.append(name)
        return real(self, name)
    with BrokerThread() as b:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        monkeypatch.setattr(BrokerConfig, "topic_default", counted)
        admin.create_topics([NewTopic("wide", 200, 1)])
        wait_until(lambda: all(b.state.replicas.get("wide", i) is not None for i in range(200)), timeout=30,
                   what="the logs")
        assert 1 <= calls.count("retention.ms") <= 3, len(calls)  # (the admin's own checks may look some up too)
        b.call(lambda: b.state.set_dynamic_broker_configs({"log.retention.ms": "4321"}, default=True))
        admin.create_topics([NewTopic("after", 2, 1)])
        wait_until(lambda: b.state.replicas.get("after", 1) is not None, timeout=30, what="the logs")
        assert b.state.replicas.get("after", 1).config.retention_ms == 4321
        assert b.state.replicas.get("wide", 0).config.retention_ms == 4321  # (the open logs' too)
        admin.close()
    assert len(TOPIC_CONFIGS) > 20
