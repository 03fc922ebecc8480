"""wire.produce_response: a Produce's answer made of light objects, encoded by kafka-python's compiled encoder, has the
bytes of kafka-python's own classes for every Produce version served, with kafka-python's objects put among them
too."""
from __future__ import annotations

import pytest
from kafka.protocol.api_header import ResponseHeader
from kafka.protocol.producer.produce import ProduceResponse

from kafkite.server.router import ROUTES
from kafkite.wire import codec
from kafkite.wire.produce_response import PartitionAnswer, ProduceAnswer, TopicAnswer
from kafka.protocol.api_key import ApiKey

T = ProduceResponse.TopicProduceResponse
P = T.PartitionProduceResponse
LOW, HIGH = ROUTES[ApiKey.Produce][:2]
VERSIONS = list(range(LOW, HIGH + 1))


def kafka_frame(topics, version: int, correlation_id: int, node_endpoints=None) -> bytes:
    """kafka-python's own encode of the same answer (not the codec's route)."""
    kafka_topics = [T(name=name, partition_responses=[
        P(index=i, error_code=e, base_offset=b, log_append_time_ms=lat, log_start_offset=lso,
          record_errors=[P.BatchIndexAndErrorMessage(batch_index=j, batch_index_error_message=m) for j, m in errs],
          error_message=msg, **({} if leader is None else {"current_leader": P.LeaderIdAndEpoch(
              leader_id=leader[0], leader_epoch=leader[1])}))
        for i, e, b, lat, lso, errs, msg, leader in parts]) for name, parts in topics]
    extra = {} if node_endpoints is None else {"node_endpoints": node_endpoints}
    response = ProduceResponse(version=version, responses=kafka_topics, throttle_time_ms=0, **extra)
    response.API_VERSION = version
    response._header = ResponseHeader(correlation_id=correlation_id)
    return bytes(response.encode(header=True, framed=True))


def answer(topics) -> ProduceAnswer:
    out = []
    for name, parts in topics:
        ps = []
        for i, e, b, lat, lso, errs, msg, leader in parts:
            p = PartitionAnswer(i, e, b, lat, lso, [P.BatchIndexAndErrorMessage(batch_index=j,
                                                                                batch_index_error_message=m)
                                                    for j, m in errs], msg)
            if leader is not None:
                p.current_leader = type(p).LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1])
            ps.append(p)
        out.append(TopicAnswer(name, ps))
    return ProduceAnswer(out)


def ok(i, base=0):
    return (i, 0, base, -1, 0, [], None, None)


CASES = {
    "six partitions": [("bench", [ok(i, 1000 * i) for i in range(6)])],
    "two topics, an error": [("a", [ok(0, 5), (1, 6, -1, -1, -1, [], None, None)]), ("b", [ok(3, 1 << 40)])],
    "log append time": [("t", [(0, 0, 7, 1_700_000_000_000, 3, [], None, None)])],
    "no topics": [],
    "a long name, many partitions": [("x" * 300, [ok(i, i) for i in range(200)])],
    "a non-ASCII name": [("tópico-é", [ok(0)])],
    "record errors": [("t", [(0, 87, -1, -1, -1, [(0, "bad"), (2, None)], "One or more records", None)])],
    "an error message": [("t", [(0, 87, -1, -1, -1, [], "why", None)])],
}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", list(CASES))
def test_the_answer_has_kafka_pythons_bytes(case, version):
    topics = CASES[case]
    assert codec.encode_response(answer(topics), version, 12345) == kafka_frame(topics, version, 12345)


@pytest.mark.parametrize("version", [v for v in VERSIONS if v >= 10])
def test_a_current_leader_and_node_endpoints_are_encoded(version):
    """What leader_hints.fill_produce puts in (KIP-951), through type(p) and type(response) as it does: tagged
    fields written from the light objects' attributes."""
    topics = [("t", [(0, 6, -1, -1, -1, [], None, (2, 5)), ok(1)])]
    a = answer(topics)
    a.node_endpoints = [type(a).NodeEndpoint(node_id=2, host="h", port=9092, rack=None)]
    assert codec.encode_response(a, version, 7) == kafka_frame(topics, version, 7, node_endpoints=[
        ProduceResponse.NodeEndpoint(node_id=2, host="h", port=9092, rack=None)])


@pytest.mark.parametrize("version", VERSIONS)
def test_kafka_pythons_objects_put_into_the_answer_are_encoded(version):
    """control/responses.add_partition_errors appends kafka-python's topic and partition objects."""
    a = answer([("t", [ok(0)])])
    a.responses[0].partition_responses.append(P(index=1, error_code=6, base_offset=-1, log_append_time_ms=-1,
                                                log_start_offset=-1, record_errors=[], error_message=None))
    a.responses.append(T(name="u", partition_responses=[P(index=0, error_code=3, base_offset=-1,
                                                          log_append_time_ms=-1, log_start_offset=-1,
                                                          record_errors=[], error_message=None)]))
    expected = kafka_frame([("t", [ok(0), (1, 6, -1, -1, -1, [], None, None)]),
                            ("u", [(0, 3, -1, -1, -1, [], None, None)])], version, 3)
    assert codec.encode_response(a, version, 3) == expected
