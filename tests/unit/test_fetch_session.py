"""server/fetch_session.py: Kafka's FetchSessionCache / FetchManager.newContext rules, sans-IO."""
from __future__ import annotations

import random
import uuid

from kafkite.server.fetch_session import (EVICTION_MS, FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, ZERO_UUID,
                                          FetchSessionCache, FullFetchContext, IncrementalFetchContext,
                                          PartitionRequest, SessionErrorContext, SessionlessFetchContext,
                                          TopicIdPartition, next_epoch)
from kafkite.wire.errors import E
from kafkite.wire.fetch_response import PartitionData

V = 12  # a version with sessions and topic names


def tp(topic="t", p=0, topic_id=ZERO_UUID):
    return TopicIdPartition(topic_id, topic, p)


def req(offset=0):
    return PartitionRequest(offset)


def resp(p=0, hw=10, lso=0, records=(), error=0, preferred=-1):
    return PartitionData(p, error, hw, hw, lso, preferred_read_replica=preferred, records=records)


def names(_id):
    return None


def ctx(cache, sid, epoch, data=None, forget=(), version=V, follower=False, now=0, topic_name=names):
    return cache.new_context(version, sid, epoch, follower, dict(data or {}), list(forget), topic_name, now)


def open_session(cache, parts, now=0, version=V, follower=False):
    """A full fetch with epoch 0 over `parts` (all answered with hw=10): the new session's id."""
    c = ctx(cache, 0, INITIAL_EPOCH, {t: req() for t in parts}, version=version, follower=follower, now=now)
    assert isinstance(c, FullFetchContext)
    err, sid, out = c.update_and_generate([(t, resp(t.partition)) for t in parts])
    assert err == 0 and len(out) == len(parts)
    return sid


def test_next_epoch_wraps_to_one_and_final_stays_final():
    assert next_epoch(0) == 1 and next_epoch(5) == 6 and next_epoch(2**31 - 1) == 1
    assert next_epoch(-1) == FINAL_EPOCH


def test_full_fetch_creates_session_and_final_epoch_does_not():
    cache = FetchSessionCache(10, rng=random.Random(1))
    sid = open_session(cache, [tp(p=0), tp(p=1)])
    assert sid != INVALID_SESSION_ID and cache.get(sid).epoch == 1 and len(cache) == 1
    c = ctx(cache, 0, FINAL_EPOCH, {tp(): req()})
    assert isinstance(c, SessionlessFetchContext)
    assert c.update_and_generate([(tp(), resp())])[1] == INVALID_SESSION_ID
    assert len(cache) == 1
    # a full fetch naming the session closes it (and epoch -1 opens no other)
    assert isinstance(ctx(cache, sid, FINAL_EPOCH, {tp(): req()}), SessionlessFetchContext)
    assert len(cache) == 0 and cache.stats["closed"] == 1


def test_versions_before_7_are_sessionless():
    cache = FetchSessionCache(10)
    c = ctx(cache, 0, FINAL_EPOCH, {tp(): req()}, version=6)
    assert isinstance(c, SessionlessFetchContext)


def test_session_errors():
    cache = FetchSessionCache(10, rng=random.Random(2))
    c = ctx(cache, 424242, 1)
    assert isinstance(c, SessionErrorContext)
    assert c.update_and_generate([(tp(), resp())]) == (E.FETCH_SESSION_ID_NOT_FOUND, INVALID_SESSION_ID, [])
    sid = open_session(cache, [tp()])
    assert ctx(cache, sid, 2).update_and_generate([])[0] == E.INVALID_FETCH_SESSION_EPOCH
    assert ctx(cache, sid, 1, version=13).update_and_generate([])[0] == E.FETCH_SESSION_TOPIC_ID_ERROR
    assert cache.get(sid).epoch == 1  # errors leave the session as it was
    assert cache.stats["INVALID_FETCH_SESSION_EPOCH"] == 1 and cache.stats["FETCH_SESSION_ID_NOT_FOUND"] == 1


def test_incremental_fetch_reads_the_session_and_carries_only_changes():
    cache = FetchSessionCache(10, rng=random.Random(3))
    parts = [tp(p=i) for i in range(4)]
    sid = open_session(cache, parts)
    c = ctx(cache, sid, 1)  # nothing listed: every session partition is read
    assert isinstance(c, IncrementalFetchContext)
    assert [t for t, _ in c.partitions()] == parts
    assert cache.get(sid).epoch == 2  # moved on when the context was made (a duplicate gets an epoch error)
    updates = [(parts[0], resp(0)),                       # unchanged: left out
               (parts[1], resp(1, records=[b"x" * 5])),   # records
               (parts[2], resp(2, hw=11)),                # high watermark
               (parts[3], resp(3, lso=4))]                # log start offset
    assert [t for t, _ in c.carried(updates)] == parts[1:]
    assert [t for t, _ in c.carried(updates)] == parts[1:]  # carried() changes nothing
    err, got_sid, out = c.update_and_generate(updates)
    assert (err, got_sid) == (0, sid) and [t for t, _ in out] == parts[1:]
    # the partition that returned records is read last next time (round robin)
    c2 = ctx(cache, sid, 2)
    assert [t for t, _ in c2.partitions()] == [parts[0], parts[2], parts[3], parts[1]]
    # the same values again: nothing to carry
    assert c2.update_and_generate([(parts[i], resp(i, hw=11 if i == 2 else 10, lso=4 if i == 3 else 0))
                                   for i in range(4)])[2] == []


def test_errors_and_preferred_replica_always_carried_and_resent_after_the_error_clears():
    cache = FetchSessionCache(10, rng=random.Random(4))
    sid = open_session(cache, [tp()])
    c = ctx(cache, sid, 1)
    assert len(c.update_and_generate([(tp(), resp(error=int(E.NOT_LEADER_OR_FOLLOWER)))])[2]) == 1
    c = ctx(cache, sid, 2)
    assert len(c.update_and_generate([(tp(), resp())])[2]) == 1  # hw was forgotten with the error
    c = ctx(cache, sid, 3)
    assert c.update_and_generate([(tp(), resp())])[2] == []
    c = ctx(cache, sid, 4)
    assert len(c.update_and_generate([(tp(), resp(preferred=2))])[2]) == 1


def test_incremental_request_adds_updates_and_forgets():
    cache = FetchSessionCache(10, rng=random.Random(5))
    sid = open_session(cache, [tp(p=0), tp(p=1)])
    c = ctx(cache, sid, 1, {tp(p=1): req(7), tp(p=2): req(3)}, forget=[tp(p=0), tp(p=9)])
    got = dict(c.partitions())
    assert list(got) == [tp(p=1), tp(p=2)] and got[tp(p=1)].fetch_offset == 7 and got[tp(p=2)].fetch_offset == 3
    # a new partition has no cached high watermark: it is carried the first time
    out = c.update_and_generate([(tp(p=1), resp(1)), (tp(p=2), resp(2))])[2]
    assert [t for t, _ in out] == [tp(p=2)]
    # forgetting every partition closes the session; the fetch is answered sessionless
    c = ctx(cache, sid, 2, forget=[tp(p=1), tp(p=2)])
    assert isinstance(c, SessionlessFetchContext) and cache.get(sid) is None


def test_stale_context_answers_invalid_epoch():
    cache = FetchSessionCache(10, rng=random.Random(6))
    sid = open_session(cache, [tp()])
    first = ctx(cache, sid, 1)
    ctx(cache, sid, 2)  # another request of the session came in meanwhile
    assert first.carried([(tp(), resp(records=[b"x"]))]) == []
    assert first.update_and_generate([(tp(), resp(records=[b"x"]))]) == (E.INVALID_FETCH_SESSION_EPOCH, sid, [])


def test_topic_ids_key_the_session_and_unknown_names_resolve_later():
    cache = FetchSessionCache(10, rng=random.Random(7))
    tid = uuid.uuid4()
    unknown = TopicIdPartition(tid, None, 0)
    sid = open_session(cache, [unknown], version=13)
    known = {tid: "late"}
    c = ctx(cache, sid, 1, version=13, topic_name=known.get)
    assert [t.topic for t, _ in c.partitions()] == ["late"]
    # the same id under its name is the same partition; forgetting by id removes it
    c = ctx(cache, sid, 2, {TopicIdPartition(tid, "late", 0): req(5)}, version=13)
    assert len(cache.get(sid).partitions) == 1
    assert isinstance(ctx(cache, sid, 3, forget=[TopicIdPartition(tid, None, 0)], version=13),
                      SessionlessFetchContext)
    assert ctx(cache, 0, 0, {}, version=12).update_and_generate([])[1] != 0  # v12 sessions still open


def test_zero_slots_creates_no_session():
    cache = FetchSessionCache(0)
    c = ctx(cache, 0, INITIAL_EPOCH, {tp(): req()})
    assert c.update_and_generate([(tp(), resp())]) == (0, INVALID_SESSION_ID, [(tp(), resp())])
    assert cache.stats["not_created"] == 1 and len(cache) == 0


def test_full_cache_refuses_until_a_session_is_stale():
    cache = FetchSessionCache(2, rng=random.Random(8))
    a = open_session(cache, [tp(p=0)], now=0)
    b = open_session(cache, [tp(p=0), tp(p=1)], now=0)
    # recent sessions cannot be evicted: no session, id 0
    assert open_session(cache, [tp(p=i) for i in range(5)], now=1000) == INVALID_SESSION_ID
    ctx(cache, b, 1, now=EVICTION_MS)  # b is used; a is not
    sid = open_session(cache, [tp()], now=EVICTION_MS + 1)  # a: unused for longer than EVICTION_MS
    assert sid != 0 and cache.get(a) is None and cache.get(b) is not None and cache.stats["evictions"] == 1


def test_old_sessions_are_evicted_by_bigger_ones_and_privileged_win():
    cache = FetchSessionCache(2, rng=random.Random(9))
    small = open_session(cache, [tp(p=0)], now=0)
    big = open_session(cache, [tp(p=i) for i in range(3)], now=0)
    t = EVICTION_MS + 10
    ctx(cache, small, 1, now=t)  # touched after EVICTION_MS from creation: evictable by all
    ctx(cache, big, 1, now=t)
    # a consumer's new session of 2 partitions evicts the smallest old one (1 partition) ...
    s2 = open_session(cache, [tp(p=0), tp(p=1)], now=t + 1)
    assert s2 != 0 and cache.get(small) is None and cache.get(big) is not None
    # ... but not one bigger than itself (s2 is new, big has 3 partitions)
    assert open_session(cache, [tp(p=0)], now=t + 2) == INVALID_SESSION_ID
    # a follower's session evicts an unprivileged one, even a new one (then the smallest: s2)
    f = open_session(cache, [tp(p=0)], now=t + 3, follower=True)
    assert f != 0 and cache.get(s2) is None and cache.get(f).privileged
    # a bigger consumer session evicts the old unprivileged one left (big) ...
    s3 = open_session(cache, [tp(p=i) for i in range(9)], now=t + 4)
    assert s3 != 0 and cache.get(big) is None
    # ... and nothing is left a consumer may evict: a recent privileged session and a recent one
    assert open_session(cache, [tp(p=i) for i in range(20)], now=t + 5) == INVALID_SESSION_ID
