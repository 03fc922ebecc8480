"""ConsumerGroupHeartbeat and the life of KIP-848 consumer groups on one shard (the consumer-group
half of Kafka 4's GroupMetadataManager), sans-IO.

An operation reads the groups, decides, and returns a CoordinatorResult: the records to write and
the response. It changes nothing itself (timers aside): the runtime appends the records and the
shard's `replay` applies them -- the same replay that loads the partition after a restart. A
heartbeat (1) creates or updates the member and bumps the group epoch when its subscription or the
subscribed topics' partition counts changed, (2) recomputes the target assignment when the group
epoch is ahead of the assignment epoch, (3) moves the member towards its target
(reconciliation.py). Sessions and rebalance timeouts fence members in `poll`.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Callable, Iterable, Protocol

import structlog

from ..wire.errors import E
from . import consumer_group_records as CR
from .assignors import ASSIGNORS, Racks
from .consumer_group import (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH, ClassicMemberMetadata,
                             ConsumerGroup, ConsumerGroupMember, MemberState)
from .consumer_group_records import Assignment, TopicMetadata
from .reconciliation import FencedMemberEpoch, next_state
from . import regex_refresh
from .regex import INVALID_REGULAR_EXPRESSION, InvalidRegularExpression, ResolvedRegularExpression, check_regex
from .result import CoordinatorResult
from .timeline import SnapshotRegistry

log = structlog.get_logger("kafkite.coordinator")
TopicLookup = Callable[[str], "TopicMetadata | None"]


class TopicsImage(Protocol):
    """The cluster's topics as the heartbeat sees them: a lookup by name, every name (for regexes), and a
    version that changes whenever the topics may have (created, deleted, partitions added)."""
    version: int

    def __call__(self, name: str) -> TopicMetadata | None: ...

    def names(self) -> Iterable[str]: ...


class GroupError(Exception):
    def __init__(self, code: int, message: str | None = None):
        super().__init__(message)
        self.code, self.message = int(code), message


@dataclass
class HeartbeatResult:
    error: int = 0
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


@dataclass
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: list[tuple[uuid.UUID, list[int]]] | None = None  # TopicPartitions; None: not sent
    client_id: str = ""
    client_host: str = ""
    # the topics among those given that the member may DESCRIBE (None: no authorizer); regex matches are
    # filtered with it, as Kafka 4's refreshRegularExpressions (KAFKA-18813)
    describable: Callable[[Iterable[str]], set[str]] | None = None


def check_heartbeat(r: HeartbeatRequest, assignors: list[str], api_version: int) -> None:
    """Kafka 4's throwIfConsumerGroupHeartbeatRequestIsInvalid, with its messages. From v1 the client
    generates its member id (KIP-1082), so it is required on every request; v0 may join without one."""
    def bad(msg: str):
        raise GroupError(E.INVALID_REQUEST, msg)
    if (api_version >= 1 or r.member_epoch > 0 or r.member_epoch == LEAVE_GROUP_MEMBER_EPOCH) and not r.member_id:
        bad("MemberId can't be empty.")
    if r.group_id == "":
        bad("GroupId can't be empty.")
    if r.instance_id == "":
        bad("InstanceId can't be empty.")
    if r.rack_id == "":
        bad("RackId can't be empty.")
    if r.member_epoch == 0:
        if r.rebalance_timeout_ms == -1:
            bad("RebalanceTimeoutMs must be provided in first request.")
        if r.owned is None or r.owned:
            bad("TopicPartitions must be empty when (re-)joining.")
        # an empty list of names (or an empty regex) is a member subscribed to nothing, still in the group
        if r.subscribed_topic_names is None and r.subscribed_topic_regex is None:
            bad("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
    elif r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if r.instance_id is None:
            bad("InstanceId can't be null.")
    elif r.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        bad("MemberEpoch is invalid.")
    if r.server_assignor is not None and r.server_assignor not in assignors:
        raise GroupError(E.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {r.server_assignor} is not supported. "
                                                 f"Supported assignors: {', '.join(assignors)}.")
    if r.subscribed_topic_regex:  # "" is no regex (librdkafka sends it with a names-only subscription)
        try:
            check_regex(r.subscribed_topic_regex)
        except InvalidRegularExpression as exc:
            raise GroupError(INVALID_REGULAR_EXPRESSION, str(exc)) from None


def classic_of(value) -> ClassicMemberMetadata | None:
    """The ClassicMemberMetadata of a ConsumerGroupMemberMetadataValue (None: a consumer-protocol member)."""
    if value is None:
        return None
    return ClassicMemberMetadata(value.session_timeout_ms,
                                 tuple((p.name, bytes(p.metadata or b"")) for p in value.supported_protocols or ()))


def _is_subset(owned, assigned: Assignment) -> bool:
    if owned is None:
        return False
    return all(p in assigned.get(t, ()) for t, ps in owned for p in ps)


def _check_epoch(m: ConsumerGroupMember, received: int, owned) -> None:
    """Kafka's throwIfConsumerGroupMemberEpochIsInvalid: a member one epoch behind whose answer was lost
    may come back with its previous epoch, owning a subset of its assignment."""
    if received > m.member_epoch:
        raise GroupError(E.FENCED_MEMBER_EPOCH, f"The consumer group member has a greater member epoch ({received})"
                         f" than the one known by the group coordinator ({m.member_epoch}). The member must "
                         "abandon all its partitions and rejoin.")
    if received < m.member_epoch and (received != m.previous_member_epoch or not _is_subset(owned, m.assigned)):
        raise GroupError(E.FENCED_MEMBER_EPOCH, f"The consumer group member has a smaller member epoch ({received})"
                         f" than the one known by the group coordinator ({m.member_epoch}). The member must "
                         "abandon all its partitions and rejoin.")


def _unknown_member(member_id: str, group_id: str) -> GroupError:
    return GroupError(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")


class ConsumerGroupManager:
    def __init__(self, cfg, groups: dict[str, ConsumerGroup], classic_groups: dict,
                 timeline: SnapshotRegistry | None = None):
        self.cfg = cfg
        self.groups = groups
        self.timeline = timeline if timeline is not None else SnapshotRegistry()  # the replay's changes
        self.classic = classic_groups
        # set by the shard (consumer_group_migration.py): the online upgrade of a classic group with members
        # (raises GroupError when it is not allowed) and the downgrade when only classic members would remain
        self.upgrade: Callable | None = None
        self.downgrade: Callable | None = None
        self.regex_jobs: list[regex_refresh.RegexJob] = []  # background resolutions for the runtime to run

    # -- lookups -------------------------------------------------------------------------------------
    def group(self, group_id: str, create: bool, topics: TopicLookup | None = None, now_ms: int = 0,
              records: list | None = None) -> ConsumerGroup:
        """Kafka's getOrMaybeCreateConsumerGroup: the consumer group, or a new one when `create`; a classic
        group with members is upgraded online when `create` and group.consumer.migration.policy allow it
        (the conversion's records are appended to `records`), else the group is not a consumer group."""
        g = self.groups.get(group_id)
        if g is not None:
            return g
        classic = self.classic.get(group_id)
        if classic is not None and classic.members:
            if create and self.upgrade is not None and topics is not None and records is not None:
                return self.upgrade(classic, topics, now_ms, records)
            raise GroupError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if not create:
            raise GroupError(E.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        return ConsumerGroup(group_id)  # its first records create it at replay

    # -- ConsumerGroupHeartbeat -----------------------------------------------------------------------
    def heartbeat(self, r: HeartbeatRequest, topics: TopicLookup | TopicsImage, now_ms: int, api_version: int = 1
                  ) -> CoordinatorResult[HeartbeatResult]:
        try:
            check_heartbeat(r, self.cfg.consumer_assignors, api_version)
            if r.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(r, now_ms)
            return self._heartbeat(r, topics, now_ms)
        except GroupError as exc:
            return CoordinatorResult(response=HeartbeatResult(exc.code, exc.message))

    def _heartbeat(self, r: HeartbeatRequest, topics: TopicLookup | TopicsImage, now_ms: int) -> CoordinatorResult:
        records: list = []
        joining = r.member_epoch == 0
        g = self.group(r.group_id, create=joining, topics=topics, now_ms=now_ms, records=records)
        self.check_size(g, r.member_id)
        member_id = r.member_id or str(uuid.uuid4())
        member, replaced = self._member(g, member_id, r, joining)

        updated = member.copy(
            instance_id=r.instance_id if r.instance_id is not None else member.instance_id,
            rack_id=r.rack_id if r.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=r.rebalance_timeout_ms if r.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            server_assignor=r.server_assignor if r.server_assignor is not None else member.server_assignor,
            subscribed_topic_names=frozenset(r.subscribed_topic_names) if r.subscribed_topic_names is not None
            else frozenset() if r.member_epoch == 0 and r.subscribed_topic_regex is not None
            else member.subscribed_topic_names,
            subscribed_topic_regex=(r.subscribed_topic_regex or None) if r.subscribed_topic_regex is not None
            else member.subscribed_topic_regex,
            client_id=r.client_id, client_host=r.client_host)
        new_member = member_id not in g.members
        reconciled = self.update_member(g, member, updated, replaced, r.owned, topics, now_ms, records,
                                        r.describable)
        g.session_deadlines[member_id] = now_ms + self.cfg.session_timeout_ms(g.group_id)
        created = g.group_id not in self.groups
        self.groups.setdefault(g.group_id, g)  # a new group: the replay of the records fills it

        full = joining or (r.rebalance_timeout_ms != -1 and r.subscribed_topic_names is not None
                           and r.owned is not None)
        changed = reconciled.assigned != member.assigned or new_member
        resp = HeartbeatResult(0, None, member_id, reconciled.member_epoch,
                               self.cfg.heartbeat_interval_ms(g.group_id),
                               dict(reconciled.assigned) if full or changed else None)
        def failed(err: int) -> HeartbeatResult:
            # nothing was applied; a group this heartbeat created (or converted from a classic one) is not left
            if created and self.groups.get(g.group_id) is g:
                del self.groups[g.group_id]
            g.session_deadlines.pop(member_id, None)
            return HeartbeatResult(err)
        return CoordinatorResult(records, resp, on_failure=failed)

    def check_size(self, g: ConsumerGroup, member_id: str) -> None:
        """Kafka's throwIfConsumerGroupIsFull: a member not in the group yet cannot join a full one."""
        if len(g.members) >= self.cfg.consumer_max_size and (not member_id or member_id not in g.members):
            raise GroupError(E.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its maximum capacity of "
                                                       f"{self.cfg.consumer_max_size} members.")

    def update_member(self, g: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember,
                      replaced: ConsumerGroupMember | None, owned, topics: TopicLookup | TopicsImage, now_ms: int,
                      records: list, describable=None) -> ConsumerGroupMember:
        """The steps a heartbeat (or a classic member's JoinGroup) takes for `member` becoming `updated`: its
        subscription written, the group epoch bumped when subscriptions or partition counts changed, the
        target assignment recomputed when the group epoch is ahead, and the member reconciled towards its
        target (given what it reports it `owned`). Appends the records; returns the reconciled member."""
        member_id = updated.member_id
        if replaced is not None:  # a static member back with a new member id: the old one goes
            records += self._remove_member_records(g.group_id, replaced.member_id)
        new_member = member_id not in g.members
        bump = False
        if new_member or not updated.subscription_equals(member):
            records.append(CR.member_metadata(g.group_id, updated))
            # a static member's new incarnation takes its place: the same subscription bumps nothing
            bump = (new_member and replaced is None) or updated.subscribed_topic_names != member.subscribed_topic_names \
                or updated.subscribed_topic_regex != member.subscribed_topic_regex
        # 1. regexes resolved, subscription metadata and group epoch
        members = {mid: m for mid, m in g.members.items() if replaced is None or mid != replaced.member_id}
        members[member_id] = updated
        resolved = self._resolve_regexes(g, members.values(), topics, now_ms, records, describable)
        bump = bump or regex_refresh.changed(g.resolved_regexes, resolved)
        names = g.subscribed_topic_names(exclude=member_id, extra=updated, resolved=resolved)
        metadata = {n: tm for n in sorted(names) if (tm := topics(n)) is not None}
        if metadata != g.subscription_metadata:
            records.append(CR.partition_metadata(g.group_id, metadata))
            bump = True
        group_epoch = g.group_epoch + 1 if bump else g.group_epoch
        if bump:
            records.append(CR.group_epoch(g.group_id, group_epoch))

        # 2. target assignment
        if group_epoch > g.assignment_epoch:
            target_all = self._compute_target(g, members, metadata, resolved)
            for mid, a in sorted(target_all.items()):
                if g.target.get(mid) != a or (mid == member_id and replaced is not None):
                    records.append(CR.target_member(g.group_id, mid, a))
            records.append(CR.target_epoch(g.group_id, group_epoch))
            target_epoch, target = group_epoch, target_all.get(member_id, {})
        elif replaced is not None:  # the new incarnation inherits the old one's target
            target_epoch, target = g.assignment_epoch, g.target.get(replaced.member_id, {})
            records.append(CR.target_member(g.group_id, member_id, target))
        else:
            target_epoch, target = g.assignment_epoch, g.target.get(member_id, {})

        # 3. reconciliation
        epochs = g.partition_epochs()
        if replaced is not None:
            epochs = {tp: e for tp, e in epochs.items()
                      if tp[1] not in replaced.assigned.get(tp[0], ()) and tp[1] not in
                      replaced.pending_revocation.get(tp[0], ())}
        for t, ps in list(updated.assigned.items()) + list(updated.pending_revocation.items()):
            for p in ps:
                epochs.pop((t, p), None)  # its own partitions do not block it
        try:
            reconciled = updated if updated.is_reconciled_to(target_epoch) else next_state(
                updated, target_epoch, target, lambda t, p: epochs.get((t, p), -1), owned)
        except FencedMemberEpoch as exc:
            raise GroupError(E.FENCED_MEMBER_EPOCH, str(exc)) from None
        if new_member or not reconciled.assignment_equals(member) or replaced is not None:
            records.append(CR.current_assignment(g.group_id, reconciled))
            # the revocation timer is the consumer protocol's; a classic member has join and sync timers
            if reconciled.state == MemberState.UNREVOKED_PARTITIONS and not reconciled.uses_classic and \
                    reconciled.member_epoch != g.rebalance_deadlines.get(member_id, (0, None))[1]:
                g.rebalance_deadlines[member_id] = (now_ms + max(reconciled.rebalance_timeout_ms, 0),
                                                    reconciled.member_epoch)
            elif reconciled.state != MemberState.UNREVOKED_PARTITIONS:
                g.rebalance_deadlines.pop(member_id, None)
        if replaced is not None:
            for timers in (g.session_deadlines, g.rebalance_deadlines, g.join_deadlines, g.sync_deadlines):
                timers.pop(replaced.member_id, None)
        return reconciled

    def _member(self, g: ConsumerGroup, member_id: str, r: HeartbeatRequest, joining: bool
                ) -> tuple[ConsumerGroupMember, ConsumerGroupMember | None]:
        """(the member as it is now, the static member it replaces or None)."""
        if r.instance_id is None:
            m = g.members.get(member_id)
            if m is None:
                if not joining:
                    raise _unknown_member(member_id, g.group_id)
                return ConsumerGroupMember(member_id), None
            if joining:  # a member that joins again under its id starts over, owning nothing
                return m.copy(member_epoch=0, previous_member_epoch=0, state=MemberState.STABLE, assigned={},
                              pending_revocation={}), None
            _check_epoch(m, r.member_epoch, r.owned)
            return m, None
        old = g.static_member(r.instance_id)
        if joining:
            if old is None:
                m = g.members.get(member_id)
                return (m.copy(member_epoch=0, previous_member_epoch=0) if m else ConsumerGroupMember(member_id)), None
            if old.member_id == member_id:
                return old.copy(member_epoch=0, previous_member_epoch=0, state=MemberState.STABLE,
                                assigned={}, pending_revocation={}), None
            if old.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise GroupError(E.UNRELEASED_INSTANCE_ID,
                                 f"Static member {member_id} with instance id {r.instance_id} cannot join the group "
                                 f"because the instance id is owned by {old.member_id} member.")
            # the new incarnation takes the old one's place and assignment
            return old.copy(member_id=member_id, member_epoch=0, previous_member_epoch=0), old
        if old is None:
            raise GroupError(E.UNKNOWN_MEMBER_ID, f"Instance id {r.instance_id} is unknown.")
        if old.member_id != member_id:
            raise GroupError(E.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id {r.instance_id} "
                                                   f"was fenced by member {old.member_id}.")
        _check_epoch(old, r.member_epoch, r.owned)
        return old, None

    def _resolve_regexes(self, g: ConsumerGroup, members: Iterable[ConsumerGroupMember], topics: TopicsImage,
                         now_ms: int, records: list, describable=None) -> dict[str, ResolvedRegularExpression]:
        """The group's regexes after this heartbeat (resolved again when needed, here or in a worker thread:
        regex_refresh.py). The matches are the topics the member whose heartbeat resolves may DESCRIBE, as
        Kafka's (members of other permissions share that resolution)."""
        return regex_refresh.at_heartbeat(g, members, topics, now_ms, records, describable,
                                          self.cfg.consumer_regex_refresh_interval_ms, self.regex_jobs)

    def _compute_target(self, g: ConsumerGroup, members: dict[str, ConsumerGroupMember],
                        metadata: dict[str, TopicMetadata],
                        resolved: dict[str, ResolvedRegularExpression] | None = None) -> dict[str, Assignment]:
        by_id = {tm.topic_id: tm.num_partitions for tm in metadata.values()}
        subs = {mid: frozenset(metadata[n].topic_id for n in g.member_topics(m, resolved) if n in metadata)
                for mid, m in members.items()}
        default = self.cfg.consumer_assignors[0]
        counts: dict[str, int] = {}
        for m in members.values():
            if m.server_assignor:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        name = max(sorted(counts), key=lambda a: counts[a]) if counts else default
        racks = Racks({mid: m.rack_id for mid, m in members.items() if m.rack_id},
                      {tm.topic_id: tm.racks for tm in metadata.values() if tm.racks})
        return ASSIGNORS[name](subs, by_id, g.target, racks)

    # -- leaving and fencing --------------------------------------------------------------------------
    def _leave(self, r: HeartbeatRequest, now_ms: int) -> CoordinatorResult:
        g = self.groups.get(r.group_id)
        if g is None:
            self.group(r.group_id, create=False)  # raises: not found / not a consumer group
        if r.instance_id is None:
            m = g.members.get(r.member_id)
            if m is None:
                raise _unknown_member(r.member_id, r.group_id)
        else:
            m = g.static_member(r.instance_id)
            if m is None:
                raise GroupError(E.UNKNOWN_MEMBER_ID, f"Instance id {r.instance_id} is unknown.")
            if m.member_id != r.member_id:
                raise GroupError(E.FENCED_INSTANCE_ID, f"Static member {r.member_id} with instance id "
                                                       f"{r.instance_id} was fenced by member {m.member_id}.")
            if r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # it keeps its partitions for its session timeout, to come back with them
                left = m.copy(member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={})
                g.rebalance_deadlines.pop(m.member_id, None)
                log.info("consumer_group.static_member_left", group=g.group_id, member=m.member_id)
                return CoordinatorResult([CR.current_assignment(g.group_id, left)],
                                         HeartbeatResult(0, None, m.member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH))
        log.info("consumer_group.member_left", group=g.group_id, member=m.member_id)
        return self.fence(g, [m], HeartbeatResult(0, None, r.member_id, r.member_epoch), now_ms)

    def _remove_member_records(self, group_id: str, member_id: str) -> list:
        return [CR.tombstone(CR.CURRENT_ASSIGNMENT, group_id, member_id),
                CR.tombstone(CR.TARGET_MEMBER, group_id, member_id),
                CR.tombstone(CR.MEMBER_METADATA, group_id, member_id)]

    def fence(self, g: ConsumerGroup, members: list[ConsumerGroupMember], response, now_ms: int) -> CoordinatorResult:
        """Kafka's consumerGroupFenceMember: the members leave; when only classic members would remain and
        the policy allows it, the group is downgraded to a classic group instead (in memory at once, as
        Kafka does: its records are written, not replayed)."""
        if self.downgrade is not None:
            records = self.downgrade(g, {m.member_id for m in members}, now_ms)
            if records is not None:
                return CoordinatorResult(records, response, replay=False)
        return CoordinatorResult(self._fence_records(g, *members), response)

    def _fence_records(self, g: ConsumerGroup, *members: ConsumerGroupMember) -> list:
        """The records removing members (Kafka's consumerGroupFenceMember): their tombstones, the subscription
        metadata without them when it changes, and the next group epoch."""
        records = []
        for m in members:
            records += self._remove_member_records(g.group_id, m.member_id)
            for timers in (g.session_deadlines, g.rebalance_deadlines, g.join_deadlines, g.sync_deadlines):
                timers.pop(m.member_id, None)
        gone = {m.member_id for m in members}
        names = {n for mid, x in g.members.items() if mid not in gone for n in g.member_topics(x)}
        in_use = {x.subscribed_topic_regex for mid, x in g.members.items() if mid not in gone}
        for rx in sorted(set(g.resolved_regexes) - in_use):
            records.append(CR.tombstone(CR.REGULAR_EXPRESSION, g.group_id, rx))
            g.regex_checked.pop(rx, None)
        metadata = {n: tm for n, tm in g.subscription_metadata.items() if n in names}
        if metadata != g.subscription_metadata:
            records.append(CR.partition_metadata(g.group_id, metadata))
        records.append(CR.group_epoch(g.group_id, g.group_epoch + 1))
        return records

    # -- timers ---------------------------------------------------------------------------------------
    def next_deadline_ms(self) -> int | None:
        ds = [d for g in self.groups.values() for d in g.session_deadlines.values()]
        ds += [d for g in self.groups.values() for d, _ in g.rebalance_deadlines.values()]
        ds += [d for g in self.groups.values() for t in (g.join_deadlines, g.sync_deadlines) for d in t.values()]
        return min(ds, default=None)

    def poll(self, now_ms: int) -> list[CoordinatorResult]:
        """Fence the members whose session expired, or that did not revoke within their rebalance timeout."""
        out = []
        for g in list(self.groups.values()):
            fenced: list[ConsumerGroupMember] = []
            for mid, deadline in sorted(g.session_deadlines.items()):
                m = g.members.get(mid)
                if m is None:
                    g.session_deadlines.pop(mid, None)
                elif deadline <= now_ms:
                    log.info("consumer_group.session_expired", group=g.group_id, member=mid)
                    fenced.append(m)
            for mid, (deadline, epoch) in sorted(g.rebalance_deadlines.items()):
                m = g.members.get(mid)
                if m is None or m.state != MemberState.UNREVOKED_PARTITIONS or m.member_epoch != epoch:
                    g.rebalance_deadlines.pop(mid, None)
                elif deadline <= now_ms and m not in fenced:
                    log.info("consumer_group.rebalance_timeout", group=g.group_id, member=mid)
                    fenced.append(m)
            for timers, event in ((g.join_deadlines, "consumer_group.classic_join_timeout"),
                                  (g.sync_deadlines, "consumer_group.classic_sync_timeout")):
                for mid, deadline in sorted(timers.items()):
                    m = g.members.get(mid)
                    if m is None:
                        timers.pop(mid, None)
                    elif deadline <= now_ms and m not in fenced:
                        log.info(event, group=g.group_id, member=mid)
                        fenced.append(m)
            if fenced:  # one write: every fenced member's tombstones, one new group epoch
                out.append(self.fence(g, fenced, None, now_ms))
        return out

    def loaded(self, now_ms: int) -> None:
        for g in self.groups.values():
            for mid, m in g.members.items():
                g.session_deadlines[mid] = now_ms + (m.classic.session_timeout_ms if m.classic is not None
                                                     else self.cfg.session_timeout_ms(g.group_id))

    # -- offsets -------------------------------------------------------------------------------------
    def validate_offset_commit(self, g: ConsumerGroup, member_id: str, member_epoch: int, api_version: int,
                               transactional: bool = False) -> int:
        """Kafka's ConsumerGroup.validateOffsetCommit -> 0 or the error."""
        if member_epoch < 0 and not g.members:
            return 0
        m = g.members.get(member_id)
        if m is None:
            return int(E.UNKNOWN_MEMBER_ID)
        if not transactional and not m.uses_classic and api_version < 9:
            return int(E.UNSUPPORTED_VERSION)
        if member_epoch != m.member_epoch:  # a classic member's generation is its member epoch
            return int(E.ILLEGAL_GENERATION if m.uses_classic else E.STALE_MEMBER_EPOCH)
        return 0

    def validate_offset_fetch(self, g: ConsumerGroup, member_id: str | None, member_epoch: int) -> int:
        if member_id is None and member_epoch < 0:
            return 0
        m = g.members.get(member_id or "")
        if m is None:
            return int(E.UNKNOWN_MEMBER_ID)
        if member_epoch != m.member_epoch:
            return int(E.ILLEGAL_GENERATION if m.uses_classic else E.STALE_MEMBER_EPOCH)
        return 0

    # -- replay --------------------------------------------------------------------------------------
    def replay(self, version: int, key, value) -> None:
        """Apply one record; every change goes through the shard's timeline (a failed write is undone)."""
        gid = key.group_id
        g = self.groups.get(gid)
        tl = self.timeline
        if value is None:
            if g is None:
                return
            if version == CR.GROUP_METADATA:
                tl.pop_item(self.groups, gid)
            elif version == CR.PARTITION_METADATA:
                tl.set_attr(g, "subscription_metadata", {})
            elif version == CR.MEMBER_METADATA:
                m = tl.pop_item(g.members, key.member_id)
                if m is not None and m.instance_id and g.static_members.get(m.instance_id) == m.member_id:
                    tl.pop_item(g.static_members, m.instance_id)
            elif version == CR.TARGET_METADATA:
                tl.set_attr(g, "assignment_epoch", 0)
            elif version == CR.TARGET_MEMBER:
                tl.pop_item(g.target, key.member_id)
            elif version == CR.REGULAR_EXPRESSION:
                tl.pop_item(g.resolved_regexes, key.regular_expression)
            elif version == CR.CURRENT_ASSIGNMENT:
                m = g.members.get(key.member_id)
                if m is not None:
                    tl.set_item(g.members, key.member_id, m.copy(
                        member_epoch=0, previous_member_epoch=0, assigned={}, pending_revocation={},
                        state=MemberState.STABLE))
            return
        if g is None:
            g = ConsumerGroup(gid)
            tl.set_item(self.groups, gid, g)
        if version == CR.GROUP_METADATA:
            tl.set_attr(g, "group_epoch", value.epoch)
        elif version == CR.PARTITION_METADATA:
            tl.set_attr(g, "subscription_metadata", {t.topic_name: CR.topic_metadata_of(t) for t in value.topics})
        elif version == CR.MEMBER_METADATA:
            m = g.members.get(key.member_id) or ConsumerGroupMember(key.member_id)
            tl.set_item(g.members, key.member_id, m.copy(
                instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
                client_host=value.client_host, subscribed_topic_names=frozenset(value.subscribed_topic_names),
                subscribed_topic_regex=value.subscribed_topic_regex or None,
                rebalance_timeout_ms=value.rebalance_timeout_ms, server_assignor=value.server_assignor,
                classic=classic_of(value.classic_member_metadata)))
            if value.instance_id:
                tl.set_item(g.static_members, value.instance_id, key.member_id)
        elif version == CR.REGULAR_EXPRESSION:
            tl.set_item(g.resolved_regexes, key.regular_expression, ResolvedRegularExpression(
                frozenset(value.topics), value.version, value.timestamp))
        elif version == CR.TARGET_METADATA:
            tl.set_attr(g, "assignment_epoch", value.assignment_epoch)
        elif version == CR.TARGET_MEMBER:
            tl.set_item(g.target, key.member_id, CR.assignment_of(value.topic_partitions))
        elif version == CR.CURRENT_ASSIGNMENT:
            m = g.members.get(key.member_id) or ConsumerGroupMember(key.member_id)
            try:
                state = MemberState(value.state)
            except ValueError:
                state = MemberState.UNKNOWN
            tl.set_item(g.members, key.member_id, m.copy(
                member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch, state=state,
                assigned=CR.assignment_of(value.assigned_partitions),
                pending_revocation=CR.assignment_of(value.partitions_pending_revocation)))
