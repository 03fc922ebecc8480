"""An empty consumer group taken by a classic JoinGroup (Kafka's maybeDeleteEmptyConsumerGroup), without
sockets: the consumer group is gone at once and its tombstones -- its regex's too -- are written ahead of the
join's records, so a replay of the partition (a restart) does not bring it back; a consumer group with
members keeps its type: a classic member joins it (test_consumer_group_migration.py)."""
from __future__ import annotations

import uuid

from kafkite.coordinator import consumer_group_records as CR
from kafkite.coordinator import regex_refresh
from kafkite.coordinator.consumer_group_records import TopicMetadata
from kafkite.coordinator.result import finish_write, start_write
from kafkite.wire.errors import E

from test_consumer_group_model import Runtime
from test_consumer_group_model import Topics

ORDERS = uuid.UUID(int=0xA1)


def join(rt, member_id=""):
    shard, result = rt.coordinator.join_group(
        group_id="g", member_id=member_id, group_instance_id=None, protocol_type="consumer",
        protocols=[("range", b"")], session_timeout_ms=10000, rebalance_timeout_ms=10000, client_id="c",
        client_host="h", require_known_member_id=True, now_ms=0)
    return result, finish_write(result, start_write(result, shard.replay, rt.logs[0].extend) if shard else 0)


def test_an_empty_consumer_group_becomes_classic_and_stays_so_after_a_replay(monkeypatch):
    monkeypatch.setattr(regex_refresh, "INLINE_MAX", 1_000_000)  # resolved inside the heartbeat
    rt = Runtime()
    rt.topics = Topics(TopicMetadata(ORDERS, "orders", 2))
    assert rt.hb("a", 0, topics=[], subscribed_topic_regex="o.*").error == 0
    result, r = join(rt)
    # it has a member: the classic member is asked for its member id and the group stays a consumer group
    assert r.error == E.MEMBER_ID_REQUIRED and rt.group is not None and not result.records
    rt.hb("a", -1, topics=None, owned=None)
    assert rt.group is not None and not rt.group.members
    result, r = join(rt)
    assert r.error == E.MEMBER_ID_REQUIRED and rt.group is None
    # the group's tombstones go with the join (the regex's went when its last member left)
    assert result.records == [CR.tombstone(CR.TARGET_METADATA, "g"), CR.tombstone(CR.PARTITION_METADATA, "g"),
                              CR.tombstone(CR.GROUP_METADATA, "g")]
    assert CR.tombstone(CR.REGULAR_EXPRESSION, "g", "o.*") in rt.logs[0]
    assert Runtime(logs=rt.logs).group is None
