"""The group coordinator facing bad data and oversized or refused writes (issue 14, items 7 and 8), with
real clients and restarts on disk:

- a batch or record of `__consumer_offsets` that cannot be decoded is logged (partition, offsets) and
  skipped while loading: the broker starts and stays up, every other group's offsets load;
- a batch of a compacted topic the cleaner cannot read is kept as it is, and the broker cleans the
  rest, across restarts;
- SyncGroup whose group record exceeds the topic's max.message.bytes answers UNKNOWN_SERVER_ERROR
  (Kafka 4's new group coordinator, checked at apache/kafka 1eb7644, trunk of Sept 2024 on the way
  to 4.0: CoordinatorOperationExceptionHelper.handleOperationException for the leader's request,
  GroupMetadataManager.appendGroupMetadataErrorToResponseError for the members waiting; Kafka
  3.x's GroupMetadataManager.storeGroup mapped the same), not a retriable error;
- OffsetDelete on a group with members answers GROUP_SUBSCRIBED_TO_TOPIC for its subscribed topics
  and deletes the others' offsets.
"""
from __future__ import annotations

import struct
import time
from pathlib import Path

import crc32c
import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.errors import GroupSubscribedToTopicError, KafkaError, NoError
from kafka.protocol.consumer import JoinGroupRequest, SyncGroupRequest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.structs import OffsetAndMetadata

from helpers import kp_group_consumer, kp_produce, wait_until
from kafkite.coordinator import records as R
from kafkite.coordinator.group import GroupState
from kafkite.coordinator.hashing import partition_for
from kafkite.storage.batch import build_batch, decode_batch, iter_batches
from kafkite.testing.process import BrokerProcess
from kafkite.testing.runner import BrokerThread
from kafkite.testing.wire_client import WireClient
from kafkite.wire.errors import E

OFFSETS = "__consumer_offsets"


def commit(bs, group, topic, offset):
    c = KafkaConsumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False)
    try:
        c.commit({TopicPartition(topic, 0): OffsetAndMetadata(offset, "", -1)})
    finally:
        c.close()


def committed(bs, group, topic):
    c = KafkaConsumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False)
    try:
        return c.committed(TopicPartition(topic, 0))
    finally:
        c.close()


_UNDECODABLE_TS = int(time.time() * 1000)  # one timestamp: the same call twice gives the same bytes


def undecodable_batch(base_offset: int, n: int = 2) -> bytes:
    """A batch whose header and CRC are valid but whose records do not parse (the same bytes for the same
    arguments, as tests compare them)."""
    b = bytearray(build_batch([(b"k%d" % i, b"v", []) for i in range(n)], base_offset=base_offset,
                              timestamp_ms=_UNDECODABLE_TS))
    b[61:] = b"\xff" * (len(b) - 61)
    struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    return bytes(b)


def append_to_segment(pdir: Path, make) -> int:
    """Write `make(log end offset)` at the end of the partition's last segment file (the broker is stopped);
    returns the offset it was written at."""
    seg = sorted(pdir.glob("*.log"))[-1]
    end = int(seg.stem)
    for _, h in iter_batches(seg.read_bytes()):
        end = h.last_offset + 1
    with open(seg, "ab") as f:
        f.write(make(end))
    return end


def lines(b: BrokerProcess, event: str) -> list[str]:
    return [ln for ln in list(b.log_tail) if event in ln]


def test_undecodable_consumer_offsets_records_are_skipped_at_load(tmp_path):
    data = tmp_path / "data"
    with BrokerProcess(data_dir=data) as b:
        bs = b.bootstrap_servers
        kp_produce(bs, "t", [(b"k", b"v", [])])
        p = partition_for("g-bad", 50)
        same = next(f"g-same-{i}" for i in range(10000) if partition_for(f"g-same-{i}", 50) == p)
        assert partition_for("g-ok", 50) != p
        commit(bs, "g-ok", "t", 1)
        commit(bs, same, "t", 2)
        commit(bs, "g-bad", "t", 3)
    pdir = data / f"{OFFSETS}-{p}"
    ts = int(time.time() * 1000)
    bad_batch = append_to_segment(pdir, undecodable_batch)
    bad_records = append_to_segment(pdir, lambda at: build_batch(
        [(b"\x00\x01\x00", b"\x00\x03", []),                               # truncated key
         (R.offset_key("g-bad", "t", 0), b"\x00\x63" + b"\x00" * 30, [])],  # OffsetCommitValue version 99
        base_offset=at, timestamp_ms=ts))
    append_to_segment(pdir, lambda at: build_batch(  # a valid commit after them: the load goes on past them
        [(R.offset_key("g-bad", "t", 0), R.offset_value(R.OffsetValue(7, -1, "", ts)), [])], base_offset=at,
        timestamp_ms=ts))

    with BrokerProcess(data_dir=data) as b:
        bs = b.bootstrap_servers
        wait_until(lambda: any(f"partition={p} " in ln for ln in lines(b, "coordinator.load_done")),
                   timeout=30, what="the partition loaded")
        [batch_line] = lines(b, "coordinator.undecodable_batch")
        assert f"partition={p} " in batch_line and f"base_offset={bad_batch} " in batch_line
        assert f"last_offset={bad_batch + 1} " in batch_line
        records = lines(b, "offsets.undecodable_record")
        assert len(records) == 2 and all(f"partition={p}" in ln for ln in records)
        assert {f"offset={bad_records}", f"offset={bad_records + 1}"} <= {
            w for ln in records for w in ln.split()}
        # every group's offsets are there, the broker serves on and accepts new commits for the partition
        assert committed(bs, "g-ok", "t") == 1
        assert committed(bs, same, "t") == 2
        assert committed(bs, "g-bad", "t") == 7
        commit(bs, "g-bad", "t", 8)
        assert b.proc.poll() is None
    assert b.proc.returncode == 0  # a clean shutdown

    with BrokerProcess(data_dir=data) as b:  # the bad bytes stay on disk: every start skips them again
        assert committed(b.bootstrap_servers, "g-bad", "t") == 8
        assert committed(b.bootstrap_servers, "g-ok", "t") == 1
        assert lines(b, "coordinator.undecodable_batch")
        assert b.proc.poll() is None


def read_batches(lg, call) -> list[tuple[int, list | None]]:
    """(base offset, [(key, value)] or None when it does not decode) of every batch of the log."""
    out, offset = [], call(lambda: lg.log_start_offset)
    while offset < call(lambda: lg.high_watermark):
        data = call(lambda: lg.read(offset, 1 << 24, min_one=True))
        for pos, h in iter_batches(data):
            try:
                recs = [(r.key, r.value) for r in decode_batch(memoryview(data)[pos:pos + h.size])]
            except Exception:
                recs = None
            out.append((h.base_offset, recs))
            offset = h.last_offset + 1
    return out


def test_cleaner_keeps_an_undecodable_batch_across_restarts(tmp_path):
    data = tmp_path / "data"
    cfg = {"log.cleaner.backoff.ms": "50"}
    keys = [b"key-%d" % i for i in range(10)]
    with BrokerThread(data_dir=data, overrides=cfg) as b:
        a = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        a.create_topics([NewTopic("compacted", 1, 1, topic_configs={
            "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01"})])
        a.close()
        kp_produce(b.bootstrap_servers, "compacted", [(k, b"v1", []) for k in keys])
    bad = append_to_segment(data / "compacted-0", lambda at: undecodable_batch(at, 3))
    raw = undecodable_batch(bad, 3)

    latest = {k: b"v1" for k in keys}
    for version in (b"v2", b"v3"):  # each run: cleanings with the bad batch in the cleaned range, then a restart
        with BrokerThread(data_dir=data, overrides=cfg) as b:
            lg = b.state.replicas.get("compacted", 0)
            assert lg.log_end_offset >= bad + 3
            kp_produce(b.bootstrap_servers, "compacted", [(k, version, []) for k in keys])
            latest.update((k, version) for k in keys)

            def cleaned():
                got = read_batches(lg, b.call)
                values = [kv for _, recs in got if recs is not None for kv in recs]
                return got if sorted(values) == sorted(latest.items()) else None
            got = wait_until(cleaned, timeout=30, what=f"compaction down to {version!r}")
            assert (bad, None) in got  # kept where it was
            data_now = b.call(lambda: lg.read(bad, 1 << 20))
            assert data_now.startswith(raw)  # byte for byte
            kp_produce(b.bootstrap_servers, "compacted", [(b"after", version, [])])  # the broker serves on
            latest[b"after"] = version
    # (a failure inside the broker thread would make the `with` raise when it stops)


class BigAssignor(RangePartitionAssignor):
    """The range assignment with `size` bytes of user data in each member's assignment."""
    name = "big"
    size = 1_200_000

    @classmethod
    def assign(cls, cluster, members):
        out = super().assign(cluster, members)
        return {m: ConsumerProtocolAssignment(version=a.version, assigned_partitions=a.assigned_partitions,
                                              user_data=b"x" * cls.size) for m, a in out.items()}


def find_coordinator(w, group):
    def found():
        r = w.request(FindCoordinatorRequest(key=group, key_type=0), 1)
        return r if r.error_code == 0 else None
    return wait_until(found, what="the group coordinator")


def raw_join(w, group, member_id=""):
    P = JoinGroupRequest.JoinGroupRequestProtocol
    return w.request(JoinGroupRequest(group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                                      member_id=member_id, group_instance_id=None, protocol_type="consumer",
                                      protocols=[P(name="range", metadata=b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00")],
                                      reason=None), 5)


def raw_sync(w, group, j, assignment):
    A = SyncGroupRequest.SyncGroupRequestAssignment
    return w.request(SyncGroupRequest(group_id=group, generation_id=j.generation_id, member_id=j.member_id,
                                      group_instance_id=None, protocol_type="consumer", protocol_name="range",
                                      assignments=[A(member_id=j.member_id, assignment=assignment)]), 5)


def test_sync_group_too_large_answers_unknown_server_error(broker):
    bs = broker.bootstrap_servers
    kp_produce(bs, "big-t", [(b"k", b"v", [])])
    # a real consumer whose leader assigns more than __consumer_offsets' max.message.bytes (1 MB, Kafka's default)
    c = kp_group_consumer("big-t", bootstrap_servers=bs, group_id="big", partition_assignment_strategy=[BigAssignor],
                          enable_auto_commit=False, session_timeout_ms=10000)
    try:
        with pytest.raises(KafkaError) as info:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                c.poll(timeout_ms=500)
        assert info.value.errno == -1  # UNKNOWN_SERVER_ERROR, not retried forever
    finally:
        c.close()
    p = partition_for("raw-big", 50)
    with WireClient.connect(bs) as w:
        find_coordinator(w, "raw-big")
        j = raw_join(w, "raw-big")
        j = raw_join(w, "raw-big", j.member_id)
        assert j.error_code == 0
        lg = broker.state.replicas.get(OFFSETS, p)
        end = lg.log_end_offset
        assert raw_sync(w, "raw-big", j, b"y" * 1_100_000).error_code == E.UNKNOWN_SERVER_ERROR
        assert lg.log_end_offset == end  # nothing appended
        # the group is not stuck: it rebalances, and a small assignment is stored
        j = raw_join(w, "raw-big", j.member_id)
        assert j.error_code == 0
        assert raw_sync(w, "raw-big", j, b"small").error_code == 0
        assert lg.log_end_offset == end + 1


def test_offset_delete_on_a_group_with_subscribed_members(broker):
    bs = broker.bootstrap_servers
    for t in ("sub-a", "other-b"):
        kp_produce(bs, t, [(b"k", b"v", [])])
    a0, b0 = TopicPartition("sub-a", 0), TopicPartition("other-b", 0)
    c = kp_group_consumer("sub-a", bootstrap_servers=bs, group_id="od", enable_auto_commit=False,
                          auto_offset_reset="earliest", session_timeout_ms=10000)
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        coordinator = broker.broker.groups.coordinator

        def stable():
            c.poll(timeout_ms=100)
            g = broker.call(lambda: coordinator.group("od"))
            return c.assignment() == {a0} and g is not None and g.state == GroupState.STABLE
        wait_until(stable, what="the group stable")
        # its start position known: kafka-python 3.0.12 keeps an OffsetFetch that a poll left unanswered (keyed by
        # its partitions, {a0}) and hands that answer, from before the commit below, to the next committed(a0)
        # (seen: None; the broker had the commit, and a second committed(a0) read it)
        c.position(a0, timeout_ms=30000)
        c.commit({a0: OffsetAndMetadata(1, "", -1), b0: OffsetAndMetadata(1, "", -1)})
        res = admin.delete_group_offsets("od", [a0, b0])
        assert res == {a0: GroupSubscribedToTopicError, b0: NoError}
        assert c.committed(a0) == 1 and c.committed(b0) is None
        c.close()  # leaves: the group is empty, subscribed to nothing
        assert admin.delete_group_offsets("od", [a0]) == {a0: NoError}
        assert committed(bs, "od", "sub-a") is None
    finally:
        c.close()
        admin.close()
