"""The Java driver's `produce-log` (an idempotent acks=all producer reporting every record's outcome),
against one `kafkite serve` process: every acknowledged value is in the log once, at the offset it was
acknowledged with -- read back with kafka-python, and from the broker's segment files with
kafkite.testing.replicas once it stopped."""
from __future__ import annotations

import collections

import pytest

from clients.drivers import produce_log_outcome, run_java, summary
from kafkite.storage.batch import decode_batch
from kafkite.testing import BrokerProcess
from kafkite.testing.replicas import read_replica

pytestmark = pytest.mark.timeout(180)


def _create(bs: str, topic: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic
    a = KafkaAdminClient(bootstrap_servers=bs)
    try:
        a.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs or {})])
    finally:
        a.close()


def _read_back(bs: str, topic: str, partitions: int, expected: int) -> dict[tuple[int, int], tuple[bytes, bytes]]:
    """(partition, offset) -> (key, value) of every record, with kafka-python (assigned, from the start)."""
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, consumer_timeout_ms=30_000)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        out = {}
        for r in c:
            assert (r.partition, r.offset) not in out
            out[(r.partition, r.offset)] = (r.key, r.value)
            if len(out) >= expected:
                break
        return out
    finally:
        c.close()


def test_produce_log_acks_each_value_once_at_its_offset(tmp_path):
    n, topic, parts = 3000, "plog", 3
    data = tmp_path / "data"
    with BrokerProcess(data_dir=data) as b:
        bs = b.bootstrap_servers
        _create(bs, topic, parts)
        lines = run_java("produce-log", bs, topic, n, "--linger-ms", "2")
        acked, failed, end = produce_log_outcome(lines)   # asserts each value is reported once
        assert end == {**end, "sent": n, "acked": n, "failed": 0, "first_error": None}
        assert len([x for x in lines if "ack" in x]) == n and failed == {}
        assert sorted(acked) == sorted(f"v-{i}" for i in range(n))
        assert {p for p, _o in acked.values()} == set(range(parts))                 # keys spread them
        at = {po: v for v, po in acked.items()}
        assert len(at) == n                                                          # no offset twice

        got = _read_back(bs, topic, parts, n)
        assert len(got) == n
        for (p, o), v in at.items():
            key, value = got[(p, o)]
            assert value == v.encode(), (p, o)
            assert key == b"k-%d" % (int(v[2:]) % 16)
        # a key always lands on the same partition
        by_key = collections.defaultdict(set)
        for (p, _o), (key, _v) in got.items():
            by_key[key].add(p)
        assert len(by_key) == 16 and all(len(ps) == 1 for ps in by_key.values())

    # the broker stopped: the same records at the same offsets in its segment files
    on_disk = {}
    for p in range(parts):
        rep = read_replica(data / f"{topic}-{p}")
        assert rep.torn is None
        for batch in rep.batches:
            for r in decode_batch(batch.data):
                on_disk[(p, r.offset)] = r.value.decode()
    assert on_disk == at


def test_produce_log_rate_and_failures(tmp_path):
    """--rate paces the sends; a record the broker keeps refusing (NOT_ENOUGH_REPLICAS: min.insync.replicas
    2 on one broker, retriable) fails once delivery.timeout.ms passed, as an ack:false line."""
    with BrokerProcess(data_dir=tmp_path / "data") as b:
        bs = b.bootstrap_servers
        _create(bs, "paced", 1)
        lines = run_java("produce-log", bs, "paced", 200, "--rate", "400")
        end = summary(lines)
        assert (end["acked"], end["failed"]) == (200, 0)
        assert end["elapsed_ms"] >= 199 / 400 * 1000                   # record 199 is not sent before 0.4975 s
        assert [x["o"] for x in lines if x.get("ack")] == list(range(200))   # one partition: in order

        _create(bs, "strict", 1, {"min.insync.replicas": "2"})
        lines = run_java("produce-log", bs, "strict", 3, "--delivery-timeout-ms", "2000",
                         "--request-timeout-ms", "1000")
        acked, failed, end = produce_log_outcome(lines)
        assert (end["sent"], end["acked"], end["failed"]) == (3, 0, 3) and acked == {}
        assert sorted(failed) == ["v-0", "v-1", "v-2"]
        assert all(e.startswith("TimeoutException") for e in failed.values()), failed
        assert end["first_error"] == next(x["error"] for x in lines if x.get("ack") is False)
