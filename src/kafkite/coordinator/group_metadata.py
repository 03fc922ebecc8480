"""Group membership of one shard (Kafka's GroupMetadataManager for classic groups): JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, rebalances and their timers. Sans-IO: callers pass `now_ms`;
answers that come later are `Pending` tokens completed through `complete`.

The state machine of a group is coordinator/group.py; this file decides when it moves. What
must be persisted (GroupMetadataValue) is emitted into `emitted`, which the shard hands to the
runtime as the operation's records (replay=False, as in Kafka 4: the move already happened in
memory). SyncGroup from the leader is the one operation whose effect waits for its write:
the assignment is propagated and the group becomes Stable only once the record is durable.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

import structlog

from ..wire.errors import E
from . import records as R
from .group import Group, GroupState, Member
from .result import CoordinatorResult, Pending, Record

S = GroupState
log = structlog.get_logger("kafkite.coordinator")


@dataclass
class JoinResult:
    error: int = 0
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass
class SyncResult:
    error: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


class GroupMetadataManager:
    def __init__(self, cfg, groups: dict[str, Group], complete: Callable[[Pending, Any], None]):
        self.cfg = cfg
        self.groups = groups
        self._complete = complete
        self.emitted: list[Record] = []  # records the current operation must write

    def take_emitted(self) -> list[Record]:
        out, self.emitted = self.emitted, []
        return out

    # -- timers ---------------------------------------------------------------------------------
    def next_deadline_ms(self) -> int | None:
        ds = []
        for g in self.groups.values():
            if g.initial_delay_deadline is not None:
                ds.append(g.initial_delay_deadline)
            if g.rebalance_deadline is not None:
                ds.append(g.rebalance_deadline)
            ds.extend(g.pending_members.values())
            ds.extend(m.heartbeat_deadline for m in g.members.values()
                      if m.join_token is None and m.sync_token is None)
        return min(ds) if ds else None

    def poll(self, now_ms: int) -> None:
        for g in list(self.groups.values()):
            for mid, dl in list(g.pending_members.items()):
                if now_ms >= dl:
                    del g.pending_members[mid]
                    self._maybe_complete_join(g, now_ms)
            if g.is_(S.PREPARING_REBALANCE):
                if g.initial_delay_deadline is not None and now_ms >= g.initial_delay_deadline:
                    g.initial_delay_deadline = None  # KIP-134: the delay is over, complete with who joined
                    self._complete_join(g, now_ms)
                elif g.rebalance_deadline is not None and now_ms >= g.rebalance_deadline:
                    self._complete_join(g, now_ms, timed_out=True)
            for m in list(g.members.values()):
                if m.join_token is None and m.sync_token is None and now_ms >= m.heartbeat_deadline:
                    log.info("group.member_expired", group=g.group_id, member=m.member_id)
                    self._remove_member(g, m.member_id, now_ms, reason="session timeout")

    def fail_all(self, code: int) -> None:
        """The shard is unloaded: every parked request gets `code`."""
        for g in self.groups.values():
            for m in g.members.values():
                if m.join_token is not None:
                    self._complete(m.join_token, JoinResult(error=code, member_id=m.member_id))
                if m.sync_token is not None:
                    self._complete(m.sync_token, SyncResult(error=code))

    # -- rebalance mechanics -----------------------------------------------------------------
    def _prepare_rebalance(self, g: Group, now_ms: int, reason: str) -> None:
        if g.is_(S.COMPLETING_REBALANCE):
            # members waiting in SyncGroup must rejoin
            for m in g.members.values():
                if m.sync_token is not None:
                    self._complete(m.sync_token, SyncResult(error=E.REBALANCE_IN_PROGRESS))
                    m.sync_token = None
        was_empty = g.is_(S.EMPTY)
        g.transition(S.PREPARING_REBALANCE, now_ms)
        timeout = g.max_rebalance_timeout()
        if was_empty and self.cfg.initial_rebalance_delay_ms > 0:
            delay = min(self.cfg.initial_rebalance_delay_ms, timeout)
            g.initial_delay_deadline = now_ms + delay
            g.rebalance_deadline = now_ms + timeout  # the delay never extends beyond the rebalance timeout
        else:
            g.initial_delay_deadline = None
            g.rebalance_deadline = now_ms + timeout
        log.info("group.rebalance", group=g.group_id, generation=g.generation, reason=reason)

    def _maybe_complete_join(self, g: Group, now_ms: int) -> None:
        if g.is_(S.PREPARING_REBALANCE) and g.initial_delay_deadline is None and g.all_joined():
            self._complete_join(g, now_ms)

    def _complete_join(self, g: Group, now_ms: int, timed_out: bool = False) -> None:
        for m in list(g.members.values()):
            if m.join_token is None:  # did not rejoin in time
                self._remove_member(g, m.member_id, now_ms, reason="rebalance timeout", rebalance=False)
        g.pending_members.clear()
        g.initial_delay_deadline = None
        g.rebalance_deadline = None
        g.generation += 1
        if not g.members:
            g.protocol_name = None
            g.leader_id = None
            g.update_subscribed_topics()
            g.transition(S.EMPTY, now_ms)
            self._persist_group(g, now_ms)
            return
        g.protocol_name = g.select_protocol()
        if g.leader_id not in g.members:
            g.leader_id = next(iter(g.members))
        g.update_subscribed_topics()
        g.transition(S.COMPLETING_REBALANCE, now_ms)
        all_members = [(m.member_id, m.group_instance_id, m.metadata_for(g.protocol_name))
                       for m in g.members.values()]
        for m in g.members.values():
            res = JoinResult(0, g.generation, g.protocol_type, g.protocol_name, g.leader_id or "", m.member_id,
                             all_members if m.member_id == g.leader_id else [])
            self._complete(m.join_token, res)
            m.join_token = None
            m.is_new = False
            m.heartbeat_deadline = now_ms + m.session_timeout_ms

    def _remove_member(self, g: Group, member_id: str, now_ms: int, reason: str, rebalance: bool = True) -> None:
        m = g.remove(member_id)
        if m is None:
            return
        if m.join_token is not None:
            self._complete(m.join_token, JoinResult(error=E.UNKNOWN_MEMBER_ID, member_id=member_id))
        if m.sync_token is not None:
            self._complete(m.sync_token, SyncResult(error=E.UNKNOWN_MEMBER_ID))
        if not rebalance:
            return
        if g.is_(S.STABLE, S.COMPLETING_REBALANCE):
            self._prepare_rebalance(g, now_ms, f"removing member {member_id}: {reason}")
            self._maybe_complete_join(g, now_ms)
        elif g.is_(S.PREPARING_REBALANCE):
            self._maybe_complete_join(g, now_ms)

    def _persist_group(self, g: Group, now_ms: int, assignments: dict[str, bytes] | None = None) -> None:
        proto = g.protocol_name
        value = R.GroupValue(g.protocol_type or "", g.generation, proto, g.leader_id, now_ms, [
            R.MemberValue(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                          m.session_timeout_ms, m.metadata_for(proto) if proto else b"",
                          m.assignment if assignments is None else assignments.get(m.member_id, b""))
            for m in g.members.values()])
        self.emitted.append((R.group_key(g.group_id), R.group_value(value)))

    # -- JoinGroup ----------------------------------------------------------------------------------
    def join_group(self, *, group_id: str, member_id: str, group_instance_id: str | None, protocol_type: str,
                   protocols: list[tuple[str, bytes]], session_timeout_ms: int, rebalance_timeout_ms: int,
                   client_id: str, client_host: str, require_known_member_id: bool, now_ms: int,
                   reason: str | None = None) -> JoinResult | Pending:
        def fail(code):
            return JoinResult(error=code, member_id=member_id)
        if not self.cfg.min_session_timeout_ms <= session_timeout_ms <= self.cfg.max_session_timeout_ms:
            return fail(E.INVALID_SESSION_TIMEOUT)
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms
        g = self.groups.get(group_id)
        if g is None:
            if member_id:
                return fail(E.UNKNOWN_MEMBER_ID)
            g = self.groups[group_id] = Group(group_id, state_timestamp=now_ms)
        if g.is_(S.DEAD):
            return fail(E.COORDINATOR_NOT_AVAILABLE)
        if not g.supports(protocol_type, protocols):
            return fail(E.INCONSISTENT_GROUP_PROTOCOL)

        def new_member(mid):
            return Member(mid, group_instance_id, client_id, client_host, session_timeout_ms, rebalance_timeout_ms,
                          protocol_type, list(protocols), heartbeat_deadline=now_ms + session_timeout_ms, is_new=True)

        if not member_id:
            new_id = f"{client_id}-{uuid.uuid4()}"
            if group_instance_id:
                old_id = g.static_members.get(group_instance_id)
                if old_id is not None:
                    # KIP-345: a known static member restarted: it takes a new member id, the old one is fenced.
                    m = g.members[old_id]
                    if m.join_token is not None:
                        self._complete(m.join_token, JoinResult(error=E.FENCED_INSTANCE_ID, member_id=old_id))
                        m.join_token = None
                    if m.sync_token is not None:
                        self._complete(m.sync_token, SyncResult(error=E.FENCED_INSTANCE_ID))
                        m.sync_token = None
                    m = g.replace_static(old_id, new_id)
                    m.session_timeout_ms, m.rebalance_timeout_ms = session_timeout_ms, rebalance_timeout_ms
                    m.heartbeat_deadline = now_ms + session_timeout_ms
                    if g.is_(S.STABLE) and m.matches(protocols):
                        return JoinResult(0, g.generation, g.protocol_type, g.protocol_name, g.leader_id or "",
                                          new_id, [], skip_assignment=new_id == g.leader_id)
                    m.protocols = list(protocols)
                    return self._join_known(g, m, now_ms)
            elif require_known_member_id:
                if len(g.members) + len(g.pending_members) >= self.cfg.max_size:
                    return fail(E.GROUP_MAX_SIZE_REACHED)
                g.pending_members[new_id] = now_ms + session_timeout_ms
                return JoinResult(error=E.MEMBER_ID_REQUIRED, member_id=new_id)
            if len(g.members) >= self.cfg.max_size:
                return fail(E.GROUP_MAX_SIZE_REACHED)
            m = new_member(new_id)
            g.add(m)
            return self._join_known(g, m, now_ms, added=True)

        # a known (or KIP-394 pending) member id
        if member_id in g.pending_members:
            del g.pending_members[member_id]
            if len(g.members) >= self.cfg.max_size:
                return fail(E.GROUP_MAX_SIZE_REACHED)
            m = new_member(member_id)
            g.add(m)
            return self._join_known(g, m, now_ms, added=True)
        m = g.members.get(member_id)
        if m is None:
            if group_instance_id and group_instance_id in g.static_members:
                return fail(E.FENCED_INSTANCE_ID)
            return fail(E.UNKNOWN_MEMBER_ID)
        if group_instance_id and m.group_instance_id != group_instance_id:
            return fail(E.FENCED_INSTANCE_ID)
        return self._join_known(g, m, now_ms, protocols=protocols, session_timeout_ms=session_timeout_ms,
                                rebalance_timeout_ms=rebalance_timeout_ms)

    def _join_known(self, g: Group, m: Member, now_ms: int, *, added: bool = False, protocols=None,
                    session_timeout_ms=None, rebalance_timeout_ms=None) -> JoinResult | Pending:
        changed = protocols is not None and not m.matches(protocols)
        if protocols is not None:
            m.protocols = list(protocols)
        if session_timeout_ms is not None:
            m.session_timeout_ms = session_timeout_ms
            m.rebalance_timeout_ms = rebalance_timeout_ms
        m.heartbeat_deadline = now_ms + m.session_timeout_ms
        if not added and not changed:
            if g.is_(S.COMPLETING_REBALANCE) or (g.is_(S.STABLE) and m.member_id != g.leader_id):
                # nothing changed: answer with the current generation, no rebalance
                members = [(x.member_id, x.group_instance_id, x.metadata_for(g.protocol_name))
                           for x in g.members.values()] if m.member_id == g.leader_id else []
                return JoinResult(0, g.generation, g.protocol_type, g.protocol_name, g.leader_id or "",
                                  m.member_id, members)
        token = Pending()
        if m.join_token is not None:
            self._complete(m.join_token, JoinResult(error=E.UNKNOWN_MEMBER_ID, member_id=m.member_id))
        m.join_token = token
        if g.is_(S.EMPTY, S.STABLE, S.COMPLETING_REBALANCE):
            self._prepare_rebalance(g, now_ms, "member joined" if added else "member rejoined")
        elif g.is_(S.PREPARING_REBALANCE) and g.initial_delay_deadline is not None and added:
            # KIP-134: each new member extends the initial delay, never past the rebalance timeout
            g.initial_delay_deadline = min(now_ms + self.cfg.initial_rebalance_delay_ms,
                                           g.rebalance_deadline or now_ms)
        self._maybe_complete_join(g, now_ms)
        return token

    # -- SyncGroup -------------------------------------------------------------------------------------
    def sync_group(self, *, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                   protocol_type: str | None, protocol_name: str | None, assignments: dict[str, bytes],
                   now_ms: int) -> SyncResult | Pending | CoordinatorResult:
        g = self.groups.get(group_id)
        if g is None or g.is_(S.DEAD, S.EMPTY):
            return SyncResult(error=E.UNKNOWN_MEMBER_ID)
        m = g.members.get(member_id)
        if m is None:
            return SyncResult(error=E.FENCED_INSTANCE_ID if group_instance_id in g.static_members else
                              E.UNKNOWN_MEMBER_ID)
        if group_instance_id and m.group_instance_id != group_instance_id:
            return SyncResult(error=E.FENCED_INSTANCE_ID)
        if generation_id != g.generation:
            return SyncResult(error=E.ILLEGAL_GENERATION)
        if (protocol_type and protocol_type != g.protocol_type) or (protocol_name and protocol_name != g.protocol_name):
            return SyncResult(error=E.INCONSISTENT_GROUP_PROTOCOL)
        if g.is_(S.PREPARING_REBALANCE):
            return SyncResult(error=E.REBALANCE_IN_PROGRESS)
        m.heartbeat_deadline = now_ms + m.session_timeout_ms
        if g.is_(S.STABLE):
            return SyncResult(0, g.protocol_type, g.protocol_name, m.assignment)
        # CompletingRebalance
        token = Pending()
        m.sync_token = token
        if member_id != g.leader_id:
            return token
        # The leader's assignment: persisted first; the group becomes Stable and every member gets its
        # assignment once the record is durable (Kafka 4's appendFuture), unless the group moved meanwhile.
        generation = g.generation
        assigned = {mid: assignments.get(mid, b"") for mid in g.members}
        self._persist_group(g, now_ms, assigned)

        def still_waiting() -> bool:
            return g.is_(S.COMPLETING_REBALANCE) and g.generation == generation

        def propagated() -> None:
            if not still_waiting():
                return
            for mid, x in g.members.items():
                x.assignment = assigned.get(mid, b"")
            g.transition(S.STABLE, now_ms)
            self._propagate(g, now_ms)

        def failed(error: int) -> Pending:
            if still_waiting():
                log.warning("group.persist_failed", group=g.group_id, error=E(error).name)
                for x in g.members.values():
                    x.assignment = b""
                self._propagate(g, now_ms, error)
                self._prepare_rebalance(g, now_ms, f"error {E(error).name} storing the group assignment")
            return token
        return CoordinatorResult(self.take_emitted(), token, replay=False, on_success=propagated, on_failure=failed)

    def _propagate(self, g: Group, now_ms: int, error: int = 0) -> None:
        for x in g.members.values():
            if x.sync_token is not None:
                self._complete(x.sync_token, SyncResult(error=error) if error else
                               SyncResult(0, g.protocol_type, g.protocol_name, x.assignment))
                x.sync_token = None
            x.heartbeat_deadline = now_ms + x.session_timeout_ms

    # -- Heartbeat / LeaveGroup ------------------------------------------------------------------------
    def heartbeat(self, *, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                  now_ms: int) -> int:
        g = self.groups.get(group_id)
        if g is None or g.is_(S.DEAD):
            return E.UNKNOWN_MEMBER_ID
        m = g.members.get(member_id)
        if m is None:
            return E.FENCED_INSTANCE_ID if group_instance_id in g.static_members else E.UNKNOWN_MEMBER_ID
        if group_instance_id and m.group_instance_id != group_instance_id:
            return E.FENCED_INSTANCE_ID
        if g.is_(S.EMPTY):
            return E.UNKNOWN_MEMBER_ID
        if generation_id != g.generation:
            return E.ILLEGAL_GENERATION
        m.heartbeat_deadline = now_ms + m.session_timeout_ms
        if g.is_(S.PREPARING_REBALANCE):
            return E.REBALANCE_IN_PROGRESS
        return 0

    def leave_group(self, *, group_id: str, members: list[tuple[str, str | None]], now_ms: int
                    ) -> tuple[int, list[tuple[str, str | None, int]]]:
        g = self.groups.get(group_id)
        if g is None or g.is_(S.DEAD):
            return 0, [(mid, iid, int(E.UNKNOWN_MEMBER_ID)) for mid, iid in members]
        out = []
        for mid, iid in members:
            target = mid
            if iid:
                known = g.static_members.get(iid)
                if known is None:
                    out.append((mid, iid, int(E.UNKNOWN_MEMBER_ID)))
                    continue
                if mid and mid != known:
                    out.append((mid, iid, int(E.FENCED_INSTANCE_ID)))
                    continue
                target = known
            if target in g.pending_members:
                del g.pending_members[target]
                out.append((mid, iid, 0))
                self._maybe_complete_join(g, now_ms)
                continue
            if target not in g.members:
                out.append((mid, iid, int(E.UNKNOWN_MEMBER_ID)))
                continue
            self._remove_member(g, target, now_ms, reason="left the group")
            out.append((mid, iid, 0))
        return 0, out

