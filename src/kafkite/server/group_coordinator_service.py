"""What handlers call for groups and offsets (Kafka 4's GroupCoordinatorService): one typed method
per API, each running the sans-IO coordinator's operation on the coordinator runtime."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Coroutine

import structlog
import trio

from ..coordinator.coordinator import GroupCoordinator, JoinResult, SyncResult
from ..coordinator.group import OffsetEntry
from ..coordinator.offsets import OffsetCommit
from ..wire.lazy_kafka import lazy_names
from .context import now_ms
from .coordinator_runtime import CoordinatorRuntime

if TYPE_CHECKING:
    from ..coordinator.consumer_group import ConsumerGroup
    from ..coordinator.consumer_group_manager import HeartbeatRequest, HeartbeatResult
    from ..coordinator.regex_refresh import RegexJob
    from ..coordinator.shard import GroupDescription
    from .broker import Broker

# KIP-848's (wire/lazy_kafka.py LazyName: imported on the first ConsumerGroupHeartbeat, as coordinator.py's)
(TopicMetadata,) = lazy_names(globals(), "kafkite.coordinator.consumer_group_records", "TopicMetadata")

log = structlog.get_logger("kafkite.coordinator")
OFFSETS_TOPIC = "__consumer_offsets"
_CONFIG_KEYS = ["group.min.session.timeout.ms", "group.max.session.timeout.ms", "group.initial.rebalance.delay.ms",
                "group.max.size", "offsets.retention.minutes", "offsets.retention.check.interval.ms",
                "offset.metadata.max.bytes", "offsets.topic.num.partitions",
                "group.coordinator.rebalance.protocols", "group.consumer.session.timeout.ms",
                "group.consumer.heartbeat.interval.ms", "group.consumer.min.session.timeout.ms",
                "group.consumer.max.session.timeout.ms", "group.consumer.min.heartbeat.interval.ms",
                "group.consumer.max.heartbeat.interval.ms", "group.consumer.max.size", "group.consumer.assignors",
                "group.consumer.migration.policy", "group.consumer.regex.refresh.interval.ms"]


class _Topics:
    """The broker's topics as the consumer-group heartbeat reads them (coordinator's TopicsImage): a lookup,
    every name (regex subscriptions resolve against them) and a version that moves whenever the set of topic
    names has changed (a topic created or deleted), so a group's regexes are resolved again at its next
    heartbeat after one is (Kafka's lastMetadataImageWithNewTopics)."""

    def __init__(self, broker: "Broker"):
        self.broker = broker
        self._version = 0
        self._names: frozenset[str] = frozenset()
        self._cache: dict[str, TopicMetadata | None] = {}  # until the next metadata update
        # broker id -> broker.rack, of every broker seen (as KRaft keeps a stopped broker's registration): a broker
        # that stops and comes back changes no partition's racks, so no group rebalances for it
        self._racks: dict[int, str] = {}

    @property
    def version(self) -> int:
        names = self.broker.metadata.topics
        if len(names) != len(self._names) or not self._names.issuperset(names):
            self._names = frozenset(names)
            self._version += 1
            self._cache.clear()
        return self._version

    def bump(self) -> None:
        """A metadata update: partition counts, replicas or brokers may have changed."""
        self._cache.clear()

    def __call__(self, name: str) -> TopicMetadata | None:
        """The topic's id, partition count and each partition's replica racks (broker.rack; () when none has one:
        the consumer groups' rack-aware assignment)."""
        if name in self._cache:
            return self._cache[name]
        md = self.broker.metadata
        t = md.topic(name)
        out = None
        if t is not None:
            for b in md.brokers.values():
                if b.rack:
                    self._racks[b.node_id] = b.rack
            racks = [frozenset()] * len(t.partitions)
            for p in t.partitions:
                if 0 <= p.index < len(racks):
                    racks[p.index] = frozenset(r for x in p.replicas if (r := self._racks.get(x)))
            out = TopicMetadata(t.topic_id, t.name, len(t.partitions), tuple(racks) if any(racks) else ())
        self._cache[name] = out
        return out

    def names(self):
        return list(self.broker.metadata.topics)


class GroupCoordinatorService:
    def __init__(self, broker: "Broker"):
        self.coordinator = GroupCoordinator({k: broker.config.get(k) for k in _CONFIG_KEYS})
        # each group's own configs (the GROUP config resource) as this broker's metadata has them now
        self.coordinator.cfg.group_configs = lambda group_id: broker.state.metadata.group_configs.get(group_id)
        self.runtime = CoordinatorRuntime(broker, OFFSETS_TOPIC, self.coordinator)
        self.broker = broker
        self._topic = _Topics(broker)
        self._nursery: trio.Nursery | None = None
        self._regex_limiter = trio.CapacityLimiter(1)

    # -- KIP-848 consumer groups ----------------------------------------------------------------------
    async def consumer_group_heartbeat(self, request: HeartbeatRequest, api_version: int) -> HeartbeatResult:
        op = self.coordinator.consumer_group_heartbeat(request, self._topic, now_ms(), api_version)
        self._start_regex_jobs()
        return await self.runtime.write(*op)

    def _start_regex_jobs(self) -> None:
        jobs = self.coordinator.take_regex_jobs()
        if jobs and self._nursery is None:
            log.warning("consumer_group.regex_refresh_dropped", groups=[j.group_id for j in jobs],
                        reason="the coordinator service is not running")
            return
        for job in jobs:
            self._nursery.start_soon(self._refresh_regexes, job)

    async def _refresh_regexes(self, job: RegexJob) -> None:
        """A big regex resolution, off the event loop (Kafka resolves in its executor): the matching runs in a
        worker thread, one at a time; its records are written as any coordinator operation's."""
        try:
            found = await trio.to_thread.run_sync(job.run, limiter=self._regex_limiter)
        except Exception as exc:  # Kafka logs the failure and writes nothing
            log.error("consumer_group.regex_refresh_failed", group=job.group_id, error=repr(exc))
            found = {}
        try:
            shard, result = self.coordinator.complete_regex_refresh(job, found, self._topic, now_ms())
            if result is not None:
                await self.runtime.write(shard, result)
        except Exception as exc:  # a background task: the broker serves on
            log.error("consumer_group.regex_refresh_failed", group=job.group_id, error=repr(exc))

    async def consumer_group_describe(self, group_id: str) -> tuple[int, str | None, ConsumerGroup | None]:
        err, shard = self.coordinator.shard_for(group_id, allow_empty=True)
        if err:
            return int(err), None, None
        return await self.runtime.read(shard.partition, lambda: self.coordinator.consumer_group_describe(group_id))

    def on_metadata(self, cache) -> None:
        self._topic.bump()
        self.runtime.on_metadata(cache)

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(self.runtime.run)
            self._nursery = nursery  # the background regex resolutions'
            task_status.started()

    # -- membership ---------------------------------------------------------------------------------
    async def join_group(self, *, group_id: str | None, member_id: str, group_instance_id: str | None,
                         protocol_type: str, protocols: list[tuple[str, bytes]], session_timeout_ms: int,
                         rebalance_timeout_ms: int, client_id: str, client_host: str,
                         require_known_member_id: bool, reason: str | None = None) -> JoinResult:
        return await self.runtime.write(*self.coordinator.join_group(
            group_id=group_id, member_id=member_id, group_instance_id=group_instance_id,
            protocol_type=protocol_type, protocols=protocols, session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms, client_id=client_id, client_host=client_host,
            require_known_member_id=require_known_member_id, reason=reason, topics=self._topic, now_ms=now_ms()))

    async def sync_group(self, *, group_id: str | None, generation_id: int, member_id: str,
                         group_instance_id: str | None, protocol_type: str | None, protocol_name: str | None,
                         assignments: dict[str, bytes]) -> SyncResult:
        return await self.runtime.write(*self.coordinator.sync_group(
            group_id=group_id, generation_id=generation_id, member_id=member_id,
            group_instance_id=group_instance_id, protocol_type=protocol_type, protocol_name=protocol_name,
            assignments=assignments, now_ms=now_ms()))

    async def heartbeat(self, *, group_id: str | None, generation_id: int, member_id: str,
                        group_instance_id: str | None) -> int:
        return await self.runtime.write(*self.coordinator.heartbeat(
            group_id=group_id, generation_id=generation_id, member_id=member_id,
            group_instance_id=group_instance_id, now_ms=now_ms()))

    async def leave_group(self, *, group_id: str | None, members: list[tuple[str, str | None]]
                          ) -> tuple[int, list[tuple[str, str | None, int]]]:
        return await self.runtime.write(*self.coordinator.leave_group(group_id=group_id, members=members,
                                                                      now_ms=now_ms()))

    # -- offsets --------------------------------------------------------------------------------------
    def commit_offsets(self, group_id: str | None, generation_id: int, member_id: str,
                       group_instance_id: str | None, offsets: list[OffsetCommit],
                       retention_ms: int = -1, api_version: int = 9, now: int | None = None
                       ) -> "list[tuple[str, int, int]] | Coroutine[Any, Any, list[tuple[str, int, int]]]":
        """`now`: the time in ms the commit is made at (the request's; now_ms() when not given). The operation runs
        now, and so does its write (CoordinatorRuntime.write_now): the answer, or when it must wait (for an fsync, the
        ISR, an earlier write) a coroutine (CoroutineType) to await for it -- no coroutine made for a commit
        answered at once (every commit comes here)."""
        # (positional: a call with keywords costs more) group id, offsets, now_ms, api version, generation id, member
        # id, group instance id, retention
        return self.runtime.write_now(*self.coordinator.commit_offsets(
            group_id, offsets, now_ms() if now is None else now, api_version, generation_id, member_id,
            group_instance_id, retention_ms))

    async def fetch_offsets(self, *, group_id: str | None, partitions: list[tuple[str, int]] | None,
                            require_stable: bool = False, member_id: str | None = None, member_epoch: int = -1
                            ) -> tuple[int, list[tuple[str, int, OffsetEntry | None, int]]]:
        err, shard = self.coordinator.shard_for(group_id, allow_empty=True)
        if err:
            return err, []
        return await self.runtime.read(shard.partition, lambda: self.coordinator.fetch_offsets(
            group_id=group_id, partitions=partitions, require_stable=require_stable, member_id=member_id,
            member_epoch=member_epoch))

    async def txn_commit_offsets(self, *, group_id: str | None, producer_id: int, producer_epoch: int,
                                 generation_id: int, member_id: str, group_instance_id: str | None,
                                 offsets: list[OffsetCommit]) -> list[tuple[str, int, int]]:
        return await self.runtime.write(*self.coordinator.txn_commit_offsets(
            group_id=group_id, producer_id=producer_id, producer_epoch=producer_epoch, generation_id=generation_id,
            member_id=member_id, group_instance_id=group_instance_id, offsets=offsets, now_ms=now_ms()))

    async def complete_transaction(self, partition: int, *, producer_id: int, producer_epoch: int, commit: bool,
                                   coordinator_epoch: int) -> int:
        """A marker for one __consumer_offsets partition (WriteTxnMarkers)."""
        return await self.runtime.complete_transaction(partition, producer_id=producer_id,
                                                       producer_epoch=producer_epoch, commit=commit,
                                                       coordinator_epoch=coordinator_epoch)

    async def delete_offsets(self, *, group_id: str | None, partitions: list[tuple[str, int]]
                             ) -> tuple[int, list[tuple[str, int, int]]]:
        return await self.runtime.write(*self.coordinator.delete_offsets(group_id, partitions))

    # -- admin ------------------------------------------------------------------------------------------
    async def describe_group(self, *, group_id: str | None) -> GroupDescription:
        err, shard = self.coordinator.shard_for(group_id, allow_empty=True)
        if err:
            return self.coordinator.describe_group(group_id)
        return await self.runtime.read(shard.partition, lambda: self.coordinator.describe_group(group_id))

    async def list_groups(self, *, states: list[str] | None = None, types: list[str] | None = None
                          ) -> list[tuple[str, str, str, str]]:
        return self.coordinator.list_groups(states, types)

    async def delete_group(self, *, group_id: str | None) -> int:
        return await self.runtime.write(*self.coordinator.delete_group(group_id))
