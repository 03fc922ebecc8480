"""One partition of `__consumer_offsets` and the groups it holds (Kafka 4's GroupCoordinatorShard).

The shard owns its groups and their offsets, applies records with `replay(key, value)` --
for a load after a leadership change and for every live write alike -- and turns the
operations of its managers (membership: group_metadata.py; offsets: offsets.py) into
CoordinatorResults for the runtime. Sans-IO: callers pass `now_ms`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import structlog

from ..wire.errors import E
from . import consumer_group_records as CR
from . import records as R
from .consumer_group import ConsumerGroup
from .consumer_group_manager import ConsumerGroupManager
from .consumer_group_migration import GroupMigration
from .group import Group, GroupState, Member
from .group_metadata import GroupMetadataManager
from .offsets import OffsetMetadataManager
from .result import CoordinatorResult, Pending
from .timeline import SnapshotRegistry

S = GroupState
log = structlog.get_logger("kafkite.coordinator")
_just_encoded = R.just_encoded
_CR_KEY_PREFIXES = frozenset(v.to_bytes(2, "big", signed=True) for v in CR.TYPES)  # their keys' first two bytes


@dataclass
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass
class GroupDescription:
    error: int
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription]


class GroupCoordinatorShard:
    def __init__(self, partition: int, cfg, complete: Callable[[Pending, Any], None], now_ms: int):
        self.partition = partition
        self.cfg = cfg
        # the replay changes the state through it: a write that fails is undone (coordinator/timeline.py)
        self.timeline = SnapshotRegistry()
        self.groups: dict[str, Group] = {}
        self.membership = GroupMetadataManager(cfg, self.groups, complete)
        self.offsets = OffsetMetadataManager(cfg, self.groups, self.timeline)
        self.consumer_groups: dict[str, ConsumerGroup] = {}  # KIP-848 groups (their offsets: in `groups`)
        self.consumer = ConsumerGroupManager(cfg, self.consumer_groups, self.groups, self.timeline)
        self.migration = GroupMigration(cfg, self.consumer, self.membership, self.groups, complete)
        self.offsets.has_consumer_members = lambda gid: bool(gid in self.consumer_groups
                                                             and self.consumer_groups[gid].members)
        self.offsets.consumer_subscriptions = lambda gid: (self.consumer_groups[gid].subscribed_topic_names()
                                                           if gid in self.consumer_groups else None)
        self.next_expiry_check = now_ms + cfg.retention_check_interval_ms
        self.ignored: dict[int, int] = {}  # key version -> records skipped (replay)

    # -- replay ------------------------------------------------------------------------------------
    def replay(self, key: bytes | None, value: bytes | None, offset: int = -1, producer_id: int = -1) -> None:
        """Apply one record of the partition (`offset` where it was read from, for the log). A record
        that cannot be decoded or applied is logged and skipped: it must not stop a load or a write.
        Record types of group kinds this broker does not run are counted in `ignored` (by key version).
        A transactional record (`producer_id` >= 0: TxnOffsetCommit) waits for its producer's marker."""
        if key is None:
            return
        if producer_id < 0 and type(key) is bytes and type(value) is bytes:
            # an offset commit encoded just now (records.decode_record's kept key and value, taken first: no
            # decode, the kind known): what the runtime replays after every commit
            got = _just_encoded(key, value)
            if got is not None:
                try:
                    self.offsets.replay(*got)
                except Exception:
                    log.exception("offsets.replay_failed", partition=self.partition, offset=offset, key=repr(got[0]))
                return
        head = key[:2]  # the key version: a KIP-848 group's record?
        if (head if type(head) is bytes else bytes(head)) in _CR_KEY_PREFIXES:
            self._replay_consumer_group(key, value, offset)
            return
        try:
            k, v = R.decode_record(key, value)
        except Exception as exc:
            log.warning("offsets.undecodable_record", partition=self.partition, offset=offset, error=str(exc))
            return
        try:
            if isinstance(k, R.OffsetKey) and producer_id >= 0:
                self.offsets.replay_pending(producer_id, k, v)
            elif isinstance(k, R.OffsetKey):
                self.offsets.replay(k, v)
            elif isinstance(k, R.GroupKey):
                self._replay_group(k.group, v)
            else:
                self.ignored[k.version] = self.ignored.get(k.version, 0) + 1
        except Exception:
            log.exception("offsets.replay_failed", partition=self.partition, offset=offset, key=repr(k))

    def _replay_consumer_group(self, key: bytes, value: bytes | None, offset: int) -> None:
        try:
            version, k, v = CR.decode(key, value)
        except Exception as exc:
            log.warning("offsets.undecodable_record", partition=self.partition, offset=offset, error=str(exc))
            return
        try:
            self.consumer.replay(version, k, v)
        except Exception:
            log.exception("offsets.replay_failed", partition=self.partition, offset=offset, key=repr(k))

    def replay_marker(self, producer_id: int, commit: bool) -> None:
        """A transaction marker: the producer's pending offset commits take effect (commit) or are dropped."""
        self.offsets.complete_transaction(producer_id, commit)

    def _replay_group(self, group_id: str, v: R.GroupValue | None) -> None:
        tl = self.timeline
        if v is None:
            g = tl.pop_item(self.groups, group_id)
            if g is not None and not g.is_(S.DEAD):
                tl.save_vars(g)
                g.transition(S.DEAD, g.state_timestamp)
            if g is not None and g.offsets:
                # the classic group is gone (deleted, or upgraded to a consumer group); its offsets stay, as
                # in Kafka, where they are kept apart from the group
                kept = Group(group_id, offsets=g.offsets, state_timestamp=g.state_timestamp)
                tl.set_item(self.groups, group_id, kept)
            return
        g = self.groups.get(group_id)
        if g is None:
            g = Group(group_id)
            tl.set_item(self.groups, group_id, g)
        else:
            tl.save_vars(g)
        g.generation, g.protocol_type, g.protocol_name = v.generation, v.protocol_type or None, v.protocol
        g.leader_id, g.state_timestamp = v.leader, v.current_state_timestamp
        g.members.clear()
        g.static_members.clear()
        for mv in v.members:
            m = Member(mv.member_id, mv.group_instance_id, mv.client_id, mv.client_host, mv.session_timeout,
                       mv.rebalance_timeout, v.protocol_type, [(v.protocol or "", mv.subscription)],
                       assignment=mv.assignment)
            g.members[m.member_id] = m
            if m.group_instance_id:
                g.static_members[m.group_instance_id] = m.member_id
        g.state = S.STABLE if g.members else S.EMPTY  # restored as loaded, not a transition
        g.update_subscribed_topics()

    def loaded(self, now_ms: int) -> None:
        """The partition is replayed to its end: members' session timers start now."""
        for g in self.groups.values():
            for m in g.members.values():
                m.heartbeat_deadline = now_ms + m.session_timeout_ms
        self.consumer.loaded(now_ms)

    # -- operations -----------------------------------------------------------------------------------
    def membership_op(self, response: Any) -> CoordinatorResult:
        """Wrap what a membership operation answered, with the records it emitted (replay=False)."""
        if isinstance(response, CoordinatorResult):
            return response
        return CoordinatorResult(self.membership.take_emitted(), response, replay=False)

    def delete_group(self, group_id: str) -> CoordinatorResult[int]:
        cg = self.consumer_groups.get(group_id)
        if cg is not None:
            if cg.members:
                return CoordinatorResult(response=E.NON_EMPTY_GROUP)
            offsets = self.groups.get(group_id)
            recs = [(R.offset_key(group_id, t, p), None) for t, p in (offsets.offsets if offsets else ())]
            recs += self.empty_consumer_group_tombstones(cg)
            if offsets is not None:
                recs.append((R.group_key(group_id), None))
            return CoordinatorResult(recs, 0, on_failure=lambda err: err)
        g = self.groups.get(group_id)
        if g is None:
            return CoordinatorResult(response=E.GROUP_ID_NOT_FOUND)
        if not g.is_(S.EMPTY, S.DEAD):
            return CoordinatorResult(response=E.NON_EMPTY_GROUP)
        recs = [(R.offset_key(group_id, t, p), None) for t, p in g.offsets]
        recs.append((R.group_key(group_id), None))
        return CoordinatorResult(recs, 0, on_failure=lambda err: err)

    def empty_consumer_group_tombstones(self, cg: ConsumerGroup) -> list:
        """The tombstones of an empty consumer group (Kafka's ConsumerGroup.createGroupTombstoneRecords): its
        regexes, target assignment epoch, subscription metadata and group epoch. Its offsets stay."""
        gid = cg.group_id
        return [CR.tombstone(CR.REGULAR_EXPRESSION, gid, rx) for rx in sorted(cg.resolved_regexes)] + [
            CR.tombstone(CR.TARGET_METADATA, gid), CR.tombstone(CR.PARTITION_METADATA, gid),
            CR.tombstone(CR.GROUP_METADATA, gid)]

    def describe_group(self, group_id: str) -> GroupDescription:
        g = self.groups.get(group_id)
        if g is None:
            return GroupDescription(E.GROUP_ID_NOT_FOUND, group_id, S.DEAD.value, "", "", [])
        members = []
        active = g.is_(S.STABLE, S.COMPLETING_REBALANCE)
        for m in g.members.values():
            md = m.metadata_for(g.protocol_name) if g.protocol_name and active else b""
            members.append(MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host, md,
                                             m.assignment if g.is_(S.STABLE) else b""))
        proto = g.protocol_name or "" if active else ""
        return GroupDescription(0, group_id, g.state.value, g.protocol_type or "", proto, members)

    # -- timers ------------------------------------------------------------------------------------------
    def next_deadline_ms(self) -> int:
        ds = [d for d in (self.membership.next_deadline_ms(), self.consumer.next_deadline_ms()) if d is not None]
        return min(ds + [self.next_expiry_check])

    def poll(self, now_ms: int) -> list[CoordinatorResult]:
        self.membership.poll(now_ms)
        out = [self.membership_op(None)] + self.consumer.poll(now_ms)
        if now_ms >= self.next_expiry_check:
            self.next_expiry_check = now_ms + self.cfg.retention_check_interval_ms
            out.append(self.offsets.expire(now_ms))
        return [r for r in out if r.records]
