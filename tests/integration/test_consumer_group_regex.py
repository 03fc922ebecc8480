"""KIP-848 regular-expression subscriptions over a real socket (ConsumerGroupHeartbeat v1's
SubscribedTopicRegex): resolved against the cluster's topics (internal ones left out, the whole name
matching), re-resolved at the next heartbeat once a topic is created or deleted, the member's subscription
the union of its names and its regex's topics, Kafka's INVALID_REGULAR_EXPRESSION, and the regex shown by
ConsumerGroupDescribe."""
from __future__ import annotations

import pytest
from kafka.protocol.admin import DeleteTopicsRequest

from kafkite.coordinator.regex import INVALID_REGULAR_EXPRESSION

from test_consumer_group_protocol import describe, hb
from test_data_versions import create
from test_group_versions import find


@pytest.fixture(autouse=True)
def inline_regexes(monkeypatch):
    """These tests look at what a resolution gives, answer by answer: resolved inside the heartbeat
    (regex_refresh.INLINE_MAX; by default, as Kafka, a worker thread resolves and the next heartbeat sees it,
    which the last test and test_consumer_group_regex_clients.py check)."""
    from kafkite.coordinator import regex_refresh
    monkeypatch.setattr(regex_refresh, "INLINE_MAX", 1_000_000)


def names(w, r) -> dict[str, set[int]]:
    d = describe(w, "gr")
    return {tp.topic_name: set(tp.partitions) for m in d.members for tp in m.target_assignment.topic_partitions}


def test_a_regex_picks_up_topics_created_and_drops_deleted_ones(wire):
    create(wire, "rx-a", 2)
    create(wire, "other", 1)
    find(wire, "gr")
    a = hb(wire, "gr", topics=[], subscribed_topic_regex="rx-.*")
    assert a.error_code == 0 and a.member_epoch == 1
    assert names(wire, "gr") == {"rx-a": {0, 1}}
    d = describe(wire, "gr")
    assert d.members[0].subscribed_topic_regex == "rx-.*" and d.members[0].subscribed_topic_names == []

    create(wire, "rx-b", 3)
    create(wire, "xrx-c", 1)  # the whole name must match
    r = hb(wire, "gr", a.member_id, 1, topics=None, owned=None)
    assert r.error_code == 0 and r.member_epoch == 2
    assert names(wire, "gr") == {"rx-a": {0, 1}, "rx-b": {0, 1, 2}}
    assert sum(len(tp.partitions) for tp in r.assignment.topic_partitions) == 5

    assert wire.request(DeleteTopicsRequest(topic_names=["rx-a"], timeout_ms=5000), 4).responses[0].error_code == 0
    r = hb(wire, "gr", a.member_id, 2, topics=None, owned=None)
    assert r.error_code == 0 and names(wire, "gr") == {"rx-b": {0, 1, 2}}
    kept = [(tp.topic_id, list(tp.partitions)) for tp in r.assignment.topic_partitions]
    assert sum(len(ps) for _, ps in kept) == 3  # rx-a's partitions are to be revoked
    r = hb(wire, "gr", a.member_id, 2, topics=None, owned=kept)
    assert r.error_code == 0 and r.member_epoch == 3 and describe(wire, "gr").group_state == "Stable"


def test_names_and_regex_are_one_subscription_and_internal_topics_never_match(wire):
    create(wire, "rx-a", 2)
    create(wire, "plain", 1)
    find(wire, "gr")
    a = hb(wire, "gr", topics=["plain"], subscribed_topic_regex=".*")
    assert a.error_code == 0
    assert names(wire, "gr") == {"rx-a": {0, 1}, "plain": {0}}  # not __consumer_offsets


def test_a_second_member_with_the_same_regex_shares_its_topics(wire):
    create(wire, "rx-a", 4)
    find(wire, "gr")
    a = hb(wire, "gr", topics=[], subscribed_topic_regex="rx-.*")
    b = hb(wire, "gr", topics=[], subscribed_topic_regex="rx-.*")
    assert a.error_code == b.error_code == 0 and b.member_epoch == 2
    d = describe(wire, "gr")
    assert sorted(len(tp.partitions) for m in d.members for tp in m.target_assignment.topic_partitions) == [2, 2]


def test_an_invalid_regex_answers_invalid_regular_expression_with_kafkas_message(wire):
    find(wire, "gr")
    r = hb(wire, "gr", topics=[], subscribed_topic_regex="rx-(")
    assert (r.error_code, r.error_message) == (
        INVALID_REGULAR_EXPRESSION, "SubscribedTopicRegex `rx-(` is not a valid regular expression: "
                                    "missing closing ).")
    assert describe(wire, "gr").error_code != 0  # no group was made


def test_a_big_resolution_runs_in_a_worker_thread_and_the_member_gets_its_partitions_at_a_later_heartbeat(
        wire, monkeypatch):
    """Above INLINE_MAX (topic names x regexes; here 0) the heartbeat does not resolve: a worker thread does, the
    result is written as records with a new group epoch, and the member's next heartbeat gets the partitions (as
    Kafka, whose executor resolves while the group goes on)."""
    import time

    from kafkite.coordinator import regex_refresh
    monkeypatch.setattr(regex_refresh, "INLINE_MAX", 0)
    create(wire, "rx-a", 2)
    find(wire, "gr")
    a = hb(wire, "gr", topics=[], subscribed_topic_regex="rx-.*")
    assert (a.error_code, a.member_epoch, [tp.partitions for tp in a.assignment.topic_partitions]) == (0, 1, [])
    deadline = time.monotonic() + 10
    r = a
    while time.monotonic() < deadline and not (r.assignment and r.assignment.topic_partitions):
        time.sleep(0.05)
        r = hb(wire, "gr", a.member_id, r.member_epoch, topics=None, owned=[])
    assert r.error_code == 0 and r.member_epoch == 2
    assert names(wire, "gr") == {"rx-a": {0, 1}}
