"""Views of this process's brokers for the control plane (GET /v1/partitions, GET /v1/groups): what a test would
otherwise dig out of broker objects; and the one topology control served over HTTP, moving a partition's leader
(POST /v1/leaders). Run on the brokers' own event loop (the HTTP listener runs there; the in-process API goes
through KafkiteCluster.call)."""
from __future__ import annotations


def partitions(brokers: dict, topic: str | None = None) -> list[dict]:
    """Every partition (of `topic`) as the cluster metadata has it, with each local replica's offsets."""
    if not brokers:
        return []
    md = brokers[min(brokers)].metadata
    out = []
    for t in sorted(md.topics.values(), key=lambda t: t.name):
        if topic is not None and t.name != topic:
            continue
        for p in t.partitions:
            local = {}
            for bid, b in sorted(brokers.items()):
                lg = b.replicas.get(t.name, p.index)
                if lg is not None:
                    local[str(bid)] = {"log_start_offset": lg.log_start_offset, "log_end_offset": lg.log_end_offset,
                                       "high_watermark": lg.high_watermark}
            out.append({"topic": t.name, "topic_id": str(t.topic_id), "partition": p.index, "leader": p.leader,
                        "leader_epoch": p.leader_epoch, "partition_epoch": p.partition_epoch,
                        "replicas": list(p.replicas), "isr": list(p.isr), "local_replicas": local})
    return out


def groups(brokers: dict, group: str | None = None) -> list[dict]:
    """Every classic group (or `group`) whose coordinator is a broker of this process."""
    out = []
    for bid, b in sorted(brokers.items()):
        for shard in list(b.groups.coordinator.shards.values()):
            for gid, g in sorted(shard.groups.items()):
                if group is not None and gid != group:
                    continue
                out.append({"group": gid, "coordinator": bid, "state": g.state.value, "generation": g.generation,
                            "protocol_type": g.protocol_type, "protocol": g.protocol_name, "leader": g.leader_id,
                            "members": [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                                         "client_id": m.client_id, "client_host": m.client_host}
                                        for m in sorted(g.members.values(), key=lambda m: m.member_id)],
                            "offsets": {f"{k[0]}-{k[1]}": e.offset for k, e in sorted(g.offsets.items())}})
    return out


def move_leader(brokers: dict, topic: str, partition: int, broker_id: int) -> None:
    """Make a live ISR member the partition's leader, through the active controller of this process's
    one-process cluster (`KafkiteCluster.move_leader`; librdkafka's partition_set_leader)."""
    state = brokers[min(brokers)].state
    if state.zk is not None:
        raise ValueError("moving a leader is served for one-process clusters (not yet in ZooKeeper mode)")
    controller = state.active_controller()
    if controller is None:
        raise ValueError("no active controller in this process")
    controller.move_leader(topic, partition, broker_id)
