"""Consumer groups with real clients: split, leave, crash, commits, two groups, restart."""
from __future__ import annotations

import pytest

from clients.group_scenario import python_consumer, run_group_scenario, produce_batch, wait_for
from helpers import kp_consume_all  # noqa: F401


def create(bs, name, partitions=6):
    from kafka.admin import KafkaAdminClient, NewTopic
    a = KafkaAdminClient(bootstrap_servers=bs)
    a.create_topics([NewTopic(name, partitions, 1)])
    a.close()


@pytest.fixture
def group_broker(broker_factory):
    # a short minimum session timeout so a crashed member is noticed in seconds
    return broker_factory(overrides={"group.min.session.timeout.ms": "1000"})


@pytest.mark.parametrize("client,strategy", [
    ("kafka-python", "range"), ("kafka-python", "roundrobin"), ("aiokafka", None),
    ("confluent", "range"), ("confluent", "cooperative-sticky"),
])
def test_group_split_leave_crash(group_broker, client, strategy):
    bs = group_broker.bootstrap_servers
    topic = f"grp-{client}-{strategy}"
    create(bs, topic)
    run_group_scenario(bs, topic, f"g-{client}-{strategy}",
                       lambda: python_consumer(client, bs, topic, f"g-{client}-{strategy}", strategy))
