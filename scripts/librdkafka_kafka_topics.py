"""Kafka's bin/kafka-topics.sh as librdkafka's tests call it (test_kafka_topics in tests/test.c):
--create / --alter --partitions / --delete through confluent-kafka's AdminClient, for a machine without a
Kafka distribution. Used by scripts/librdkafka_tests.sh only."""
import argparse
import sys

from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

p = argparse.ArgumentParser()
p.add_argument("--bootstrap-server", required=True)
p.add_argument("--topic", required=True)
p.add_argument("--partitions", type=int)
p.add_argument("--replication-factor", type=int, default=-1)
p.add_argument("--config", action="append", default=[])
g = p.add_mutually_exclusive_group(required=True)
g.add_argument("--create", action="store_true")
g.add_argument("--alter", action="store_true")
g.add_argument("--delete", action="store_true")
a = p.parse_args()
admin = AdminClient({"bootstrap.servers": a.bootstrap_server})
if a.create:
    fs = admin.create_topics([NewTopic(a.topic, a.partitions or -1, a.replication_factor,
                                       config=dict(c.split("=", 1) for c in a.config))])
elif a.alter:
    fs = admin.create_partitions([NewPartitions(a.topic, a.partitions)])
else:
    fs = admin.delete_topics([a.topic])
for f in fs.values():
    try:
        f.result(30)
    except Exception as e:  # noqa: BLE001 -- kafka-topics.sh prints the error and exits 1
        print(f"Error: {e}", file=sys.stderr)
        sys.exit(1)
