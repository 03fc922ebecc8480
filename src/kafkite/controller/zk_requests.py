"""The controller's cluster view as Kafka's controller-to-broker requests (Kafka's ControllerBrokerRequestBatch).

For each live broker, from a `MetadataUpdate` (the controller's whole view, stamped with its epoch):

- LeaderAndIsr (v7) with the partitions the broker replicates whose leader, leader epoch, ISR or
  replicas changed since this controller last told it, or all of them when the broker is new to this
  controller or registered again (a new broker epoch: it restarted and knows nothing);
- StopReplica (v4, delete_partition) for the replicas a reassignment took off it, and for its replicas of topics
  being deleted (the snapshot's "deleting":
  the replicas that have not yet answered one), once per broker epoch: the channel resends it until the
  broker answers, and a broker that comes back (a new epoch) gets it again;
- UpdateMetadata (v8) with every live broker and the partitions whose state changed since this controller
  last told the broker (all of them for a broker new to it or registered again), and the partitions of
  deleted topics once more with leader -2 (Kafka's LeaderDuringDelete), so the broker forgets them; the
  broker merges it into its cache, as Kafka's ZkMetadataCache does.

They go out in that order on the broker's one controller connection. Sans-IO.
"""
from __future__ import annotations

import uuid

from ..wire.interbroker import LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest

LAI_VERSION, STOP_REPLICA_VERSION, UPDATE_METADATA_VERSION = 7, 4, 8
LEADER_DURING_DELETE = -2
INTER_BROKER_LISTENER = "INTERNAL"

_LaiTopic = LeaderAndIsrRequest.LeaderAndIsrTopicState
_LaiPartition = LeaderAndIsrRequest.LeaderAndIsrTopicState.LeaderAndIsrPartitionState
_UmTopic = UpdateMetadataRequest.UpdateMetadataTopicState
_UmPartition = UpdateMetadataRequest.UpdateMetadataTopicState.UpdateMetadataPartitionState
_UmBroker = UpdateMetadataRequest.UpdateMetadataBroker
_UmEndpoint = UpdateMetadataRequest.UpdateMetadataBroker.UpdateMetadataEndpoint
_SrTopic = StopReplicaRequest.StopReplicaTopicState
_SrPartition = StopReplicaRequest.StopReplicaTopicState.StopReplicaPartitionState


_SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}  # Kafka's SecurityProtocol


def _protocol_id(broker: dict, listener: str) -> int:
    return _SECURITY_PROTOCOL_IDS.get((broker.get("protocols") or {}).get(listener, "PLAINTEXT"), 0)


def inter_broker_endpoint(broker: dict, listener: str = INTER_BROKER_LISTENER) -> tuple[str, int]:
    """Where a broker (a snapshot's broker entry) takes controller requests: its inter-broker listener (by name:
    inter.broker.listener.name, INTERNAL by default), else its client one."""
    for name, host, port in broker.get("listeners") or ():
        if name == listener:
            return host, int(port)
    return broker["host"], int(broker["port"])


class RequestBuilder:
    def __init__(self) -> None:
        self._told: dict[int, tuple[int, dict[tuple[str, int], tuple]]] = {}  # broker -> (epoch, partition states)
        self._topics: dict[int, dict[str, str]] = {}  # broker -> topics in its last UpdateMetadata (name -> id)
        self._parts: dict[int, dict[str, list[int]]] = {}  # broker -> those topics' partition indexes
        self._stopped: dict[int, tuple[int, set[tuple[str, int]]]] = {}  # broker -> (epoch, StopReplica sent)
        self._um: dict[int, tuple[int, dict[tuple[str, int], tuple]]] = {}  # broker -> (epoch, states in UpdateMetadata)

    def reset(self) -> None:
        self._told.clear()
        self._topics.clear()
        self._parts.clear()
        self._stopped.clear()
        self._um.clear()

    def stop_failed(self, broker_id: int, partitions: list[tuple[str, int]]) -> None:
        """A StopReplica answered with an error for these: the next publish sends them again."""
        sent = self._stopped.get(broker_id, (None, set()))[1]
        sent.difference_update(partitions)

    def build(self, broker_id: int, controller_id: int, controller_epoch: int, snapshot: dict) -> list:
        brokers = {b["node_id"]: b for b in snapshot.get("brokers", [])}
        me = brokers.get(broker_id)
        broker_epoch = me.get("epoch", -1) if me else -1
        told_epoch, told = self._told.get(broker_id, (None, {}))
        if told_epoch != broker_epoch:
            told = {}
        now: dict[tuple[str, int], tuple] = {}
        um_epoch, um_told = self._um.get(broker_id, (None, {}))
        if um_epoch != broker_epoch:
            um_told = {}
        um_now: dict[tuple[str, int], tuple] = {}
        lai_topics, um_topics = [], []
        current: dict[str, str] = {}
        for t in snapshot["topics"]:
            tid = uuid.UUID(t["topic_id"])
            current[t["name"]] = t["topic_id"]
            lai_parts, um_parts = [], []
            for p in t["partitions"]:
                if p["leader_epoch"] < 0:
                    continue  # never elected (no live replica yet)
                offline = [r for r in p["replicas"] if r not in brokers]
                um_state = (p["leader"], p["leader_epoch"], tuple(p["isr"]), p["partition_epoch"],
                            tuple(p["replicas"]), tuple(offline))
                um_now[(t["name"], p["index"])] = um_state
                if um_told.get((t["name"], p["index"])) != um_state:  # only what changed since it was last told
                    um_parts.append(_UmPartition(
                        partition_index=p["index"], controller_epoch=controller_epoch, leader=p["leader"],
                        leader_epoch=p["leader_epoch"], isr=list(p["isr"]), zk_version=p["partition_epoch"],
                        replicas=list(p["replicas"]), offline_replicas=offline))
                if broker_id in p["replicas"]:
                    # LeaderAndIsr goes out when leadership changes (a new leader epoch); an ISR change alone
                    # (AlterPartition, a follower gone) reaches brokers through UpdateMetadata, as in Kafka
                    key, state = (t["name"], p["index"]), (p["leader"], p["leader_epoch"], tuple(p["replicas"]))
                    now[key] = state
                    if told.get(key) != state:
                        lai_parts.append(_LaiPartition(
                            partition_index=p["index"], controller_epoch=controller_epoch, leader=p["leader"],
                            leader_epoch=p["leader_epoch"], isr=list(p["isr"]), partition_epoch=p["partition_epoch"],
                            replicas=list(p["replicas"]), adding_replicas=[], removing_replicas=[],
                            is_new=key not in told, leader_recovery_state=0))
            if lai_parts:
                lai_topics.append(_LaiTopic(topic_name=t["name"], topic_id=tid, partition_states=lai_parts))
            if um_parts:
                um_topics.append(_UmTopic(topic_name=t["name"], topic_id=tid, partition_states=um_parts))
        # replicas of topics being deleted: StopReplica (delete) to their brokers, once per broker epoch
        stopped_epoch, stopped = self._stopped.get(broker_id, (None, set()))
        if stopped_epoch != broker_epoch:
            stopped = set()
        stop: dict[str, list[int]] = {}
        for d in snapshot.get("deleting", ()):
            for b, index in d["pending"]:
                if b == broker_id and (d["name"], index) not in stopped:
                    stop.setdefault(d["name"], []).append(index)
                    stopped.add((d["name"], index))
        deleting = {d["name"] for d in snapshot.get("deleting", ())}
        self._stopped[broker_id] = (broker_epoch, {k for k in stopped if k[0] in deleting})
        # replicas a reassignment took off this broker (it was told of them, the topic lives on, it is no replica of
        # them now): StopReplica (delete), as Kafka's controller sends to the replicas it removes
        for topic, index in sorted(told):
            if (topic, index) not in now and topic in current and topic not in deleting:
                stop.setdefault(topic, []).append(index)
        # and leader -2 in UpdateMetadata for the topics this broker was told about that are gone
        for topic, tid in self._topics.get(broker_id, {}).items():
            if topic not in current:
                um_topics.append(_UmTopic(topic_name=topic, topic_id=uuid.UUID(tid), partition_states=[
                    _UmPartition(partition_index=i, controller_epoch=controller_epoch, leader=LEADER_DURING_DELETE,
                                 leader_epoch=-1, isr=[], zk_version=-1, replicas=[], offline_replicas=[])
                    for i in self._parts.get(broker_id, {}).get(topic, [])]))
        self._told[broker_id] = (broker_epoch, now)
        self._um[broker_id] = (broker_epoch, um_now)
        self._topics[broker_id] = {name: tid for name, tid in current.items()}
        self._parts[broker_id] = {t["name"]: [p["index"] for p in t["partitions"]] for t in snapshot["topics"]}
        out = []
        if lai_topics:
            leaders = {p.leader for t in lai_topics for p in t.partition_states if p.leader in brokers}
            out.append(LeaderAndIsrRequest(
                version=LAI_VERSION, controller_id=controller_id, is_kraft_controller=False,
                controller_epoch=controller_epoch, broker_epoch=broker_epoch, update_type=0, topic_states=lai_topics,
                live_leaders=[LeaderAndIsrRequest.LeaderAndIsrLiveLeader(
                    broker_id=b, host_name=inter_broker_endpoint(brokers[b])[0],
                    port=inter_broker_endpoint(brokers[b])[1]) for b in sorted(leaders)]))
        if stop:
            out.append(StopReplicaRequest(
                version=STOP_REPLICA_VERSION, controller_id=controller_id, is_kraft_controller=False,
                controller_epoch=controller_epoch, broker_epoch=broker_epoch, topic_states=[
                    _SrTopic(topic_name=topic, partition_states=[
                        _SrPartition(partition_index=i, leader_epoch=-2, delete_partition=True) for i in sorted(parts)])
                    for topic, parts in sorted(stop.items())]))
        out.append(UpdateMetadataRequest(
            version=UPDATE_METADATA_VERSION, controller_id=controller_id, is_kraft_controller=False, update_type=0,
            controller_epoch=controller_epoch, broker_epoch=broker_epoch, topic_states=um_topics,
            live_brokers=[_UmBroker(id=b["node_id"], rack=b.get("rack"), endpoints=[  # the client listener first
                _UmEndpoint(port=b["port"], host=b["host"], listener=b.get("listener") or "PLAINTEXT",
                            security_protocol=_protocol_id(b, b.get("listener") or "PLAINTEXT"))] + [
                _UmEndpoint(port=int(port), host=host, listener=name, security_protocol=_protocol_id(b, name))
                for name, host, port in b.get("listeners") or ()]) for _, b in sorted(brokers.items())]))
        return out
