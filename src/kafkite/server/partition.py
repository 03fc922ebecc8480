"""One replicated partition on this broker (Kafka's cluster.Partition), ZooKeeper mode: its role, ISR and high watermark.

As **leader** it tracks each follower (`Replica`: the log end offset its last fetch reported, when it last caught
up) and moves the high watermark to the smallest log end offset over the ISR (its own counted as far as it is
written and fsynced; never backwards). It proposes ISR changes, which the controller makes (AlterPartition):

- a follower leaves the ISR when it has not caught up for `replica.lag.time.max.ms` (Kafka's
  getOutOfSyncReplicas: caught up = its fetch reached the leader's log end offset as it was at that fetch or the
  one before);
- a follower joins again once it has all records up to the high watermark and everything of the current leader
  epoch's start (Kafka's isFollowerInSync);
- while a change is in flight (`pending_isr`) no other is proposed, and the high watermark and acks=all count the
  larger of the two sets (Kafka's maximal ISR), so a record is never acknowledged by fewer replicas than either.

As **follower** it holds the leader's id and epoch; the replica fetcher (replication.py) does the copying and sets
the high watermark from the leader's answers.

A leader configured with Kafka's RackAwareReplicaSelector (`replica_selector`) sends a consumer of another rack
to an in-sync replica of the consumer's rack (KIP-392, `preferred_read_replica`).

Sans-IO: times come in as `now_ms`; the broker's replica manager calls in.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..controller.metadata import BrokerInfo

RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


def replica_selector(config) -> bool:
    """`replica.selector.class`: unset (consumers read from leaders) or Kafka's RackAwareReplicaSelector (a
    consumer with client.rack is sent to an in-sync replica of its rack, KIP-392); ValueError for another."""
    name = (config.get("replica.selector.class") or "").strip()
    if name in ("", "null"):
        return False
    if name == RACK_AWARE_SELECTOR:
        return True
    raise ValueError(f"replica.selector.class {name!r}: Kafkite implements {RACK_AWARE_SELECTOR} only")


@dataclass
class Replica:
    """A follower as its leader sees it (Kafka's Replica state)."""
    broker_id: int
    log_end_offset: int = -1  # unknown until its first fetch
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_leo: int = -1


@dataclass
class Partition:
    topic: str
    index: int
    node_id: int
    log: object
    leader: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    # tuples (never changed in place, a change puts a new one): a tuple of ints is one object fewer for every full
    # garbage collection to go through (the collector stops tracking it), a list is not (3 brokers x 1,000
    # partitions held 6,000 of them)
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    pending_isr: list[int] | None = None  # proposed to the controller, not answered yet
    leader_epoch_start_offset: int = 0
    remotes: dict[int, Replica] = field(default_factory=dict)

    @property
    def is_leader(self) -> bool:
        return self.leader == self.node_id

    @property
    def maximal_isr(self) -> Sequence[int]:
        """The committed ISR plus what a change in flight adds (Kafka's maximal ISR)."""
        if self.pending_isr is None:
            return self.isr
        return [*self.isr, *(r for r in self.pending_isr if r not in self.isr)]

    # -- role changes (LeaderAndIsr) ---------------------------------------------------------------
    def make_leader(self, leader_epoch: int, partition_epoch: int, replicas: list[int], isr: list[int],
                    now_ms: int) -> None:
        """Become (or stay) leader: every follower starts unknown, ISR members as caught up now (Kafka gives them
        a fresh lastCaughtUpTime so they are not dropped before their first fetch)."""
        new_epoch = leader_epoch != self.leader_epoch or not self.is_leader
        self.leader, self.leader_epoch, self.partition_epoch = self.node_id, leader_epoch, partition_epoch
        self.replicas, self.isr, self.pending_isr = tuple(replicas), tuple(isr), None
        if new_epoch:
            self.leader_epoch_start_offset = self.log.log_end_offset
            self.remotes = {r: Replica(r, last_caught_up_ms=now_ms if r in isr else 0)
                            for r in replicas if r != self.node_id}
        # the high watermark this replica had (as a follower, or from before) is where it starts
        self.log.set_replicated_high_watermark(self.log.high_watermark)
        self.maybe_increment_hw()

    def make_follower(self, leader: int, leader_epoch: int, partition_epoch: int, replicas: list[int],
                      isr: list[int]) -> None:
        self.leader, self.leader_epoch, self.partition_epoch = leader, leader_epoch, partition_epoch
        self.replicas, self.isr, self.pending_isr = tuple(replicas), tuple(isr), None
        self.remotes = {}
        self.log.set_replicated_high_watermark(self.log.high_watermark)

    # -- follower: what the replica fetcher changes (Kafka's Partition.truncateTo, truncateFullyAndStartAt, and the
    #    watermarks of a fetch answer) -----------------------------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.log.truncate_fully_and_start_at(offset)

    def update_follower_watermarks(self, leader_high_watermark: int, leader_log_start_offset: int) -> None:
        """A fetch answer from the leader: this replica's high watermark is the leader's, up to its own log end;
        records below the leader's log start offset go once this replica's high watermark covers it (the deleted
        segments' renames, and the log start's files, left to the log's `renames()`, for a worker thread, as
        DeleteRecords leaves them: the replica fetcher runs it)."""
        lg = self.log
        lg.set_replicated_high_watermark(min(leader_high_watermark, lg.log_end_offset))
        if lg.log_start_offset < leader_log_start_offset <= lg.high_watermark:
            lg.delete_records_before(leader_log_start_offset, defer_renames=True)

    def apply_isr(self, isr: list[int], partition_epoch: int) -> bool:
        """The controller's ISR (an AlterPartition answer, an UpdateMetadata): taken when newer than what we have
        (a proposal in flight is then void: the controller answers it INVALID_UPDATE_VERSION). True when taken."""
        if partition_epoch <= self.partition_epoch:
            return False
        self.isr, self.partition_epoch, self.pending_isr = tuple(isr), partition_epoch, None
        return True

    # -- leader: followers' fetches ---------------------------------------------------------------------
    def update_follower_fetch(self, replica_id: int, fetch_offset: int, leader_leo: int, now_ms: int) -> bool:
        """A follower fetched from `fetch_offset` (so it has everything below it). True when the high watermark
        moved."""
        r = self.remotes.get(replica_id)
        if r is None:
            return False
        if fetch_offset >= leader_leo:
            r.last_caught_up_ms = now_ms
        elif fetch_offset >= r.last_fetch_leader_leo:
            r.last_caught_up_ms = max(r.last_caught_up_ms, r.last_fetch_ms)
        r.log_end_offset, r.last_fetch_ms, r.last_fetch_leader_leo = fetch_offset, now_ms, leader_leo
        return self.maybe_increment_hw()

    def maybe_increment_hw(self) -> bool:
        """High watermark = the smallest log end offset over the (maximal) ISR, never lower than it was."""
        if not self.is_leader:
            return False
        lg = self.log
        hw = lg.log_end_offset
        for b in self.maximal_isr:
            if b != self.node_id:
                r = self.remotes.get(b)
                hw = min(hw, r.log_end_offset if r is not None else -1)
        if hw > lg.high_watermark:
            lg.set_replicated_high_watermark(hw)
            return True
        return False

    def isr_to_expand(self) -> list[int] | None:
        """The ISR with the followers that caught up added, or None (nothing to add, or a change in flight)."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        hw = self.log.high_watermark
        add = [b for b, r in self.remotes.items() if b not in self.isr and b in self.replicas
               and r.log_end_offset >= hw and r.log_end_offset >= self.leader_epoch_start_offset]
        return [*self.isr, *sorted(add)] if add else None

    def isr_to_shrink(self, now_ms: int, lag_ms: int) -> list[int] | None:
        """The ISR without the followers that have not caught up for `lag_ms`, or None."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        out = [b for b in self.isr if b != self.node_id and
               (b not in self.remotes or now_ms - self.remotes[b].last_caught_up_ms > lag_ms)]
        return [b for b in self.isr if b not in out] if out else None

    def enough_replicas_reached(self, offset: int) -> bool:
        """acks=all: every member of the (maximal) ISR has the records below `offset`."""
        return self.log.high_watermark >= offset

    # -- leader: a consumer's preferred read replica (KIP-392) ------------------------------------------------
    def preferred_read_replica(self, fetch_offset: int, client_rack: str, brokers: Mapping[int, "BrokerInfo"]) -> int:
        """Kafka's RackAwareReplicaSelector over the leader's view (`brokers`: the metadata's, for their racks): the
        leader itself when it is in the consumer's rack (-1: no redirection), else the ISR member of that rack that
        holds fetch_offset, the one with the largest log end offset (then the most recently caught up); -1 when
        there is none (or this replica does not lead)."""
        if not self.is_leader:
            return -1
        def rack(b: int) -> str | None:
            info = brokers.get(b)
            return None if info is None else info.rack
        if rack(self.node_id) == client_rack:
            return -1
        best = None
        for r in self.isr:
            remote = self.remotes.get(r)
            if r == self.node_id or remote is None or rack(r) != client_rack or remote.log_end_offset < fetch_offset:
                continue
            rank = (remote.log_end_offset, remote.last_caught_up_ms)
            if best is None or rank > best[0]:
                best = (rank, r)
        return -1 if best is None else best[1]
