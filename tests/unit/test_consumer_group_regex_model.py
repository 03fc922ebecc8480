"""KIP-848 regex subscriptions without sockets: RE2 resolution (whole names, internal topics left out),
Kafka's INVALID_REGULAR_EXPRESSION messages, the ConsumerGroupRegularExpression record in Kafka's format,
and heartbeats whose records replay -- after a "restart" too -- to the same resolved regexes."""
from __future__ import annotations

import uuid

import pytest

from kafka.protocol.api_data import ApiData

from kafkite.coordinator import consumer_group_records as CR
from kafkite.coordinator import regex_refresh
from kafkite.coordinator import schemas
from kafkite.coordinator.consumer_group_records import TopicMetadata
from kafkite.coordinator.regex import INVALID_REGULAR_EXPRESSION, InvalidRegularExpression, check_regex, resolve

from test_consumer_group_model import Runtime, Topics

ORDERS, OTHERS = uuid.UUID(int=0xA1), uuid.UUID(int=0xC3)


class ConsumerGroupRegularExpressionValue(ApiData, load_json=schemas):
    """Kafka's schema read by ApiData: the reference for our hand-coded value."""


def test_resolve_matches_whole_names_and_leaves_internal_topics_out():
    names = ["orders", "orders-eu", "x-orders", "__consumer_offsets", "__transaction_state", "Orders"]
    assert resolve("orders.*", names) == {"orders", "orders-eu"}
    assert resolve(".*", names) == {"orders", "orders-eu", "x-orders", "Orders"}
    assert resolve("(?i)orders", names) == {"orders", "Orders"}
    assert resolve("__.*", names) == frozenset()


@pytest.mark.parametrize("regex,description", [
    ("a(", "missing closing )"), ("a)", "unexpected )"), ("[a", "missing closing ]"),
    ("*a", "missing argument to repetition operator"), ("a{2,1}", "invalid repeat count"),
    ("a\\", "trailing backslash at end of expression"), ("\\8", "invalid escape sequence"),
    ("a(?=b)", "invalid or unsupported Perl syntax"),  # RE2 has no lookahead
])
def test_an_invalid_regex_gets_re2js_description_in_kafkas_message(regex, description):
    with pytest.raises(InvalidRegularExpression) as exc:
        check_regex(regex)
    assert str(exc.value) == f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {description}."


def test_the_record_is_kafkas_key_16_and_value_v0():
    k, v = CR.regular_expression("g", "^a.*", ["a1", "a0"], 3, 1000)
    assert k == b"\x00\x10" + b"\x00\x01g" + b"\x00\x04^a.*"
    # the value as Kafka's JSON schema encodes it (kafka-python's ApiData over our copy of it)
    assert v == ConsumerGroupRegularExpressionValue(["a0", "a1"], 3, 1000, version=0).encode()
    version, key, value = CR.decode(k, v)
    assert (version, key.group_id, key.regular_expression) == (16, "g", "^a.*")
    assert (value.topics, value.version, value.timestamp) == (["a0", "a1"], 3, 1000)
    with pytest.raises(CR.RecordDecodeError):
        CR.decode(k, v[:-9])


def test_heartbeats_resolve_write_and_replay_regexes(monkeypatch):
    monkeypatch.setattr(regex_refresh, "INLINE_MAX", 1_000_000)  # resolved inside the heartbeat
    rt = Runtime()
    rt.topics = Topics(TopicMetadata(ORDERS, "orders", 2),
                       TopicMetadata(uuid.UUID(int=9), "__consumer_offsets", 50))
    a = rt.hb("a", 0, topics=[], subscribed_topic_regex="o.*")
    assert (a.error, a.member_epoch, a.assignment) == (0, 1, {ORDERS: frozenset({0, 1})})
    assert rt.group.resolved_regexes["o.*"].topics == {"orders"}
    n = len(rt.logs[0])
    a = rt.hb("a", 1, topics=None, owned=[0, 1])  # nothing changed: nothing resolved again, nothing written
    assert len(rt.logs[0]) == n and a.member_epoch == 1
    rt.topics.add(TopicMetadata(OTHERS, "others", 1))
    a = rt.hb("a", 1, topics=None, owned=[0, 1])
    assert a.member_epoch == 2 and a.assignment == {ORDERS: frozenset({0, 1}), OTHERS: frozenset({0})}
    assert rt.group.resolved_regexes["o.*"].topics == {"orders", "others"}
    assert 16 in {int.from_bytes(k[:2], "big") for k, _ in rt.logs[0]}
    # a restart: the records give the same regexes and subscriptions
    again = Runtime(logs=rt.logs)
    assert again.group.resolved_regexes == rt.group.resolved_regexes
    assert again.group.members["a"].subscribed_topic_regex == "o.*"
    # the member leaves: the regex nobody uses goes, with a tombstone
    rt.hb("a", -1, topics=None, owned=None)
    assert rt.group.resolved_regexes == {}
    assert (CR.tombstone(16, "g", "o.*")) in rt.logs[0]
    assert Runtime(logs=rt.logs).group.resolved_regexes == {}


def test_an_invalid_regex_is_answered_before_anything_is_written():
    rt = Runtime()
    r = rt.hb("a", 0, topics=[], subscribed_topic_regex="[")
    assert r.error == INVALID_REGULAR_EXPRESSION and "missing closing ]" in r.message
    assert rt.logs[0] == []
