"""An in-process Kafka cluster for tests: several brokers, one Trio thread, faults on demand.

    with KafkiteCluster(brokers=3) as cluster:
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
        cluster.stop_broker(cluster.leader("orders", 0))
        ...

Every broker has its own node id, listener, metadata cache and partitions (in memory, or in
`<data_dir>/broker-<id>`); one controller (elected through the in-process coordination store)
pushes metadata to all of them. Followers copy from their leaders as between processes
(Fetch with a replica id on each broker's inter-broker listener, the ISR changed with
AlterPartition, acks=all waiting for the ISR), so tests see real follower lag: `pause_replication`
stops a broker's fetchers and the leaders drop it from their ISRs after replica.lag.time.max.ms.
Works from plain synchronous tests (the brokers run in a background thread) and
from Trio tests: `async with KafkiteCluster(brokers=3) as cluster:` starts and stops it
without blocking the test's own Trio loop; the fault-injection methods are quick calls
into the cluster's thread and may be used directly from async code.
"""
from __future__ import annotations

from pathlib import Path

import trio

from ..config import BrokerConfig
from ..server.broker import Broker, ClusterState
from ..server.node import Node, open_node
from .faults import Faults
from .trio_thread import TrioThread


class KafkiteCluster(TrioThread):
    thread_name = "kafkite-cluster"

    def __new__(cls, *args, processes: bool = False, **kwargs):
        """`processes=True`: brokers as separate `kafkite serve` processes on one ZooKeeper instead
        (a `ProcessCluster`, same control API; its extra keywords: zookeeper_connect, chroot, ...)."""
        if processes:
            from .process_cluster import ProcessCluster
            return ProcessCluster(*args, **kwargs)
        return super().__new__(cls)

    def __init__(self, brokers: int = 3, data_dir: str | Path | None = None,
                 overrides: dict[str, str] | None = None, host: str = "127.0.0.1", processes: bool = False,
                 racks: dict[int, str] | None = None, control: bool = False):
        """`racks`: each broker's broker.rack, e.g. {1: "a", 2: "b", 3: "c"} (with overrides
        {"replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"}, consumers with
        client.rack fetch from a replica of their rack, KIP-392). `faults` is the brokers' control model
        (kafkite.control.model); `control=True` also serves it over HTTP at `control_url`."""
        static = {"listeners": f"PLAINTEXT://{host}:0", "group.initial.rebalance.delay.ms": "0",
                  "default.replication.factor": str(min(3, brokers)),
                  "offsets.topic.replication.factor": str(min(3, brokers))}
        super().__init__()
        static.update(overrides or {})
        self.config = BrokerConfig(static=static)
        self.n = brokers
        self.host = host
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.state: ClusterState | None = None
        self.node: Node | None = None
        self.faults = Faults()
        self.racks = dict(racks or {})
        self.control = control
        self.control_url: str | None = None

    # -- Trio side -----------------------------------------------------------
    async def _serve(self) -> None:
        async with open_node(self.config, data_dir=self.data_dir, in_memory=self.data_dir is None,
                             node_ids=range(1, self.n + 1), faults=self.faults, racks=self.racks) as node, \
                trio.open_nursery() as side:
            self.node = node
            self.state = node.state
            if self.control:
                from ..control.http import ControlApp, serve_control
                port = await side.start(serve_control, ControlApp(self.faults, self.node_ids, lambda: self.brokers,
                                                                     lambda: self.node),
                                        self.host, 0)
                self.control_url = f"http://{self.host}:{port}"
            await self._started()
            await trio.sleep_forever()

    @property
    def brokers(self) -> dict[int, Broker]:
        """Every broker started, by node id (a stopped one stays, with its last state)."""
        return {} if self.node is None else self.node.brokers

    @property
    def node_ids(self) -> list[int]:
        """Every broker of the cluster (live or stopped; added ones included, removed ones not)."""
        return sorted(self.brokers) if self.node is not None else list(range(1, self.n + 1))

    @property
    def ports(self) -> dict[int, int]:
        return {} if self.node is None else self.node.ports

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{self.host}:{self.ports[i]}" for i in sorted(self.ports))

    def bootstrap_of(self, broker_id: int) -> str:
        return f"{self.host}:{self.ports[broker_id]}"

    @property
    def live_brokers(self) -> list[int]:
        return sorted(self.state.brokers)

    def stop_broker(self, broker_id: int) -> None:
        """Stop a broker as if its process died: listener closed, connections dropped, session ended."""
        self.call(self.node.stop_broker, broker_id)
        self.call(self.node.wait_stopped, broker_id)

    def start_broker(self, broker_id: int) -> None:
        """Start a stopped broker again, on the port it had."""
        self.call(self.node.start_broker, broker_id)

    def add_broker(self, broker_id: int | None = None, rack: str | None = None) -> int:
        """POST /v1/brokers: a new broker (the next id when None), empty, on a free port, listed in Metadata when this
        returns; topics and partitions made later are placed on it too (librdkafka's broker_add, kfake's AddNode).
        Returns its id."""
        from ..control import topology
        return self.call(topology.add_broker, self.node, broker_id, rack)["added"]

    def remove_broker(self, broker_id: int, timeout: float = 60.0) -> list[dict]:
        """DELETE /v1/brokers: decommission a broker: each partition it hosts gets another live broker in its place
        (copying the log, joining the ISR), then it leaves them (its leaderships move) and stops for good
        (librdkafka's broker_decommission, kfake's RemoveNode). Returns the partitions moved."""
        from ..control import topology
        return self.call(topology.remove_broker, self.node, broker_id, timeout)["moved"]

    def reassign(self, topic: str, partition: int, replicas: list[int], timeout: float = 60.0) -> dict:
        """POST /v1/replicas: the partition's replicas changed as Kafka's reassignment changes them (the new ones copy
        the log and join the ISR first, then those not kept leave) -> its state."""
        from ..control import topology
        return self.call(topology.reassign, self.node, topic, partition, list(replicas), timeout)

    def set_rack(self, broker_id: int, rack: str | None) -> None:
        """POST /v1/brokers/rack: a running broker's broker.rack changed (librdkafka's broker_set_rack)."""
        from ..control import topology
        self.call(topology.set_rack, self.node, broker_id, rack)

    @property
    def controller_id(self) -> int:
        c = self.state.active_controller()
        return -1 if c is None else c.node_id

    @property
    def controller_epoch(self) -> int:
        return self.state.metadata.controller_epoch

    def controller(self, broker_id: int):
        return self.brokers[broker_id].controller

    def leader(self, topic: str, partition: int) -> int:
        p = self.state.metadata.partition(topic, partition)
        return -1 if p is None else p.leader

    def leader_epoch(self, topic: str, partition: int) -> int:
        return self.state.metadata.partition(topic, partition).leader_epoch

    def isr(self, topic: str, partition: int) -> list[int]:
        """The partition's ISR as the controller has it."""
        p = self.state.metadata.partition(topic, partition)
        return [] if p is None else list(p.isr)

    def replica_log(self, broker_id: int, topic: str, partition: int):
        """Broker `broker_id`'s own copy of the partition (its UnifiedLog), or None when it hosts none."""
        return self.brokers[broker_id].replicas.get(topic, partition)

    def log_end_offsets(self, topic: str, partition: int) -> dict[int, int]:
        """Each broker's log end offset of the partition (the brokers hosting a copy)."""
        def read() -> dict[int, int]:
            out = {}
            for i, b in self.brokers.items():
                lg = b.replicas.get(topic, partition)
                if lg is not None:
                    out[i] = lg.log_end_offset
            return out
        return self.call(read)

    def pause_replication(self, broker_id: int) -> None:
        """The broker's followers stop fetching (it stays up for clients): after replica.lag.time.max.ms its
        partitions' leaders drop it from their ISRs. `resume_replication` lets it catch up and rejoin."""
        self.call(lambda: self.brokers[broker_id].replicas.replication.pause())

    def resume_replication(self, broker_id: int) -> None:
        self.call(lambda: self.brokers[broker_id].replicas.replication.resume())

    def move_leader(self, topic: str, partition: int, broker_id: int) -> None:
        from ..control import views
        self.call(views.move_leader, self.brokers, topic, partition, broker_id)

    def shuffle_leaders(self, topics: list[str] | None = None, seed: int | None = None) -> list[dict]:
        """POST /v1/leaders/shuffle: every partition (of topics) whose ISR has another live member is led by one of
        them, at random (kfake's ShufflePartitionLeaders) -> the moves."""
        from ..control import views
        return self.call(views.shuffle_leaders, self.brokers, topics, seed)

    def rehash_coordinators(self, seed: int | None = None) -> list[dict]:
        """POST /v1/leaders/shuffle {"coordinators": true} (kfake's RehashCoordinators): the __consumer_offsets and
        __transaction_state partitions move, and with them the groups' and transactional ids' coordinators."""
        from ..control import views
        internal = [t for t in ("__consumer_offsets", "__transaction_state") if self.state.metadata.topic(t)]
        return self.call(views.shuffle_leaders, self.brokers, internal, seed) if internal else []

    def make_leaderless(self, topic: str, partition: int) -> None:
        """POST /v1/leaderless: the partition has no leader (leader -1; Metadata answers LEADER_NOT_AVAILABLE,
        Produce and Fetch NOT_LEADER_OR_FOLLOWER) until `restore_leader`."""
        from ..control import views
        self.call(views.make_leaderless, self.brokers, topic, partition)

    def restore_leader(self, topic: str | None = None, partition: int | None = None) -> None:
        """DELETE /v1/leaderless: the leaderless partitions (of topic, or that one) elect a leader from their ISR."""
        from ..control import views
        self.call(views.restore_leader, self.brokers, topic, partition)

    def cut_replication(self, follower: int, leader: int) -> None:
        """POST /v1/replication/cut: broker `follower` stops fetching from broker `leader` only; after
        replica.lag.time.max.ms it leaves the ISRs of the partitions `leader` leads. `heal_replication` undoes it."""
        from ..control import views
        self.call(views.cut_replication, self.brokers, follower, leader, True)

    def heal_replication(self, follower: int, leader: int) -> None:
        from ..control import views
        self.call(views.cut_replication, self.brokers, follower, leader, False)

    def cut_controller(self, broker_id: int) -> None:
        """POST /v1/controller/cut: the controller's commands (leaders, ISRs, brokers) stop reaching the broker, which
        keeps its old view; `heal_controller` delivers what it missed."""
        self.call(lambda: self.state.cut_controller(broker_id, True))

    def heal_controller(self, broker_id: int) -> None:
        self.call(lambda: self.state.cut_controller(broker_id, False))

    def advance_clock(self, ms: int, broker_id: int | None = None) -> list[dict]:
        """POST /v1/clock: the brokers' (or one's) log clock `ms` ahead: retention, compaction, segment.ms and
        LogAppendTime see the later time; sessions and timeouts keep the wall clock."""
        from ..control import views
        return self.call(views.advance_clock, self.brokers, ms, broker_id)

    def coordinator(self, group_id: str) -> int:
        from ..coordinator.hashing import partition_for
        n = self.config.get("offsets.topic.num.partitions")
        return self.leader("__consumer_offsets", partition_for(group_id, n))

    def metadata_view(self, broker_id: int) -> dict:
        """A broker's own view of the cluster (to check every broker agrees)."""
        return self.call(lambda: self.brokers[broker_id].cache.snapshot(include_brokers=True))

    def metadata_views(self) -> dict[int, dict]:
        """Every live broker's own view, taken at one instant (ISR changes move on between separate calls)."""
        return self.call(lambda: {i: self.brokers[i].cache.snapshot(include_brokers=True) for i in self.live_brokers})

    # -- controls (kafkite.control.model; `self.faults` has them all) ------------------------------
    def set_follower(self, topic: str, partition: int, broker_id: int | None) -> None:
        """Consumers of the partition are sent to replica `broker_id` (the leader names it their preferred read
        replica, librdkafka's mock partition_set_follower); None: no longer."""
        p = self.state.metadata.partition(topic, partition)
        if broker_id is not None and (p is None or broker_id not in p.replicas):
            raise ValueError(f"broker {broker_id} is not a replica of {topic}-{partition}")
        self.faults.set_follower(topic, partition, broker_id)

    def push_metadata_leader(self, topic: str, partition: int, leader_id: int, leader_epoch: int,
                             count: int = 1) -> None:
        """The next `count` Metadata answers listing the partition name this leader and epoch (librdkafka's mock
        partition_push_leader_response); the partition is unchanged."""
        self.faults.push_metadata_leader(topic, partition, leader_id, leader_epoch, count)

    def inject_error(self, api, error, count: int = 1, broker_id: int | None = None, **filters) -> int:
        """`error`: a code or a sequence answered in turn; filters: version, client_id, topic, partition."""
        error = [int(e) for e in error] if isinstance(error, (list, tuple)) else int(error)
        return self.faults.inject_error(api, error, count=count, broker_id=broker_id, **filters)

    def drop_response(self, api, count: int = 1, broker_id: int | None = None, skip: int = 0,
                      handled: bool = True) -> int:
        return self.faults.drop_response(api, count=count, broker_id=broker_id, skip=skip, handled=handled)

    def set_latency(self, broker_id: int | None, ms: int, api=None) -> None:
        self.faults.set_latency(broker_id, ms, api=api)

    def hold(self, api, broker_id: int | None = None, client_id: str | None = None) -> int:
        return self.faults.hold(api, broker_id=broker_id, client_id=client_id)

    def release(self, api=None, count: int | None = None) -> int:
        return self.faults.release(api, count=count)

    def unhold(self, api=None) -> int:
        return self.faults.unhold(api)

    def set_api_versions(self, api, max_version: int | None = None, min_version: int | None = None,
                         broker_id: int | None = None) -> None:
        self.faults.set_api_versions(api, max_version=max_version, min_version=min_version, broker_id=broker_id)

    def remove_api(self, api, broker_id: int | None = None) -> None:
        self.faults.remove_api(api, broker_id=broker_id)

    def partition_states(self, topic: str | None = None) -> list[dict]:
        """GET /v1/partitions: leader, epochs, replicas, ISR, each broker's copy's offsets (JSON-able)."""
        from ..control import views
        return self.call(lambda: views.partitions(self.brokers, topic))

    def group_states(self, group: str | None = None) -> list[dict]:
        """GET /v1/groups: each group's state, generation, members and committed offsets (JSON-able)."""
        from ..control import views
        return self.call(lambda: views.groups(self.brokers, group))

    def compact(self, topic: str | None = None, partition: int | None = None) -> list[dict]:
        """POST /v1/compact: compact every compacted replica (of topic, partition) now, committed records included."""
        from ..control import views
        return self.call(lambda: views.compact(self.brokers, topic, partition))

    def apply_retention(self, topic: str | None = None, partition: int | None = None, advance_ms: int = 0) -> list[dict]:
        """POST /v1/retention: apply retention now, or as if `advance_ms` later."""
        from ..control import views
        return self.call(lambda: views.apply_retention(self.brokers, topic, partition, advance_ms))

    def empty(self) -> dict:
        """POST /v1/reset {"data": true} without the controls: delete every topic (but the internal ones), group,
        ACL and SCRAM user; the brokers keep their ports."""
        from ..control import views
        return self.call(lambda: views.empty(self.brokers))
