"""When a consumer group's regexes are resolved again, and where (regex_refresh.py, Kafka 4's
maybeUpdateRegularExpressions): at a heartbeat after the topic names changed, when a regex is new, or when the
last resolution is older than group.consumer.regex.refresh.interval.ms; as a job for a worker thread (one at a
time per group, not within 10 s of the last; or inside the heartbeat below INLINE_MAX, which some tests set), whose
result is written as records that bump the group epoch. Without sockets; cases and data are our own."""
from __future__ import annotations

import uuid

import pytest

from kafkite.coordinator import consumer_group_records as CR
from kafkite.coordinator import regex_refresh
from kafkite.coordinator.consumer_group_records import TopicMetadata
from kafkite.coordinator.result import start_write

from test_consumer_group_model import Runtime, Topics

ORDERS, OTHERS, PAYMENTS = uuid.UUID(int=0xA1), uuid.UUID(int=0xC3), uuid.UUID(int=0xB2)
REGEX = 16


@pytest.fixture
def inline_regexes(monkeypatch):
    """Resolve regexes inside the heartbeat (regex_refresh.INLINE_MAX; Kafka and Kafkite by default resolve in a
    worker thread): these tests look at the epochs and records that follow a resolution."""
    monkeypatch.setattr(regex_refresh, "INLINE_MAX", 1_000_000)


def regex_records(rt, since=0):
    return [(k, v) for k, v in rt.logs[0][since:] if int.from_bytes(k[:2], "big") == REGEX]


def ids(assignment):
    return {t: sorted(ps) for t, ps in (assignment or {}).items()}


def complete(rt, job, now):
    shard, result = rt.coordinator.complete_regex_refresh(job, job.run(), rt.topics, now)
    if result is not None:
        start_write(result, shard.replay, rt.logs[0].extend)
    return result


def test_small_resolutions_happen_in_the_heartbeat_when_the_topic_names_change(inline_regexes):
    rt = Runtime()
    rt.topics = Topics(TopicMetadata(ORDERS, "o-1", 2))
    a = rt.hb("a", 0, topics=[], subscribed_topic_regex="o-.*", now=1000)
    assert (a.member_epoch, ids(a.assignment)) == (1, {ORDERS: [0, 1]})
    n = len(rt.logs[0])
    # a metadata update that changes no name (the version stays): nothing resolved, nothing written
    a = rt.hb("a", 1, topics=None, owned=[0, 1], now=2000)
    assert len(rt.logs[0]) == n
    # a topic created: resolved again at once (no 10 s wait for a small one), the new epoch in this answer
    rt.topics.add(TopicMetadata(OTHERS, "o-2", 1))
    a = rt.hb("a", 1, topics=None, owned=[0, 1], now=3000)
    assert (a.member_epoch, ids(a.assignment)) == (2, {ORDERS: [0, 1], OTHERS: [0]})
    assert rt.group.resolved_regexes["o-.*"].topics == {"o-1", "o-2"}
    assert not rt.coordinator.take_regex_jobs()
    # the topic deleted: its partitions leave the subscription (and the regex's topics)
    rt.topics.delete("o-1")
    a = rt.hb("a", 2, topics=None, owned=None, now=4000)
    assert rt.group.resolved_regexes["o-.*"].topics == {"o-2"} and set(rt.group.target["a"]) == {OTHERS}
    assert rt.group.group_epoch == 3


def test_the_periodic_refresh_writes_the_resolution_again_without_a_new_epoch_when_nothing_changed(inline_regexes):
    rt = Runtime()
    rt.topics = Topics(TopicMetadata(ORDERS, "o-1", 2))
    rt.hb("a", 0, topics=[], subscribed_topic_regex="o-.*", now=1000)
    rt.hb("a", 1, topics=None, owned=[0, 1], now=1000 + 600_000 - 1)  # within the interval: nothing
    n, epoch = len(rt.logs[0]), rt.group.group_epoch
    rt.hb("a", 1, topics=None, owned=[0, 1], now=1000 + 600_000)
    (k, v), = regex_records(rt, n)
    assert CR.decode(k, v)[2].timestamp == 1000 + 600_000
    assert rt.group.group_epoch == epoch and rt.group.resolved_regexes["o-.*"].timestamp_ms == 601_000


def test_the_interval_is_group_consumer_regex_refresh_interval_ms():
    from kafkite.config import BrokerConfig, ConfigError
    from kafkite.coordinator.coordinator import GroupCoordinator
    from kafkite.server.group_coordinator_service import _CONFIG_KEYS
    for static, want in (({}, 600_000), ({"group.consumer.regex.refresh.interval.ms": "10000"}, 10_000)):
        cfg = BrokerConfig(static=static)
        assert GroupCoordinator({k: cfg.get(k) for k in _CONFIG_KEYS}).cfg.consumer_regex_refresh_interval_ms == want
    with pytest.raises(ConfigError) as exc:
        BrokerConfig(static={"group.consumer.regex.refresh.interval.ms": "9999"})
    assert str(exc.value) == ("Invalid value 9999 for configuration group.consumer.regex.refresh.interval.ms: "
                              "Value must be at least 10000")


@pytest.fixture
def big(monkeypatch):
    """Every resolution counts as big: it goes to a worker thread."""
    monkeypatch.setattr(regex_refresh, "INLINE_MAX", 0)


def test_a_big_resolution_is_a_job_whose_result_bumps_the_epoch(big):
    rt = Runtime()
    rt.topics = Topics(TopicMetadata(ORDERS, "o-1", 2), TopicMetadata(PAYMENTS, "pay", 1))
    rt.hb("b", 0, topics=["pay"], now=1000)
    a = rt.hb("a", 0, topics=[], subscribed_topic_regex="o-.*", now=1000)
    # the heartbeat does not wait: the regex matches nothing yet
    assert (a.error, a.member_epoch, ids(a.assignment)) == (0, 2, {})
    job, = rt.coordinator.take_regex_jobs()
    assert (job.group_id, job.regexes, job.version) == ("g", {"o-.*"}, 1) and set(job.names) == {"o-1", "pay"}
    rt.hb("a", 2, topics=None, owned=[], now=1500)
    assert not rt.coordinator.take_regex_jobs()  # one at a time per group
    epoch = rt.group.group_epoch
    n = len(rt.logs[0])
    complete(rt, job, 2000)
    versions = [int.from_bytes(k[:2], "big") for k, _ in rt.logs[0][n:]]
    assert versions == [REGEX, CR.PARTITION_METADATA, CR.GROUP_METADATA] and rt.group.group_epoch == epoch + 1
    assert rt.group.resolved_regexes["o-.*"].topics == {"o-1"} and rt.group.regex_job is None
    a = rt.hb("a", 2, topics=None, owned=[], now=2500)
    assert (a.member_epoch, ids(a.assignment)) == (epoch + 1, {ORDERS: [0, 1]})
    assert "a" in Runtime(logs=rt.logs).group.members  # the records replay


def test_background_resolutions_wait_ten_seconds_after_the_last(big):
    rt = Runtime()
    rt.topics = Topics(TopicMetadata(ORDERS, "o-1", 2))
    rt.hb("a", 0, topics=[], subscribed_topic_regex="o-.*", now=1000)
    complete(rt, rt.coordinator.take_regex_jobs()[0], 1100)  # resolved as of 1000, when it started
    rt.topics.add(TopicMetadata(OTHERS, "o-2", 1))
    rt.hb("a", 1, topics=None, owned=[], now=11_000)
    assert not rt.coordinator.take_regex_jobs()
    rt.hb("a", 1, topics=None, owned=[], now=11_001)
    job, = rt.coordinator.take_regex_jobs()
    complete(rt, job, 11_002)
    assert rt.group.resolved_regexes["o-.*"].topics == {"o-1", "o-2"}


def test_a_job_whose_group_went_writes_nothing(big):
    rt = Runtime()
    rt.topics = Topics(TopicMetadata(ORDERS, "o-1", 2))
    rt.hb("a", 0, topics=[], subscribed_topic_regex="o-.*", now=1000)
    job, = rt.coordinator.take_regex_jobs()
    r = rt.hb("a", -1, topics=None, owned=None, now=1100)  # the last member leaves
    assert r.error == 0
    n = len(rt.logs[0])
    complete(rt, job, 1200)
    assert len(rt.logs[0]) == n


def test_a_refresh_that_gives_a_regex_a_topic_another_member_names_bumps_the_epoch(inline_regexes):
    """The group's subscribed topics stay the same (b names `o-2`) but a's subscription grows -- here when a
    member may DESCRIBE `o-2` at the periodic refresh (KAFKA-18813's filter): a new epoch, a's share of it."""
    rt = Runtime()
    rt.topics = Topics(TopicMetadata(ORDERS, "o-1", 1), TopicMetadata(OTHERS, "o-2", 4))
    rt.hb("b", 0, topics=["o-2"], now=1000)
    a = rt.hb("a", 0, topics=[], subscribed_topic_regex="o-.*", now=1000,
              describable=lambda names: {n for n in names if n != "o-2"})
    assert rt.group.resolved_regexes["o-.*"].topics == {"o-1"} and set(rt.group.target["a"]) == {ORDERS}
    epoch = rt.group.group_epoch
    rt.hb("a", a.member_epoch, topics=None, owned=None, now=1000 + 600_000, describable=lambda names: set(names))
    assert rt.group.resolved_regexes["o-.*"].topics == {"o-1", "o-2"}
    assert rt.group.group_epoch == epoch + 1 and set(rt.group.target["a"]) == {ORDERS, OTHERS}
