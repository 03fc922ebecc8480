"""The control plane's topology and data routes (sans-IO tables; the answers run on the brokers' event loop): the
partitions and groups as JSON, leaders, reassignments, leaderless partitions, coordinators, replication and
controller links cut and healed, brokers added, removed, stopped and started, racks, the log clock, compaction and
retention now. control/routes.py serves them with the fault routes (errors, drops, latency, holds, versions, the
request log) as one table: `ControlApp` is `TopologyAnswers` plus those."""
from __future__ import annotations

from . import views
from .schema import _BROKER, _OPT_INT, _OPT_STR, _TARGET, BadRequest, Route, _obj

TOPOLOGY_ROUTES: dict[str, dict[str, Route]] = {
    "/v1/partitions": {"GET": Route("the partitions: leader, epochs, replicas, ISR, this process's replicas' offsets",
                                    "partitions", query=(("topic", {"type": "string"}, "only this topic"),))},
    "/v1/leaders": {"POST": Route("make a live ISR member the partition's leader (one-process clusters; ZooKeeper "
                                  "mode: the controller's listener)",
                                  "move_leader", _obj({"topic": {"type": "string"}, "partition": {"type": "integer",
                                                                                                  "minimum": 0},
                                                       "broker": {"type": "integer", "minimum": 0}},
                                                      ("topic", "partition", "broker")))},
    "/v1/replicas": {"POST": Route("reassign a partition: the new replicas copy the log and join the ISR, then those not "
                                   "kept leave (a leader not kept hands over); answers once done (ZooKeeper mode: the "
                                   "controller's listener)",
                                   "reassign", _obj({"topic": {"type": "string"},
                                                     "partition": {"type": "integer", "minimum": 0},
                                                     "replicas": {"type": "array", "minItems": 1, "maxItems": 1000,
                                                                  "items": {"type": "integer", "minimum": 0}}},
                                                    ("topic", "partition", "replicas")))},
    "/v1/leaders/shuffle": {"POST": Route(
        "every partition (of topics) whose ISR has another live member is led by one of them, chosen at random "
        "(kfake's ShufflePartitionLeaders); coordinators: the __consumer_offsets and __transaction_state partitions "
        "(kfake's RehashCoordinators). ZooKeeper mode: the controller's listener", "shuffle_leaders",
        _obj({"topics": {"type": ["array", "null"], "items": {"type": "string"}, "maxItems": 10_000},
              "coordinators": {"type": "boolean"}, "seed": {"type": ["integer", "null"],
                                                            "description": "the same seed, the same choice"}}))},
    "/v1/leaderless": {
        "GET": Route("the partitions kept leaderless", "leaderless"),
        "POST": Route("make a partition leaderless, as when no ISR member is live: leader -1 at a new leader epoch "
                      "(Metadata: LEADER_NOT_AVAILABLE; Produce, Fetch: NOT_LEADER_OR_FOLLOWER) until restored "
                      "(one-process clusters and single brokers; ZooKeeper mode: the controller's listener)",
                      "make_leaderless", _obj({"topic": {"type": "string"}, "partition": {"type": "integer",
                                                                                            "minimum": 0}},
                                              ("topic", "partition"))),
        "DELETE": Route("restore leaderless partitions (of topic, or that one, or all): the first live ISR member "
                        "leads", "restore_leader", _obj({"topic": _OPT_STR, "partition": _OPT_INT}))},
    "/v1/coordinators": {"POST": Route("make a broker the coordinator of a group (or transactional id): it leads that "
                                       "key's __consumer_offsets (__transaction_state) partition", "move_coordinator",
                                       _obj({"group": _OPT_STR, "transactional_id": _OPT_STR,
                                             "broker": {"type": "integer", "minimum": 0}}, ("broker",)))},
    "/v1/replication/pause": {"POST": Route("a broker of this process stops fetching as a follower (it serves clients): "
                                            "after replica.lag.time.max.ms it leaves the ISRs", "pause_replication",
                                            _obj({"broker": _TARGET}, ("broker",)))},
    "/v1/replication/resume": {"POST": Route("the broker's followers fetch again, catch up and rejoin the ISRs",
                                             "resume_replication", _obj({"broker": _TARGET}, ("broker",)))},
    "/v1/replication": {"GET": Route("each replicating broker of this process: paused, the leaders it is cut from",
                                     "replication")},
    "/v1/replication/cut": {"POST": Route("broker follower stops fetching from broker leader only (the others it "
                                          "goes on copying): after replica.lag.time.max.ms it leaves that leader's "
                                          "ISRs (ZooKeeper mode: the follower's listener)", "cut_replication",
                                          _obj({"follower": _TARGET, "leader": {"type": "integer", "minimum": 0}},
                                               ("follower", "leader")))},
    "/v1/replication/heal": {"POST": Route("the follower fetches from the leader again, catches up and rejoins",
                                           "heal_replication", _obj({"follower": _TARGET,
                                                                     "leader": {"type": "integer", "minimum": 0}},
                                                                    ("follower", "leader")))},
    "/v1/controller": {"GET": Route("the controller, and the brokers its connection is cut from", "controller_links")},
    "/v1/controller/cut": {"POST": Route("cut the controller's connection to a broker: its LeaderAndIsr and "
                                         "UpdateMetadata do not reach it, it keeps its old view (ZooKeeper mode: the "
                                         "controller's listener)", "cut_controller",
                                         _obj({"broker": {"type": "integer", "minimum": 0}}, ("broker",)))},
    "/v1/controller/heal": {"POST": Route("heal it: the broker gets what it missed and catches up", "heal_controller",
                                          _obj({"broker": {"type": "integer", "minimum": 0}}, ("broker",)))},
    "/v1/clock": {"GET": Route("each broker's log clock: the wall clock plus what it was advanced by", "clock"),
                  "POST": Route("move the log clock forward (of this process's brokers, or one): what retention, "
                                "compaction, segment.ms and LogAppendTime read", "advance_clock",
                                _obj({"advance_ms": {"type": "integer", "minimum": 0, "maximum": 10 ** 13},
                                      "broker": _BROKER}, ("advance_ms",)))},
    "/v1/brokers": {
        "GET": Route("this process's brokers: live or stopped, port, rack; the controller", "brokers_view"),
        "POST": Route("add a broker (one-process clusters of several brokers): empty, on a free port; answers once "
                      "Metadata lists it (topics and partitions made later are placed on it too)", "add_broker",
                      _obj({"broker": {**_OPT_INT, "description": "its id; default: the next one"},
                            "rack": {**_OPT_STR, "description": "its broker.rack"}})),
        "DELETE": Route("decommission a broker (one-process clusters): each of its partitions gets another live "
                        "broker in its place, which copies the log and joins the ISR; then the broker leaves them "
                        "(its leaderships move) and stops for good", "remove_broker",
                        _obj({"broker": _TARGET}, ("broker",)))},
    "/v1/brokers/rack": {"POST": Route("change a running broker's broker.rack (one-process clusters): Metadata and "
                                       "rack-aware fetching and assignment see it", "set_rack",
                                       _obj({"broker": _TARGET, "rack": {**_OPT_STR, "description": "null: none"}},
                                            ("broker", "rack")))},
    "/v1/brokers/stop": {"POST": Route(
        "stop a broker as if its process died (listeners closed, connections dropped, its session ended: its "
        "leaderships move); answers once it is out of the cluster. ZooKeeper mode: this process's broker, its logs "
        "left as a kill leaves them (see control/zk_restart.py)", "stop_broker", _obj({"broker": _TARGET, "clean": {
            "type": "boolean", "description": "ZooKeeper mode: a controlled shutdown, the logs closed clean, as "
            "SIGTERM does (default: a kill)"}}, ("broker",)))},
    "/v1/brokers/start": {"POST": Route(
        "start a stopped broker again on its port and data dir (ZooKeeper mode: as `kafkite serve` restarted: a new "
        "session, the logs recovered, the replicas caught up); answers once it is registered and serving",
        "start_broker", _obj({"broker": _TARGET}, ("broker",)))},
    "/v1/compact": {"POST": Route("compact every compacted replica (of topic, partition) now, the records committed "
                                  "so far included", "compact", _obj({"topic": _OPT_STR, "partition": _OPT_INT}))},
    "/v1/retention": {"POST": Route("apply retention to every delete-policy replica (of topic, partition) now, or "
                                    "as if advance_ms later", "retention",
                                    _obj({"topic": _OPT_STR, "partition": _OPT_INT,
                                          "advance_ms": {"type": "integer", "minimum": 0, "maximum": 10 ** 13,
                                                         "description": "evaluate retention.ms this much later "
                                                                        "than now"}}))},
    "/v1/groups": {"GET": Route("the groups coordinated in this process: state, generation, members, offsets",
                                "groups", query=(("group", {"type": "string"}, "only this group"),))},
}


class TopologyAnswers:
    """ControlApp's answers to TOPOLOGY_ROUTES (a mixin: `_broker`, `brokers` and `node` are ControlApp's)."""

    def _zk_mode(self) -> bool:
        brokers = self._brokers()
        return bool(brokers) and brokers[min(brokers)].state.zk is not None


    def _view(self, fn, query, name):
        if self.brokers is None:
            raise BadRequest(404, f"this control listener has no view of its brokers' {name}")
        return fn(self._brokers(), query[name][0] if name in query else None)

    def partitions(self, body, query, path):
        return {"partitions": self._view(views.partitions, query, "topic")}

    async def move_leader(self, body, query, path):
        brokers = self._brokers()
        zk = brokers[min(brokers)].state.zk if brokers else None
        broker = body["broker"] if zk is not None else self._broker(body["broker"])  # ZooKeeper: any broker id
        await views.move_leader(brokers, body["topic"], body["partition"], broker)
        return {"partitions": [p for p in views.partitions(self._brokers(), body["topic"])
                               if p["partition"] == body["partition"]]}

    async def reassign(self, body, query, path):
        from . import topology
        return {"partitions": [await topology.reassign(self._topology_node(), body["topic"], body["partition"],
                                                       body["replicas"])]}

    async def shuffle_leaders(self, body, query, path):
        topics = body.get("topics")
        if body.get("coordinators"):
            if topics is not None:
                raise BadRequest(400, "give topics or coordinators")
            brokers = self._brokers()
            known = brokers[min(brokers)].metadata.topics if brokers else {}
            topics = [t for t in ("__consumer_offsets", "__transaction_state") if t in known]
            if not topics:
                return {"moved": []}
        return {"moved": await views.shuffle_leaders(self._brokers(), topics, body.get("seed"))}

    def _brokers(self) -> dict:
        if self.brokers is None:
            raise BadRequest(404, "this control listener has no view of its brokers")
        brokers = self.brokers()
        runner = self._runner()
        if runner is not None and not brokers:
            raise BadRequest(409, f"broker {runner.node_id} is stopped: start it first (POST /v1/brokers/start)")
        return brokers

    def _runner(self):
        """A ZooKeeper-mode process's broker runner (control/zk_restart.py), else None."""
        from .zk_restart import ZkBrokerRunner
        node = None if self.node is None else self.node()
        return node if isinstance(node, ZkBrokerRunner) else None

    def _node(self):
        node = None if self.node is None else self.node()
        if node is None or (self._runner() is None and node.state.zk is not None):
            raise BadRequest(400, "this control listener cannot stop and start its broker: a ZooKeeper-mode broker "
                                  "does so over its own control listener (kafkite serve --control-port)")
        return node

    def brokers_view(self, body, query, path):
        runner = self._runner()
        if runner is not None and runner.node is None:
            return runner.stopped_view()
        brokers = self._brokers()
        state = brokers[min(brokers)].state if brokers else None
        if state is not None and state.zk is not None:  # this process's broker; the controller as it knows it
            controller = brokers[min(brokers)].controller_id()
        else:
            c = state.active_controller() if state is not None else None
            controller = None if c is None else c.node_id
        live = set(state.brokers) if state is not None and state.zk is None else set(brokers)
        return {"brokers": [{"id": i, "live": i in live, "port": b.bound_port, "rack": b.rack}
                             for i, b in sorted(brokers.items())], "controller": controller}

    def _topology_node(self):
        runner = self._runner()
        if runner is not None:  # ZooKeeper mode: the running broker's node
            self._brokers()  # (409 while stopped)
            return runner.node
        node = None if self.node is None else self.node()
        if node is None:
            raise BadRequest(404, "this control listener has no view of its brokers")
        return node

    async def add_broker(self, body, query, path):
        from . import topology
        node = self._topology_node()
        added = await topology.add_broker(node, body.get("broker"), body.get("rack"))
        return {**self.brokers_view(body, query, path), **added}

    async def remove_broker(self, body, query, path):
        from . import topology
        node, bid = self._topology_node(), self._broker(body["broker"])
        removed = await topology.remove_broker(node, bid)
        return {**self.brokers_view(body, query, path), **removed}

    def set_rack(self, body, query, path):
        from . import topology
        node, bid = self._topology_node(), self._broker(body["broker"])
        topology.set_rack(node, bid, body["rack"])
        return self.brokers_view(body, query, path)

    async def stop_broker(self, body, query, path):
        runner = self._runner()
        if runner is not None:  # ZooKeeper mode: this process's broker (any other id is refused there)
            await runner.stop(body["broker"], clean=bool(body.get("clean")))
            return self.brokers_view(body, query, path)
        if body.get("clean"):
            raise BadRequest(400, "clean is served in ZooKeeper mode (a controlled shutdown); a one-process "
                                  "cluster's broker stops as if its process died")
        node, bid = self._node(), self._broker(body["broker"])
        if bid not in node.live_brokers:
            raise BadRequest(400, f"broker {bid} is not running")
        node.stop_broker(bid)
        await node.wait_stopped(bid)
        return self.brokers_view(body, query, path)

    async def start_broker(self, body, query, path):
        runner = self._runner()
        if runner is not None:
            await runner.start(body["broker"])
            return self.brokers_view(body, query, path)
        node, bid = self._node(), self._broker(body["broker"])
        if bid in node.live_brokers or bid in node._scopes:
            raise BadRequest(400, f"broker {bid} is running")
        await node.start_broker(bid)
        return self.brokers_view(body, query, path)

    def _where(self, body) -> tuple:
        if body.get("partition") is not None and body.get("topic") is None:
            raise BadRequest(400, "partition needs topic")
        return body.get("topic"), body.get("partition")

    async def compact(self, body, query, path):
        return {"compacted": await views.compact(self._brokers(), *self._where(body))}

    async def retention(self, body, query, path):
        return {"retention": await views.apply_retention(self._brokers(), *self._where(body), body.get("advance_ms", 0))}

    def clock(self, body, query, path):
        return {"clock": views.clock(self._brokers())}

    def advance_clock(self, body, query, path):
        return {"clock": views.advance_clock(self._brokers(), body["advance_ms"], self._broker(body.get("broker")))}

    def leaderless(self, body, query, path):
        return {"leaderless": views.leaderless(self._brokers())}

    async def make_leaderless(self, body, query, path):
        await views.make_leaderless(self._brokers(), body["topic"], body["partition"])
        brokers = self._brokers()
        return {"partitions": [p for p in views.partitions(brokers, body["topic"])
                               if p["partition"] == body["partition"]], "leaderless": views.leaderless(brokers)}

    async def restore_leader(self, body, query, path):
        topic, partition = self._where(body)
        await views.restore_leader(self._brokers(), topic, partition)
        return {"partitions": [p for p in views.partitions(self._brokers(), topic)
                               if partition in (None, p["partition"])] if topic is not None else [],
                "leaderless": views.leaderless(self._brokers())}

    def replication(self, body, query, path):
        return views.replication_state(self._brokers())

    def _cut(self, body, cut: bool):
        follower = self._broker(body["follower"])
        leader = body["leader"] if self._zk_mode() else self._broker(body["leader"])  # ZooKeeper: another process's
        return views.cut_replication(self._brokers(), follower, leader, cut)

    def cut_replication(self, body, query, path):
        return self._cut(body, True)

    def heal_replication(self, body, query, path):
        return self._cut(body, False)

    def controller_links(self, body, query, path):
        return views.controller_links(self._brokers())

    def _cut_controller(self, body, cut: bool):
        broker = body["broker"] if self._zk_mode() else self._broker(body["broker"])  # ZooKeeper: any broker id
        return views.cut_controller(self._brokers(), broker, cut)

    def cut_controller(self, body, query, path):
        return self._cut_controller(body, True)

    def heal_controller(self, body, query, path):
        return self._cut_controller(body, False)

    async def move_coordinator(self, body, query, path):
        from ..coordinator.hashing import partition_for
        if (body.get("group") is None) == (body.get("transactional_id") is None):
            raise BadRequest(400, "give group or transactional_id")
        topic, key = (("__consumer_offsets", body["group"]) if body.get("group") is not None
                      else ("__transaction_state", body["transactional_id"]))
        brokers = self._brokers()
        info = brokers[min(brokers)].metadata.topics.get(topic) if brokers else None
        if info is None:
            raise BadRequest(400, f"no {topic} yet: it is made when a client first finds a coordinator")
        return await self.move_leader({"topic": topic, "partition": partition_for(key, len(info.partitions)),
                                       "broker": body["broker"]}, query, path)

    def _replication(self, body):
        broker = self._brokers().get(self._broker(body["broker"]))
        if broker is None or broker.replicas is None or not broker.replicated:
            raise BadRequest(400, f"broker {body['broker']} does not replicate (a single broker)")
        return broker.replicas.replication

    def pause_replication(self, body, query, path):
        self._replication(body).pause()
        return {"broker": body["broker"], "replication_paused": True}

    def resume_replication(self, body, query, path):
        self._replication(body).resume()
        return {"broker": body["broker"], "replication_paused": False}

    def groups(self, body, query, path):
        return {"groups": self._view(views.groups, query, "group")}
