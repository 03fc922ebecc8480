"""The group coordinator and offset manager, sans-IO.

Callers pass `now_ms`; nothing here waits, sleeps or touches a socket.
JoinGroup and SyncGroup answers that come later are returned as `Pending`
tokens; their results appear in `drain_completions()`. The driver calls
`poll(now_ms)` at `next_deadline_ms()` (join-phase end, initial rebalance delay,
heartbeat expiry, offset expiry).

Offsets and group metadata are appended to `__consumer_offsets` through the
injected store *before* they are applied to the in-memory cache that answers
OffsetFetch. A partition of `__consumer_offsets` this coordinator does not own
answers NOT_COORDINATOR; one being loaded answers COORDINATOR_LOAD_IN_PROGRESS.
"""
from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass, field
from typing import Any

import structlog

from ..wire.errors import E
from . import records as R
from .group import Group, GroupState, Member, OffsetEntry
from .hashing import partition_for
from .store import OffsetsStore

S = GroupState
log = structlog.get_logger("kafkite.coordinator")


class Pending:
    """A token for an answer that will appear in drain_completions()."""
    _ids = itertools.count(1)

    def __init__(self) -> None:
        self.id = next(self._ids)

    def __repr__(self) -> str:
        return f"Pending({self.id})"


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


@dataclass
class Config:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2147483647
    offsets_retention_ms: int = 10080 * 60000
    retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    num_partitions: int = 50

    @classmethod
    def from_kafka(cls, c: dict[str, Any]) -> "Config":
        return cls(c["group.min.session.timeout.ms"], c["group.max.session.timeout.ms"],
                   c["group.initial.rebalance.delay.ms"], c["group.max.size"],
                   c["offsets.retention.minutes"] * 60000, c["offsets.retention.check.interval.ms"],
                   c["offset.metadata.max.bytes"], c["offsets.topic.num.partitions"])


class GroupCoordinator:
    def __init__(self, config: dict | Config, store: OffsetsStore, now_ms: int):
        self.cfg = config if isinstance(config, Config) else Config.from_kafka(config)
        self.store = store
        self.groups: dict[str, Group] = {}
        self.owned: set[int] = set()  # __consumer_offsets partitions loaded and served
        self.loading: dict[int, dict] = {}  # partition -> loader state
        self._completions: list[tuple[Pending, Any]] = []
        self._next_expiry_check = now_ms + self.cfg.retention_check_interval_ms

    # -- ownership ---------------------------------------------------------------------
    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.cfg.num_partitions)

    def _check_owner(self, group_id: str | None, *, allow_empty: bool = False) -> int:
        """Kafka's isValidGroupId, then ownership: a null group id is never valid; an empty one only for
        the offset APIs (commit, fetch) and admin calls, not for group membership."""
        if group_id is None or (not group_id and not allow_empty):
            return E.INVALID_GROUP_ID
        p = self.partition_of(group_id)
        if p in self.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        if p not in self.owned:
            return E.NOT_COORDINATOR
        return 0

    def begin_loading(self, partition: int, now_ms: int) -> None:
        self.owned.discard(partition)
        self._drop_partition(partition)
        self.loading[partition] = {"iter": iter(self.store.read(partition, 0)), "offsets": {}, "groups": {},
                                   "now": now_ms}

    def is_loading(self, partition: int) -> bool:
        return partition in self.loading

    def load_step(self, partition: int, max_records: int = 1000) -> bool:
        """Read up to max_records of the partition; True when the partition is loaded and served."""
        st = self.loading.get(partition)
        if st is None:
            return True
        it = st["iter"]
        for _ in range(max_records):
            rec = next(it, None)
            if rec is None:
                self._finish_load(partition, st)
                return True
            _offset, key, value = rec
            if key is None:
                continue
            try:
                k, v = R.decode_record(key, value)
            except Exception:  # a record we can't read must not stop the load
                log.warning("offsets.undecodable_record", partition=partition)
                continue
            if isinstance(k, R.OffsetKey):
                if v is None:
                    st["offsets"].pop(k, None)
                else:
                    st["offsets"][k] = v  # later records win: the log is in commit order
            elif isinstance(k, R.GroupKey):
                if v is None:
                    st["groups"].pop(k.group, None)
                    for ok in [ok for ok in st["offsets"] if ok.group == k.group]:
                        del st["offsets"][ok]
                else:
                    st["groups"][k.group] = v
        return False

    def _finish_load(self, partition: int, st: dict) -> None:
        now = st["now"]
        for gid, gv in st["groups"].items():
            g = Group(gid, generation=gv.generation, protocol_type=gv.protocol_type or None,
                      protocol_name=gv.protocol, leader_id=gv.leader, state_timestamp=gv.current_state_timestamp)
            for mv in gv.members:
                m = Member(mv.member_id, mv.group_instance_id, mv.client_id, mv.client_host, mv.session_timeout,
                           mv.rebalance_timeout, gv.protocol_type, [(gv.protocol or "", mv.subscription)],
                           assignment=mv.assignment, heartbeat_deadline=now + mv.session_timeout)
                g.members[m.member_id] = m
                if m.group_instance_id:
                    g.static_members[m.group_instance_id] = m.member_id
            g.state = S.STABLE if g.members else S.EMPTY
            self.groups[gid] = g
        for k, v in st["offsets"].items():
            g = self.groups.get(k.group)
            if g is None:
                g = self.groups[k.group] = Group(k.group, state_timestamp=now)
            g.offsets[(k.topic, k.partition)] = OffsetEntry(v.offset, v.leader_epoch, v.metadata,
                                                            v.commit_timestamp, v.expire_timestamp)
        del self.loading[partition]
        self.owned.add(partition)

    def unload(self, partition: int) -> None:
        """This broker no longer leads the partition: drop its groups (answers NOT_COORDINATOR after)."""
        self.loading.pop(partition, None)
        self.owned.discard(partition)
        self._drop_partition(partition)

    def _drop_partition(self, partition: int) -> None:
        for gid in [g for g in self.groups if self.partition_of(g) == partition]:
            g = self.groups.pop(gid)
            for m in g.members.values():
                if m.join_token is not None:
                    self._complete(m.join_token, JoinResult(error=E.NOT_COORDINATOR, member_id=m.member_id))
                if m.sync_token is not None:
                    self._complete(m.sync_token, SyncResult(error=E.NOT_COORDINATOR))

    # -- completions and timers ----------------------------------------------------------
    def _complete(self, token: Pending, result: Any) -> None:
        self._completions.append((token, result))

    def drain_completions(self) -> list[tuple[Pending, Any]]:
        out, self._completions = self._completions, []
        return out

    def next_deadline_ms(self) -> int | None:
        ds = [self._next_expiry_check]
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
        if now_ms >= self._next_expiry_check:
            self._next_expiry_check = now_ms + self.cfg.retention_check_interval_ms
            self.expire_offsets(now_ms)

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
            g.transition(S.EMPTY, now_ms)
            self._persist_group(g, now_ms)
            return
        g.protocol_name = g.select_protocol()
        if g.leader_id not in g.members:
            g.leader_id = next(iter(g.members))
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

    def _persist_group(self, g: Group, now_ms: int) -> None:
        proto = g.protocol_name
        value = R.GroupValue(g.protocol_type or "", g.generation, proto, g.leader_id, now_ms, [
            R.MemberValue(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                          m.session_timeout_ms, m.metadata_for(proto) if proto else b"", m.assignment)
            for m in g.members.values()])
        self.store.append(self.partition_of(g.group_id), [(R.group_key(g.group_id), R.group_value(value))], now_ms)

    # -- JoinGroup ----------------------------------------------------------------------------------
    def join_group(self, *, group_id: str, member_id: str, group_instance_id: str | None, protocol_type: str,
                   protocols: list[tuple[str, bytes]], session_timeout_ms: int, rebalance_timeout_ms: int,
                   client_id: str, client_host: str, require_known_member_id: bool, now_ms: int,
                   reason: str | None = None) -> JoinResult | Pending:
        def fail(code):
            return JoinResult(error=code, member_id=member_id)
        if not group_id:
            return fail(E.INVALID_GROUP_ID)
        err = self._check_owner(group_id)
        if err:
            return fail(err)
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
                   now_ms: int) -> SyncResult | Pending:
        err = self._check_owner(group_id)
        if err:
            return SyncResult(error=err)
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
        if member_id == g.leader_id:
            for mid, x in g.members.items():
                x.assignment = assignments.get(mid, b"")
            try:
                self._persist_group(g, now_ms)
            except Exception:
                log.exception("group.persist_failed", group=g.group_id)
                for x in g.members.values():
                    if x.sync_token is not None:
                        self._complete(x.sync_token, SyncResult(error=E.COORDINATOR_NOT_AVAILABLE))
                        x.sync_token = None
                self._prepare_rebalance(g, now_ms, "failed to persist assignment")
                return token
            g.transition(S.STABLE, now_ms)
            for x in g.members.values():
                if x.sync_token is not None:
                    self._complete(x.sync_token, SyncResult(0, g.protocol_type, g.protocol_name, x.assignment))
                    x.sync_token = None
                x.heartbeat_deadline = now_ms + x.session_timeout_ms
        return token

    # -- Heartbeat / LeaveGroup ------------------------------------------------------------------------
    def heartbeat(self, *, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                  now_ms: int) -> int:
        err = self._check_owner(group_id)
        if err:
            return err
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
        err = self._check_owner(group_id)
        if err:
            return err, []
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

    # -- offsets -------------------------------------------------------------------------------------------
    def commit_offsets(self, *, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                       offsets: list[tuple[str, int, int, int, str | None]], now_ms: int,
                       retention_ms: int = -1) -> list[tuple[str, int, int]]:
        """offsets: (topic, partition, offset, leader_epoch, metadata) -> [(topic, partition, error)]."""
        def all_(code):
            return [(t, p, int(code)) for t, p, *_ in offsets]
        err = self._check_owner(group_id, allow_empty=True)
        if err:
            return all_(err)
        g = self.groups.get(group_id)
        if g is None:
            if generation_id >= 0:
                return all_(E.ILLEGAL_GENERATION)
            g = self.groups[group_id] = Group(group_id, state_timestamp=now_ms)
        elif g.is_(S.DEAD):
            return all_(E.COORDINATOR_NOT_AVAILABLE)
        elif generation_id < 0 and g.is_(S.EMPTY):
            pass  # a simple consumer (assign + commit), or a group nobody is in
        else:
            m = g.members.get(member_id)
            if group_instance_id:
                known = g.static_members.get(group_instance_id)
                if known is not None and known != member_id:
                    return all_(E.FENCED_INSTANCE_ID)
            if m is None:
                return all_(E.UNKNOWN_MEMBER_ID)
            if generation_id != g.generation:
                return all_(E.ILLEGAL_GENERATION)
            if g.is_(S.COMPLETING_REBALANCE):
                return all_(E.REBALANCE_IN_PROGRESS)
            m.heartbeat_deadline = now_ms + m.session_timeout_ms
        results, recs, apply = [], [], []
        for topic, partition, offset, leader_epoch, metadata in offsets:
            md = metadata or ""
            if len(md.encode()) > self.cfg.offset_metadata_max_bytes:
                results.append((topic, partition, int(E.OFFSET_METADATA_TOO_LARGE)))
                continue
            expire = now_ms + retention_ms if retention_ms and retention_ms > 0 else -1
            entry = OffsetEntry(offset, leader_epoch, md, now_ms, expire)
            recs.append((R.offset_key(group_id, topic, partition),
                         R.offset_value(R.OffsetValue(offset, leader_epoch, md, now_ms, expire))))
            apply.append(((topic, partition), entry))
            results.append((topic, partition, 0))
        if recs:
            try:
                self.store.append(self.partition_of(group_id), recs, now_ms)
            except Exception:
                log.exception("offsets.append_failed", group=group_id)
                return all_(E.COORDINATOR_NOT_AVAILABLE)
            for k, entry in apply:  # only after the append: the cache never runs ahead of the log
                g.offsets[k] = entry
        return results

    def fetch_offsets(self, *, group_id: str, partitions: list[tuple[str, int]] | None, now_ms: int,
                      require_stable: bool = False) -> tuple[int, list[tuple[str, int, OffsetEntry | None, int]]]:
        err = self._check_owner(group_id, allow_empty=True)
        if err:
            return err, []
        g = self.groups.get(group_id)
        if partitions is None:
            items = sorted(g.offsets.items()) if g else []
            return 0, [(t, p, e, 0) for (t, p), e in items]
        return 0, [(t, p, g.offsets.get((t, p)) if g else None, 0) for t, p in partitions]

    def expire_offsets(self, now_ms: int) -> int:
        n = 0
        for g in list(self.groups.values()):
            if self.partition_of(g.group_id) not in self.owned:
                continue
            expired = []
            for k, e in g.offsets.items():
                if e.expire_timestamp >= 0:
                    dead = now_ms >= e.expire_timestamp
                elif g.protocol_type is None:  # simple consumer: counted from the commit
                    dead = g.is_(S.EMPTY) and now_ms - e.commit_timestamp >= self.cfg.offsets_retention_ms
                else:  # a group: counted from when it became empty (Kafka 2.1+)
                    dead = g.is_(S.EMPTY) and now_ms - g.state_timestamp >= self.cfg.offsets_retention_ms
                if dead:
                    expired.append(k)
            if expired:
                recs = [(R.offset_key(g.group_id, t, p), None) for t, p in expired]
                self.store.append(self.partition_of(g.group_id), recs, now_ms)
                for k in expired:
                    del g.offsets[k]
                n += len(expired)
                log.info("offsets.expired", group=g.group_id, count=len(expired))
            if g.is_(S.EMPTY) and not g.offsets and not g.members:
                g.transition(S.DEAD, now_ms)
                self.store.append(self.partition_of(g.group_id), [(R.group_key(g.group_id), None)], now_ms)
                del self.groups[g.group_id]
        return n

    # -- admin -----------------------------------------------------------------------------------------------
    def describe_group(self, group_id: str, now_ms: int = 0) -> GroupDescription:
        err = self._check_owner(group_id, allow_empty=True)
        if err:
            return GroupDescription(err, group_id, "", "", "", [])
        g = self.groups.get(group_id)
        if g is None:
            return GroupDescription(E.GROUP_ID_NOT_FOUND, group_id, S.DEAD.value, "", "", [])
        members = []
        for m in g.members.values():
            md = m.metadata_for(g.protocol_name) if g.protocol_name and g.is_(S.STABLE, S.COMPLETING_REBALANCE) else b""
            members.append(MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host, md,
                                             m.assignment if g.is_(S.STABLE) else b""))
        proto = g.protocol_name or "" if g.is_(S.STABLE, S.COMPLETING_REBALANCE) else ""
        return GroupDescription(0, group_id, g.state.value, g.protocol_type or "", proto, members)

    def list_groups(self, states: list[str] | None = None, now_ms: int = 0) -> list[tuple[str, str, str]]:
        out = []
        for g in self.groups.values():
            if self.partition_of(g.group_id) not in self.owned:
                continue
            if states and g.state.value.lower() not in {s.lower() for s in states}:
                continue
            out.append((g.group_id, g.protocol_type or "", g.state.value))
        return sorted(out)

    def delete_group(self, group_id: str, now_ms: int) -> int:
        err = self._check_owner(group_id, allow_empty=True)
        if err:
            return err
        g = self.groups.get(group_id)
        if g is None:
            return E.GROUP_ID_NOT_FOUND
        if not g.is_(S.EMPTY, S.DEAD):
            return E.NON_EMPTY_GROUP
        recs = [(R.offset_key(group_id, t, p), None) for t, p in g.offsets]
        recs.append((R.group_key(group_id), None))
        self.store.append(self.partition_of(group_id), recs, now_ms)
        g.transition(S.DEAD, now_ms)
        del self.groups[group_id]
        return 0

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]], now_ms: int
                       ) -> tuple[int, list[tuple[str, int, int]]]:
        err = self._check_owner(group_id, allow_empty=True)
        if err:
            return err, []
        g = self.groups.get(group_id)
        if g is None:
            return E.GROUP_ID_NOT_FOUND, []
        subscribed: set[str] = set()
        if not g.is_(S.EMPTY, S.DEAD):
            subs = g.subscribed_topics()
            if subs is None:
                return E.NON_EMPTY_GROUP, []
            subscribed = subs
        out, recs = [], []
        for t, p in partitions:
            if t in subscribed:
                out.append((t, p, int(E.GROUP_SUBSCRIBED_TO_TOPIC)))
                continue
            out.append((t, p, 0))
            if (t, p) in g.offsets:
                recs.append((R.offset_key(group_id, t, p), None))
        if recs:
            self.store.append(self.partition_of(group_id), recs, now_ms)
            for t, p, code in out:
                if code == 0:
                    g.offsets.pop((t, p), None)
        return 0, out
