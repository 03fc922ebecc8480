"""Disk faults: a write or fsync that fails (a full disk, an I/O error) takes the data dir offline
as Kafka's log dir failure handling does. Its partitions answer KAFKA_STORAGE_ERROR (56), nothing
that was not acknowledged is ever written (not once space returns, not after a restart), a
CreateTopics that failed leaves no topic, the group coordinator answers NOT_COORDINATOR, and
Metadata and ApiVersions are still served.

The faults are injected in-process (kafkite.testing.faults.DiskFaults: the broker's own writes
get OSError(ENOSPC/EIO)); one more test fills a real size-limited tmpfs when this machine lets us
mount one.
"""
from __future__ import annotations

import errno
import os
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError
from confluent_kafka import Producer as ConfluentProducer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaStorageError
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import (FetchRequest, ListOffsetsRequest, OffsetCommitRequest,
                                     OffsetFetchRequest)
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import ProduceRequest

from helpers import wait_until
from kafkite.storage.batch import build_batch
from kafkite.testing.faults import DiskFaults
from kafkite.testing.wire_client import WireClient
from kafkite.wire.errors import E

STORAGE = E.KAFKA_STORAGE_ERROR


def batch(tag: str, n: int = 2, size: int = 0) -> bytes:
    pad = b"x" * size
    return build_batch([(b"k%d" % i, b"%s-%d" % (tag.encode(), i) + pad, []) for i in range(n)],
                       timestamp_ms=int(time.time() * 1000))


def produce_request(topic: str, parts: dict[int, bytes], acks: int = -1) -> ProduceRequest:
    T = ProduceRequest.TopicProduceData
    return ProduceRequest(transactional_id=None, acks=acks, timeout_ms=30000, topic_data=[
        T(name=topic, topic_id=None, partition_data=[T.PartitionProduceData(index=p, records=d)
                                                     for p, d in parts.items()])])


def produce(w: WireClient, topic: str, parts: dict[int, bytes], acks: int = -1) -> dict[int, tuple[int, int]]:
    """partition -> (error, base offset)."""
    resp = w.request(produce_request(topic, parts, acks), 9)
    return {p.index: (p.error_code, p.base_offset) for p in resp.responses[0].partition_responses}


def fetch(w: WireClient, topic: str, partition: int, offset: int = 0):
    T = FetchRequest.FetchTopic
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                       session_id=0, session_epoch=-1, topics=[T(topic=topic, topic_id=None, partitions=[
                           T.FetchPartition(partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                                            last_fetched_epoch=-1, log_start_offset=-1,
                                            partition_max_bytes=1 << 20)])],
                       forgotten_topics_data=[], rack_id="")
    return w.request(req, 12).responses[0].partitions[0]


def list_offset(w: WireClient, topic: str, partition: int) -> tuple[int, int]:
    """(error, latest offset)."""
    T = ListOffsetsRequest.ListOffsetsTopic
    req = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[T(name=topic, partitions=[
        T.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1, timestamp=-1)])])
    p = w.request(req, 7).topics[0].partitions[0]
    return p.error_code, p.offset


def metadata(w: WireClient, topics: list[str] | None = None):
    T = MetadataRequest.MetadataRequestTopic
    req = MetadataRequest(topics=None if topics is None else [T(name=t) for t in topics],
                          allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    return {t.name: t for t in w.request(req, 9).topics}


def create_topic(w: WireClient, name: str, partitions: int = 1):
    CT = CreateTopicsRequest.CreatableTopic
    req = CreateTopicsRequest(topics=[CT(name=name, num_partitions=partitions, replication_factor=1,
                                         assignments=[], configs=[])], timeout_ms=5000, validate_only=False)
    t = w.request(req, 7).topics[0]
    return t.error_code, t.error_message


def log_bytes(data: Path, topic: str, partition: int) -> int:
    return sum(p.stat().st_size for p in (data / f"{topic}-{partition}").glob("*.log"))


def consume_all(bs: str, topic: str, partitions: int) -> dict[int, list[bytes]]:
    """Every record of every partition, from the start to the high watermark: partition -> values."""
    c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    end = c.end_offsets(tps)
    out: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + 20
    while any(c.position(tp) < end[tp] for tp in tps) and time.monotonic() < deadline:
        for tp, msgs in c.poll(timeout_ms=200).items():
            out[tp.partition].extend(m.value for m in msgs)
    c.close()
    return out


@pytest.fixture
def data(tmp_path) -> Path:
    return tmp_path / "data"


def test_full_disk_produce_answers_56_and_unacknowledged_records_never_appear(broker_factory, data):
    b = broker_factory(data_dir=data)
    with WireClient.connect(b.bootstrap_servers) as w:
        assert create_topic(w, "t", 2)[0] == 0
        assert produce(w, "t", {0: batch("ok0", 5), 1: batch("ok1", 3)}) == {0: (0, 0), 1: (0, 0)}
        acked = {p: log_bytes(data, "t", p) for p in (0, 1)}
        with DiskFaults(data) as disk:  # the disk is full from here
            # 100 batches pipelined on one connection: every partition of every answer is 56, in order
            frames = [w.encode(produce_request("t", {0: batch(f"lost{i}"), 1: batch(f"lost{i}")}), 9)
                      for i in range(100)]
            w.send_raw(b"".join(f for f, _ in frames))
            for _, corr in frames:
                resp = w.read_response(ProduceRequest.API_KEY, 9, corr)
                assert [(p.index, p.error_code, p.base_offset) for p in resp.responses[0].partition_responses] \
                    == [(0, STORAGE, -1), (1, STORAGE, -1)]
            assert disk.failed_calls > 0
            # the connection stays open; ApiVersions and Metadata are served, the replicas listed offline
            assert w.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"),
                             3).error_code == 0
            t = metadata(w, ["t"])["t"]
            assert t.error_code == 0
            assert [(p.partition_index, p.error_code, p.leader_id, p.offline_replicas) for p in t.partitions] \
                == [(0, 0, 1, [1]), (1, 0, 1, [1])]
            # every partition answers 56: Fetch, ListOffsets
            assert fetch(w, "t", 0).error_code == STORAGE
            assert list_offset(w, "t", 1) == (STORAGE, -1)
            # the clients see Kafka's error
            kp = KafkaProducer(bootstrap_servers=b.bootstrap_servers, acks="all", retries=0)
            with pytest.raises(KafkaStorageError):
                kp.send("t", b"lost", partition=0).get(timeout=30)
            kp.close()
            errors = []
            ck = ConfluentProducer({"bootstrap.servers": b.bootstrap_servers, "acks": "all", "retries": 0,
                                    "message.timeout.ms": 20000})
            ck.produce("t", b"lost", partition=1, on_delivery=lambda err, _msg: errors.append(err))
            assert ck.flush(30) == 0
            assert [e.code() for e in errors] == [KafkaError.KAFKA_STORAGE_ERROR]
            disk.heal()  # space returns: the log dir stays offline until a restart, nothing is written
            assert produce(w, "t", {0: batch("after")}) == {0: (STORAGE, -1)}
            # what reached the files before the failure (the first batches) is cut back
            wait_until(lambda: {p: log_bytes(data, "t", p) for p in (0, 1)} == acked,
                       timeout=30, what="the unacknowledged bytes cut from the segments")
    b.stop()  # a clean shutdown writes nothing more either
    assert {p: log_bytes(data, "t", p) for p in (0, 1)} == acked
    assert not (data / ".kafka_cleanshutdown").exists()  # the failed dir is recovered at the next start

    b2 = broker_factory(data_dir=data)
    got = consume_all(b2.bootstrap_servers, "t", 2)
    assert got == {0: [b"ok0-%d" % i for i in range(5)], 1: [b"ok1-%d" % i for i in range(3)]}
    with WireClient.connect(b2.bootstrap_servers) as w:
        assert list_offset(w, "t", 0) == (0, 5)
        assert produce(w, "t", {0: batch("again")}) == {0: (0, 5)}  # back in service after the restart


@pytest.mark.parametrize("acks", [-1, 0])
def test_failed_fsync_cuts_bytes_already_written(broker_factory, data, acks):
    """EIO on fsync: the bytes are in the file (the page cache), never acknowledged; they are cut, so
    neither the kernel's later write-back nor a restart serves them. acks=0 appends inline."""
    b = broker_factory(data_dir=data)
    with WireClient.connect(b.bootstrap_servers) as w:
        assert create_topic(w, "f")[0] == 0
        assert produce(w, "f", {0: batch("ok", 4)}) == {0: (0, 0)}
        acked = log_bytes(data, "f", 0)
        with DiskFaults(data, errno.EIO, ops=("fsync",)):
            if acks == 0:
                w.send_raw(w.encode(produce_request("f", {0: batch("lost", size=1000)}, acks=0), 9)[0])
                wait_until(lambda: b.state.replicas.log_dir_offline, timeout=30, what="the log dir offline")
                assert produce(w, "f", {0: batch("lost2")}) == {0: (STORAGE, -1)}
            else:
                assert produce(w, "f", {0: batch("lost", size=1000)}) == {0: (STORAGE, -1)}
            wait_until(lambda: log_bytes(data, "f", 0) == acked, timeout=30, what="the written batch cut")
    b.stop()
    b2 = broker_factory(data_dir=data)
    assert consume_all(b2.bootstrap_servers, "f", 1) == {0: [b"ok-%d" % i for i in range(4)]}


@pytest.mark.parametrize("ops", [("open",), ("mkdir",)], ids=["metadata-write-fails", "log-creation-fails"])
def test_create_topics_on_failed_disk_leaves_no_topic(broker_factory, data, ops):
    """The metadata cannot be written, or it can but the partition directories cannot be made: either
    way no topic is left behind; Metadata and CreateTopics agree that it does not exist."""
    b = broker_factory(data_dir=data)
    with WireClient.connect(b.bootstrap_servers) as w:
        with DiskFaults(data, ops=ops) as disk:
            err, msg = create_topic(w, "new", 3)
            assert err == STORAGE and "offline" in msg
            assert "new" not in metadata(w)
            assert metadata(w, ["new"])["new"].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
            disk.heal()
            # the data dir stays offline: nothing is created in it (never TOPIC_ALREADY_EXISTS)
            assert create_topic(w, "new", 3)[0] == STORAGE
            assert "new" not in metadata(w)
            # nor can __consumer_offsets be: Kafka's answer when the coordinator's topic is not there
            r = w.request(FindCoordinatorRequest(key="g", key_type=0), 3)
            assert (r.error_code, r.node_id) == (E.COORDINATOR_NOT_AVAILABLE, -1)
            assert "__consumer_offsets" not in metadata(w)
        a = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        with pytest.raises(KafkaStorageError):
            a.create_topics([NewTopic("new2", 1, 1)], raise_errors=True)
        a.close()
    b.stop()
    assert not list(data.glob("new-*"))  # no partition directory left
    b2 = broker_factory(data_dir=data)
    with WireClient.connect(b2.bootstrap_servers) as w:
        assert "new" not in metadata(w)
        assert create_topic(w, "new", 3) == (0, None)
        assert len(metadata(w, ["new"])["new"].partitions) == 3


def commit(w: WireClient, group: str, offset: int) -> int:
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    req = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                              retention_time_ms=-1, topics=[T(name="c", partitions=[T.OffsetCommitRequestPartition(
                                  partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                                  commit_timestamp=-1, committed_metadata="")])])
    return w.request(req, 7).topics[0].partitions[0].error_code


def committed(w: WireClient, group: str) -> tuple[int, int]:
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    r = w.request(OffsetFetchRequest(group_id=group, topics=[T(name="c", partition_indexes=[0])],
                                     require_stable=False), 7)
    return r.error_code, (r.topics[0].partitions[0].committed_offset if r.topics else -1)


def ready_coordinator(w: WireClient, group: str) -> None:
    def ready():
        r = w.request(FindCoordinatorRequest(key=group, key_type=0), 3)
        return r.error_code == 0 and committed(w, group)[0] == 0
    wait_until(ready, timeout=20, what="the group coordinator loaded")


def test_offset_commit_on_failed_disk_answers_not_coordinator(broker_factory, data):
    b = broker_factory(data_dir=data)
    with WireClient.connect(b.bootstrap_servers) as w:
        assert create_topic(w, "c")[0] == 0
        ready_coordinator(w, "g")
        assert commit(w, "g", 3) == 0
        with DiskFaults(data):
            assert commit(w, "g", 4) == E.NOT_COORDINATOR  # Kafka's mapping of KAFKA_STORAGE_ERROR
            assert committed(w, "g")[0] == E.NOT_COORDINATOR  # the partition was unloaded
            assert commit(w, "g", 5) == E.NOT_COORDINATOR
    b.stop()
    b2 = broker_factory(data_dir=data)
    with WireClient.connect(b2.bootstrap_servers) as w:
        ready_coordinator(w, "g")
        assert committed(w, "g") == (0, 3)


def _mount_tmpfs(path: Path, size: str) -> str | None:
    """Mount a size-limited tmpfs at path; None when done, else why not."""
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True,
                       text=True)
    return None if r.returncode == 0 else f"mount -t tmpfs failed: {r.stderr.strip() or r.returncode}"


def test_real_full_disk_on_a_small_tmpfs(broker_factory, tmp_path):
    """A real ENOSPC: a 2 MiB tmpfs fills up under produce; space then returns (remount larger)."""
    mnt = tmp_path / "mnt"
    why = _mount_tmpfs(mnt, "2m")
    if why:
        pytest.skip(why)
    brokers = []
    try:
        data = mnt / "data"
        b = broker_factory(data_dir=data)
        brokers.append(b)
        acked: list[bytes] = []
        with WireClient.connect(b.bootstrap_servers) as w:
            assert create_topic(w, "full")[0] == 0
            for i in range(200):
                err, base = produce(w, "full", {0: batch(f"r{i}", n=1, size=32 * 1024)})[0]
                if err:
                    break
                assert base == len(acked)
                acked.append(b"r%d-0" % i)
            assert err == STORAGE and 10 < len(acked) < 200
            subprocess.run(["mount", "-o", "remount,size=64m", str(mnt)], check=True)  # space returns
            assert produce(w, "full", {0: batch("after")})[0] == (STORAGE, -1)
            assert metadata(w, ["full"])["full"].partitions[0].offline_replicas == [1]
        b.stop()
        b2 = broker_factory(data_dir=data)
        brokers.append(b2)
        got = consume_all(b2.bootstrap_servers, "full", 1)[0]
        assert [v[:len(f"r{i}-0")] for i, v in enumerate(got)] == acked
    finally:
        for b in brokers:  # their files closed before the unmount
            b.stop()
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
