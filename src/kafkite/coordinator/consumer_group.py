"""A KIP-848 consumer group and its members (Kafka 4's ConsumerGroup / ConsumerGroupMember), sans-IO.

Three epochs: the *group epoch* moves when the group's members, subscriptions or the subscribed
topics' partition counts change; the *assignment epoch* is the group epoch the target assignment
was computed for; a member's *member epoch* is the assignment epoch it has reconciled to. The
group's state is derived from them, as Kafka's ConsumerGroup.maybeUpdateGroupState:

* Empty: no members;  Assigning: group epoch > assignment epoch;
* Reconciling: some member is not at the assignment epoch or not STABLE;  Stable: otherwise.

Everything here is changed only by `replay` of the group's records (consumer_group_records.py),
for a live write and a load alike; timers (session, rebalance) are in memory and restart at load.
"""
from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from .consumer_group_records import Assignment, TopicMetadata
from .regex import ResolvedRegularExpression

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(enum.IntEnum):
    """A member's reconciliation state (Kafka's MemberState; the value is the record's State byte)."""
    STABLE = 0  # owns exactly its target (at its epoch)
    UNREVOKED_PARTITIONS = 1  # must revoke partitions before it gets the next epoch
    UNRELEASED_PARTITIONS = 2  # waits for partitions that other members still own
    UNKNOWN = 127


@dataclass(frozen=True)
class ClassicMemberMetadata:
    """A member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat) inside a consumer group
    (Kafka's ConsumerGroupMemberMetadataValue.ClassicMemberMetadata): its session timeout and the
    (name, metadata) protocols of its last JoinGroup."""
    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_name(self) -> str:
        """The name a JoinGroup answer gives it and SyncGroup checks: its first protocol's."""
        return self.protocols[0][0] if self.protocols else ""


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    subscribed_topic_regex: str | None = None  # None: no regex ("" from a client is stored as None)
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    classic: ClassicMemberMetadata | None = None  # set: the member uses the classic protocol

    @property
    def uses_classic(self) -> bool:
        return self.classic is not None

    def copy(self, **changes) -> "ConsumerGroupMember":
        return replace(self, **changes)

    def subscription_equals(self, other: "ConsumerGroupMember") -> bool:
        return (self.instance_id, self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names,
                self.subscribed_topic_regex, self.rebalance_timeout_ms, self.server_assignor, self.classic) == (
            other.instance_id, other.rack_id, other.client_id, other.client_host, other.subscribed_topic_names,
            other.subscribed_topic_regex, other.rebalance_timeout_ms, other.server_assignor, other.classic)

    def assignment_equals(self, other: "ConsumerGroupMember") -> bool:
        return (self.member_epoch, self.previous_member_epoch, self.state, self.assigned,
                self.pending_revocation) == (other.member_epoch, other.previous_member_epoch, other.state,
                                             other.assigned, other.pending_revocation)

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state == MemberState.STABLE and self.member_epoch == epoch


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, Assignment] = field(default_factory=dict)  # member id -> target partitions
    subscription_metadata: dict[str, TopicMetadata] = field(default_factory=dict)
    resolved_regexes: dict[str, ResolvedRegularExpression] = field(default_factory=dict)  # regex -> its topics
    # in memory: regex -> the topics-metadata version it was last resolved against without a change
    regex_checked: dict[str, int] = field(default_factory=dict)
    regex_job: Any = None  # in memory: the background resolution of its regexes under way (regex_refresh.py)
    # timers, in memory only: member id -> deadline (ms)
    session_deadlines: dict[str, int] = field(default_factory=dict)
    rebalance_deadlines: dict[str, tuple[int, int]] = field(default_factory=dict)  # -> (deadline, epoch)
    # classic members: a JoinGroup due (after REBALANCE_IN_PROGRESS) and a SyncGroup due (after JoinGroup)
    join_deadlines: dict[str, int] = field(default_factory=dict)
    sync_deadlines: dict[str, int] = field(default_factory=dict)

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def num_classic(self) -> int:
        return sum(1 for m in self.members.values() if m.classic is not None)

    def all_classic_except(self, leaving: set[str]) -> bool:
        """Kafka's allMembersUseClassicProtocolExcept: the leaving members use the consumer protocol and
        every other member the classic one."""
        return all(m.classic is None for mid, m in self.members.items() if mid in leaving) and \
            all(m.classic is not None for mid, m in self.members.items() if mid not in leaving) and \
            any(mid in leaving for mid in self.members)

    def supports_classic_protocols(self, protocol_type: str, names: set[str]) -> bool:
        """Kafka's supportsClassicProtocols: a "consumer" JoinGroup whose protocols include one that every
        classic member supports (any, when none is classic yet)."""
        if protocol_type != "consumer" or not names:
            return False
        classic = [m.classic for m in self.members.values() if m.classic is not None]
        return any(all(n in {p for p, _ in c.protocols} for c in classic) for n in names)

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        mid = self.static_members.get(instance_id) if instance_id else None
        return self.members.get(mid) if mid is not None else None

    def partition_epochs(self) -> dict[tuple[uuid.UUID, int], int]:
        """(topic id, partition) -> epoch of the member that owns it (assigned or still to revoke)."""
        out: dict[tuple[uuid.UUID, int], int] = {}
        for m in self.members.values():
            for a in (m.assigned, m.pending_revocation):
                for t, ps in a.items():
                    for p in ps:
                        out[(t, p)] = m.member_epoch
        return out

    def member_topics(self, m: ConsumerGroupMember,
                      resolved: dict[str, ResolvedRegularExpression] | None = None) -> frozenset[str]:
        """A member's subscription: its topic names and the topics its regex resolved to."""
        resolved = self.resolved_regexes if resolved is None else resolved
        rx = resolved.get(m.subscribed_topic_regex) if m.subscribed_topic_regex else None
        return m.subscribed_topic_names | rx.topics if rx is not None else m.subscribed_topic_names

    def subscribed_topic_names(self, exclude: str | None = None, extra: ConsumerGroupMember | None = None,
                               resolved: dict[str, ResolvedRegularExpression] | None = None) -> set[str]:
        names: set[str] = set()
        for m in self.members.values():
            if m.member_id != exclude:
                names |= self.member_topics(m, resolved)
        if extra is not None:
            names |= self.member_topics(extra, resolved)
        return names

    def preferred_assignor(self, default: str) -> str:
        """The server assignor most members ask for (Kafka's ConsumerGroup.computePreferredServerAssignor),
        else the broker's first configured one."""
        counts: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if not counts:
            return default
        return max(sorted(counts), key=lambda a: counts[a])
