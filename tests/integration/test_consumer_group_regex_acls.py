"""A regex subscription under an authorizer, as Kafka 4's group coordinator (KAFKA-18813): the topics a regex
matches are only those the member may DESCRIBE; a topic it is not allowed to see is neither assigned nor
shown. Raw requests over a SASL_PLAINTEXT listener (admin a super user, bob with the ACLs given)."""
from __future__ import annotations

import time
import uuid

import pytest
from kafka.admin import ACLOperation, NewTopic, ResourceType
from kafka.protocol.metadata import FindCoordinatorRequest

from kafkite.testing.wire_client import WireClient
from kafkite.wire.consumer_group_api import ConsumerGroupDescribeRequest

from test_acls import grant, _login, secured_broker
from test_consumer_group_protocol import hb

env = pytest.fixture(scope="module", name="env")(secured_broker)


def test_a_regex_matches_only_the_topics_the_member_may_describe(env):
    b, adm = env
    p = f"rx{uuid.uuid4().hex[:6]}"
    adm.create_topics([NewTopic(f"{p}-seen", 2, 1), NewTopic(f"{p}-hidden", 3, 1)])
    group = f"g-{p}"
    grant(adm, ResourceType.GROUP, group, ACLOperation.READ)
    grant(adm, ResourceType.TOPIC, f"{p}-seen", ACLOperation.DESCRIBE)
    with WireClient.connect(b.bootstrap_servers) as w:
        _login(w, "bob")
        assert w.request(FindCoordinatorRequest(key=group, key_type=0), 3).error_code == 0
        r = hb(w, group, topics=[], subscribed_topic_regex=f"{p}-.*")
        assert r.error_code == 0, r
        # resolved in a worker thread after this answer (as Kafka): a later heartbeat has the partitions
        deadline = time.monotonic() + 10
        while not (r.assignment and r.assignment.topic_partitions) and time.monotonic() < deadline:
            time.sleep(0.05)
            r = hb(w, group, r.member_id, r.member_epoch, topics=None, owned=[])
            assert r.error_code == 0, r
        assert sum(len(tp.partitions) for tp in r.assignment.topic_partitions) == 2  # not the hidden 3
        d = w.request(ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False),
                      1).groups[0]
        assert d.error_code == 0
        assert {tp.topic_name for m in d.members for tp in m.assignment.topic_partitions} == {f"{p}-seen"}
