"""ReplicaManager's part for replicated partitions (ZooKeeper mode, and each broker of an in-process cluster).

A LeaderAndIsr makes this broker a partition's leader or follower (`become_replica`) and an ISR change reaches
its Partition (`on_isr_changed`); the leader answers its followers' fetches (`read_for_follower`, which notes
their positions: the high watermark and the ISR may move) and holds acks=all produces until the ISR has the
records (`wait_replicated`); a follower appends its leader's batches as they are (`append_as_follower`, called
by the replica fetcher, replication.py) and may answer a consumer's fetch from its own copy (KIP-392,
`_follower_read_check`). The choice of a consumer's preferred read replica is Partition's
(`Partition.preferred_read_replica`).

`ReplicatedPartitions` is a base class of ReplicaManager, not used alone: its methods work on the
ReplicaManager's state (logs, partitions, leader_epochs, replication, node_id, is_replicated, log_dir,
offline_log_dirs) and call its leader_check, notify, watch, unwatch, handle_log_dir_failure and lifecycle.open.
`LogReadResult` (one partition of a Fetch, a follower's or a consumer's) is defined here, below
replica_manager.py, which imports it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from ..storage.unified_log import OffsetOutOfRange
from ..wire.errors import E
from .context import now_ms
from .partition import Partition

if TYPE_CHECKING:
    from ..controller.controller import MetadataCache
    from ..controller.metadata import PartitionInfo, TopicInfo


@dataclass
class LogReadResult:
    """One partition of a Fetch (Kafka's LogReadResult)."""
    partition: int
    error: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: list | None = None  # the log's buffers, not copied
    preferred_read_replica: int = -1  # KIP-392: the replica this consumer should fetch from instead
    aborted_transactions: list[tuple[int, int]] | None = None  # read_committed: (producer id, first offset)


class ReplicatedPartitions:
    """The replication side of ReplicaManager (see the module comment)."""

    # -- role changes (LeaderAndIsr, ISR updates) ---------------------------------------------------
    def become_replica(self, topic: "TopicInfo", state: "PartitionInfo") -> int:
        """A LeaderAndIsr for a partition this broker replicates (ZooKeeper mode): its log opened (recovered) when
        it is not yet, then leader (the high watermark from the ISR's fetches) or follower (the replica fetcher
        truncates to the new leader's epoch and copies from it) -> 0, or KAFKA_STORAGE_ERROR when the log dir
        is offline or the log cannot be made."""
        key = (topic.name, state.index)
        if self.offline_log_dirs:
            return int(E.KAFKA_STORAGE_ERROR)
        lg = self.logs.get(key)
        if lg is not None and lg.busy:  # the replica fetcher is cutting it (replication.py): applied once it is done
            lg.after_busy.append(lambda: self.become_replica(topic, state))
            self.leader_epochs[key] = state.leader_epoch
            return 0
        if lg is None:
            try:
                lg = self.lifecycle.open(topic, state.index, self.log_now_ms())
            except OSError as exc:
                self.handle_log_dir_failure(exc, f"creating the log of {topic.name}-{state.index}")
                return int(E.KAFKA_STORAGE_ERROR)
            # the high watermark it had (replication-offset-checkpoint), not its log end offset: what the ISR
            # never confirmed stays invisible until the leader (or, leading, its ISR) vouches for it
            checkpointed = self.log_dir.high_watermarks.get(key, 0) if self.log_dir is not None else 0
            lg.set_replicated_high_watermark(checkpointed)
        self.leader_epochs[key] = state.leader_epoch
        p = self.partitions.get(key)
        if p is None or p.log is not lg:
            p = self.partitions[key] = Partition(topic.name, state.index, self.node_id, lg)
        if state.leader == self.node_id:
            if self.replication is not None:
                self.replication.remove_fetch(key)
            p.make_leader(state.leader_epoch, state.partition_epoch, state.replicas, state.isr, now_ms())
        else:
            p.make_follower(state.leader, state.leader_epoch, state.partition_epoch, state.replicas, state.isr)
            if self.replication is not None:
                if state.leader >= 0:
                    self.replication.add_fetch(key, state.leader, state.leader_epoch)
                else:  # offline: nobody to copy from until a leader is elected
                    self.replication.remove_fetch(key)
        self.notify(topic.name, state.index)  # fetches and produces waiting on it look again
        return 0

    def on_isr_changed(self, topic: str, partition: int, isr: list[int], partition_epoch: int) -> None:
        """The controller's ISR for a partition this broker leads (an AlterPartition answer, an UpdateMetadata)."""
        p = self.partitions.get((topic, partition))
        if p is not None and p.apply_isr(isr, partition_epoch) and p.maybe_increment_hw():
            self.notify(topic, partition)

    # -- followers' fetches and appends, acks=all ---------------------------------------------------------
    def read_for_follower(self, cache: "MetadataCache", topic: str, partition: int, replica_id: int,
                          fetch_offset: int, current_leader_epoch: int, max_bytes: int, now: int) -> LogReadResult:
        """One partition of a follower's Fetch (Kafka's fetchMessages with a replica id): batches up to the log
        end offset (written records only), the leader's high watermark; the follower's position is noted
        first (it has every record below fetch_offset), which may move the high watermark and the ISR."""
        err = self.leader_check(cache, topic, partition, current_leader_epoch)
        key = (topic, partition)
        p = self.partitions.get(key)
        if not err and (p is None or replica_id not in p.replicas):
            err = E.NOT_LEADER_OR_FOLLOWER  # not a replica of this partition (Kafka: NotLeaderOrFollower)
        if err:
            return LogReadResult(partition, err)
        lg = self.logs[key]
        try:
            data = lg.read_parts(fetch_offset, max_bytes, min_one=True)
        except OffsetOutOfRange:
            return LogReadResult(partition, E.OFFSET_OUT_OF_RANGE, lg.high_watermark, lg.high_watermark,
                                 lg.log_start_offset)
        if p.update_follower_fetch(replica_id, fetch_offset, lg.log_end_offset, now):
            self.notify(topic, partition)  # acks=all produces and consumers waiting on the watermark
        if self.replication is not None:
            self.replication.maybe_expand_isr(p)
        hw = lg.high_watermark
        return LogReadResult(partition, 0, hw, hw, lg.log_start_offset, data)

    def follower(self, key: tuple[str, int]) -> Partition | None:
        """The partition, while this broker replicates it with its log in service (the replica fetcher's way to it;
        None once it moved, stopped or its log dir went offline)."""
        p = self.partitions.get(key)
        return p if p is not None and self.logs.get(key) is p.log else None

    def append_as_follower(self, key: tuple[str, int], data) -> tuple[object, int] | None:
        """A follower's append of the leader's batches (UnexpectedAppend when they do not follow on); returns
        (log, last offset) for wait_durable, or None when the partition is no longer here."""
        lg = self.logs.get(key)
        if lg is None:
            return None
        try:
            res = lg.append_as_follower(data, now_ms=self.log_now_ms(), defer_flush=True)
        except OSError as exc:
            raise self.handle_log_dir_failure(exc, f"appending to {key[0]}-{key[1]} as a follower") from None
        return lg, res.last_offset

    async def wait_replicated(self, topic: str, partition: int, offset: int, deadline: float) -> int:
        """acks=all (Kafka's DelayedProduce): wait until every ISR member has the records below `offset` ->
        0, NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR is then smaller than min.insync.replicas,
        NOT_LEADER_OR_FOLLOWER when leadership moved meanwhile, REQUEST_TIMED_OUT at the deadline."""
        key = (topic, partition)
        while True:
            p = self.partitions.get(key)
            if p is None or not p.is_leader or self.logs.get(key) is not p.log:
                return int(E.NOT_LEADER_OR_FOLLOWER)
            if p.enough_replicas_reached(offset):
                if len(p.isr) < p.log.config.min_insync_replicas:
                    return int(E.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
                return 0
            with self.purgatory.watching([key]) as ev, trio.move_on_at(deadline):
                await ev.wait()
            if trio.current_time() >= deadline:
                return int(E.REQUEST_TIMED_OUT)

    def replicated(self, topic: str, partition: int) -> bool:
        """True when acks=all must wait for followers: a partition of several replicas on a ZooKeeper-mode broker."""
        p = self.partitions.get((topic, partition))
        return p is not None and len(p.replicas) > 1

    # -- a consumer's fetch from a follower (KIP-392) -----------------------------------------------------
    def _follower_read_check(self, cache: "MetadataCache", topic: str, partition: int,
                             current_leader_epoch: int) -> int:
        """A consumer's fetch from a follower (KIP-392): it must host a copy and follow the current leader epoch."""
        p = cache.partition(topic, partition)
        key = (topic, partition)
        if p is None or not self.is_replicated or key not in self.logs or key not in self.partitions \
                or self.node_id not in p.replicas or self.logs[key].busy:  # (busy: being truncated)
            return int(E.NOT_LEADER_OR_FOLLOWER)
        if current_leader_epoch is not None and current_leader_epoch >= 0:
            if current_leader_epoch < p.leader_epoch:
                return int(E.FENCED_LEADER_EPOCH)
            if current_leader_epoch > p.leader_epoch:
                return int(E.UNKNOWN_LEADER_EPOCH)
        return 0
