"""The Python admin clients against Kafkite: create, list, describe with configs, delete, Kafka's errors."""
from __future__ import annotations

import pytest


def test_kafka_python_admin(broker):
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
    from kafka.errors import InvalidTopicError, TopicAlreadyExistsError, UnknownTopicOrPartitionError
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        a.create_topics([NewTopic("kpa", 3, 1, topic_configs={"cleanup.policy": "compact"})])
        assert "kpa" in a.list_topics()
        d = a.describe_topics(["kpa"])[0]
        assert d["error_code"] == 0 and len(d["partitions"]) == 3
        cfg = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kpa")])
        assert cfg["topic"]["kpa"]["cleanup.policy"]["value"] == "compact"
        with pytest.raises(TopicAlreadyExistsError):
            a.create_topics([NewTopic("kpa", 3, 1)])
        with pytest.raises(InvalidTopicError):
            a.create_topics([NewTopic("no/slash", 1, 1)])
        a.delete_topics(["kpa"])
        assert "kpa" not in a.list_topics()
        with pytest.raises(UnknownTopicOrPartitionError):
            a.delete_topics(["kpa"])
    finally:
        a.close()


def test_confluent_admin(broker):
    from confluent_kafka import KafkaError, KafkaException, TopicCollection
    from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic
    a = AdminClient({"bootstrap.servers": broker.bootstrap_servers})

    def err_of(futures):
        try:
            for f in futures.values():
                f.result(30)
        except KafkaException as exc:
            return exc.args[0].code()
        return None
    assert err_of(a.create_topics([NewTopic("cka", 3, 1, config={"retention.ms": "1000"})])) is None
    assert "cka" in a.list_topics(timeout=10).topics
    res = a.describe_configs([ConfigResource("topic", "cka")])
    entries = next(iter(res.values())).result(30)
    assert entries["retention.ms"].value == "1000" and entries["retention.ms"].source == 1
    desc = a.describe_topics(TopicCollection(["cka"]))["cka"].result(30)
    assert len(desc.partitions) == 3 and not desc.is_internal
    assert err_of(a.create_topics([NewTopic("cka", 3, 1)])) == KafkaError.TOPIC_ALREADY_EXISTS
    assert err_of(a.create_topics([NewTopic("bad name", 1, 1)])) == KafkaError.TOPIC_EXCEPTION
    assert err_of(a.create_partitions([NewPartitions("cka", 5)])) is None
    assert err_of(a.delete_topics(["cka"])) is None
    assert err_of(a.delete_topics(["cka"])) == KafkaError.UNKNOWN_TOPIC_OR_PART
    with pytest.raises(KafkaException):
        a.describe_topics(TopicCollection(["missing"]))["missing"].result(30)
