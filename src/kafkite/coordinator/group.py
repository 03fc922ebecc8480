"""The classic consumer group state machine. Everything that decides a group's
state lives here: the states, which transitions are legal (a table, checked in
one place; an illegal transition raises at once), members, and protocol
selection. The coordinator (coordinator.py) decides *when* to move; this file
decides *whether* it may.
"""
from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field

import structlog

from . import records as R

log = structlog.get_logger("kafkite.coordinator")


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


S = GroupState

# Kafka's classic group states, each with its valid previous states.
VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
    S.PREPARING_REBALANCE: frozenset({S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}),
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    S.DEAD: frozenset({S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD}),
}


class IllegalStateTransition(Exception):
    pass


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_token: object | None = None  # parked JoinGroup
    sync_token: object | None = None  # parked SyncGroup
    heartbeat_deadline: int = 0
    is_new: bool = False

    def metadata_for(self, protocol: str) -> bytes:
        for name, md in self.protocols:
            if name == protocol:
                return md
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return list(self.protocols) == list(protocols)


# A committed offset as the group holds it: the decoded OffsetCommitValue itself (offset, leader epoch, metadata,
# commit and expire timestamps), kept as the replay gets it -- a value is never changed once decoded
OffsetEntry = R.OffsetValue


@dataclass
class Group:
    group_id: str
    state: GroupState = S.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: dict[str, int] = field(default_factory=dict)  # KIP-394 ids issued -> deadline
    offsets: dict[tuple[str, int], OffsetEntry] = field(default_factory=dict)
    state_timestamp: int = -1
    rebalance_deadline: int | None = None  # end of the join phase
    initial_delay_deadline: int | None = None  # KIP-134: delayed first rebalance
    subscribed_topics: set[str] | None = None  # update_subscribed_topics
    new_member_added: bool = False

    def transition(self, to: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[to]:
            raise IllegalStateTransition(f"group {self.group_id}: {self.state.value} -> {to.value}")
        self.state = to
        self.state_timestamp = now_ms

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    # -- members --------------------------------------------------------------------
    def add(self, m: Member) -> None:
        if not self.members:
            self.protocol_type = m.protocol_type
        self.members[m.member_id] = m
        if m.group_instance_id:
            self.static_members[m.group_instance_id] = m.member_id
        if self.leader_id is None:
            self.leader_id = m.member_id

    def remove(self, member_id: str) -> Member | None:
        m = self.members.pop(member_id, None)
        if m is None:
            return None
        if m.group_instance_id and self.static_members.get(m.group_instance_id) == member_id:
            del self.static_members[m.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return m

    def replace_static(self, old_id: str, new_id: str) -> Member:
        m = self.members.pop(old_id)
        m.member_id = new_id
        self.members[new_id] = m
        self.static_members[m.group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        return m

    # -- protocols ----------------------------------------------------------------
    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        names = {n for n, _ in protocols}
        return bool(names & self.candidate_protocols())

    def candidate_protocols(self) -> set[str]:
        sets = [{n for n, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol among those all members support."""
        candidates = self.candidate_protocols()
        votes = Counter()
        for m in self.members.values():
            for name, _ in m.protocols:
                if name in candidates:
                    votes[name] += 1
                    break
        # most votes; ties broken by the first member's preference order, like Kafka's maxBy
        first_pref = [n for n, _ in next(iter(self.members.values())).protocols]
        return max(votes, key=lambda n: (votes[n], -first_pref.index(n) if n in first_pref else -999))

    def update_subscribed_topics(self) -> None:
        """Kafka's computeSubscribedTopics, run when a generation starts and when the group is loaded:
        the topics in the members' consumer protocol subscriptions; none for an empty "consumer"
        group; unknown (None) when the protocol type is not "consumer", no protocol is chosen yet,
        or a subscription does not decode (logged)."""
        self.subscribed_topics = None
        if self.protocol_type != "consumer":
            return
        if not self.members:
            self.subscribed_topics = set()
            return
        if not self.protocol_name:
            return
        topics: set[str] = set()
        for m in self.members.values():
            try:
                topics.update(R.subscribed_topics(m.metadata_for(self.protocol_name)))
            except ValueError as exc:
                log.warning("group.subscription_undecodable", group=self.group_id, member=m.member_id,
                            protocol=self.protocol_name, error=str(exc))
                return
        self.subscribed_topics = topics

    def is_subscribed_to(self, topic: str) -> bool:
        """Kafka's isSubscribedToTopic: when the subscriptions are unknown, a "consumer" group counts as
        subscribed to every topic, any other group to none."""
        if self.subscribed_topics is not None:
            return topic in self.subscribed_topics
        return self.protocol_type == "consumer"

    def all_joined(self) -> bool:
        return all(m.join_token is not None for m in self.members.values()) and not self.pending_members

    def max_rebalance_timeout(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
