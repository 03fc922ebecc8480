"""The storage topic configs over the wire: topics created with kafka-python's admin client with
segment.index.bytes, file.delete.delay.ms (with retention), segment.jitter.ms and preallocate, records produced,
and each config's effect seen in the broker's data directory (unit tests: tests/unit/test_storage_topic_configs.py)."""
from __future__ import annotations

import time

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from helpers import kp_consume_all


class LargestJitter:
    """The broker's segment jitter source (LogLifecycle.segment_rng): every draw the largest value."""

    def randrange(self, n: int) -> int:
        return n - 1


def test_storage_topic_configs_over_the_wire(broker_factory, tmp_path):
    data = tmp_path / "data"
    b = broker_factory(data_dir=data, overrides={"log.retention.check.interval.ms": "100"})
    b.state.replicas.lifecycle.segment_rng = LargestJitter()  # the logs opened from now on draw from it
    bs = b.bootstrap_servers
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        admin.create_topics([
            # 24 bytes: a time index of 2 slots, full at 1 entry; index.interval.bytes 0: an entry from the 2nd batch
            NewTopic("tiny-index", 1, 1, topic_configs={"segment.index.bytes": "24", "index.interval.bytes": "0"}),
            NewTopic("retained", 1, 1, topic_configs={"segment.bytes": "200", "retention.ms": "1",
                                                      "file.delete.delay.ms": "1000"}),
            # jitter drawn as 59999: the segment rolls once more than 1 ms of record time passed, not 60 s
            NewTopic("jittered", 1, 1, topic_configs={"segment.ms": "60000", "segment.jitter.ms": "60000"}),
            NewTopic("steady", 1, 1, topic_configs={"segment.ms": "60000"}),
            NewTopic("preallocated", 1, 1, topic_configs={"preallocate": "true", "segment.bytes": "100000"}),
        ])
    finally:
        admin.close()

    def logs(topic: str) -> list[str]:
        return sorted(p.name for p in (data / f"{topic}-0").glob("*.log"))

    def deleted(topic: str) -> list[str]:
        return sorted(p.name for p in (data / f"{topic}-0").glob("*.deleted"))

    p = KafkaProducer(bootstrap_servers=bs, acks="all", linger_ms=0)
    try:
        now = int(time.time() * 1000)
        for i in range(6):  # one batch a send: each waits for the one before
            p.send("tiny-index", value=b"x%d" % i).get(timeout=10)
        for topic in ("jittered", "steady"):
            p.send(topic, value=b"a", timestamp_ms=now).get(timeout=10)
            p.send(topic, value=b"b", timestamp_ms=now + 1000).get(timeout=10)
        for i in range(5):
            p.send("preallocated", value=b"p%d" % i).get(timeout=10)
    finally:
        p.flush()

    # segment.index.bytes: a segment of 2 batches each, rolled on its full time index
    assert logs("tiny-index") == [f"{o:020d}.log" for o in (0, 2, 4)]
    assert [m[1] for m in kp_consume_all(bs, "tiny-index", 6)] == list(range(6))
    # segment.jitter.ms: 1 s of record time rolls the jittered topic's segment, not the steady one's
    assert logs("jittered") == [f"{o:020d}.log" for o in (0, 1)] and logs("steady") == [f"{0:020d}.log"]
    # preallocate: the active .log is segment.bytes long, its zero tail never read
    assert (data / "preallocated-0" / f"{0:020d}.log").stat().st_size == 100000
    assert [m[4] for m in kp_consume_all(bs, "preallocated", 5)] == [b"p%d" % i for i in range(5)]
    # file.delete.delay.ms: retention (checked every 100 ms) renames the old segments .deleted at once; they
    # go file.delete.delay.ms later, never sooner
    start = time.monotonic()  # nothing of the topic is renamed before this
    try:
        for i in range(6):  # a segment a batch (segment.bytes 200), retention.ms 1: every segment goes, the active
            # one too once past retention.ms (as on Kafka: a new active segment is rolled first)
            p.send("retained", value=b"r" * 60).get(timeout=10)
    finally:
        p.close()
    seen: set[str] = set()
    gone_at: dict[str, float] = {}
    deadline = start + 8
    while time.monotonic() < deadline and (sum(n.endswith(".log.deleted") for n in seen) < 6 or seen - set(gone_at)):
        now_there = set(deleted("retained"))
        t = time.monotonic()
        seen |= now_there
        gone_at.update({n: t for n in seen - now_there if n not in gone_at})
        time.sleep(0.02)
    # (a segment deleted before its roll's index files (or producer snapshot) were written has none to rename)
    assert {n for n in seen if n.endswith(".log.deleted")} == {f"{o:020d}.log.deleted" for o in range(6)}
    assert seen <= {f"{o:020d}{ext}.deleted" for o in range(6) for ext in (".log", ".index", ".timeindex",
                                                                            ".snapshot")}
    assert set(gone_at) == seen and min(gone_at.values()) - start >= 1.0
    assert logs("retained") == [f"{6:020d}.log"]
