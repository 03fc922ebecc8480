"""The controller: election by claim-if-absent, controller-epoch fencing, leaders and failover.

Every broker runs a `Controller`; the one that claims `/controller` in the
coordination store first is active. Each election increments the persisted
`/controller_epoch` (compare-and-set, so two claimants can never get the same
epoch). The active controller owns the authoritative `ClusterMetadata` and
pushes it to every live broker as a `MetadataUpdate` carrying its epoch; a broker
(`MetadataCache.apply`) rejects a command whose epoch is older than the newest it
has seen (STALE_CONTROLLER_EPOCH), so a deposed controller changes nothing.

The values kept in the store are Kafka 3.x's ZooKeeper values (zk_data.py), in both stores.
`ZkController` (zk_controller.py) is this controller on ZooKeeper: the same election, epoch and
leadership rules, plus what separate processes need (reloading the context from ZooKeeper,
topic watches, fenced writes, requests over the network).

Sans-IO: no sockets; the time comes from `now_ms`; the in-process store fires watches synchronously
(on ZooKeeper, the broker runs the controller on its controller event thread).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import structlog

from ..wire.errors import E
from . import zk_data
from .metadata import BrokerInfo, ClusterMetadata, MemoryMetadataStore
from .store import BadVersion, CoordinationStore, NodeExists

log = structlog.get_logger("kafkite.controller")

CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKERS = "/brokers/ids"


@dataclass(frozen=True)
class MetadataUpdate:
    """UpdateMetadata + LeaderAndIsr in one: the whole cluster view, stamped with the sender's epoch."""
    controller_id: int
    controller_epoch: int
    snapshot: dict


class StaleControllerEpoch(Exception):
    pass


class MetadataCache(ClusterMetadata):
    """A broker's own view of the cluster, changed only by controller commands."""

    def __init__(self, node_id: int):
        super().__init__(MemoryMetadataStore(), node_id=node_id)
        self.latest_controller_epoch = -1
        self.controller_id = -1
        self.listeners: list[Callable[[ClusterMetadata, "MetadataCache"], None]] = []

    def persist(self) -> None:  # a cache is never the source of truth
        pass

    def apply(self, cmd: MetadataUpdate) -> int:
        if cmd.controller_epoch < self.latest_controller_epoch:
            log.warning("metadata.stale_controller_epoch", broker=self.node_id, got=cmd.controller_epoch,
                        newest=self.latest_controller_epoch, sender=cmd.controller_id)
            return int(E.STALE_CONTROLLER_EPOCH)
        old = self.topics  # (load_snapshot makes a new dict of new objects: this one stays as it was)
        self.latest_controller_epoch = cmd.controller_epoch
        self.controller_id = cmd.controller_id
        self.controller_epoch = cmd.controller_epoch
        snap = cmd.snapshot
        self.load_snapshot(snap)
        for fn in self.listeners:
            fn(old, self)
        return 0


class StateChanges:
    """The partition state changes of one controller action, logged as one line each when they are few, else as one
    line listing them all (`changes`, as `topic-partition: old -> new`): a failover or a broker's return changes
    hundreds at once, and a line each held the event loop ~0.1 ms per partition."""
    EACH_UP_TO = 10

    def __init__(self, event: str) -> None:
        self.event = event
        self.changes: list[dict] = []

    def add(self, **fields) -> None:
        self.changes.append(fields)

    def log(self) -> None:
        if len(self.changes) <= self.EACH_UP_TO:
            for fields in self.changes:
                log.info(self.event, **fields)
        else:
            log.info(self.event, partitions=len(self.changes), changes=[
                f"{c['topic']}-{c['partition']}: {c['old']} -> {c['new']}" for c in self.changes])
        self.changes = []


def broker_info(reg: zk_data.BrokerRegistration) -> BrokerInfo:
    return BrokerInfo(reg.broker_id, reg.host, reg.port, reg.rack, [list(x) for x in reg.listeners],
                      listener=reg.listener, protocols=dict(reg.protocols))


class Controller:
    """One per broker. Active when it holds /controller."""

    def __init__(self, node_id: int, store: CoordinationStore, authority: ClusterMetadata,
                 send: Callable[[int, MetadataUpdate], int], *, auto_leader_rebalance: bool = True,
                 now_ms: Callable[[], int] = lambda: 0, unclean_default: Callable[[], bool] = lambda: False,
                 leaderless: dict | None = None):
        """`leaderless`: the partitions kept without a leader ((topic, partition) -> topic id; a test control,
        `make_leaderless`), shared by the controllers of one process so that the next one elected keeps them so."""
        self.node_id = node_id
        self.leaderless: dict[tuple[str, int], object] = {} if leaderless is None else leaderless
        self.unclean_default = unclean_default  # the broker's unclean.leader.election.enable (dynamic)
        self.now_ms = now_ms
        self.store = store
        self.authority = authority
        self.send = send  # (broker id, command) -> error code
        self.auto_leader_rebalance = auto_leader_rebalance
        self.epoch = -1  # the epoch this controller was elected with (-1: never)
        self.epoch_zk_version = -1  # the version of /controller_epoch it wrote (its fencing token)
        self.active = False
        self.stopped = False

    # -- membership and election ----------------------------------------------
    def startup(self, info: BrokerInfo) -> None:
        self.stopped = False
        self.register(info)
        self._watch_controller()
        self.try_elect()

    def register(self, info: BrokerInfo) -> None:
        reg = zk_data.BrokerRegistration(info.node_id, info.host, info.port, info.rack, tuple(
            (name, h, p) for name, h, p in info.listeners), info.listener, tuple(sorted(info.protocols.items())))
        self.store.create(f"{BROKERS}/{self.node_id}", zk_data.broker_registration(reg, self.now_ms()),
                          ephemeral_owner=self.node_id)

    def shutdown(self) -> None:
        self.stopped = True
        self.active = False

    def _watch_controller(self) -> None:
        if self.stopped:
            return

        def fired(_path: str) -> None:
            if self.stopped:
                return
            self._watch_controller()
            if self.store.get(CONTROLLER) is None:
                self.try_elect()
        self.store.watch(CONTROLLER, fired)

    def try_elect(self) -> bool:
        if self.stopped:
            return False
        try:
            self.store.create(CONTROLLER, zk_data.controller(self.node_id, self.now_ms()),
                              ephemeral_owner=self.node_id)
        except NodeExists:
            return False
        # Won the claim: bump the epoch with compare-and-set.
        while True:
            cur = self.store.get(CONTROLLER_EPOCH)
            try:
                if cur is None:
                    self.store.create(CONTROLLER_EPOCH, self.authority.controller_epoch + 1)
                    new_epoch, self.epoch_zk_version = self.authority.controller_epoch + 1, 0
                else:
                    new_epoch = cur[0] + 1
                    self.epoch_zk_version = self.store.set(CONTROLLER_EPOCH, new_epoch, expected_version=cur[1])
                break
            except (NodeExists, BadVersion):
                continue
        self.epoch = new_epoch
        self.active = True
        log.info("controller.elected", broker=self.node_id, controller_epoch=new_epoch)
        self.on_elected()
        return True

    def on_elected(self) -> None:
        """Take over: the epoch into the authority, watch the brokers, elect leaders, tell every broker."""
        self.authority.controller_epoch = self.epoch
        self.authority.controller_id = self.node_id
        self.authority.persist()
        self._watch_brokers()
        self.on_brokers_changed()

    def _watch_brokers(self) -> None:
        def fired(_path: str) -> None:
            if self.active and not self.stopped and self.is_current():
                self._watch_brokers()
                self.on_brokers_changed()
        self.store.watch(BROKERS + "/", fired)

    def is_current(self) -> bool:
        cur = self.store.get(CONTROLLER)
        return cur is not None and zk_data.controller_id(cur[0]) == self.node_id

    def active_controller(self) -> "Controller | None":
        return self if self.active and self.is_current() else None

    # -- leadership ------------------------------------------------------------------
    def live_brokers(self) -> dict[int, BrokerInfo]:
        out = {}
        for child in self.store.children(BROKERS):
            got = self.store.get(f"{BROKERS}/{child}")
            if got is not None:
                out[int(child)] = broker_info(zk_data.parse_broker_registration(int(child), got[0]))
        return out

    def elect_leader(self, p, live: dict[int, BrokerInfo], topic: str = "") -> int:
        """Kafka's OfflinePartitionLeaderElectionStrategy: a new partition's leader is its first live replica; a
        leader that is gone is replaced by the first live member of the ISR in assignment order. With none, the
        partition goes offline (leader -1), unless the topic's unclean.leader.election.enable (else the broker's)
        lets the first live replica out of the ISR lead: records it never got are lost, and Kafka logs it too."""
        if topic and self.held_leaderless(topic, p.index):
            return -1
        if p.leader_epoch < 0:
            return next((r for r in p.replicas if r in live), -1)
        if p.leader in live:
            return p.leader
        clean = next((r for r in p.replicas if r in p.isr and r in live), -1)
        if clean != -1 or not topic or not self.unclean_allowed(topic):
            return clean
        unclean = next((r for r in p.replicas if r in live), -1)
        if unclean != -1:
            log.warning("partition.unclean_leader_election", topic=topic, partition=p.index, leader=unclean,
                        isr=list(p.isr), message="a replica out of the ISR becomes leader: data may be lost")
        return unclean

    def unclean_allowed(self, topic: str) -> bool:
        """The topic's unclean.leader.election.enable, else the broker's."""
        t = self.authority.topic(topic)
        value = (t.configs if t is not None else {}).get("unclean.leader.election.enable")
        return self.unclean_default() if value is None else str(value).lower() == "true"

    def next_isr(self, p, live: dict[int, BrokerInfo], leader: int) -> list[int]:
        """A broker that goes away leaves every ISR; one that comes back is added by the partition's leader once it
        has caught up (`alter_partition`). A new partition's ISR is its live replicas (all empty, all in sync);
        an offline partition keeps its last ISR, so that it comes back with one of them."""
        if not p.isr:
            return [r for r in p.replicas if r in live] if leader != -1 else []
        if leader == -1:
            return list(p.isr)
        isr = [r for r in p.isr if r in live]
        return isr if leader in isr else [leader] + isr

    def _is_active(self) -> bool:
        return self.active_controller() is not None

    def on_brokers_changed(self) -> None:
        live = self.live_brokers()
        md = self.authority
        md.brokers = dict(live)
        changed = False
        moves = StateChanges("partition.leader_changed")
        for t in md.topics.values():
            for p in t.partitions:
                new_leader = self.elect_leader(p, live, t.name)
                if new_leader != p.leader:
                    moves.add(topic=t.name, partition=p.index, old=p.leader, new=new_leader,
                              leader_epoch=p.leader_epoch + 1)
                    p.leader = new_leader
                    p.leader_epoch += 1
                    p.partition_epoch += 1
                    changed = True
                new_isr = self.next_isr(p, live, new_leader)
                if new_isr != p.isr:
                    p.isr = new_isr
                    p.partition_epoch += 1
                    changed = True
        moves.log()
        if changed:
            md.persist()
        self.publish()

    def move_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """Make a live ISR member the partition's leader (a preferred-leader election for a chosen replica)."""
        p = self.authority.partition(topic, partition)
        if p is None or broker_id not in p.replicas or broker_id not in self.live_brokers():
            raise ValueError(f"broker {broker_id} is not a live replica of {topic}-{partition}")
        if broker_id not in p.isr:
            raise ValueError(f"broker {broker_id} is not in the ISR {p.isr} of {topic}-{partition}")
        self.leaderless.pop((topic, partition), None)  # (librdkafka's partition_set_leader brings it back too)
        if p.leader != broker_id:
            p.leader = broker_id
            p.leader_epoch += 1
            p.partition_epoch += 1
            self.authority.persist()
        self.publish()

    def reassign(self, topic: str, partition: int, replicas: list[int]) -> None:
        """Give a partition these replicas (a step of a test control's reassignment: a broker's decommission, see
        control/topology.py). A replica added is a follower out of the ISR until it has caught up (its leader adds
        it, AlterPartition); a replica dropped leaves the ISR, and when it led, the first live ISR member that stays
        leads. The leader epoch is bumped, so that every replica learns the assignment (as Kafka's ZooKeeper
        controller bumps it in a reassignment)."""
        p = self.authority.partition(topic, partition)
        if p is None:
            raise ValueError(f"no partition {topic}-{partition}")
        live = self.live_brokers()
        if not replicas or len(set(replicas)) != len(replicas):
            raise ValueError(f"replicas must be distinct broker ids, at least one, got {replicas}")
        added = [r for r in replicas if r not in p.replicas]
        if any(r not in live for r in added):
            raise ValueError(f"a replica added must be a live broker: {added} of live {sorted(live)}")
        if list(replicas) == list(p.replicas):
            return
        isr = [r for r in p.isr if r in replicas]
        leader = p.leader if p.leader in replicas else next((r for r in replicas if r in isr and r in live), -1)
        if self.held_leaderless(topic, partition):
            leader = -1
        log.info("partition.reassigned", topic=topic, partition=partition, replicas=list(replicas),
                 old_replicas=list(p.replicas), leader=leader, isr=isr, leader_epoch=p.leader_epoch + 1)
        p.replicas, p.isr, p.leader = list(replicas), isr, leader
        p.leader_epoch += 1
        p.partition_epoch += 1
        self.authority.persist()
        self.publish()

    def shuffle_leaders(self, topics, pick: Callable[[list[int]], int]) -> list[dict]:
        """A test control (kfake's ShufflePartitionLeaders; on the internal topics its RehashCoordinators): every
        partition (of `topics`, None: all) whose ISR has another live member is led by one of them, `pick(candidates)`,
        at a new leader epoch, with one write and one publish for all -> the moves."""
        live = self.live_brokers()
        moved = []
        for t in sorted(self.authority.topics.values(), key=lambda t: t.name):
            if topics is not None and t.name not in topics:
                continue
            for p in t.partitions:
                if p.leader == -1 or self.held_leaderless(t.name, p.index):
                    continue
                others = [r for r in p.replicas if r in p.isr and r in live and r != p.leader]
                if others:
                    new = pick(others)
                    moved.append({"topic": t.name, "partition": p.index, "old": p.leader, "leader": new,
                                  "leader_epoch": p.leader_epoch + 1})
                    p.leader = new
                    p.leader_epoch += 1
                    p.partition_epoch += 1
        if moved:
            log.info("partition.leaders_shuffled", partitions=len(moved))
            self.authority.persist()
        self.publish()
        return moved

    def make_leaderless(self, topic: str, partition: int) -> None:
        """A test control: the partition goes offline as when no ISR member is live (leader -1 at a new leader
        epoch, the ISR kept) and stays so, whatever brokers come and go, until `restore_leader` (or move_leader)."""
        p = self.authority.partition(topic, partition)
        if p is None:
            raise ValueError(f"no partition {topic}-{partition}")
        self.leaderless[(topic, partition)] = self.authority.topic(topic).topic_id
        if p.leader != -1:
            log.info("partition.leader_changed", topic=topic, partition=partition, old=p.leader, new=-1,
                     leader_epoch=p.leader_epoch + 1, reason="made leaderless")
            p.leader = -1
            p.leader_epoch += 1
            p.partition_epoch += 1
            self.authority.persist()
        self.publish()

    def restore_leader(self, topic: str | None = None, partition: int | None = None) -> None:
        """The leaderless partition (of topic, or all) elects a leader again, as an offline partition does when an
        ISR member comes back: the first live ISR member in assignment order."""
        for key in [k for k in self.leaderless if topic in (None, k[0]) and partition in (None, k[1])]:
            del self.leaderless[key]
        self.on_brokers_changed()

    def held_leaderless(self, topic: str, partition: int) -> bool:
        """Whether make_leaderless holds this partition (of this topic, not a later one of its name)."""
        held = self.leaderless.get((topic, partition))
        t = self.authority.topic(topic) if held is not None else None
        return t is not None and t.topic_id == held

    def check_preferred_leaders(self) -> int:
        """Give leadership back to each partition's preferred replica where it is live and in the ISR (every
        leader.imbalance.check.interval.seconds with auto.leader.rebalance.enable) -> how many moved."""
        if not self._is_active() or not self.auto_leader_rebalance:
            return 0
        live = self.live_brokers()
        moved = 0
        for t in self.authority.topics.values():
            for p in t.partitions:
                pref = p.replicas[0] if p.replicas else -1
                if p.leader != pref and pref in live and pref in p.isr and not self.held_leaderless(t.name, p.index):
                    log.info("partition.preferred_leader", topic=t.name, partition=p.index, old=p.leader, new=pref)
                    p.leader, p.leader_epoch = pref, p.leader_epoch + 1
                    p.partition_epoch += 1
                    moved += 1
        if moved:
            self._write_changes()
        return moved

    def _write_changes(self) -> bool:
        """Persist the authority and tell every broker -> False when this controller was fenced off meanwhile."""
        self.authority.persist()
        self.publish()
        return True

    def _partition_epoch(self, topic: str, index: int, p) -> int:
        return p.partition_epoch

    def check_broker(self, broker_id: int, broker_epoch: int, unknown: int) -> tuple[int, dict[int, BrokerInfo]]:
        """The checks a broker's request to the controller opens with -> (error, the live brokers): this controller
        active (NOT_CONTROLLER), the broker live (else `unknown`), its epoch not an older registration's (-1: not
        given) (STALE_BROKER_EPOCH)."""
        if not self._is_active():
            return int(E.NOT_CONTROLLER), {}
        live = self.live_brokers()
        if broker_id not in live:
            return int(unknown), live
        if broker_epoch != -1 and broker_epoch < live[broker_id].epoch:
            return int(E.STALE_BROKER_EPOCH), live
        return 0, live

    def alter_partition(self, broker_id: int, broker_epoch: int,
                        items: list[tuple[str, int, int, list[int], int]]) -> tuple[int, list[tuple]]:
        """AlterPartition (Kafka's KafkaController.processAlterPartition): a leader's new ISRs ->
        (error, [(topic, partition, error, leader, leader_epoch, isr, partition_epoch)]). Each item is
        (topic, partition, leader epoch, new ISR, partition epoch); it is refused, changing nothing, when the
        partition is unknown, the sender does not lead it (NOT_LEADER_OR_FOLLOWER), its leader epoch is older
        (FENCED_LEADER_EPOCH), its partition epoch is not the current one (INVALID_UPDATE_VERSION), or the ISR
        names a broker that is not a live replica (INELIGIBLE_REPLICA). Accepted ones are written at once, then
        every broker learns them."""
        err, live = self.check_broker(broker_id, broker_epoch, E.STALE_BROKER_EPOCH)
        if err:
            return err, []
        out, changed = [], False
        isr_changes = StateChanges("partition.isr_changed")
        for topic, index, leader_epoch, new_isr, partition_epoch in items:
            p = self.authority.partition(topic, index)
            if p is None:
                out.append((topic, index, int(E.UNKNOWN_TOPIC_OR_PARTITION), -1, -1, [], -1))
                continue
            current = self._partition_epoch(topic, index, p)
            err = 0
            if p.leader != broker_id:
                err = E.NOT_LEADER_OR_FOLLOWER
            elif leader_epoch < p.leader_epoch:
                err = E.FENCED_LEADER_EPOCH
            elif leader_epoch > p.leader_epoch or partition_epoch != current:
                err = E.INVALID_UPDATE_VERSION
            elif broker_id not in new_isr or any(r not in p.replicas or r not in live for r in new_isr):
                err = E.INELIGIBLE_REPLICA
            if err:
                log.info("alter_partition.refused", topic=topic, partition=index, broker=broker_id,
                         error=E(err).name, leader_epoch=leader_epoch, partition_epoch=partition_epoch,
                         current_leader_epoch=p.leader_epoch, current_partition_epoch=current, new_isr=new_isr)
                out.append((topic, index, int(err), p.leader, p.leader_epoch, list(p.isr), current))
                continue
            if list(new_isr) != list(p.isr):
                isr_changes.add(topic=topic, partition=index, old=list(p.isr), new=list(new_isr), leader=p.leader,
                                leader_epoch=p.leader_epoch)
                p.isr = list(new_isr)
                p.partition_epoch += 1
                changed = True
            out.append((topic, index, 0, p.leader, p.leader_epoch, list(p.isr), None))
        isr_changes.log()
        if changed and not self._write_changes():
            return int(E.NOT_CONTROLLER), []
        return 0, [o if o[6] is not None else o[:6] + (self._partition_epoch(o[0], o[1], self.authority.partition(
            o[0], o[1])),) for o in out]

    def publish(self) -> list[int]:
        """Push the cluster view to every live broker; returns their answers (error codes)."""
        cmd = self.metadata_update()
        return [self.send(b, cmd) for b in sorted(self.live_brokers())]

    def metadata_update(self) -> MetadataUpdate:
        return MetadataUpdate(self.node_id, self.epoch, self.authority.published_snapshot())
