"""A member's way from its current assignment to its target (Kafka 4's CurrentAssignmentBuilder), sans-IO.

KIP-848's rule: a member gets a partition only once its previous owner has revoked it. Given a
member, the group's target assignment and epoch, who owns what (partition -> owner's epoch) and
what the member reported owning in its heartbeat, `next_state` returns the member's next state:

* STABLE at an old epoch: reconcile towards the target.
* UNREVOKED_PARTITIONS: stay until the member no longer reports the partitions to revoke; then
  move on with its epoch + 1.
* UNRELEASED_PARTITIONS: reconcile again (partitions others released meanwhile are given now).

Reconciling keeps (assigned ∩ target); revokes (assigned - target), staying at its epoch in
UNREVOKED_PARTITIONS while the member still owns any of them; otherwise takes the target epoch and
the target partitions nobody else owns (UNRELEASED_PARTITIONS while some are still owned).
"""
from __future__ import annotations

import uuid
from typing import Callable, Iterable

from .consumer_group import ConsumerGroupMember, MemberState
from .consumer_group_records import Assignment

Owned = "list[tuple[uuid.UUID, list[int]]] | None"  # what the heartbeat reported; None: not sent


class FencedMemberEpoch(Exception):
    pass


def _owns_any(owned: Iterable[tuple[uuid.UUID, list[int]]] | None, partitions: Assignment) -> bool:
    if owned is None:
        return True  # not reported: assume it still owns them
    return any(p in partitions.get(t, ()) for t, ps in owned for p in ps)


def next_state(member: ConsumerGroupMember, target_epoch: int, target: Assignment,
               partition_epoch: Callable[[uuid.UUID, int], int], owned) -> ConsumerGroupMember:
    s = member.state
    if s == MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _compute(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
        return member
    if s == MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        return _compute(member, member.member_epoch + 1, target_epoch, target, partition_epoch, owned)
    if s == MemberState.UNRELEASED_PARTITIONS:
        return _compute(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    if owned is None or owned:  # UNKNOWN (a newer coordinator's state): start over from nothing
        raise FencedMemberEpoch("The consumer group member is in a unknown state. "
                                "The member must abandon all its partitions and rejoin.")
    return _compute(member, target_epoch, target_epoch, target, partition_epoch, owned)


def _epoch(member: ConsumerGroupMember, new_epoch: int) -> dict:
    """Kafka's updateMemberEpoch: the previous epoch is the one the member had (even when unchanged)."""
    return {"member_epoch": new_epoch, "previous_member_epoch": member.member_epoch}


def _compute(member: ConsumerGroupMember, epoch: int, target_epoch: int, target: Assignment,
             partition_epoch: Callable[[uuid.UUID, int], int], owned) -> ConsumerGroupMember:
    unreleased = False
    assigned: Assignment = {}
    revoke: Assignment = {}
    pending_assign: Assignment = {}
    for t in set(target) | set(member.assigned):
        want = target.get(t, frozenset())
        have = member.assigned.get(t, frozenset())
        keep = have & want
        gone = have - keep
        new = {p for p in want - keep if partition_epoch(t, p) == -1}
        if len(new) < len(want - keep):
            unreleased = True
        if keep:
            assigned[t] = frozenset(keep)
        if gone:
            revoke[t] = frozenset(gone)
        if new:
            pending_assign[t] = frozenset(new)
    if revoke and _owns_any(owned, revoke):
        return member.copy(state=MemberState.UNREVOKED_PARTITIONS, assigned=assigned, pending_revocation=revoke,
                           **_epoch(member, epoch))
    for t, ps in pending_assign.items():
        assigned[t] = assigned.get(t, frozenset()) | ps
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return member.copy(state=state, assigned=assigned, pending_revocation={}, **_epoch(member, target_epoch))
