"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69): our spec files encode and decode as
kio's classes (generated from Kafka's own message definitions) do, at every version we serve."""
from __future__ import annotations

import io
import uuid

import pytest

kio_serial = pytest.importorskip("kio.serial")

from kafkite.wire.consumer_group_api import (  # noqa: E402
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse)

T1 = uuid.UUID("6b1c2f5e-0d4a-4f3e-9a51-2c7e8d9f0a11")


def _kio(name: str, version: int, kind: str):
    import importlib
    mod = importlib.import_module(f"kio.schema.{name}.v{version}.{kind}")
    return mod


def _kio_decode(cls, data: bytes):
    return kio_serial.entity_reader(cls)(memoryview(bytes(data)), 0)[0]


def _kio_encode(entity) -> bytes:
    buf = io.BytesIO()
    kio_serial.entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_request_matches_kio(version):
    R = ConsumerGroupHeartbeatRequest
    kw = dict(group_id="g1", member_id="m-1", member_epoch=3, instance_id="i-1", rack_id=None,
              rebalance_timeout_ms=30000, subscribed_topic_names=["a", "b"], server_assignor="range",
              topic_partitions=[R.TopicPartitions(topic_id=T1, partitions=[0, 2])])
    if version >= 1:
        kw["subscribed_topic_regex"] = "^x.*"
    ours = R[version](**kw).encode()
    k = _kio_decode(_kio("consumer_group_heartbeat", version, "request").ConsumerGroupHeartbeatRequest, ours)
    assert (k.group_id, k.member_id, k.member_epoch, k.instance_id) == ("g1", "m-1", 3, "i-1")
    assert list(k.subscribed_topic_names) == ["a", "b"] and k.server_assignor == "range"
    assert [(tp.topic_id, list(tp.partitions)) for tp in k.topic_partitions] == [(T1, [0, 2])]
    if version >= 1:
        assert k.subscribed_topic_regex == "^x.*"
    assert _kio_encode(k) == bytes(ours)


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_response_matches_kio(version):
    R = ConsumerGroupHeartbeatResponse
    for assignment in (None, R.Assignment(topic_partitions=[R.Assignment.TopicPartitions(topic_id=T1,
                                                                                         partitions=[1, 5])])):
        ours = R[version](throttle_time_ms=0, error_code=0, error_message=None, member_id="m-1", member_epoch=7,
                          heartbeat_interval_ms=5000, assignment=assignment).encode()
        k = _kio_decode(_kio("consumer_group_heartbeat", version, "response").ConsumerGroupHeartbeatResponse, ours)
        assert (k.member_id, k.member_epoch, k.heartbeat_interval.total_seconds()) == ("m-1", 7, 5.0)
        if assignment is None:
            assert k.assignment is None
        else:
            assert [(tp.topic_id, list(tp.partitions)) for tp in k.assignment.topic_partitions] == [(T1, [1, 5])]
        assert _kio_encode(k) == bytes(ours)


@pytest.mark.parametrize("version", [0, 1])
def test_describe_matches_kio(version):
    ours = ConsumerGroupDescribeRequest[version](group_ids=["g1", "g2"], include_authorized_operations=True).encode()
    k = _kio_decode(_kio("consumer_group_describe", version, "request").ConsumerGroupDescribeRequest, ours)
    assert list(k.group_ids) == ["g1", "g2"] and k.include_authorized_operations is True
    R = ConsumerGroupDescribeResponse
    G = R.DescribedGroup
    A = G.Member.Assignment
    tp = A.TopicPartitions(topic_id=T1, topic_name="t", partitions=[0, 1])
    member = dict(member_id="m-1", instance_id=None, rack_id="r1", member_epoch=4, client_id="c", client_host="/h",
                  subscribed_topic_names=["t"], subscribed_topic_regex=None, assignment=A(topic_partitions=[tp]),
                  target_assignment=A(topic_partitions=[]))
    if version >= 1:
        member["member_type"] = 1
    g = G(error_code=0, error_message=None, group_id="g1", group_state="Stable", group_epoch=4, assignment_epoch=4,
          assignor_name="uniform", members=[G.Member(**member)], authorized_operations=-2147483648)
    ours = R[version](throttle_time_ms=0, groups=[g]).encode()
    k = _kio_decode(_kio("consumer_group_describe", version, "response").ConsumerGroupDescribeResponse, ours)
    km = k.groups[0].members[0]
    assert (k.groups[0].group_state, km.member_epoch, km.rack_id) == ("Stable", 4, "r1")
    assert [(t.topic_name, list(t.partitions)) for t in km.assignment.topic_partitions] == [("t", [0, 1])]
    if version >= 1:
        assert km.member_type == 1
    assert _kio_encode(k) == bytes(ours)
