"""Groups that change protocol with their members in them (KIP-848's upgrade path, Kafka 4's
GroupMetadataManager: validateOnlineUpgrade / convertToConsumerGroup, classicGroup*ToConsumerGroup,
validateOnlineDowngrade* / convertToClassicGroup), sans-IO.

* **Upgrade.** A ConsumerGroupHeartbeat joining a classic group that has members turns it into a
  consumer group when `group.consumer.migration.policy` is `upgrade` or `bidirectional` (Kafka 4's
  default), the group uses the "consumer" protocol type and it is not larger than
  `group.consumer.max.size`. Every classic member becomes a member of the consumer group at the
  generation's epoch, with its last assignment as its target and current assignment, and keeps its
  JoinGroup protocols and session timeout (ClassicMemberMetadata). Written: the classic group's
  tombstone, then the consumer group's records; the heartbeat's own records follow.
* **Classic members in a consumer group** keep speaking JoinGroup/SyncGroup/Heartbeat/LeaveGroup. A
  JoinGroup is a full heartbeat (subscription and owned partitions from the protocol metadata) answered
  at once with the member's epoch as the generation and no leader; SyncGroup answers the member's
  assigned partitions; Heartbeat answers REBALANCE_IN_PROGRESS when the member must rejoin (the group
  epoch moved, it has partitions to revoke, or partitions it waited for are free). A member that does
  not rejoin, or sync, within its rebalance timeout is fenced, as one whose session expires.
* **Downgrade.** When the last member using the consumer protocol leaves (or is fenced) and only
  classic members remain, the group becomes a classic group again when the policy is `downgrade` or
  `bidirectional` and it is not larger than `group.max.size`: Stable at the group epoch with each
  member's target assignment, then a rebalance. Written: the consumer group's tombstones and the
  classic group's GroupMetadata record.
"""
from __future__ import annotations

import uuid
from typing import Callable

import structlog

from ..wire.errors import E
from . import consumer_group_records as CR
from . import records as R
from .consumer_group import ClassicMemberMetadata, ConsumerGroup, ConsumerGroupMember, MemberState
from .consumer_group_manager import ConsumerGroupManager, GroupError, TopicLookup
from .consumer_protocol import PROTOCOL_TYPE, MalformedProtocol, decode_assignment, decode_subscription, \
    encode_assignment, version_of
from .group import Group, GroupState, Member
from .group_metadata import GroupMetadataManager, JoinResult, SyncResult
from .result import CoordinatorResult

S = GroupState
log = structlog.get_logger("kafkite.coordinator")


class GroupMigration:
    def __init__(self, cfg, consumer: ConsumerGroupManager, membership: GroupMetadataManager,
                 classic_groups: dict[str, Group], complete: Callable):
        self.cfg = cfg
        self.consumer = consumer
        self.membership = membership
        self.classic = classic_groups
        self._complete = complete
        consumer.upgrade = self.upgrade
        consumer.downgrade = self.downgrade

    def _policy(self) -> str:
        return self.cfg.consumer_migration_policy

    # -- upgrade ---------------------------------------------------------------------------------------
    def upgrade(self, classic: Group, topics: TopicLookup, now_ms: int, records: list) -> ConsumerGroup:
        gid = classic.group_id
        why = None
        if self._policy() not in ("upgrade", "bidirectional"):
            why = "the online upgrade is disabled"
        elif classic.protocol_type != PROTOCOL_TYPE:
            why = "the group does not use the consumer embedded protocol"
        elif len(classic.members) > self.cfg.consumer_max_size:
            why = "the group size exceeds the consumer group maximum size"
        if why is not None:
            log.info("consumer_group.upgrade_refused", group=gid, reason=why)
            raise GroupError(E.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group.")
        try:
            g = self._from_classic(classic, topics)
        except MalformedProtocol as exc:
            log.warning("consumer_group.upgrade_refused", group=gid, reason=str(exc))
            raise GroupError(E.GROUP_ID_NOT_FOUND, f"Cannot upgrade the classic group {gid} to consumer group "
                                                   "because the embedded consumer protocol is malformed.") from None
        # the joining member bumps the group epoch: members waiting in a JoinGroup or SyncGroup must rejoin
        for m in classic.members.values():
            if m.join_token is not None:
                self._complete(m.join_token, JoinResult(error=E.REBALANCE_IN_PROGRESS, member_id=m.member_id))
                m.join_token = None
            if m.sync_token is not None:
                self._complete(m.sync_token, SyncResult(error=E.REBALANCE_IN_PROGRESS))
                m.sync_token = None
        records.append((R.group_key(gid), None))
        members = sorted(g.members.values(), key=lambda m: m.member_id)
        records += [CR.member_metadata(gid, m) for m in members]
        records.append(CR.group_epoch(gid, g.group_epoch))
        records += [CR.target_member(gid, m.member_id, g.target[m.member_id]) for m in members]
        records.append(CR.target_epoch(gid, g.assignment_epoch))
        records += [CR.current_assignment(gid, m) for m in members]
        for m in members:
            g.session_deadlines[m.member_id] = now_ms + m.classic.session_timeout_ms
        log.info("consumer_group.upgraded", group=gid, members=len(members), epoch=g.group_epoch)
        return g

    def _from_classic(self, classic: Group, topics: TopicLookup) -> ConsumerGroup:
        """Kafka's ConsumerGroup.fromClassicGroup: every member Stable at the generation, owning its last
        assignment (also its target); partitions of topics that no longer exist are dropped."""
        gen = classic.generation
        g = ConsumerGroup(classic.group_id, group_epoch=gen, assignment_epoch=gen)
        for cm in classic.members.values():
            protocol = classic.protocol_name or (cm.protocols[0][0] if cm.protocols else "")
            sub = decode_subscription(cm.metadata_for(protocol))
            assigned: dict[uuid.UUID, frozenset[int]] = {}
            for topic, ps in decode_assignment(cm.assignment):
                tm = topics(topic)
                if tm is not None and ps:
                    assigned[tm.topic_id] = assigned.get(tm.topic_id, frozenset()) | frozenset(ps)
            m = ConsumerGroupMember(
                cm.member_id, instance_id=cm.group_instance_id, rack_id=sub.rack_id, client_id=cm.client_id,
                client_host=cm.client_host, subscribed_topic_names=frozenset(sub.topics),
                rebalance_timeout_ms=cm.rebalance_timeout_ms, member_epoch=gen, previous_member_epoch=gen,
                state=MemberState.STABLE, assigned=assigned,
                classic=ClassicMemberMetadata(cm.session_timeout_ms, tuple(cm.protocols)))
            g.members[m.member_id] = m
            if m.instance_id:
                g.static_members[m.instance_id] = m.member_id
            g.target[m.member_id] = assigned
        return g

    # -- downgrade -------------------------------------------------------------------------------------
    def downgrade(self, g: ConsumerGroup, leaving: set[str], now_ms: int,
                  joining: ConsumerGroupMember | None = None) -> list | None:
        """Kafka's validateOnlineDowngradeWithFencedMember (or, with `joining`, a classic static member
        replacing the leaving one: validateOnlineDowngradeWithReplacedMemberId) then convertToClassicGroup:
        None when the group stays a consumer group, else the records of the conversion (already applied in
        memory). A member leaving starts a rebalance; a replacing one takes the leaving one's assignment."""
        if not g.all_classic_except(leaving):
            return None
        remaining = [m for mid, m in g.members.items() if mid not in leaving]
        targets = {m.member_id: g.target.get(m.member_id, {}) for m in remaining}
        if joining is not None:
            remaining.append(joining)
            targets[joining.member_id] = next((g.target.get(mid, {}) for mid in leaving), {})
        if not remaining:
            return None  # empty: it stays an (empty) consumer group
        if self._policy() not in ("downgrade", "bidirectional"):
            log.info("consumer_group.downgrade_refused", group=g.group_id, reason="the online downgrade is disabled")
            return None
        if len(remaining) > self.cfg.max_size:
            log.info("consumer_group.downgrade_refused", group=g.group_id,
                     reason="its group size is greater than classic group max size")
            return None
        gid = g.group_id
        names = {tm.topic_id: name for name, tm in g.subscription_metadata.items()}
        # every member's records go (a replaced member's went with its replacement: the joining one's go here)
        records = self.consumer_group_tombstones(g, [m.member_id for m in remaining] if joining is not None
                                                 else list(g.members))
        cg = self.classic.get(gid)  # the classic group object holds the group's offsets
        if cg is None:
            cg = self.classic[gid] = Group(gid)
        cg.generation, cg.protocol_type, cg.state, cg.state_timestamp = g.group_epoch, PROTOCOL_TYPE, S.STABLE, now_ms
        cg.leader_id, cg.protocol_name = None, None
        cg.members.clear()
        cg.static_members.clear()
        cg.pending_members.clear()
        cg.rebalance_deadline = cg.initial_delay_deadline = None
        for m in remaining:
            cg.add(Member(m.member_id, m.instance_id, m.client_id, m.client_host, m.classic.session_timeout_ms,
                          m.rebalance_timeout_ms, PROTOCOL_TYPE, list(m.classic.protocols),
                          heartbeat_deadline=now_ms + m.classic.session_timeout_ms))
        cg.protocol_name = cg.select_protocol()
        cg.update_subscribed_topics()
        for cm in cg.members.values():
            try:
                version = version_of(cm.metadata_for(cg.protocol_name))
            except MalformedProtocol:
                version = 0
            cm.assignment = encode_assignment(targets[cm.member_id], names.get, version)
        value = R.GroupValue(PROTOCOL_TYPE, cg.generation, cg.protocol_name, cg.leader_id, now_ms, [
            R.MemberValue(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                          m.session_timeout_ms, m.metadata_for(cg.protocol_name), m.assignment)
            for m in cg.members.values()])
        records.append((R.group_key(gid), R.group_value(value)))
        del self.consumer.groups[gid]
        log.info("consumer_group.downgraded", group=gid, members=len(remaining), generation=cg.generation)
        if joining is None:
            self.membership._prepare_rebalance(cg, now_ms, f"Downgrade group {gid} from consumer to classic.")
        return records

    @staticmethod
    def consumer_group_tombstones(g: ConsumerGroup, member_ids=None) -> list:
        """Kafka's ConsumerGroup.createGroupTombstoneRecords: every member's records, then the group's."""
        gid, mids = g.group_id, sorted(g.members if member_ids is None else member_ids)
        return ([CR.tombstone(CR.CURRENT_ASSIGNMENT, gid, mid) for mid in mids]
                + [CR.tombstone(CR.TARGET_MEMBER, gid, mid) for mid in mids]
                + [CR.tombstone(CR.TARGET_METADATA, gid)]
                + [CR.tombstone(CR.MEMBER_METADATA, gid, mid) for mid in mids]
                + [CR.tombstone(CR.REGULAR_EXPRESSION, gid, rx) for rx in sorted(g.resolved_regexes)]
                + [CR.tombstone(CR.PARTITION_METADATA, gid), CR.tombstone(CR.GROUP_METADATA, gid)])

    # -- classic members in a consumer group ------------------------------------------------------------
    def join(self, g: ConsumerGroup, *, member_id: str, group_instance_id: str | None, protocol_type: str,
             protocols: list[tuple[str, bytes]], session_timeout_ms: int, rebalance_timeout_ms: int,
             client_id: str, client_host: str, require_known_member_id: bool, topics: TopicLookup, now_ms: int,
             **_) -> CoordinatorResult[JoinResult]:
        """Kafka's classicGroupJoinToConsumerGroup."""
        mid = member_id or str(uuid.uuid4())
        records: list = []
        try:
            if not self.cfg.min_session_timeout_ms <= session_timeout_ms <= self.cfg.max_session_timeout_ms:
                raise GroupError(E.INVALID_SESSION_TIMEOUT)
            self.consumer.check_size(g, mid)
            if not g.supports_classic_protocols(protocol_type, {n for n, _ in protocols}):
                raise GroupError(E.INCONSISTENT_GROUP_PROTOCOL, f"Member {mid}'s protocols are not supported.")
            if require_known_member_id and not member_id and group_instance_id is None:
                log.info("consumer_group.classic_member_id_required", group=g.group_id, member=mid)
                return CoordinatorResult(response=JoinResult(error=E.MEMBER_ID_REQUIRED, member_id=mid))
            try:
                sub = decode_subscription(protocols[0][1])
            except MalformedProtocol as exc:
                raise GroupError(E.INCONSISTENT_GROUP_PROTOCOL, str(exc)) from None
            replaced = None
            old = g.static_member(group_instance_id) if group_instance_id is not None else None
            if old is None:
                member = g.members.get(mid) or ConsumerGroupMember(mid)
            elif old.member_id == mid:
                member = old
            else:  # the static member's new incarnation takes its place (no release needed for classic ones)
                member, replaced = old.copy(member_id=mid, member_epoch=0, previous_member_epoch=0), old
            if rebalance_timeout_ms < 0:
                rebalance_timeout_ms = session_timeout_ms
            updated = member.copy(
                instance_id=group_instance_id if group_instance_id is not None else member.instance_id,
                rack_id=sub.rack_id if sub.rack_id is not None else member.rack_id,
                rebalance_timeout_ms=rebalance_timeout_ms, subscribed_topic_names=frozenset(sub.topics),
                client_id=client_id, client_host=client_host,
                classic=ClassicMemberMetadata(session_timeout_ms, tuple((n, bytes(md)) for n, md in protocols)))
            owned = [(tm.topic_id, ps) for t, ps in sub.owned if (tm := topics(t)) is not None]
            reconciled = self.consumer.update_member(g, member, updated, replaced, owned, topics, now_ms, records)
        except GroupError as exc:
            return CoordinatorResult(response=JoinResult(error=exc.code, member_id=member_id))
        log.info("consumer_group.classic_member_joined", group=g.group_id, member=mid, epoch=reconciled.member_epoch,
                 state=reconciled.state.name)
        resp = JoinResult(0, reconciled.member_epoch, PROTOCOL_TYPE, updated.classic.protocol_name, "", mid, [])
        if replaced is not None:
            # the last consumer-protocol member, static, replaced by a classic one: maybe a classic group again
            converted = self.downgrade(g, {replaced.member_id}, now_ms, joining=reconciled)
            if converted is not None:
                return CoordinatorResult(records + converted, resp, replay=False,
                                         on_failure=lambda err: JoinResult(error=err, member_id=mid))

        def joined() -> None:
            g.join_deadlines.pop(mid, None)
            g.session_deadlines[mid] = now_ms + session_timeout_ms
            g.sync_deadlines[mid] = now_ms + rebalance_timeout_ms
        return CoordinatorResult(records, resp, on_success=joined,
                                 on_failure=lambda err: JoinResult(error=err, member_id=mid))

    def _classic_member(self, g: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
        """Kafka's validateConsumerGroupMember then throwIfMemberDoesNotUseClassicProtocol."""
        if instance_id is None:
            m = g.members.get(member_id)
            if m is None:
                raise GroupError(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {g.group_id}.")
        else:
            m = g.static_member(instance_id)
            if m is None:
                raise GroupError(E.UNKNOWN_MEMBER_ID, f"Member with instance id {instance_id} is not a member of "
                                                      f"group {g.group_id}.")
            if m.member_id != member_id:
                raise GroupError(E.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id {instance_id} "
                                                       f"was fenced by member {m.member_id}.")
        if not m.uses_classic:
            raise GroupError(E.UNKNOWN_MEMBER_ID, f"Member {m.member_id} does not use the classic protocol.")
        return m

    @staticmethod
    def _check_generation(m: ConsumerGroupMember, generation_id: int) -> None:
        if generation_id != m.member_epoch:
            raise GroupError(E.ILLEGAL_GENERATION, f"The request generation id {generation_id} is not equal to the "
                                                   f"member epoch {m.member_epoch} of member {m.member_id}.")

    def sync(self, g: ConsumerGroup, *, generation_id: int, member_id: str, group_instance_id: str | None,
             protocol_type: str | None, protocol_name: str | None, now_ms: int, **_
             ) -> CoordinatorResult[SyncResult]:
        """Kafka's classicGroupSyncToConsumerGroup: the member's assigned partitions, in its protocol's version."""
        try:
            if not g.members:
                raise GroupError(E.UNKNOWN_MEMBER_ID)
            m = self._classic_member(g, member_id, group_instance_id)
            self._check_generation(m, generation_id)
            if protocol_type is not None and protocol_type != PROTOCOL_TYPE:
                raise GroupError(E.INCONSISTENT_GROUP_PROTOCOL)
            if protocol_name is not None and protocol_name != m.classic.protocol_name:
                raise GroupError(E.INCONSISTENT_GROUP_PROTOCOL)
            if g.group_epoch > m.member_epoch and m.state != MemberState.UNREVOKED_PARTITIONS:
                # a new rebalance began: it must rejoin to catch up
                g.join_deadlines.setdefault(m.member_id, now_ms + m.rebalance_timeout_ms)
                raise GroupError(E.REBALANCE_IN_PROGRESS)
        except GroupError as exc:
            return CoordinatorResult(response=SyncResult(error=exc.code))
        names = {tm.topic_id: name for name, tm in g.subscription_metadata.items()}
        try:
            version = version_of(m.classic.protocols[0][1])
        except (MalformedProtocol, IndexError):
            version = 0
        assignment = encode_assignment(m.assigned, names.get, version)

        def synced() -> None:
            g.sync_deadlines.pop(m.member_id, None)
            g.session_deadlines[m.member_id] = now_ms + m.classic.session_timeout_ms
        return CoordinatorResult([], SyncResult(0, protocol_type, protocol_name, assignment), on_success=synced)

    def heartbeat(self, g: ConsumerGroup, *, generation_id: int, member_id: str, group_instance_id: str | None,
                  now_ms: int, **_) -> CoordinatorResult[int]:
        """Kafka's classicGroupHeartbeatToConsumerGroup: REBALANCE_IN_PROGRESS tells a classic member to rejoin."""
        try:
            m = self._classic_member(g, member_id, group_instance_id)
            self._check_generation(m, generation_id)
        except GroupError as exc:
            return CoordinatorResult(response=exc.code)
        g.session_deadlines[m.member_id] = now_ms + m.classic.session_timeout_ms
        if m.member_epoch < g.group_epoch or m.state == MemberState.UNREVOKED_PARTITIONS or (
                m.state == MemberState.UNRELEASED_PARTITIONS and not self._waiting_on_unreleased(g, m)):
            g.join_deadlines.setdefault(m.member_id, now_ms + m.rebalance_timeout_ms)
            return CoordinatorResult(response=int(E.REBALANCE_IN_PROGRESS))
        return CoordinatorResult(response=0)

    @staticmethod
    def _waiting_on_unreleased(g: ConsumerGroup, m: ConsumerGroupMember) -> bool:
        epochs = g.partition_epochs()
        return any(p not in m.assigned.get(t, ()) and (t, p) in epochs
                   for t, ps in g.target.get(m.member_id, {}).items() for p in ps)

    def leave(self, g: ConsumerGroup, *, members: list[tuple[str, str | None]], now_ms: int
              ) -> CoordinatorResult[tuple[int, list]]:
        """Kafka's classicGroupLeaveToConsumerGroup: classic members leave; the group epoch moves once."""
        out, leaving = [], []
        for mid, iid in members:
            try:
                if iid is None:
                    m = g.members.get(mid)
                    if m is None:
                        raise GroupError(E.UNKNOWN_MEMBER_ID)
                else:
                    m = g.static_member(iid)
                    if m is None:
                        raise GroupError(E.UNKNOWN_MEMBER_ID)
                    if mid and m.member_id != mid:
                        raise GroupError(E.FENCED_INSTANCE_ID)
                if not m.uses_classic:
                    raise GroupError(E.UNKNOWN_MEMBER_ID)
            except GroupError as exc:
                out.append((mid, iid, exc.code))
                continue
            if m not in leaving:
                leaving.append(m)
            log.info("consumer_group.classic_member_left", group=g.group_id, member=m.member_id)
            out.append((m.member_id, iid, 0))
        records = self.consumer._fence_records(g, *leaving) if leaving else []
        return CoordinatorResult(records, (0, out))
