"""The pytest plugin's fixtures work as a user would paste them."""


def test_kafka_bootstrap_fixture(kafka_bootstrap):
    from kafka import KafkaConsumer, KafkaProducer
    p = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    p.send("plugin-topic", b"hello").get(timeout=30)
    p.close()
    c = KafkaConsumer("plugin-topic", bootstrap_servers=kafka_bootstrap, auto_offset_reset="earliest",
                      consumer_timeout_ms=60_000)
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


def test_kafkite_broker_process_fixture_serves_confluent_group_consumers(kafkite_broker_process):
    """The case the child-process broker exists for: a confluent-kafka group consumer that subscribes,
    reads, commits and closes (its rebalance callback runs with the GIL held)."""
    import os
    from confluent_kafka import Consumer, Producer
    bs = kafkite_broker_process.bootstrap_servers
    assert kafkite_broker_process.pid != os.getpid()
    p = Producer({"bootstrap.servers": bs})
    for i in range(20):
        p.produce("proc-topic", key=b"k%d" % i, value=b"v%d" % i)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bs, "group.id": "proc-g", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe(["proc-topic"])
    got = []
    import time
    deadline = time.monotonic() + 60
    while len(got) < 20 and time.monotonic() < deadline:
        got += [m.value() for m in c.consume(20, timeout=0.5) if not m.error()]
    c.commit(asynchronous=False)
    c.close()
    assert sorted(got) == sorted(b"v%d" % i for i in range(20))
