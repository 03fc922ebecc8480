"""The group coordinator, sans-IO: which shards (partitions of `__consumer_offsets`) this broker
owns, and the typed operations the runtime runs on them.

Callers pass `now_ms`; nothing here waits, sleeps or touches a socket. Each write operation
returns a CoordinatorResult (records + response, coordinator/result.py) that the runtime
appends, replays and answers once durable; a group whose partition is not owned answers
NOT_COORDINATOR, one being loaded COORDINATOR_LOAD_IN_PROGRESS. JoinGroup and SyncGroup
answers that come later are `Pending` tokens whose results appear in `drain_completions()`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

import structlog

from ..wire.errors import E
from .assignors import normalize as normalize_assignors
from . import group_config
from .group import Group, OffsetEntry
from .group_metadata import JoinResult, SyncResult
from .hashing import partition_for
from .offsets import OffsetCommit
from .result import CoordinatorResult, Pending
from ..wire.lazy_kafka import lazy_names

if TYPE_CHECKING:
    from .consumer_group import ConsumerGroup
    from .consumer_group_manager import HeartbeatRequest, HeartbeatResult, TopicLookup
    from .regex_refresh import RegexJob

# KIP-848's consumer groups, and the shard (which builds their manager): imported at the first load of a
# __consumer_offsets partition, ConsumerGroupHeartbeat or description (wire/lazy_kafka.py LazyName)
GroupCoordinatorShard, GroupDescription, MemberDescription = lazy_names(
    globals(), "kafkite.coordinator.shard", "GroupCoordinatorShard", "GroupDescription", "MemberDescription")
(regex_refresh,) = lazy_names(globals(), "kafkite.coordinator", "regex_refresh")

log = structlog.get_logger("kafkite.coordinator")

__all__ = ["Config", "GroupCoordinator", "JoinResult", "SyncResult", "Pending", "GroupDescription",
           "MemberDescription", "CoordinatorResult"]


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
    # KIP-848 consumer groups
    consumer_enabled: bool = True  # "consumer" in group.coordinator.rebalance.protocols
    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    consumer_min_session_timeout_ms: int = 45000
    consumer_max_session_timeout_ms: int = 60000
    consumer_min_heartbeat_interval_ms: int = 5000
    consumer_max_heartbeat_interval_ms: int = 15000
    consumer_max_size: int = 2147483647
    consumer_assignors: list[str] = field(default_factory=lambda: ["uniform", "range"])
    consumer_migration_policy: str = "bidirectional"  # group.consumer.migration.policy, lower case
    consumer_regex_refresh_interval_ms: int = 600000  # group.consumer.regex.refresh.interval.ms (Kafka 4.1)
    # a group's own configs (the GROUP config resource, group_config.py) as the cluster metadata has them now:
    # group id -> {name: value}, or None; read at every use, so a change is taken at the group's next heartbeat
    group_configs: Callable[[str], Mapping[str, str] | None] = lambda _group_id: None

    def session_timeout_ms(self, group_id: str) -> int:
        """The consumer group's session timeout: its consumer.session.timeout.ms, else the broker's."""
        return group_config.effective(self.group_configs(group_id), self)[group_config.CONSUMER_SESSION_TIMEOUT_MS]

    def heartbeat_interval_ms(self, group_id: str) -> int:
        """The heartbeat interval the group's members are given: its consumer.heartbeat.interval.ms, else the
        broker's."""
        return group_config.effective(self.group_configs(group_id),
                                      self)[group_config.CONSUMER_HEARTBEAT_INTERVAL_MS]

    @classmethod
    def from_kafka(cls, c: dict[str, Any]) -> "Config":
        cfg = cls(c["group.min.session.timeout.ms"], c["group.max.session.timeout.ms"],
                  c["group.initial.rebalance.delay.ms"], c["group.max.size"],
                  c["offsets.retention.minutes"] * 60000, c["offsets.retention.check.interval.ms"],
                  c["offset.metadata.max.bytes"], c["offsets.topic.num.partitions"])
        if c.get("group.coordinator.rebalance.protocols") is not None:
            cfg.consumer_enabled = "consumer" in c["group.coordinator.rebalance.protocols"]
        for key, attr in (("group.consumer.session.timeout.ms", "consumer_session_timeout_ms"),
                          ("group.consumer.heartbeat.interval.ms", "consumer_heartbeat_interval_ms"),
                          ("group.consumer.min.session.timeout.ms", "consumer_min_session_timeout_ms"),
                          ("group.consumer.max.session.timeout.ms", "consumer_max_session_timeout_ms"),
                          ("group.consumer.min.heartbeat.interval.ms", "consumer_min_heartbeat_interval_ms"),
                          ("group.consumer.max.heartbeat.interval.ms", "consumer_max_heartbeat_interval_ms"),
                          ("group.consumer.max.size", "consumer_max_size"),
                          ("group.consumer.regex.refresh.interval.ms", "consumer_regex_refresh_interval_ms")):
            if c.get(key) is not None:
                setattr(cfg, attr, c[key])
        if c.get("group.consumer.assignors"):
            cfg.consumer_assignors = normalize_assignors(c["group.consumer.assignors"])
        if c.get("group.consumer.migration.policy"):
            cfg.consumer_migration_policy = c["group.consumer.migration.policy"].lower()
        return cfg


_PARTITION_CACHE_MAX = 65536  # group ids whose partition is kept (GroupCoordinator.partition_of)


class GroupCoordinator:
    def __init__(self, config: dict | Config):
        self.cfg = config if isinstance(config, Config) else Config.from_kafka(config)
        self.shards: dict[int, GroupCoordinatorShard] = {}  # owned partitions, loaded and served
        self.loading: dict[int, GroupCoordinatorShard] = {}  # owned partitions being replayed
        # (token, answer) of the requests completed since the last drain_completions (empty: nothing to deliver)
        self.completed: list[tuple[Pending, Any]] = []
        # group id -> its partition (partition_for), for the groups asked about lately: every group request asks
        self._partition_of: dict[str, int] = {}

    # -- ownership ---------------------------------------------------------------------------------
    def partition_of(self, group_id: str) -> int:
        p = self._partition_of.get(group_id)
        if p is None:
            if len(self._partition_of) >= _PARTITION_CACHE_MAX:
                self._partition_of.clear()
            p = self._partition_of[group_id] = partition_for(group_id, self.cfg.num_partitions)
        return p

    def shard_for(self, group_id: str | None, allow_empty: bool = False
                  ) -> tuple[int, GroupCoordinatorShard | None]:
        """Kafka's isValidGroupId, then ownership: a null group id is never valid; an empty one only for
        the offset APIs (commit, fetch) and admin calls, not for group membership."""
        if group_id is None or (not group_id and not allow_empty):
            return E.INVALID_GROUP_ID, None
        p = self._partition_of.get(group_id)  # (partition_of, without its call when known)
        if p is None:
            p = self.partition_of(group_id)
        if p in self.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS, None
        shard = self.shards.get(p)
        if shard is None:
            return E.NOT_COORDINATOR, None
        return 0, shard

    def group(self, group_id: str) -> Group | None:
        shard = self.shards.get(self.partition_of(group_id))
        return shard.groups.get(group_id) if shard is not None else None

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        shard = self.shards.get(self.partition_of(group_id))
        return shard.consumer_groups.get(group_id) if shard is not None else None

    def begin_loading(self, partition: int, now_ms: int) -> GroupCoordinatorShard:
        """This broker leads the partition now: a fresh shard, replayed by the caller, then `finish_loading`."""
        self.unload(partition)
        shard = self.loading[partition] = GroupCoordinatorShard(partition, self.cfg, self._complete, now_ms)
        return shard

    def finish_loading(self, partition: int, now_ms: int) -> None:
        shard = self.loading.pop(partition, None)
        if shard is not None:
            shard.loaded(now_ms)
            self.shards[partition] = shard

    def is_loading(self, partition: int) -> bool:
        return partition in self.loading

    def unload(self, partition: int) -> None:
        """This broker no longer leads the partition: its groups answer NOT_COORDINATOR from now on."""
        self.loading.pop(partition, None)
        shard = self.shards.pop(partition, None)
        if shard is not None:
            shard.membership.fail_all(E.NOT_COORDINATOR)

    # -- completions and timers ------------------------------------------------------------------------
    def _complete(self, token: Pending, result: Any) -> None:
        self.completed.append((token, result))

    def drain_completions(self) -> list[tuple[Pending, Any]]:
        out, self.completed = self.completed, []
        return out

    def next_deadline_ms(self) -> int | None:
        return min((s.next_deadline_ms() for s in self.shards.values()), default=None)

    def poll(self, now_ms: int) -> list[tuple[GroupCoordinatorShard, CoordinatorResult]]:
        """Timers (join phase, initial delay, sessions, offset expiry): the records they write, per shard."""
        return [(s, r) for s in list(self.shards.values()) for r in s.poll(now_ms)]

    # -- membership -------------------------------------------------------------------------------------
    def join_group(self, *, group_id: str | None, member_id: str, now_ms: int, topics: TopicLookup | None = None,
                   **kw) -> tuple[GroupCoordinatorShard | None, CoordinatorResult[JoinResult | Pending]]:
        err, shard = self.shard_for(group_id)
        if err:
            return None, CoordinatorResult(response=JoinResult(error=err, member_id=member_id))
        cg = shard.consumer_groups.get(group_id)
        if cg is not None and cg.members:
            # a classic member joining a consumer group with members (Kafka's classicGroupJoinToConsumerGroup)
            return shard, shard.migration.join(cg, member_id=member_id, now_ms=now_ms,
                                               topics=topics or (lambda name: None), **kw)
        tombstones = []
        if cg is not None:
            # Kafka's maybeDeleteEmptyConsumerGroup: an empty consumer group becomes a classic group with its
            # offsets (whatever group.consumer.migration.policy says: it governs groups with members)
            tombstones = shard.empty_consumer_group_tombstones(cg)
            del shard.consumer_groups[group_id]
            log.info("consumer_group.converted_to_classic", group=group_id)
        result = shard.membership_op(shard.membership.join_group(
            group_id=group_id, member_id=member_id, now_ms=now_ms, **kw))
        if tombstones:
            result.records = tombstones + list(result.records)
        return shard, result

    def sync_group(self, *, group_id: str | None, now_ms: int, **kw
                   ) -> tuple[GroupCoordinatorShard | None, CoordinatorResult[SyncResult | Pending]]:
        err, shard = self.shard_for(group_id)
        if err:
            return None, CoordinatorResult(response=SyncResult(error=err))
        cg = shard.consumer_groups.get(group_id)
        if cg is not None:
            return shard, shard.migration.sync(cg, now_ms=now_ms, **kw)
        return shard, shard.membership_op(shard.membership.sync_group(group_id=group_id, now_ms=now_ms, **kw))

    def heartbeat(self, *, group_id: str | None, now_ms: int, **kw
                  ) -> tuple[GroupCoordinatorShard | None, CoordinatorResult[int]]:
        err, shard = self.shard_for(group_id)
        if err:
            return None, CoordinatorResult(response=err)
        cg = shard.consumer_groups.get(group_id)
        if cg is not None:
            return shard, shard.migration.heartbeat(cg, now_ms=now_ms, **kw)
        return shard, shard.membership_op(shard.membership.heartbeat(group_id=group_id, now_ms=now_ms, **kw))

    def leave_group(self, *, group_id: str | None, members: list[tuple[str, str | None]], now_ms: int
                    ) -> tuple[GroupCoordinatorShard | None, CoordinatorResult[tuple[int, list]]]:
        err, shard = self.shard_for(group_id)
        if err:
            return None, CoordinatorResult(response=(err, []))
        cg = shard.consumer_groups.get(group_id)
        if cg is not None:
            return shard, shard.migration.leave(cg, members=members, now_ms=now_ms)
        return shard, shard.membership_op(shard.membership.leave_group(group_id=group_id, members=members,
                                                                       now_ms=now_ms))

    # -- KIP-848 consumer groups ------------------------------------------------------------------------
    def consumer_group_heartbeat(self, request: HeartbeatRequest, topics: TopicLookup, now_ms: int,
                                 api_version: int = 1
                                 ) -> tuple[GroupCoordinatorShard | None, CoordinatorResult[HeartbeatResult]]:
        # (KIP-848's manager is imported on first use; an import statement, not a lazy name: an except clause needs
        # the class itself)
        from .consumer_group_manager import GroupError, HeartbeatResult, check_heartbeat
        try:  # as Kafka's service: the request's own rules first, before the coordinator is looked up
            check_heartbeat(request, self.cfg.consumer_assignors, api_version)
        except GroupError as exc:
            return None, CoordinatorResult(response=HeartbeatResult(exc.code, exc.message))
        err, shard = self.shard_for(request.group_id)
        if err:
            return None, CoordinatorResult(response=HeartbeatResult(int(err)))
        return shard, shard.consumer.heartbeat(request, topics, now_ms, api_version)

    def take_regex_jobs(self) -> list[RegexJob]:
        """The regex resolutions heartbeats handed over for a worker thread (regex_refresh.py)."""
        jobs = [j for s in self.shards.values() for j in s.consumer.regex_jobs]
        for s in self.shards.values():
            s.consumer.regex_jobs.clear()
        return jobs

    def complete_regex_refresh(self, job: RegexJob, found: dict[str, frozenset[str]], topics: TopicLookup,
                               now_ms: int) -> tuple[GroupCoordinatorShard | None, CoordinatorResult | None]:
        """A worker thread's resolution back: the records to write on the group's shard, or None when the group
        or this broker's ownership of it went meanwhile (or nothing changed)."""
        shard = self.shards.get(self.partition_of(job.group_id))
        g = shard.consumer_groups.get(job.group_id) if shard is not None else None
        if g is None or g.regex_job is not job:
            return None, None
        records = regex_refresh.complete(g, job, found, topics, now_ms)
        return (shard, CoordinatorResult(records)) if records else (None, None)

    def consumer_group_describe(self, group_id: str | None) -> tuple[int, str | None, ConsumerGroup | None]:
        """(error, message, group) as Kafka's consumerGroupDescribe."""
        err, shard = self.shard_for(group_id, allow_empty=True)
        if err:
            return int(err), None, None
        g = shard.consumer_groups.get(group_id)
        if g is None:
            if group_id in shard.groups:  # a classic group, even empty or with only offsets (Kafka 4 has one)
                return int(E.GROUP_ID_NOT_FOUND), f"Group {group_id} is not a consumer group.", None
            return int(E.GROUP_ID_NOT_FOUND), f"Group {group_id} not found.", None
        return 0, None, g

    # -- offsets ---------------------------------------------------------------------------------------------
    def commit_offsets(self, group_id: str | None, offsets: list[OffsetCommit], now_ms: int,
                       api_version: int = 9, generation_id: int = -1, member_id: str = "",
                       group_instance_id: str | None = None, retention_ms: int = -1
                       ) -> tuple[GroupCoordinatorShard | None, CoordinatorResult[list[tuple[str, int, int]]]]:
        # (shard_for's lookups when the group is known and its shard loaded -- never loading then --, else its call)
        shard = self.shards.get(self._partition_of.get(group_id))
        if shard is None:
            err, shard = self.shard_for(group_id, True)  # (allow_empty)
            if err:
                return None, CoordinatorResult(response=[(t, p, int(err)) for t, p, *_ in offsets])
        cg = shard.consumer_groups.get(group_id)
        if cg is not None:  # a KIP-848 group: the generation is the member epoch
            err = shard.consumer.validate_offset_commit(cg, member_id, generation_id, api_version)
            if err:
                return None, CoordinatorResult(response=[(t, p, err) for t, p, *_ in offsets])
            generation_id, member_id, group_instance_id = -1, "", None
        return shard, shard.offsets.commit(group_id, generation_id, member_id, group_instance_id, offsets, now_ms,
                                           retention_ms)

    def fetch_offsets(self, *, group_id: str | None, partitions: list[tuple[str, int]] | None,
                      require_stable: bool = False, member_id: str | None = None, member_epoch: int = -1
                      ) -> tuple[int, list[tuple[str, int, OffsetEntry | None, int]]]:
        err, shard = self.shard_for(group_id, allow_empty=True)
        if err:
            return err, []
        cg = shard.consumer_groups.get(group_id)
        if cg is not None:
            err = shard.consumer.validate_offset_fetch(cg, member_id, member_epoch)
            if err:
                return err, []
        return 0, shard.offsets.fetch(group_id, partitions, require_stable)

    def txn_commit_offsets(self, *, group_id: str | None, offsets: list[OffsetCommit], now_ms: int, **kw
                           ) -> tuple[GroupCoordinatorShard | None, CoordinatorResult[list[tuple[str, int, int]]]]:
        err, shard = self.shard_for(group_id)
        if err:
            return None, CoordinatorResult(response=[(t, p, int(err)) for t, p, *_ in offsets])
        return shard, shard.offsets.txn_commit(group_id=group_id, offsets=offsets, now_ms=now_ms, **kw)

    def delete_offsets(self, group_id: str | None, partitions: list[tuple[str, int]]
                       ) -> tuple[GroupCoordinatorShard | None, CoordinatorResult[tuple[int, list]]]:
        err, shard = self.shard_for(group_id, allow_empty=True)
        if err:
            return None, CoordinatorResult(response=(err, []))
        return shard, shard.offsets.delete(group_id, partitions)

    # -- admin -----------------------------------------------------------------------------------------------
    def describe_group(self, group_id: str | None) -> GroupDescription:
        err, shard = self.shard_for(group_id, allow_empty=True)
        if err:
            return GroupDescription(err, group_id, "", "", "", [])
        if group_id in shard.consumer_groups:  # Kafka: a consumer group is not a classic group: Dead, not found
            return GroupDescription(E.GROUP_ID_NOT_FOUND, group_id, "Dead", "", "", [])
        return shard.describe_group(group_id)

    def list_groups(self, states: list[str] | None = None, types: list[str] | None = None
                    ) -> list[tuple[str, str, str, str]]:
        """(group id, protocol type, state, group type: "classic" or "consumer"), filtered by state and
        by type as Kafka's ListGroups v4/v5 (case-insensitive)."""
        wanted = {s.lower() for s in states} if states else None
        kinds = {t.lower() for t in types} if types else None
        out = {g.group_id: (g.group_id, g.protocol_type or "", g.state.value, "classic")
               for shard in self.shards.values() for g in shard.groups.values()}
        out.update({g.group_id: (g.group_id, "consumer", g.state.value, "consumer")
                    for shard in self.shards.values() for g in shard.consumer_groups.values()})
        return sorted(row for row in out.values() if (wanted is None or row[2].lower() in wanted)
                      and (kinds is None or row[3] in kinds))

    def delete_group(self, group_id: str | None
                     ) -> tuple[GroupCoordinatorShard | None, CoordinatorResult[int]]:
        err, shard = self.shard_for(group_id, allow_empty=True)
        if err:
            return None, CoordinatorResult(response=err)
        return shard, shard.delete_group(group_id)
