"""Replication acceptance: no acknowledged record is lost while brokers die, pause and come back.

Three `kafkite serve` processes on ZooKeeper; a topic of 3 partitions with replication factor 3 and
min.insync.replicas=2; `__consumer_offsets` replicated 3 times. The Java client's idempotent acks=all producer
(`produce-log`, every record's outcome on a line) and a confluent-kafka consumer group (committing as it goes) run
while, one after another:

1. the leader of partition 0 is killed with -9, then restarted;
2. the controller's broker is killed with -9, then restarted;
3. a follower (neither leader of partition 0 nor controller) is stopped (SIGSTOP) past replica.lag.time.max.ms,
   leaves the ISR, resumes and rejoins it.

At the end: every record was acknowledged (the producer retries: none may fail); every acknowledged record is in
the topic exactly once, at the offset it was acknowledged with; the group's committed offsets never went backwards;
every replica's segment files hold the same batches at the same offsets, byte for byte (kafkite.testing.replicas).
"""
from __future__ import annotations

import collections
import json
import subprocess
import threading

import pytest

from clients.drivers import java_argv, need, produce_log_outcome
from kafkite.testing.process_cluster import ProcessCluster
from kafkite.testing.replicas import compare_replicas, partition_dirs

pytestmark = pytest.mark.timeout(420)

SESSION_MS = 4000
LAG_MS = 1500
TOPIC, PARTITIONS = "acceptance", 3
RECORDS, RATE = 6000, 250  # about 24 s of producing


def _state(c: ProcessCluster, p: int) -> dict:
    return c.zk_get(f"/brokers/topics/{TOPIC}/partitions/{p}/state") or {}


def _full_isr(c: ProcessCluster) -> bool:
    return all(sorted(_state(c, p).get("isr", [])) == [1, 2, 3] for p in range(PARTITIONS))


class GroupConsumer(threading.Thread):
    """A confluent-kafka group member consuming the topic and committing synchronously after each poll."""

    def __init__(self, bootstrap: str):
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.stop = threading.Event()
        self.commits: dict[int, list[int]] = collections.defaultdict(list)  # partition -> offsets committed, in order
        self.consumed = 0
        self.errors: list[str] = []

    def run(self) -> None:
        from confluent_kafka import Consumer, KafkaException
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "acceptance-group",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000})
        try:
            c.subscribe([TOPIC])
            while not self.stop.is_set():
                msgs = c.consume(200, timeout=0.3)
                good = [m for m in msgs if m.error() is None]
                self.consumed += len(good)
                if not good:
                    continue
                try:
                    for tp in c.commit(asynchronous=False) or []:
                        if tp.error is None and tp.offset >= 0:
                            self.commits[tp.partition].append(tp.offset)
                except KafkaException as exc:  # a coordinator moving: the next commit covers it
                    self.errors.append(str(exc))
        finally:
            c.close()


def _agree(c: ProcessCluster, p: int):
    diff = compare_replicas(partition_dirs(c, TOPIC, p))
    return diff if diff.same else None


def _read_all(c: ProcessCluster) -> dict[bytes, list[tuple[int, int]]]:
    """value -> every (partition, offset) it is at, reading each partition from its start to its end."""
    from kafka import KafkaConsumer, TopicPartition
    cons = KafkaConsumer(bootstrap_servers=c.bootstrap_servers, enable_auto_commit=False, consumer_timeout_ms=30000)
    out: dict[bytes, list[tuple[int, int]]] = collections.defaultdict(list)
    try:
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        cons.assign(tps)
        cons.seek_to_beginning(*tps)
        ends = cons.end_offsets(tps)
        remaining = sum(ends.values())
        for m in cons:
            out[m.value].append((m.partition, m.offset))
            remaining -= 1
            if remaining <= 0:
                break
    finally:
        cons.close()
    return out


def test_no_acknowledged_record_lost_through_kills_and_a_pause(kafkite_zookeeper, tmp_path):
    need("java")
    from kafka.admin import KafkaAdminClient, NewTopic
    c = ProcessCluster(3, zookeeper_connect=kafkite_zookeeper.connect_string, session_timeout_ms=SESSION_MS,
                       chroot="/kafkite-acceptance", overrides={
                           "replica.lag.time.max.ms": str(LAG_MS), "replica.fetch.backoff.ms": "200",
                           "offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "5"})
    producer = None
    group = None
    with c:
        c.wait_until(lambda: c.live_brokers == [1, 2, 3] and c.controller_id > 0, 30, "three brokers, a controller")
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap_servers, request_timeout_ms=20000)
        try:
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, topic_configs={"min.insync.replicas": "2"})])
        finally:
            admin.close()
        c.wait_until(lambda: _full_isr(c) and all(_state(c, p).get("leader", -1) > 0 for p in range(PARTITIONS)),
                     30, "every partition led, full ISR")
        out = (tmp_path / "producer.jsonl").open("w")
        try:
            producer = subprocess.Popen(java_argv("produce-log", c.bootstrap_servers, TOPIC, str(RECORDS),
                                                  "--rate", str(RATE), "--request-timeout-ms", "8000"),
                                        stdout=out, stderr=subprocess.PIPE, text=True)
            group = GroupConsumer(c.bootstrap_servers)
            group.start()
            c.wait_until(lambda: group.consumed > 200, 60, "the group consuming")

            # 1. the leader of partition 0, killed and restarted
            leader = _state(c, 0)["leader"]
            c.kill_broker(leader)
            c.wait_until(lambda: _state(c, 0).get("leader") not in (leader, -1, None), 20,
                         f"a new leader of partition 0 after {leader} was killed")
            c.start_broker(leader)
            c.wait_until(lambda: _full_isr(c), 60, f"broker {leader} back in every ISR")

            # 2. the controller's broker, killed and restarted
            ctl = c.controller_id
            c.kill_broker(ctl)
            c.wait_until(lambda: c.controller_id not in (ctl, -1), 20, f"a new controller after {ctl}")
            c.start_broker(ctl)
            c.wait_until(lambda: _full_isr(c), 60, f"broker {ctl} back in every ISR")

            # 3. a follower of partition 0 stopped past replica.lag.time.max.ms, then resumed
            lead0, ctl = _state(c, 0)["leader"], c.controller_id
            follower = next(b for b in (1, 2, 3) if b not in (lead0, ctl))
            c.pause_broker(follower)
            try:
                c.wait_until(lambda: follower not in _state(c, 0).get("isr", [follower]), SESSION_MS / 1000 - 0.5,
                             f"broker {follower} out of partition 0's ISR while stopped")
            finally:
                c.resume_broker(follower)
            c.wait_until(lambda: _full_isr(c), 60, f"broker {follower} back in every ISR")

            producer.wait(timeout=180)
        finally:
            out.close()
            if producer is not None and producer.poll() is None:
                producer.kill()
        lines = [json.loads(x) for x in (tmp_path / "producer.jsonl").read_text().splitlines() if x.startswith("{")]
        acked, failed, summary = produce_log_outcome(lines)
        assert producer.returncode == 0, producer.stderr.read()[-2000:]
        assert len(acked) + len(failed) == RECORDS, summary
        # the producer retries every retriable error (retries=MAX, delivery.timeout.ms 120 s, far above any
        # leader election here): through kills and a pause, no record may fail
        assert not failed, (f"{len(failed)} of {RECORDS} records failed although the producer retries", summary,
                            list(failed.items())[:3])

        found = _read_all(c)
        for value, (p, o) in acked.items():
            assert found.get(value.encode()) == [(p, o)], (value, p, o, found.get(value.encode()))

        c.wait_until(lambda: group.consumed >= len(acked), 60, "the group read every record")
        group.stop.set()
        group.join(30)
        for p, offsets in group.commits.items():
            assert offsets == sorted(offsets), f"partition {p}: committed offsets went backwards: {offsets}"
        assert group.commits, "the group committed nothing"

        c.wait_until(lambda: _full_isr(c), 30, "full ISR at the end")
        for p in range(PARTITIONS):
            diff = c.wait_until(lambda: _agree(c, p), 30, f"partition {p}: replicas byte-identical")
            assert min(diff.log_end_offsets.values()) > 0
