"""The pytest plugin's fixtures work as a user would paste them."""


def test_kafka_bootstrap_fixture(kafka_bootstrap):
    from kafka import KafkaConsumer, KafkaProducer
    p = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    p.send("plugin-topic", b"hello").get(timeout=30)
    p.close()
    c = KafkaConsumer("plugin-topic", bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest",
                      consumer_timeout_ms=10_000)
    assert next(iter(c)).value == b"hello"
    c.close()


def test_kafkite_cluster_fixture(kafkite_cluster):
    from kafka.admin import KafkaAdminClient, NewTopic
    a = KafkaAdminClient(bootstrap_servers=kafkite_cluster.bootstrap_servers)
    a.create_topics([NewTopic("fx", 3, 3)])
    a.close()
    lead = kafkite_cluster.leader("fx", 0)
    kafkite_cluster.stop_broker(lead)
    assert kafkite_cluster.leader("fx", 0) not in (lead, -1)
