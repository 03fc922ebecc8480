"""Java Admin (kafka-clients 3.9 and 4.3) describeConsumerGroups on both kinds of group, as against Kafka 4: it asks
ConsumerGroupDescribe first; a consumer group answers there (type CONSUMER, its state, the uniform assignor,
each member's client id, host and assignment); a classic group answers GROUP_ID_NOT_FOUND there ("Group g is
not a consumer group.") and the client falls back to DescribeGroups (type CLASSIC). The consumer group's
members are raw ConsumerGroupHeartbeats (the Java 3.9 consumer's heartbeat is v0 and leaves on close)."""
from __future__ import annotations

import pytest
from kafka.protocol.consumer import OffsetCommitRequest

from test_consumer_group_protocol import describe, hb, parts
from test_data_versions import create
from test_group_versions import find


@pytest.mark.usefixtures("java_client")
def test_java_admin_describes_a_consumer_group_and_a_classic_group(broker, wire):
    from clients.drivers import run_java
    create(wire, "jd6", 6)
    find(wire, "gjd")
    a = hb(wire, "gjd", topics=["jd6"], instance_id="static-a", rack_id="r1")
    b = hb(wire, "gjd", topics=["jd6"])
    tid = a.assignment.topic_partitions[0].topic_id
    a = hb(wire, "gjd", a.member_id, 1, topics=None, owned=[(tid, range(6))])  # a gives up half
    a = hb(wire, "gjd", a.member_id, 1, topics=None, owned=[(tid, sorted(parts(a)))])
    b = hb(wire, "gjd", b.member_id, 2, topics=None, owned=[])
    raw = describe(wire, "gjd")
    assert raw.group_state == "Stable" and a.member_epoch == b.member_epoch == 2
    # a classic group with committed offsets only (Empty)
    find(wire, "gjc")
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    r = wire.request(OffsetCommitRequest(group_id="gjc", generation_id_or_member_epoch=-1, member_id="",
                                         retention_time_ms=-1, topics=[T(name="jd6", partitions=[
                                             P(partition_index=0, committed_offset=0, committed_metadata="")])]), 2)
    assert r.topics[0].partitions[0].error_code == 0

    d, = run_java("admin-describe-group", broker.bootstrap_servers, "gjd")
    assert (d["group"], d["state"], d["protocol"], d["assignor"]) == ("gjd", "STABLE", "CONSUMER", "uniform")
    assert d["coordinator"] == broker.config.node_id
    want = {m.member_id: (m.client_id, m.client_host, sorted(f"jd6:{p}" for tp in m.assignment.topic_partitions
                                                          for p in tp.partitions)) for m in raw.members}
    assert {m["member_id"]: (m["client_id"], m["host"], m["assignment"]) for m in d["members"]} == want
    assert sorted(len(x[2]) for x in want.values()) == [3, 3]
    c, = run_java("admin-describe-group", broker.bootstrap_servers, "gjc")
    assert (c["group"], c["state"], c["protocol"], c["members"]) == ("gjc", "EMPTY", "CLASSIC", [])
