"""Brokers added to and removed from a one-process cluster at run time (POST /v1/brokers, DELETE /v1/brokers;
librdkafka's mock broker_add / broker_decommission, kfake's AddNode / RemoveNode), a broker's rack changed (POST
/v1/brokers/rack, the mock's broker_set_rack). Run on the brokers' event loop (the HTTP listener runs there; the
in-process API goes through KafkiteCluster.call).

A removal is a decommission as an operator does it on Kafka (kafka-reassign-partitions, then a shutdown): each
partition the broker hosts gets another live broker in its place (the one hosting the fewest replicas, when one is
not already a replica; else the partition keeps one replica less), the new replica copies the log from the leader
and joins the ISR; then the broker leaves the partition (its leaderships move to an ISR member) and stops. No record
acknowledged by the ISR is lost on the way. A partition with no live leader (nothing to copy from) gets its new
replica all the same, out of the ISR: it stays offline until an ISR member comes back, as on Kafka.

A reassignment (POST /v1/replicas) is served in ZooKeeper mode too, by the controller's listener: its controller
writes the assignment and the partition state to ZooKeeper and sends LeaderAndIsr, as for a leader move."""
from __future__ import annotations

from collections import Counter

import trio


def _controller(node):
    state = node.state
    if state.zk is not None or not state.storages:
        raise ValueError("adding and removing brokers is served for one-process clusters of several brokers "
                         "(kafkite serve --brokers N, KafkiteCluster); in ZooKeeper mode start or stop a process")
    c = state.active_controller()
    if c is None:
        raise ValueError("no active controller in this process")
    return c


async def add_broker(node, broker_id: int | None = None, rack: str | None = None) -> dict:
    """A new broker (id: the next one when None) with empty partitions, listening and registered when this returns:
    Metadata lists it; topics and partitions made from now on are placed on it too."""
    _controller(node)
    b = await node.add_broker(broker_id, rack=rack)
    return {"added": b.node_id}


def plan(controller, broker_id: int) -> list[tuple[str, int, int | None]]:
    """(topic, partition, the replacement or None) of every partition the broker hosts."""
    md = controller.authority
    live = controller.live_brokers()
    load = Counter(r for t in md.topics.values() for p in t.partitions for r in p.replicas)
    out = []
    for t in sorted(md.topics.values(), key=lambda t: t.name):
        for p in t.partitions:
            if broker_id not in p.replicas:
                continue
            spare = sorted((load[b], b) for b in live if b != broker_id and b not in p.replicas)
            new = spare[0][1] if spare else None
            if new is not None:
                load[new] += 1
            out.append((t.name, p.index, new))
    return out


def _reassigner(node):
    """The controller a reassignment goes through: the active one of this one-process cluster, or in ZooKeeper mode
    this broker's when it is the controller."""
    zk = node.state.zk
    if zk is None:
        return _controller(node)
    if zk.controller is None or not zk.controller.active:
        raise ValueError(f"broker {zk.node_id} is not the controller: ask the controller's control listener (GET "
                         "/v1/brokers names it)")
    return zk.controller


async def _on(node, c, fn):
    """fn() on the controller's thread (ZooKeeper mode: its event thread, fenced by the controller epoch)."""
    zk = node.state.zk
    if zk is None:
        return fn()
    return await zk.call(lambda: c.guarded(fn))


async def _caught_up(node, waiting: list[tuple[str, int, int]], timeout: float, controller=None) -> None:
    """Wait until each (topic, partition, broker) is in the partition's ISR (or the partition has no leader to copy
    from, or is gone); ValueError after `timeout` seconds."""
    behind = waiting
    with trio.move_on_after(timeout):
        while True:
            md = (controller or _controller(node)).authority  # (in-process the controller may move meanwhile)
            behind = [(t, i, n) for t, i, n in waiting if (p := md.partition(t, i)) is not None and n not in p.isr
                      and p.leader != -1]
            if not behind:
                return
            await trio.sleep(0.02)
    raise ValueError(f"the new replicas did not catch up within {timeout}s: {behind[:5]}")


async def reassign(node, topic: str, partition: int, replicas: list[int], timeout: float = 60.0) -> dict:
    """A partition's replicas changed as Kafka's reassignment changes them (AlterPartitionReassignments): the new
    replicas join and copy the log until they are in the ISR, then the replicas not kept leave (a leader not kept hands
    over to the first live ISR member of the new list, at a new leader epoch) -> the partition's state."""
    c = _reassigner(node)
    if not replicas or len(set(replicas)) != len(replicas):
        raise ValueError(f"replicas must be distinct broker ids, at least one, got {replicas}")

    def first_step():  # (ZooKeeper mode: the live brokers are read from ZooKeeper, on the controller's thread)
        p = c.authority.partition(topic, partition)
        if p is None:
            raise ValueError(f"no partition {topic}-{partition}")
        live = c.live_brokers()
        added = [r for r in replicas if r not in p.replicas]
        if any(r not in live for r in added):
            raise ValueError(f"a replica added must be a live broker: {added} of live {sorted(live)}")
        if added:
            c.reassign(topic, partition, list(p.replicas) + added)
        return added, p.leader
    first = await _on(node, c, first_step)
    if first is None:
        raise ValueError("the controller moved meanwhile (a newer one was elected): ask it")
    added, leader = first
    if added and leader != -1:
        await _caught_up(node, [(topic, partition, r) for r in added], timeout, c if node.state.zk else None)
    c = _reassigner(node)

    def last_step():
        c.reassign(topic, partition, list(replicas))
        p = c.authority.partition(topic, partition)
        return {"topic": topic, "partition": partition, "replicas": list(p.replicas), "leader": p.leader,
                "leader_epoch": p.leader_epoch, "isr": list(p.isr)}
    out = await _on(node, c, last_step)
    if out is None:
        raise ValueError("the controller moved meanwhile (a newer one was elected): ask it")
    return out


async def remove_broker(node, broker_id: int, timeout: float = 60.0) -> dict:
    """Decommission a broker (see the module docstring) -> the brokers and the partitions moved."""
    c = _controller(node)
    if broker_id not in node.state.storages:
        raise ValueError(f"no broker {broker_id} in this one-process cluster")
    if not any(b != broker_id for b in c.live_brokers()):
        raise ValueError(f"broker {broker_id} is the last live broker: the cluster would have none")
    moves = plan(c, broker_id)
    md = c.authority
    # 1. each replacement joins the replicas and copies the log from the leader
    waiting = []
    for topic, index, new in moves:
        p = md.partition(topic, index)
        if new is not None:
            c.reassign(topic, index, list(p.replicas) + [new])
            if p.leader != -1:
                waiting.append((topic, index, new))
    await _caught_up(node, waiting, timeout)  # (when not: the broker stays, its partitions have the new replicas too)
    # 2. the broker leaves every partition (its leaderships move to an ISR member), then stops
    moved = []
    for topic, index, new in moves:
        c = _controller(node)
        p = c.authority.partition(topic, index)
        if p is None:  # deleted meanwhile
            continue
        c.reassign(topic, index, [r for r in p.replicas if r != broker_id])
        p = c.authority.partition(topic, index)
        moved.append({"topic": topic, "partition": index, "replicas": list(p.replicas), "leader": p.leader,
                      "isr": list(p.isr)})
    await node.remove_broker(broker_id)
    return {"removed": broker_id, "moved": moved}


def set_rack(node, broker_id: int, rack: str | None) -> dict:
    _controller(node)
    node.set_rack(broker_id, rack)
    return {"broker": broker_id, "rack": rack or None}
