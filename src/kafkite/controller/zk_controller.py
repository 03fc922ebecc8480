"""The controller on ZooKeeper (Kafka 3.x's KafkaController): `Controller` plus what separate processes need.

The election, the epoch and the leadership rules are `Controller`'s (controller.py). On ZooKeeper:

- on election the controller reloads its context from ZooKeeper (`ZkMetadataStore.load`), fences its
  writes with the version of `/controller_epoch` it wrote, and watches `/brokers/topics` (new topics),
  each topic's node (new partitions) and `/admin/delete_topics` (deletions);
- leader election is clean only: a partition's new leader comes from its ISR; with no live ISR member
  the partition goes offline (leader -1) and keeps its ISR, and comes back when one returns. A new
  partition's ISR is its live replicas; a broker that goes away leaves every ISR; one that comes back is
  added by its partitions' leaders once it has caught up (`alter_partition`: AlterPartition);
- the preferred replica gets leadership back from `check_preferred_leaders` (every
  leader.imbalance.check.interval.seconds with auto.leader.rebalance.enable), not at once;
- ControlledShutdown moves leadership off a stopping broker where another ISR member can take it;
- a topic marked under /admin/delete_topics leaves the view at once (brokers get leader -2 and forget it),
  but its nodes and the marker stay until every replica has answered a StopReplica (delete) without
  error (Kafka's TopicDeletionManager): a replica whose broker is down gets it when the broker comes
  back, and a new controller resumes the deletions it finds marked;
- a session loss resigns (`on_session_event`); the new session registers again and joins the election.

Every method runs on the broker's controller event thread (ZooKeeper calls block), one at a time.
"""
from __future__ import annotations

import structlog

from . import zk_data as z
from .controller import BROKERS, CONTROLLER, Controller, broker_info
from .metadata import BrokerInfo
from .store import NoNode
from .zk_metadata import ControllerMoved, ensure_cluster_id, ensure_persistent_paths

log = structlog.get_logger("kafkite.controller")


class ZkController(Controller):
    def __init__(self, *a, on_resign=None, **kw):
        super().__init__(*a, **kw)
        self.on_resign = on_resign  # called (controller thread) when this broker stops being the controller
        self.info: BrokerInfo | None = None
        self.broker_epoch = -1
        self._session_lost = False
        self._watched_topics: set[str] = set()
        # topics being deleted: name -> the (broker, partition) replicas that have not yet deleted their copy
        self.deletion_pending: dict[str, set[tuple[int, int]]] = {}

    # -- membership ---------------------------------------------------------------------------------
    def startup(self, info: BrokerInfo) -> None:
        ensure_persistent_paths(self.store)
        self.cluster_id = ensure_cluster_id(self.store)
        self.info = info
        super().startup(info)

    def register(self, info: BrokerInfo) -> None:
        """Register (NodeExists while a registration left by this broker id's previous session, a crash, is still
        there: the caller waits for it to expire and tries again; Kafka refuses to start instead)."""
        super().register(info)
        self.broker_epoch = self.store.czxid(z.broker_path(self.node_id)) or -1
        log.info("broker.registered", broker=self.node_id, broker_epoch=self.broker_epoch)

    def live_brokers(self) -> dict[int, BrokerInfo]:
        out = {}
        for child in self.store.children(BROKERS):
            got = self.store.get_with_czxid(f"{BROKERS}/{child}")
            if got is not None:
                info = broker_info(z.parse_broker_registration(int(child), got[0]))
                info.epoch = got[2]
                out[int(child)] = info
        return out

    def on_session_event(self, event: str) -> None:
        if event == "lost":
            self._session_lost = True
            log.warning("zookeeper.session_expired", broker=self.node_id,
                        message="the ZooKeeper session expired: resigning, registering again on a new session")
            self.resign()
        elif event == "connected" and self._session_lost and not self.stopped:
            self._session_lost = False
            self.register(self.info)
            self._watch_controller()
            self.try_elect()

    def resign(self) -> None:
        if self.active:
            log.info("controller.resigned", broker=self.node_id, controller_epoch=self.epoch)
        self.active = False
        self._watched_topics.clear()
        self.deletion_pending.clear()
        self.authority.store.keep.clear()
        if self.on_resign is not None:
            self.on_resign()

    def shutdown(self) -> None:
        super().shutdown()
        self.resign()

    # -- taking over -------------------------------------------------------------------------------
    def on_elected(self) -> None:
        self.authority.store.epoch_zk_version = self.epoch_zk_version
        self.authority.controller_id = self.node_id
        self._reload()
        self.authority.controller_epoch = self.epoch
        self._watch_brokers()
        self._watch_children(z.TOPICS, self.on_topics_changed)
        self._watch_children(z.DELETE_TOPICS, self.on_delete_topics)
        self.on_delete_topics()
        self.on_brokers_changed()

    def _reload(self) -> None:
        md = self.authority
        md.load_snapshot(md.store.load(), brokers=False)
        md.controller_epoch = self.epoch
        for name in self.deletion_pending:  # still in ZooKeeper until their replicas are deleted; never in the view
            md.forget_topic(name)
        self._watch_new_topics()

    def _watch_new_topics(self) -> None:
        for name in self.authority.topics:
            if name not in self._watched_topics:
                self._watched_topics.add(name)
                self._watch_topic(name)

    def _is_active(self) -> bool:
        return self.active and not self.stopped

    def _watch_children(self, path: str, handler) -> None:
        def fired(_path: str) -> None:
            if self._is_active():
                self._watch_children(path, handler)
                self.guarded(handler)
        self.store.watch(path + "/", fired)

    def _watch_topic(self, name: str) -> None:
        def fired(_path: str) -> None:
            if self._is_active() and name in self._watched_topics:
                if self.store.get(z.topic_path(name)) is None:
                    self._watched_topics.discard(name)
                    return
                self._watch_topic(name)
                self.guarded(self.on_topics_changed, {name})
        self.store.watch(z.topic_path(name), fired)

    def guarded(self, fn, *a):
        """Run a controller action; a write fenced off by a newer controller makes this one resign."""
        try:
            return fn(*a)
        except ControllerMoved:
            log.warning("controller.moved", broker=self.node_id, controller_epoch=self.epoch)
            self.resign()
            return None

    # -- events --------------------------------------------------------------------------------------
    def on_topics_changed(self, changed: set[str] | None = None) -> None:
        """New topics (a /brokers/topics child) or new partitions (`changed`: a topic's node) written by AdminZk:
        only those topics are read again; their leaders elected, their states written, every broker told."""
        md = self.authority
        names = set(self.store.children(z.TOPICS))
        todo = {n for n in names if n not in md.topics and n not in self.deletion_pending}
        todo |= {n for n in (changed or ()) if n in names and n not in self.deletion_pending}
        for t in md.store.load_topics(sorted(todo)):
            md.put_topic(t)
        self._watch_new_topics()
        self.on_brokers_changed()

    def on_delete_topics(self) -> None:
        """Topics newly marked under /admin/delete_topics leave the view; StopReplica (delete) goes to their replicas."""
        md = self.authority
        marked = self.store.children(z.DELETE_TOPICS)
        started = False
        for name in marked:
            if name in self.deletion_pending:
                continue
            t = md.topic(name)
            if t is None:  # nothing of that name (any more): the marker alone goes, as Kafka drops it
                self._delete_marker(name)
                continue
            md.forget_topic(name)
            self._watched_topics.discard(name)
            md.store.keep.add(name)
            self.deletion_pending[name] = {(r, p.index) for p in t.partitions for r in p.replicas}
            log.info("topic.deletion_started", topic=name, replicas=len(self.deletion_pending[name]))
            started = True
        if started:
            md.persist()  # other topics' changes only: the deleted ones' nodes are kept
            self.publish()  # live replicas get StopReplica (delete), every broker leader -2 for the topic
        self._complete_deletions()

    def on_replicas_deleted(self, broker_id: int, controller_epoch: int, partitions: list[tuple[str, int]]) -> None:
        """A StopReplica (delete) answered without error by `broker_id` for these partitions."""
        if not self._is_active() or controller_epoch != self.epoch:
            return
        for topic, index in partitions:
            self.deletion_pending.get(topic, set()).discard((broker_id, index))
        self.guarded(self._complete_deletions)

    def _complete_deletions(self) -> None:
        done = [name for name, left in self.deletion_pending.items() if not left]
        if not done:
            return
        for name in done:
            self.authority.store.keep.discard(name)
            del self.deletion_pending[name]
        self.authority.persist()  # the topics' nodes go now (assignment, partition states, config)
        for name in done:
            self._delete_marker(name)
            log.info("topic.deleted", topic=name)

    def _delete_marker(self, name: str) -> None:
        try:
            self.store.delete(z.delete_topic_path(name))
        except NoNode:
            pass

    def deletion_snapshot(self) -> list[dict]:
        """What RequestBuilder needs to send StopReplica (delete): each topic being deleted, with the replicas
        that have not yet deleted their copy."""
        return [{"name": name, "pending": sorted(left)} for name, left in self.deletion_pending.items()]

    def on_brokers_changed(self) -> None:
        self.guarded(super().on_brokers_changed)

    def unclean_allowed(self, topic: str) -> bool:
        """Read from ZooKeeper's /config/topics/<topic>: topic configs change there without the controller."""
        got = self.store.get(z.topic_config_path(topic))
        value = z.parse_topic_config(got[0] if got else None).get("unclean.leader.election.enable")
        return self.unclean_default() if value is None else str(value).lower() == "true"

    def on_topic_configs_changed(self, topics: set[str]) -> None:
        """Kafka's TopicUncleanLeaderElectionEnable: a topic's config changed, so its offline partitions may now
        have a leader (unclean.leader.election.enable turned on)."""
        if self.active and any(self.unclean_allowed(t) for t in topics):
            self.on_brokers_changed()

    # -- leadership: clean elections only (Controller's rules), written to ZooKeeper ----------------------------
    def check_preferred_leaders(self) -> int:
        return self.guarded(super().check_preferred_leaders) or 0

    def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> tuple[int, list[tuple[str, int]]]:
        """Move leadership off `broker_id` (Kafka's ControlledShutdownLeaderSelector: another live ISR member)
        and take it out of the ISRs it follows in -> (error, the partitions it still leads)."""
        from ..wire.errors import E
        err, live = self.check_broker(broker_id, broker_epoch, E.BROKER_NOT_AVAILABLE)
        if err:
            return err, []
        remaining = []
        for t in self.authority.topics.values():
            for p in t.partitions:
                if p.leader == broker_id:
                    if len(p.replicas) <= 1:
                        continue  # nowhere to move it (Kafka leaves replication factor 1 out)
                    other = next((r for r in p.replicas if r != broker_id and r in p.isr and r in live), -1)
                    if other == -1:
                        remaining.append((t.name, p.index))
                        continue
                    p.leader, p.leader_epoch = other, p.leader_epoch + 1
                    p.isr = [r for r in p.isr if r != broker_id]
                    log.info("partition.leader_changed", topic=t.name, partition=p.index, old=broker_id, new=other,
                             leader_epoch=p.leader_epoch, reason="controlled shutdown")
                elif broker_id in p.isr and len(p.isr) > 1:
                    p.isr = [r for r in p.isr if r != broker_id]
        self.guarded(self._persist_and_publish)
        return 0, remaining

    def _persist_and_publish(self) -> None:
        self.authority.persist()
        self.publish()

    def _write_changes(self) -> bool:
        """A write fenced off by a newer controller: this one resigns (False)."""
        try:
            self._persist_and_publish()
        except ControllerMoved:
            log.warning("controller.moved", broker=self.node_id, controller_epoch=self.epoch)
            self.resign()
            return False
        return True

    def _partition_epoch(self, topic: str, index: int, p) -> int:
        """On ZooKeeper, a partition's epoch is its state node's version (what AlterPartition is checked against)."""
        return self.authority.store.partition_epoch(topic, index)

    def publish(self) -> list[int]:
        store = self.authority.store
        for t in self.authority.topics.values():
            for p in t.partitions:
                p.partition_epoch = store.partition_epoch(t.name, p.index)
        return super().publish()

    def metadata_update(self):
        cmd = super().metadata_update()
        cmd.snapshot["deleting"] = self.deletion_snapshot()
        return cmd

    def is_current(self) -> bool:
        cur = self.store.get(CONTROLLER)
        return cur is not None and z.controller_id(cur[0]) == self.node_id
