"""Restarting on the same data dir keeps topics, topic ids, partitions and configs."""
from __future__ import annotations

from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic


def test_restart_keeps_topics_ids_configs(broker_factory, tmp_path):
    b = broker_factory(data_dir=tmp_path / "data")
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
    admin.create_topics([NewTopic("keep", 4, 1, topic_configs={"retention.ms": "4242"})])
    before = {t["name"]: t["topic_id"] for t in admin.describe_topics(["keep"])}
    cluster_id = b.state.metadata.cluster_id
    admin.close()
    b.stop()
    assert (tmp_path / "data" / "meta.properties").exists()
    # Kafka's partition.metadata: the topic id in Kafka's base64 form, in every partition directory
    import base64
    import uuid
    for p in range(4):
        text = (tmp_path / "data" / f"keep-{p}" / "partition.metadata").read_text()
        lines = dict(line.split(": ", 1) for line in text.splitlines())
        assert lines["version"] == "0"
        raw = base64.urlsafe_b64decode(lines["topic_id"] + "==")
        assert str(uuid.UUID(bytes=raw)) == str(before["keep"])

    b2 = broker_factory(data_dir=tmp_path / "data")
    admin = KafkaAdminClient(bootstrap_servers=b2.bootstrap_servers)
    try:
        desc = admin.describe_topics(["keep"])[0]
        assert desc["topic_id"] == before["keep"]
        assert len(desc["partitions"]) == 4
        cfg = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "keep")])
        assert cfg["topic"]["keep"]["retention.ms"]["value"] == "4242"
        assert b2.state.metadata.cluster_id == cluster_id
    finally:
        admin.close()
