"""Committed offsets of one shard (Kafka's OffsetMetadataManager): commit, fetch, delete,
expire. Sans-IO, and pure: each write returns a CoordinatorResult with the records and the
response and changes nothing itself; the shard's `replay` applies the records once they are
appended (coordinator/result.py), the same replay that loads the partition.
"""
from __future__ import annotations

from typing import Callable

import structlog

from ..wire.errors import E
from . import records as R
from .group import Group, GroupState, OffsetEntry
from .result import CoordinatorResult
from .timeline import SnapshotRegistry

S = GroupState
_EMPTY = S.EMPTY  # (a member read off an enum class costs ~60 ns: read once)
log = structlog.get_logger("kafkite.coordinator")

OffsetCommit = tuple[str, int, int, int, "str | None"]  # topic, partition, offset, leader epoch, metadata


class OffsetMetadataManager:
    def __init__(self, cfg, groups: dict[str, Group], timeline: SnapshotRegistry | None = None):
        self.cfg = cfg
        self.groups = groups
        self.timeline = timeline if timeline is not None else SnapshotRegistry()  # the replay's changes
        # TxnOffsetCommit: producer id -> offsets written in its open transaction, until its marker
        self.pending: dict[int, dict[tuple[str, str, int], R.OffsetValue]] = {}
        # a KIP-848 group with members keeps its offsets (they live in `groups` as an empty "simple" group)
        self.has_consumer_members: Callable[[str], bool] = lambda group_id: False
        # the topics a KIP-848 group is subscribed to (its members' names and regexes); None: no such group
        self.consumer_subscriptions: Callable[[str], "set[str] | None"] = lambda group_id: None

    # -- OffsetCommit ---------------------------------------------------------------------------
    def commit(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
               offsets: list[OffsetCommit], now_ms: int, retention_ms: int = -1
               ) -> CoordinatorResult[list[tuple[str, int, int]]]:
        """-> response [(topic, partition, error)]."""
        def all_(code) -> list[tuple[str, int, int]]:
            return [(t, p, int(code)) for t, p, *_ in offsets]
        g = self.groups.get(group_id)
        # (_validate_member's answer for a simple consumer's commit, inline: 0; else its call)
        err = 0 if generation_id < 0 and (g is None or g.state is _EMPTY) else \
            self._validate_member(group_id, generation_id, member_id, group_instance_id, now_ms)
        if err:
            return CoordinatorResult(response=all_(err))
        expire = now_ms + retention_ms if retention_ms and retention_ms > 0 else -1
        recs, results = self._offset_records(group_id, offsets, now_ms, expire)
        return CoordinatorResult(recs, results, True, None, all_)  # (on_failure: positional, cheaper than a keyword)

    def _offset_records(self, group_id: str, offsets: list[OffsetCommit], now_ms: int, expire: int = -1
                        ) -> tuple[list, list[tuple[str, int, int]]]:
        """The records of a commit and its answer per partition (metadata too large: OFFSET_METADATA_TOO_LARGE)."""
        results, recs = [], []
        for topic, partition, offset, leader_epoch, metadata in offsets:
            md = metadata or ""
            if md and len(md.encode()) > self.cfg.offset_metadata_max_bytes:
                results.append((topic, partition, int(E.OFFSET_METADATA_TOO_LARGE)))
                continue
            recs.append(R.offset_commit_record(group_id, topic, partition,
                                               R.OffsetValue(offset, leader_epoch, md, now_ms, expire)))
            results.append((topic, partition, 0))
        return recs, results

    # -- TxnOffsetCommit -------------------------------------------------------------------------
    def txn_commit(self, *, group_id: str, producer_id: int, producer_epoch: int, generation_id: int,
                   member_id: str, group_instance_id: str | None, offsets: list[OffsetCommit], now_ms: int
                   ) -> CoordinatorResult[list[tuple[str, int, int]]]:
        """Offsets committed in a transaction (Kafka's transactional offset commit): written now as one
        transactional batch of the producer, applied when its commit marker comes. A producer that does not give
        its group's generation (TxnOffsetCommit v0-v2, or -1) is not checked against the membership."""
        def all_(code) -> list[tuple[str, int, int]]:
            return [(t, p, int(code)) for t, p, *_ in offsets]
        if generation_id >= 0 or member_id or group_instance_id:
            err = self._validate_member(group_id, generation_id, member_id, group_instance_id, now_ms)
            if err:
                return CoordinatorResult(response=all_(err))
        recs, results = self._offset_records(group_id, offsets, now_ms)
        return CoordinatorResult(recs, results, on_failure=all_, producer_id=producer_id,
                                 producer_epoch=producer_epoch)

    def replay_pending(self, producer_id: int, key: R.OffsetKey, value: R.OffsetValue | None) -> None:
        if value is not None:
            tl = self.timeline
            tl.set_item(tl.setdefault(self.pending, producer_id, dict), (key.group, key.topic, key.partition), value)

    def complete_transaction(self, producer_id: int, commit: bool) -> None:
        offsets = self.timeline.pop_item(self.pending, producer_id, {})
        if commit:
            for (group, topic, partition), value in offsets.items():
                self.replay(R.OffsetKey(group, topic, partition), value)

    def has_pending(self, group_id: str, topic: str, partition: int) -> bool:
        return any((group_id, topic, partition) in offs for offs in self.pending.values())

    def _validate_member(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                         now_ms: int) -> int:
        g = self.groups.get(group_id)
        if g is None:
            # a simple consumer (assign + commit) commits with generation -1; the replay of its first
            # commit creates the group
            return E.ILLEGAL_GENERATION if generation_id >= 0 else 0
        state = g.state
        if state is S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and state is S.EMPTY:
            return 0  # a simple consumer, or a group nobody is in
        m = g.members.get(member_id)
        if group_instance_id:
            known = g.static_members.get(group_instance_id)
            if known is not None and known != member_id:
                return E.FENCED_INSTANCE_ID
        if m is None:
            return E.UNKNOWN_MEMBER_ID
        if generation_id != g.generation:
            return E.ILLEGAL_GENERATION
        if g.is_(S.COMPLETING_REBALANCE):
            return E.REBALANCE_IN_PROGRESS
        m.heartbeat_deadline = now_ms + m.session_timeout_ms  # a commit counts as a heartbeat (timer only)
        return 0

    # -- OffsetFetch (a read) ---------------------------------------------------------------------
    def fetch(self, group_id: str, partitions: list[tuple[str, int]] | None, require_stable: bool = False
              ) -> list[tuple[str, int, OffsetEntry | None, int]]:
        """With require_stable (KIP-447) a partition whose offset an open transaction is committing answers
        UNSTABLE_OFFSET_COMMIT, no offset, until the transaction ends."""
        g = self.groups.get(group_id)

        def one(t: str, p: int, e: OffsetEntry | None):
            if require_stable and self.pending and self.has_pending(group_id, t, p):
                return t, p, None, int(E.UNSTABLE_OFFSET_COMMIT)
            return t, p, e, 0
        if partitions is None:
            items = sorted(g.offsets.items()) if g else []
            return [one(t, p, e) for (t, p), e in items]
        return [one(t, p, g.offsets.get((t, p)) if g else None) for t, p in partitions]

    # -- OffsetDelete ------------------------------------------------------------------------------
    def delete(self, group_id: str, partitions: list[tuple[str, int]]
               ) -> CoordinatorResult[tuple[int, list[tuple[str, int, int]]]]:
        """Kafka's deleteOffsets: a group with members that is not a "consumer" group answers
        NON_EMPTY_GROUP; otherwise the partitions of topics the group is subscribed to answer
        GROUP_SUBSCRIBED_TO_TOPIC (Group.is_subscribed_to) and the others' offsets are deleted. A KIP-848
        group (ConsumerGroup.isSubscribedToTopic) is subscribed to its members' topic names and the topics
        their regexes resolved to, and exists without offsets."""
        g = self.groups.get(group_id)
        subscribed = self.consumer_subscriptions(group_id)
        if subscribed is None:
            if g is None or g.is_(S.DEAD):
                return CoordinatorResult(response=(E.GROUP_ID_NOT_FOUND, []))
            if not g.is_(S.EMPTY) and g.protocol_type != "consumer":
                return CoordinatorResult(response=(E.NON_EMPTY_GROUP, []))
        out, recs = [], []
        for t, p in partitions:
            if t in subscribed if subscribed is not None else g.is_subscribed_to(t):
                out.append((t, p, int(E.GROUP_SUBSCRIBED_TO_TOPIC)))
                continue
            out.append((t, p, 0))
            if g is not None and (t, p) in g.offsets:
                recs.append((R.offset_key(group_id, t, p), None))
        return CoordinatorResult(recs, (0, out), on_failure=lambda err: (err, []))

    # -- expiry (a timer) -------------------------------------------------------------------------
    def expire(self, now_ms: int) -> CoordinatorResult[int]:
        """Tombstones for offsets past retention, and for groups left with nothing (Kafka 2.1+ rules:
        a group's offsets expire counted from when it became empty, a simple consumer's from the commit)."""
        recs, n = [], 0
        for g in self.groups.values():
            if self.has_consumer_members(g.group_id):
                continue
            expired = [k for k, e in g.offsets.items() if self._expired(g, e, now_ms)]
            if expired:
                recs.extend((R.offset_key(g.group_id, t, p), None) for t, p in expired)
                n += len(expired)
                log.info("offsets.expired", group=g.group_id, count=len(expired))
            if g.is_(S.EMPTY) and len(expired) == len(g.offsets) and not g.members:
                recs.append((R.group_key(g.group_id), None))
        return CoordinatorResult(recs, n, on_failure=lambda err: 0)

    def _expired(self, g: Group, e: OffsetEntry, now_ms: int) -> bool:
        if e.expire_timestamp >= 0:
            return now_ms >= e.expire_timestamp
        if g.protocol_type is None:  # simple consumer: counted from the commit
            return g.is_(S.EMPTY) and now_ms - e.commit_timestamp >= self.cfg.offsets_retention_ms
        return g.is_(S.EMPTY) and now_ms - g.state_timestamp >= self.cfg.offsets_retention_ms

    # -- replay ------------------------------------------------------------------------------------
    def replay(self, key: R.OffsetKey, value: R.OffsetValue | None) -> None:
        g = self.groups.get(key.group)
        tl = self.timeline
        if value is None:
            if g is not None:
                tl.pop_item(g.offsets, (key.topic, key.partition))
            return
        if g is None:
            # offsets of a group that does not use membership: an empty "simple" group (as Kafka's replay)
            g = Group(key.group, state_timestamp=value.commit_timestamp)
            tl.set_item(self.groups, key.group, g)
        tl.set_item(g.offsets, (key.topic, key.partition), value)  # (an OffsetEntry is the decoded value)
