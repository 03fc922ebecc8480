"""The hand-written Fetch response encoder gives the bytes kafka-python's generated encoder gives,
for every version served, and keeps large record buffers by reference."""
from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings, strategies as st
from kafka.protocol.consumer import FetchResponse

from kafkite.wire.fetch_response import (FIRST_VERSION, LAST_VERSION, FetchResponseData, PartitionData,
                                         TopicData)

VERSIONS = list(range(FIRST_VERSION, LAST_VERSION + 1))


def reference(data: FetchResponseData, version: int, corr: int) -> bytes:
    T = FetchResponse.FetchableTopicResponse
    P = T.PartitionData
    A = P.AbortedTransaction
    resp = FetchResponse(version=version, throttle_time_ms=data.throttle_time_ms, error_code=data.error_code,
                         session_id=data.session_id, responses=[
                             T(topic=t.topic if version < 13 else None, topic_id=t.topic_id if version >= 13 else None,
                               partitions=[P(partition_index=p.partition_index, error_code=p.error_code,
                                             high_watermark=p.high_watermark,
                                             last_stable_offset=p.last_stable_offset,
                                             log_start_offset=p.log_start_offset,
                                             aborted_transactions=None if p.aborted_transactions is None else
                                             [A(producer_id=a, first_offset=b) for a, b in p.aborted_transactions],
                                             preferred_read_replica=p.preferred_read_replica,
                                             records=None if p.records is None else b"".join(p.records),
                                             **({} if p.current_leader is None or version < 12 else {
                                                 "current_leader": P.LeaderIdAndEpoch(
                                                     leader_id=p.current_leader[0],
                                                     leader_epoch=p.current_leader[1])}))
                                           for p in t.partitions])
                             for t in data.responses],
                         **({"node_endpoints": [FetchResponse.NodeEndpoint(node_id=n, host=h, port=port, rack=r)
                                                for n, h, port, r in data.node_endpoints]} if version >= 16 else {}))
    resp.API_VERSION = version
    resp.with_header(correlation_id=corr)
    return bytes(resp.encode(header=True, framed=True))


partitions = st.builds(
    PartitionData, partition_index=st.integers(0, 2**31 - 1), error_code=st.integers(-1, 120),
    high_watermark=st.integers(-1, 2**62), last_stable_offset=st.integers(-1, 2**62),
    log_start_offset=st.integers(-1, 2**62),
    aborted_transactions=st.none() | st.lists(st.tuples(st.integers(0, 2**62), st.integers(0, 2**62)), max_size=3),
    preferred_read_replica=st.integers(-1, 5),
    records=st.none() | st.lists(st.binary(max_size=300), max_size=4),
    current_leader=st.none() | st.tuples(st.integers(-1, 2**31 - 1), st.integers(-1, 2**31 - 1)))
topics = st.builds(TopicData, topic=st.text(max_size=20), topic_id=st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1)),
                   partitions=st.lists(partitions, max_size=4))


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=60, deadline=None)
@given(data=st.builds(FetchResponseData, responses=st.lists(topics, max_size=3),
                      throttle_time_ms=st.integers(0, 1000), error_code=st.integers(0, 100),
                      session_id=st.integers(0, 2**31 - 1),
                      node_endpoints=st.lists(st.tuples(st.integers(0, 2**31 - 1), st.text(max_size=20),
                                                        st.integers(0, 65535), st.none() | st.text(max_size=5)),
                                              max_size=3)),
       corr=st.integers(-2**31, 2**31 - 1))
def test_same_bytes_as_kafka_python(version, data, corr):
    assert b"".join(data.encode_frames(version, corr)) == reference(data, version, corr)


@pytest.mark.parametrize("version", VERSIONS)
def test_large_records_are_not_copied(version):
    big = [bytes(200_000), bytes(100_000)]
    data = FetchResponseData(responses=[TopicData("t", uuid.uuid4(), [PartitionData(0, records=big)])])
    frames = data.encode_frames(version, 7)
    assert any(f is big[0] for f in frames) and any(f is big[1] for f in frames)
    assert b"".join(frames) == reference(data, version, 7)


def test_versions_outside_the_range_are_refused():
    with pytest.raises(ValueError):
        FetchResponseData(responses=[]).encode_frames(3, 1)
    with pytest.raises(ValueError):
        FetchResponseData(responses=[]).encode_frames(17, 1)


def _big_batch(n=40, size=4000):
    from kafkite.storage.batch import build_batch
    return build_batch([(b"k%d" % i, bytes([i % 251]) * size, []) for i in range(n)], timestamp_ms=1000)


def test_memory_log_serves_its_stored_batches(tmp_path):
    """The fetch path gets the memory log's batch objects themselves, and a file log's read buffer
    without a trimming copy; both concatenate to what read() returns."""
    from kafkite.storage.log_config import LogConfig
    from kafkite.storage.unified_log import FileLog, MemoryLog
    mem, disk = MemoryLog(LogConfig()), FileLog(tmp_path / "t-0", LogConfig())
    for lg in (mem, disk):
        for _ in range(3):
            lg.append(_big_batch(), now_ms=0)
    parts = mem.read_parts(0, 1 << 20)
    assert len(parts) == 3 and all(p is b for p, b in zip(parts, mem.segments[0].batches))
    assert b"".join(parts) == mem.read(0, 1 << 20)
    one = len(parts[0])
    # max_bytes cuts at a batch boundary; the file log hands out a view of its one read, not a copy
    fparts = disk.read_parts(0, 2 * one + 10)
    assert len(fparts) == 1 and isinstance(fparts[0], memoryview) and len(fparts[0]) == 2 * one
    assert bytes(fparts[0]) == disk.read(0, 2 * one + 10) == b"".join(mem.read_parts(0, 2 * one + 10))
    frames = FetchResponseData(responses=[TopicData("t", None, [PartitionData(0, records=parts)])]).encode_frames(11, 1)
    assert sum(1 for f in frames if any(f is p for p in parts)) == 3
    disk.close()
