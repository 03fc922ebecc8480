"""Incremental fetch sessions (KIP-227): Kafka's FetchSession.scala, sans-IO (callers pass now_ms).

A Fetch (v7+) carries session_id and session_epoch:

- epoch 0 (INITIAL_EPOCH): a full fetch that asks for a new session. Any session it names is closed first;
  the response carries every partition and the id of the session created, or 0 when the cache has no room
  for one (the client goes on with full fetches).
- epoch -1 (FINAL_EPOCH): a full fetch without a session (closes the one it names). (Followers fetch in sessions,
  as Kafka's: server/replication.py.)
- any other epoch: an incremental fetch of session `session_id`: unknown id -> FETCH_SESSION_ID_NOT_FOUND,
  an epoch other than the session's -> INVALID_FETCH_SESSION_EPOCH, a session created with topic ids (v13+)
  used by an older version or the reverse -> FETCH_SESSION_TOPIC_ID_ERROR (each with session id 0 and no
  partitions). Otherwise the partitions listed are added or updated, forgotten_topics_data removes some,
  the session's epoch moves on, and the fetch reads every partition of the session; its response carries
  only the partitions with something new: records, a changed high watermark or log start offset, an error,
  a preferred read replica. A session left empty is closed (the fetch is answered sessionless).

FetchSessionCache holds at most `max.incremental.fetch.session.cache.slots` sessions, evicting as Kafka's
FetchSessionCacheShard.tryEvict does: a session unused for EVICTION_MS first; else, among the sessions
older than EVICTION_MS (and unprivileged ones, for a follower's new session), the least valuable
(unprivileged before privileged, then fewer partitions) when the new one is worth at least as much.
Sessions live in memory: a restarted broker knows none (clients get FETCH_SESSION_ID_NOT_FOUND and start
over with a full fetch, as against Kafka).

The contexts follow Kafka's FetchContext: `partitions()` is what the fetch reads (foreachPartition),
`carried(updates)` what its response would carry without changing anything (for the long-poll's min_bytes,
any number of times), and `update_and_generate(updates)` -- once per answered request -- records the
response in the session and returns (error_code, session_id, the partitions to send).
"""
from __future__ import annotations

import random
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Protocol

from ..wire.errors import E

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1
EVICTION_MS = 120_000  # Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS
ZERO_UUID = uuid.UUID(int=0)


def next_epoch(prev: int) -> int:
    """Kafka's FetchMetadata.nextEpoch."""
    if prev < 0:
        return FINAL_EPOCH
    return 1 if prev == MAX_EPOCH else prev + 1


def is_full(epoch: int) -> bool:
    return epoch in (INITIAL_EPOCH, FINAL_EPOCH)


@dataclass(frozen=True, slots=True)
class TopicIdPartition:
    """A partition as a fetch names it: by topic id from v13 (name None while the id is unknown), by name
    before (topic_id ZERO_UUID)."""
    topic_id: uuid.UUID
    topic: str | None
    partition: int
    # Kafka's CachedPartition equality: the id when there is one, else the name
    key: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", (self.topic_id, self.partition) if self.topic_id.int
                           else (self.topic, self.partition))


@dataclass(slots=True)
class PartitionRequest:
    """One partition's fetch parameters (Kafka's FetchRequest.PartitionData)."""
    fetch_offset: int
    log_start_offset: int = -1
    max_bytes: int = 1 << 20
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1


class ResponsePartition(Protocol):
    """What the session compares (wire.fetch_response.PartitionData has it)."""
    error_code: int
    high_watermark: int
    log_start_offset: int
    preferred_read_replica: int

    @property
    def records_size(self) -> int: ...


class CachedPartition:
    __slots__ = ("tp", "req", "high_watermark", "local_log_start_offset")

    def __init__(self, tp: TopicIdPartition, req: PartitionRequest, resp: ResponsePartition | None = None):
        self.tp = tp
        self.req = req
        self.high_watermark = -1 if resp is None else resp.high_watermark
        self.local_log_start_offset = -1 if resp is None else resp.log_start_offset

    def maybe_resolve_unknown_name(self, topic_name: Callable[[uuid.UUID], str | None]) -> None:
        """A topic id unknown when the partition joined the session may have a name now (Kafka's
        maybeResolveUnknownName; once known, the name stays)."""
        if self.tp.topic is None:
            name = topic_name(self.tp.topic_id)
            if name is not None:
                self.tp = TopicIdPartition(self.tp.topic_id, name, self.tp.partition)

    def maybe_update_response_data(self, resp: ResponsePartition, update: bool) -> bool:
        """Whether the response must carry this partition; with `update`, remember what it carries."""
        must = resp.records_size > 0
        if self.high_watermark != resp.high_watermark:
            must = True
            if update:
                self.high_watermark = resp.high_watermark
        if self.local_log_start_offset != resp.log_start_offset:
            must = True
            if update:
                self.local_log_start_offset = resp.log_start_offset
        if resp.preferred_read_replica >= 0:
            must = True
        if resp.error_code:
            # an error is always sent; the high watermark is forgotten so the partition is sent again once it clears
            if update:
                self.high_watermark = -1
            must = True
        return must


class FetchSession:
    __slots__ = ("id", "privileged", "partitions", "uses_topic_ids", "creation_ms", "last_used_ms", "epoch",
                 "cached_size", "evictable_by_all", "evictable_by_privileged")

    def __init__(self, session_id: int, privileged: bool, partitions: dict[tuple, CachedPartition],
                 uses_topic_ids: bool, now_ms: int):
        self.id = session_id
        self.privileged = privileged
        self.partitions = partitions  # in fetch order: a partition that returned records moves to the end
        self.uses_topic_ids = uses_topic_ids
        self.creation_ms = self.last_used_ms = now_ms
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.cached_size = -1
        self.evictable_by_all = self.evictable_by_privileged = False

    def update(self, fetch_data: dict[TopicIdPartition, PartitionRequest], to_forget: Iterable[TopicIdPartition]
               ) -> tuple[int, int, int]:
        """An incremental request's partitions added or updated, then its forgotten ones removed: the counts."""
        added = updated = removed = 0
        for tp, req in fetch_data.items():
            cached = self.partitions.get(tp.key)
            if cached is None:
                self.partitions[tp.key] = CachedPartition(tp, req)
                added += 1
            else:
                cached.req = req
                updated += 1
        for tp in to_forget:
            if self.partitions.pop(tp.key, None) is not None:
                removed += 1
        return added, updated, removed


class FetchSessionCache:
    """A broker's fetch sessions (Kafka's FetchSessionCacheShard; one shard)."""

    def __init__(self, max_entries: int = 1000, eviction_ms: int = EVICTION_MS, rng: random.Random | None = None):
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self._rng = rng or random.Random()
        # what happened, for tests, benchmarks and operators: full / incremental / sessionless fetches,
        # created / not_created sessions, evictions, closed, and session errors by name
        self.stats: Counter[str] = Counter()

    def __len__(self) -> int:
        return len(self.sessions)

    @property
    def total_partitions(self) -> int:
        return sum(max(0, s.cached_size) for s in self.sessions.values())

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def _new_session_id(self) -> int:
        while True:
            sid = self._rng.randint(1, MAX_EPOCH - 1)  # Kafka: nextInt(1, Int.MaxValue)
            if sid not in self.sessions:
                return sid

    def maybe_create_session(self, now_ms: int, privileged: bool, size: int, uses_topic_ids: bool,
                             create: Callable[[], dict[tuple, CachedPartition]]) -> int:
        """A new session's id, or INVALID_SESSION_ID when there is no room for it."""
        if len(self.sessions) < self.max_entries or self._try_evict(privileged, (privileged, size, 0), now_ms):
            session = FetchSession(self._new_session_id(), privileged, create(), uses_topic_ids, now_ms)
            self.sessions[session.id] = session
            self.touch(session, now_ms)
            self.stats["created"] += 1
            return session.id
        self.stats["not_created"] += 1
        return INVALID_SESSION_ID

    def _try_evict(self, privileged: bool, key: tuple, now_ms: int) -> bool:
        if not self.sessions:
            return False
        stale = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - stale.last_used_ms > self.eviction_ms:
            self.remove(stale.id)
            self.stats["evictions"] += 1
            return True
        candidates = [s for s in self.sessions.values()
                      if (s.evictable_by_privileged if privileged else s.evictable_by_all)]
        if not candidates:
            return False
        victim = min(candidates, key=lambda s: (s.privileged, s.cached_size, s.id))
        if key < (victim.privileged, victim.cached_size, victim.id):
            return False
        self.remove(victim.id)
        self.stats["evictions"] += 1
        return True

    def remove(self, session_id: int) -> FetchSession | None:
        return self.sessions.pop(session_id, None)

    def touch(self, session: FetchSession, now_ms: int) -> None:
        """The session was used now: its size and whether it may be evicted, as of now (Kafka's touch)."""
        session.last_used_ms = now_ms
        session.cached_size = len(session.partitions)
        old = now_ms - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = (not session.privileged) or old
        session.evictable_by_all = old

    # -- Kafka's FetchManager.newContext ---------------------------------------------------------------------
    def new_context(self, version: int, session_id: int, epoch: int, is_follower: bool,
                    fetch_data: dict[TopicIdPartition, PartitionRequest], to_forget: list[TopicIdPartition],
                    topic_name: Callable[[uuid.UUID], str | None], now_ms: int) -> "FetchContext":
        if version < 7:  # no session fields: every fetch is full and sessionless
            self.stats["sessionless"] += 1
            return SessionlessFetchContext(fetch_data)
        if is_full(epoch):
            if session_id != INVALID_SESSION_ID and self.remove(session_id) is not None:
                self.stats["closed"] += 1
            if epoch == FINAL_EPOCH:
                self.stats["sessionless"] += 1
                return SessionlessFetchContext(fetch_data)
            self.stats["full"] += 1
            return FullFetchContext(self, fetch_data, version >= 13, is_follower, now_ms)
        session = self.sessions.get(session_id)
        if session is None:
            return self._error(E.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return self._error(E.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != (version >= 13):
            return self._error(E.FETCH_SESSION_TOPIC_ID_ERROR)
        session.update(fetch_data, to_forget)
        if not session.partitions:
            self.remove(session.id)
            self.stats["closed"] += 1
            self.stats["sessionless"] += 1
            return SessionlessFetchContext(fetch_data)
        self.touch(session, now_ms)
        session.epoch = next_epoch(session.epoch)
        self.stats["incremental"] += 1
        return IncrementalFetchContext(session, epoch, topic_name, self.stats)

    def _error(self, code: E) -> "SessionErrorContext":
        self.stats[code.name] += 1
        return SessionErrorContext(int(code))


Updates = list[tuple[TopicIdPartition, ResponsePartition]]


class FetchContext:
    """What one Fetch reads and how its response is cut (Kafka's FetchContext)."""
    incremental = False

    def partitions(self) -> list[tuple[TopicIdPartition, PartitionRequest]]:
        raise NotImplementedError

    def carried(self, updates: Updates) -> Updates:
        return updates

    def update_and_generate(self, updates: Updates) -> tuple[int, int, Updates]:
        raise NotImplementedError


class SessionErrorContext(FetchContext):
    def __init__(self, error: int):
        self.error = error

    def partitions(self):
        return []

    def carried(self, updates):
        return []

    def update_and_generate(self, updates):
        return self.error, INVALID_SESSION_ID, []


class SessionlessFetchContext(FetchContext):
    def __init__(self, fetch_data: dict[TopicIdPartition, PartitionRequest]):
        self.fetch_data = fetch_data

    def partitions(self):
        return list(self.fetch_data.items())

    def update_and_generate(self, updates):
        return 0, INVALID_SESSION_ID, updates


class FullFetchContext(FetchContext):
    def __init__(self, cache: FetchSessionCache, fetch_data: dict[TopicIdPartition, PartitionRequest],
                 uses_topic_ids: bool, is_follower: bool, now_ms: int):
        self.cache = cache
        self.fetch_data = fetch_data
        self.uses_topic_ids = uses_topic_ids
        self.is_follower = is_follower
        self.now_ms = now_ms

    def partitions(self):
        return list(self.fetch_data.items())

    def update_and_generate(self, updates):
        def create() -> dict[tuple, CachedPartition]:
            return {tp.key: CachedPartition(tp, self.fetch_data[tp], resp) for tp, resp in updates}
        sid = self.cache.maybe_create_session(self.now_ms, self.is_follower, len(updates), self.uses_topic_ids,
                                              create)
        return 0, sid, updates


class IncrementalFetchContext(FetchContext):
    incremental = True

    def __init__(self, session: FetchSession, request_epoch: int, topic_name: Callable[[uuid.UUID], str | None],
                 stats: Counter | None = None):
        self.session = session
        self.request_epoch = request_epoch
        self.topic_name = topic_name
        self.stats = stats if stats is not None else Counter()

    def partitions(self):
        out = []
        for cached in self.session.partitions.values():
            if self.session.uses_topic_ids:
                cached.maybe_resolve_unknown_name(self.topic_name)
            out.append((cached.tp, cached.req))
        return out

    @property
    def stale(self) -> bool:
        """Another request of this session came in since this one (Kafka: 'Possible duplicate request')."""
        return self.session.epoch != next_epoch(self.request_epoch)

    def carried(self, updates):
        if self.stale:
            return []
        parts = self.session.partitions
        return [(tp, resp) for tp, resp in updates
                if (c := parts.get(tp.key)) is not None and c.maybe_update_response_data(resp, False)]

    def update_and_generate(self, updates):
        if self.stale:
            return int(E.INVALID_FETCH_SESSION_EPOCH), self.session.id, []
        parts = self.session.partitions
        out = []
        for tp, resp in updates:
            cached = parts.get(tp.key)
            if cached is None or not cached.maybe_update_response_data(resp, True):
                continue
            out.append((tp, resp))
            if resp.error_code:
                self.stats["incremental_partition_errors"] += 1
            if resp.records_size > 0:  # round robin: a partition that returned records is read last next time
                parts[tp.key] = parts.pop(tp.key)
        return 0, self.session.id, out
