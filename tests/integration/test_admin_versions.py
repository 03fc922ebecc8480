"""Every version of every foundation API, over a real socket, with Kafka's error codes.

ApiVersions must advertise exactly what is implemented: this file walks each
advertised (api, version) of the metadata/admin APIs and checks a real answer.
"""
from __future__ import annotations

import uuid

import pytest
from kafka.protocol.admin import (AlterConfigsRequest, CreatePartitionsRequest, CreateTopicsRequest,
                                  DeleteTopicsRequest, DescribeClusterRequest, DescribeConfigsRequest,
                                  DescribeTopicPartitionsRequest, IncrementalAlterConfigsRequest)
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from kafkite.server.router import supported
from kafkite.wire.errors import E

SUP = supported()
ZERO = uuid.UUID(int=0)


def versions(api_key):
    lo, hi = SUP[api_key]
    return list(range(lo, hi + 1))


def create(wire, name, partitions=3, rf=1, configs=None, version=7, validate_only=False):
    CT = CreateTopicsRequest.CreatableTopic
    req = CreateTopicsRequest(topics=[CT(name=name, num_partitions=partitions, replication_factor=rf,
                                         assignments=[],
                                         configs=[CT.CreatableTopicConfig(name=k, value=v)
                                                  for k, v in (configs or {}).items()])],
                              timeout_ms=5000, validate_only=validate_only)
    return wire.request(req, version).topics[0]


@pytest.mark.parametrize("v", versions(18))
def test_api_versions_every_version(wire, v):
    req = ApiVersionsRequest(client_software_name="kafkite-test", client_software_version="1.0")
    resp = wire.request(req, v)
    assert resp.error_code == 0
    got = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert got == SUP
    assert got[18] == (0, 4)


def test_api_versions_bad_software_name(wire):
    """Kafka answers INVALID_REQUEST at the request's version, with no api keys."""
    from kafka.protocol.api_message import ApiMessage
    from kafka.protocol.metadata import ApiVersionsResponse
    data, corr = wire.encode(ApiVersionsRequest(client_software_name="bad name!", client_software_version="1"), 3)
    wire.send_raw(data)
    frame = wire.recv_frame()
    # kafka-python decodes any error answer as v0; Kafka's (and ours) is at the request version.
    resp = ApiMessage.decode.__func__(ApiVersionsResponse, frame, version=3, header=True)
    assert resp.header.correlation_id == corr
    assert resp.error_code == E.INVALID_REQUEST and resp.api_keys == []


def test_api_versions_unsupported_version_gets_v0_answer(wire):
    """KIP-511: an ApiVersions version above ours is answered at v0 with UNSUPPORTED_VERSION + our list."""
    data, corr = wire.encode(ApiVersionsRequest(client_software_name="x", client_software_version="1"), 4)
    data = bytearray(data)
    data[6:8] = (99).to_bytes(2, "big")  # api version 99
    wire.send_raw(bytes(data))
    resp = wire.read_response(18, 0, corr)
    assert resp.error_code == E.UNSUPPORTED_VERSION
    assert {k.api_key for k in resp.api_keys} == set(SUP)


@pytest.mark.parametrize("v", versions(3))
def test_metadata_every_version(wire, broker, v):
    name = f"md-{v}"
    assert create(wire, name, partitions=2).error_code == 0
    T = MetadataRequest.MetadataRequestTopic
    kw = {}
    if v >= 4:
        kw["allow_auto_topic_creation"] = False
    if v >= 8:
        kw["include_topic_authorized_operations"] = True
    req = MetadataRequest(topics=[T(name=name), T(name="nope-" + str(v)), T(name="bad name")], **kw)
    resp = wire.request(req, v)
    by = {t.name: t for t in resp.topics}
    assert by[name].error_code == 0
    assert sorted(p.partition_index for p in by[name].partitions) == [0, 1]
    assert all(p.leader_id == broker.broker.node_id for p in by[name].partitions)
    # before v4 there is no allow_auto_topic_creation flag: Kafka auto-creates (auto.create.topics.enable)
    assert by["nope-" + str(v)].error_code == (0 if v < 4 else E.UNKNOWN_TOPIC_OR_PARTITION)
    assert by["bad name"].error_code == E.INVALID_TOPIC_EXCEPTION
    assert [b.port for b in resp.brokers] == [broker.port]
    if v >= 2:
        assert resp.cluster_id == broker.state.metadata.cluster_id
    if v >= 1:
        assert resp.controller_id == broker.broker.node_id
    if v >= 10:
        assert by[name].topic_id == broker.state.metadata.topic(name).topic_id
    if v >= 8:
        assert 3 in by[name].authorized_operations  # READ
    # all topics: v0 uses an empty list, v1+ null
    all_req = MetadataRequest(topics=[] if v == 0 else None, **kw)
    assert name in {t.name for t in wire.request(all_req, v).topics}


@pytest.mark.parametrize("v", [4, 7, 12])
def test_metadata_auto_create(wire, v):
    T = MetadataRequest.MetadataRequestTopic
    resp = wire.request(MetadataRequest(topics=[T(name=f"auto-{v}")], allow_auto_topic_creation=True), v)
    assert resp.topics[0].error_code == 0
    assert len(resp.topics[0].partitions) == 1


def test_metadata_auto_create_disabled(broker_factory):
    from kafkite.testing.wire_client import WireClient
    b = broker_factory(overrides={"auto.create.topics.enable": "false"})
    with WireClient.connect(b.bootstrap_servers) as w:
        T = MetadataRequest.MetadataRequestTopic
        resp = w.request(MetadataRequest(topics=[T(name="x")], allow_auto_topic_creation=True), 9)
        assert resp.topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION


def test_metadata_by_topic_id(wire, broker):
    """Kafka's KafkaApis: from v12 a topic asked by id is looked up by id, whatever name it comes with (the Java
    4.x consumer sends "" beside the ids of an assignment it cannot name); the unknown ids are answered first,
    UNKNOWN_TOPIC_ID, and a name beside an id is not looked up (no auto-creation either); before v12 an id or a
    null name refuses the request, INVALID_REQUEST for each topic."""
    create(wire, "byid")
    tid = broker.state.metadata.topic("byid").topic_id
    T = MetadataRequest.MetadataRequestTopic
    unknown = uuid.uuid4()
    for name in (None, ""):
        resp = wire.request(MetadataRequest(topics=[T(topic_id=tid, name=name), T(topic_id=unknown, name=name)],
                                            allow_auto_topic_creation=False), 12)
        assert [(t.error_code, t.name, t.topic_id) for t in resp.topics] == [
            (E.UNKNOWN_TOPIC_ID, None, unknown), (0, "byid", tid)]
        assert [p.partition_index for p in resp.topics[1].partitions] == [0, 1, 2]
    resp = wire.request(MetadataRequest(topics=[T(topic_id=tid, name=""), T(topic_id=tid, name="byid"),
                                                T(topic_id=ZERO, name="not-asked")],
                                        allow_auto_topic_creation=True), 12)
    assert [(t.error_code, t.name) for t in resp.topics] == [(0, "byid")]
    assert broker.state.metadata.topic("not-asked") is None
    for v in (10, 11):
        for topics in ([T(topic_id=tid, name="byid")], [T(topic_id=ZERO, name=None), T(topic_id=ZERO, name="byid")]):
            resp = wire.request(MetadataRequest(topics=topics, allow_auto_topic_creation=False), v)
            assert [(t.error_code, t.name) for t in resp.topics] == [
                (E.INVALID_REQUEST, t.name or "") for t in topics], (v, resp)


@pytest.mark.parametrize("v", versions(19))
def test_create_topics_every_version(wire, v):
    r = create(wire, f"ct-{v}", partitions=4, configs={"retention.ms": "12345"}, version=v)
    assert r.error_code == 0
    if v >= 5:
        assert r.num_partitions == 4 and r.replication_factor == 1
        assert {c.name: c.value for c in r.configs}["retention.ms"] == "12345"
    if v >= 7:
        assert r.topic_id is not None
    assert create(wire, f"ct-{v}", version=v).error_code == E.TOPIC_ALREADY_EXISTS
    bad = create(wire, "bad/name", version=v)
    assert bad.error_code == E.INVALID_TOPIC_EXCEPTION
    if v >= 1:
        assert "illegal" in bad.error_message
    assert create(wire, "x" * 250, version=v).error_code == E.INVALID_TOPIC_EXCEPTION
    assert create(wire, f"rf-{v}", rf=3, version=v).error_code == E.INVALID_REPLICATION_FACTOR
    assert create(wire, f"np-{v}", partitions=0, version=v).error_code == E.INVALID_PARTITIONS
    assert create(wire, f"cfg-{v}", configs={"no.such": "1"}, version=v).error_code == E.INVALID_CONFIG
    assert create(wire, f"cfg2-{v}", configs={"retention.ms": "abc"}, version=v).error_code == E.INVALID_CONFIG
    if v >= 1:
        r = create(wire, f"vo-{v}", version=v, validate_only=True)
        assert r.error_code == 0
        assert create(wire, f"vo-{v}", version=v).error_code == 0  # validate_only created nothing


def test_create_topics_collision_and_defaults(wire):
    assert create(wire, "a.b").error_code == 0
    assert create(wire, "a_b").error_code == E.INVALID_TOPIC_EXCEPTION
    r = create(wire, "defaults", partitions=-1, rf=-1)
    assert r.error_code == 0 and r.num_partitions == 1 and r.replication_factor == 1


@pytest.mark.parametrize("v", versions(20))
def test_delete_topics_every_version(wire, broker, v):
    create(wire, f"dt-{v}")
    if v >= 6:
        S = DeleteTopicsRequest.DeleteTopicState
        tid = broker.state.metadata.topic(f"dt-{v}").topic_id
        req = DeleteTopicsRequest(topics=[S(name=None, topic_id=tid), S(name="missing", topic_id=None),
                                          S(name=None, topic_id=uuid.uuid4())], timeout_ms=1000)
    else:
        req = DeleteTopicsRequest(topic_names=[f"dt-{v}", "missing"], timeout_ms=1000)
    resp = wire.request(req, v)
    codes = [r.error_code for r in resp.responses]
    assert codes[0] == 0 and codes[1] == E.UNKNOWN_TOPIC_OR_PARTITION
    if v >= 6:
        assert resp.responses[0].name == f"dt-{v}"
        assert codes[2] == E.UNKNOWN_TOPIC_ID
    assert broker.state.metadata.topic(f"dt-{v}") is None


@pytest.mark.parametrize("v", versions(37))
def test_create_partitions_every_version(wire, broker, v):
    create(wire, f"cp-{v}", partitions=2)
    P = CreatePartitionsRequest.CreatePartitionsTopic
    req = CreatePartitionsRequest(topics=[P(name=f"cp-{v}", count=5, assignments=None),
                                          P(name="missing", count=3, assignments=None)],
                                  timeout_ms=1000, validate_only=False)
    resp = wire.request(req, v)
    assert [r.error_code for r in resp.results] == [0, E.UNKNOWN_TOPIC_OR_PARTITION]
    assert len(broker.state.metadata.topic(f"cp-{v}").partitions) == 5
    req = CreatePartitionsRequest(topics=[P(name=f"cp-{v}", count=4, assignments=None)], timeout_ms=1000,
                                  validate_only=False)
    assert wire.request(req, v).results[0].error_code == E.INVALID_PARTITIONS


@pytest.mark.parametrize("v", versions(32))
def test_describe_configs_every_version(wire, broker, v):
    create(wire, f"dc-{v}", configs={"retention.ms": "5000"})
    R = DescribeConfigsRequest.DescribeConfigsResource
    kw = {}
    if v >= 1:
        kw["include_synonyms"] = True
    if v >= 3:
        kw["include_documentation"] = True
    req = DescribeConfigsRequest(resources=[R(resource_type=2, resource_name=f"dc-{v}", configuration_keys=None),
                                            R(resource_type=2, resource_name="missing", configuration_keys=None),
                                            R(resource_type=4, resource_name=str(broker.broker.node_id),
                                              configuration_keys=["log.segment.bytes"])], **kw)
    resp = wire.request(req, v)
    topic, missing, brk = resp.results
    assert topic.error_code == 0
    cfg = {c.name: c for c in topic.configs}
    assert cfg["retention.ms"].value == "5000"
    assert cfg["segment.bytes"].value == "1073741824"
    assert cfg["cleanup.policy"].value == "delete"
    if v == 0:
        assert cfg["retention.ms"].is_default is False and cfg["segment.bytes"].is_default is True
    else:
        assert cfg["retention.ms"].config_source == 1  # TOPIC_CONFIG
        assert cfg["segment.bytes"].config_source == 5  # DEFAULT_CONFIG
        syn = [s.name for s in cfg["retention.ms"].synonyms]
        assert syn[0] == "retention.ms" and "log.retention.hours" in syn
    if v >= 3:
        assert cfg["retention.ms"].config_type == 5  # LONG
        assert cfg["retention.ms"].documentation
    assert missing.error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert brk.error_code == 0 and [c.name for c in brk.configs] == ["log.segment.bytes"]


@pytest.mark.parametrize("v", versions(33))
def test_alter_configs_every_version(wire, broker, v):
    name = f"ac-{v}"
    create(wire, name, configs={"retention.ms": "5000"})
    R = AlterConfigsRequest.AlterConfigsResource
    C = R.AlterableConfig
    req = AlterConfigsRequest(resources=[R(resource_type=2, resource_name=name,
                                           configs=[C(name="segment.bytes", value="1048576")]),
                                         R(resource_type=2, resource_name="missing", configs=[]),
                                         R(resource_type=2, resource_name=name,
                                           configs=[C(name="bogus.config", value="1")])], validate_only=False)
    resp = wire.request(req, v)
    assert [r.error_code for r in resp.responses] == [0, E.UNKNOWN_TOPIC_OR_PARTITION, E.INVALID_CONFIG]
    # legacy AlterConfigs replaces the whole set: retention.ms is back to default
    assert broker.state.metadata.topic(name).configs == {"segment.bytes": "1048576"}


@pytest.mark.parametrize("v", versions(44))
def test_incremental_alter_configs_every_version(wire, broker, v):
    name = f"iac-{v}"
    create(wire, name, configs={"retention.ms": "5000"})
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    C = R.AlterableConfig
    req = IncrementalAlterConfigsRequest(resources=[
        R(resource_type=2, resource_name=name, configs=[
            C(name="segment.bytes", config_operation=0, value="1048576"),
            C(name="retention.ms", config_operation=1, value=None),
            C(name="cleanup.policy", config_operation=2, value="compact")]),
        R(resource_type=2, resource_name=name, configs=[C(name="segment.bytes", config_operation=2, value="1")]),
        R(resource_type=4, resource_name="", configs=[C(name="log.retention.ms", config_operation=0,
                                                         value="7200000")]),
        R(resource_type=4, resource_name="", configs=[C(name="broker.id", config_operation=0, value="5")]),
    ], validate_only=False)
    resp = wire.request(req, v)
    assert [r.error_code for r in resp.responses] == [0, E.INVALID_CONFIG, 0, E.INVALID_REQUEST]
    assert broker.state.metadata.topic(name).configs == {"segment.bytes": "1048576",
                                                          "cleanup.policy": "delete,compact"}
    # the dynamic broker default (the empty broker name: cluster-wide) now shows through for topics without
    # an override
    R2 = DescribeConfigsRequest.DescribeConfigsResource
    d = wire.request(DescribeConfigsRequest(resources=[R2(resource_type=2, resource_name=name,
                                                          configuration_keys=["retention.ms"])],
                                            include_synonyms=True), 4)
    entry = d.results[0].configs[0]
    assert entry.value == "7200000" and entry.config_source == 3  # DYNAMIC_DEFAULT_BROKER_CONFIG


@pytest.mark.parametrize("v", versions(60))
def test_describe_cluster_every_version(wire, broker, v):
    kw = {"include_cluster_authorized_operations": True}
    if v >= 1:
        kw["endpoint_type"] = 1
    resp = wire.request(DescribeClusterRequest(**kw), v)
    assert resp.error_code == 0
    assert resp.cluster_id == broker.state.metadata.cluster_id
    assert [(b.broker_id, b.port) for b in resp.brokers] == [(broker.broker.node_id, broker.port)]
    assert 9 in resp.authorized_operations  # CLUSTER_ACTION


def test_describe_topic_partitions_paging(wire, broker):
    create(wire, "dtp-a", partitions=3)
    create(wire, "dtp-b", partitions=2)
    T = DescribeTopicPartitionsRequest.TopicRequest
    req = DescribeTopicPartitionsRequest(topics=[T(name="dtp-a"), T(name="dtp-b"), T(name="dtp-missing")],
                                         response_partition_limit=4, cursor=None)
    resp = wire.request(req, 0)
    got = [(t.name, [p.partition_index for p in t.partitions]) for t in resp.topics]
    assert got == [("dtp-a", [0, 1, 2]), ("dtp-b", [0])]
    assert (resp.next_cursor.topic_name, resp.next_cursor.partition_index) == ("dtp-b", 1)
    req = DescribeTopicPartitionsRequest(topics=[T(name="dtp-a"), T(name="dtp-b"), T(name="dtp-missing")],
                                         response_partition_limit=4,
                                         cursor=DescribeTopicPartitionsRequest.Cursor(topic_name="dtp-b",
                                                                                      partition_index=1))
    resp = wire.request(req, 0)
    got = [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in resp.topics]
    assert got == [("dtp-b", 0, [1]), ("dtp-missing", E.UNKNOWN_TOPIC_OR_PARTITION, [])]
    assert resp.next_cursor is None
