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
