"""Rack-aware assignment of a KIP-848 consumer group with real clients: three confluent-kafka consumers
(group.protocol=consumer) with client.rack a, b and c on a 3-broker cluster whose brokers have broker.rack a, b
and c. librdkafka sends its client.rack as the heartbeat's RackId; each partition's racks are those of its
replicas' brokers; the uniform assignor gives each consumer the partitions of its rack. (The consumers run in a
child process: confluent-kafka can wait on the coordinator while holding the GIL, see testing/process.py.)"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from helpers import wait_until
from kafkite.testing.cluster import KafkiteCluster
from kafkite.testing.wire_client import WireClient
from kafkite.wire.consumer_group_api import ConsumerGroupDescribeRequest

confluent_kafka = pytest.importorskip("confluent_kafka")
if confluent_kafka.libversion()[1] < 0x020a0000:
    pytest.skip("librdkafka < 2.10 has no group.protocol=consumer", allow_module_level=True)

RACKS = {1: "a", 2: "b", 3: "c"}
FAST = {"group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "100"}

CONSUMERS = r"""
import json, sys, threading
from confluent_kafka import Consumer
bs, topic, group = sys.argv[1:4]
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
cs = {r: Consumer({"bootstrap.servers": bs, "group.id": group, "group.protocol": "consumer", "client.rack": r})
      for r in "abc"}
for c in cs.values():
    c.subscribe([topic])
seen = {}
while not stop.is_set():
    for r, c in cs.items():
        c.poll(0.05)
        now = sorted(tp.partition for tp in c.assignment())
        if seen.get(r) != now:
            seen[r] = now
            print(json.dumps({"rack": r, "assignment": now}), flush=True)
for c in cs.values():
    c.close()
print(json.dumps({"closed": True}), flush=True)
"""


def test_consumers_get_the_partitions_whose_replicas_are_on_their_rack():
    with KafkiteCluster(brokers=3, racks=RACKS, overrides=FAST) as cluster:
        # partitions 0-1 on broker 1 (rack a), 2-3 on broker 2 (rack b), 4-5 on broker 3 (rack c): the uniform
        # assignor without racks gives {0, 3}, {1, 4}, {2, 5}, no consumer all of its rack's
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        try:
            admin.create_topics([NewTopic("near", replica_assignments={p: [p // 2 + 1] for p in range(6)})])
        finally:
            admin.close()
        wait_until(lambda: all(cluster.leader("near", p) > 0 for p in range(6)), timeout=30, what="leaders")
        proc = subprocess.Popen([sys.executable, "-c", CONSUMERS, cluster.bootstrap_servers, "near", "racks"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        latest: dict[str, list[int]] = {}
        lines: list[dict] = []

        def read() -> None:
            for line in proc.stdout:
                obj = json.loads(line)
                lines.append(obj)
                if "rack" in obj:
                    latest[obj["rack"]] = obj["assignment"]
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        want = {"a": [0, 1], "b": [2, 3], "c": [4, 5]}
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and dict(latest) != want:
                time.sleep(0.1)
            assert dict(latest) == want, f"assignments {latest}; history {lines}"
            # the coordinator's view: each member's RackId is its client.rack, its assignment its rack's partitions
            with WireClient.connect(cluster.bootstrap_of(cluster.coordinator("racks"))) as w:
                d = w.request(ConsumerGroupDescribeRequest(group_ids=["racks"], include_authorized_operations=False),
                              1).groups[0]
            assert d.error_code == 0
            assert sorted((m.rack_id, sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions))
                          for m in d.members) == sorted(want.items())
        finally:
            proc.stdin.close()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
            reader.join(5)
