"""Views of this process's brokers for the control plane (GET /v1/partitions, GET /v1/groups): what a test would
otherwise dig out of broker objects; and the controls that act on the brokers: a partition's leader moved or
taken away (POST /v1/leaders, /v1/leaderless), replication cut between two brokers (POST /v1/replication/cut),
the log clock advanced (POST /v1/clock), compaction and retention now, reset to empty. Run on the brokers' own
event loop (the HTTP listener runs there; the in-process API goes through KafkiteCluster.call)."""
from __future__ import annotations

from .model import error_name


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


async def move_leader(brokers: dict, topic: str, partition: int, broker_id: int) -> None:
    """Make a live ISR member the partition's leader through the active controller (librdkafka's
    partition_set_leader): of this process's one-process cluster (`KafkiteCluster.move_leader`), or, in ZooKeeper
    mode, this broker when it is the controller: the new state node is written to ZooKeeper and LeaderAndIsr and
    UpdateMetadata sent, as for a preferred-replica election (ask the controller's control listener:
    `ProcessCluster.move_leader` does)."""
    await _on_controller(brokers, "move_leader", topic, partition, broker_id)


async def make_leaderless(brokers: dict, topic: str, partition: int) -> None:
    """The partition goes offline (leader -1 at a new leader epoch, its ISR kept), as when no ISR member is live:
    Metadata lists it with leader -1 and LEADER_NOT_AVAILABLE, Produce and Fetch to its replicas answer
    NOT_LEADER_OR_FOLLOWER; it stays so until `restore_leader` (or a leader move), whatever brokers come and go."""
    await _on_controller(brokers, "make_leaderless", topic, partition)


async def restore_leader(brokers: dict, topic: str | None, partition: int | None) -> None:
    """The leaderless partitions (of topic, or that one) elect a leader again: the first live ISR member."""
    await _on_controller(brokers, "restore_leader", topic, partition)


def leaderless(brokers: dict) -> list[dict]:
    """The partitions kept leaderless, as this process's controller knows them."""
    state = brokers[min(brokers)].state if brokers else None
    if state is None:
        return []
    controller = state.active_controller() if state.zk is None else state.zk.controller
    if controller is None:
        return []
    return [{"topic": t, "partition": p} for t, p in sorted(controller.leaderless) if controller.held_leaderless(t, p)]


async def shuffle_leaders(brokers: dict, topics: list[str] | None, seed: int | None) -> list[dict]:
    """Every partition (of `topics`; None: all, the internal ones too) whose ISR has another live member gets one of
    them, chosen at random (`seed`: the same choice again), as leader at a new leader epoch (kfake's
    ShufflePartitionLeaders; on __consumer_offsets and __transaction_state its RehashCoordinators: the groups' and
    transactional ids' coordinators move). -> the moves."""
    import random
    rng = random.Random(seed)
    names = None if topics is None else set(topics)
    if names is not None and brokers:
        known = brokers[min(brokers)].metadata.topics
        missing = sorted(n for n in names if n not in known)
        if missing:
            raise ValueError(f"unknown topics {missing[:5]}")
    return await _on_controller(brokers, "shuffle_leaders", names, rng.choice) or []


async def _on_controller(brokers: dict, action: str, *args):
    """A controller action (Controller.<action>) on the active controller of this process's one-process cluster,
    or in ZooKeeper mode on this broker's when it is the controller (on its controller thread; its writes to
    ZooKeeper are fenced by the controller epoch)."""
    if not brokers:
        raise ValueError("no broker of this process is running")
    state = brokers[min(brokers)].state
    if state.zk is not None:
        zk = state.zk
        controller = zk.controller
        if controller is None or not controller.active:
            raise ValueError(f"broker {min(brokers)} is not the controller: ask the controller's control listener "
                             "(GET /v1/brokers names it)")
        return await zk.call(lambda: controller.guarded(getattr(controller, action), *args))
    controller = state.active_controller()
    if controller is None:
        raise ValueError("no active controller in this process")
    result = getattr(controller, action)(*args)
    if state.writer is not None:  # done once the brokers know it: the controller's change is written first
        await state.writer.durable()
    return result


# -- replication cut between two brokers -------------------------------------------------------------------------
def _replication(brokers: dict, broker_id: int):
    b = brokers.get(broker_id)
    if b is None or b.replicas is None or not b.replicated or b.replicas.replication is None:
        raise ValueError(f"broker {broker_id} does not replicate (a single broker)")
    return b.replicas.replication


def cut_replication(brokers: dict, follower: int, leader: int, cut: bool = True) -> dict:
    """Broker `follower`'s replica fetchers stop fetching from broker `leader` (only: it goes on copying from the
    others), as if the link between them were cut; the leader's ISRs drop it after replica.lag.time.max.ms. With
    cut=False the link heals: it catches up and rejoins."""
    if follower == leader:
        raise ValueError("a broker does not replicate from itself")
    r = _replication(brokers, follower)
    (r.cut_from if cut else r.heal_from)(leader)
    return replication_state(brokers)


def replication_state(brokers: dict) -> dict:
    """Each replicating broker of this process: paused, and the leaders it is cut from."""
    out = []
    for bid, b in sorted(brokers.items()):
        r = b.replicas.replication if b.replicas is not None and b.replicated else None
        if r is not None:
            out.append({"broker": bid, "paused": r.paused, "cut_from": sorted(r.cut)})
    return {"replication": out}


# -- the controller's connection to a broker cut -------------------------------------------------------------------
def cut_controller(brokers: dict, broker_id: int, cut: bool = True) -> dict:
    """The active controller's connection to broker `broker_id` cut: its LeaderAndIsr and UpdateMetadata (one-process
    clusters: its metadata commands) do not reach the broker, which keeps its view of leaders, ISRs and brokers
    (and acts on it) while the rest of the cluster moves on; healed, the broker gets what it missed (ZooKeeper mode:
    the queued requests in order, as Kafka's controller channel retries them; in-process: the newest view) and catches
    up. In ZooKeeper mode ask the controller's listener (it holds the channel); a new controller's link is whole."""
    state = brokers[min(brokers)].state if brokers else None
    if state is None:
        raise ValueError("no broker of this process is running")
    if state.zk is not None:
        controller = state.zk.controller
        if controller is None or not controller.active:
            raise ValueError(f"broker {min(brokers)} is not the controller: ask the controller's control listener "
                             "(GET /v1/brokers names it)")
        state.zk.channel.cut_link(broker_id, cut)
    else:
        if not state.storages:
            raise ValueError("a single broker is its own controller: cutting the controller's connection needs a "
                             "cluster (kafkite serve --brokers N, KafkiteCluster, a ZooKeeper cluster)")
        if broker_id not in state.storages:
            raise ValueError(f"unknown broker {broker_id}")
        state.cut_controller(broker_id, cut)
    return controller_links(brokers)


def controller_links(brokers: dict) -> dict:
    """The controller as this process knows it, and the brokers its connection is cut from (this process's cuts)."""
    state = brokers[min(brokers)].state if brokers else None
    if state is None:
        return {"controller": None, "cut": []}
    if state.zk is not None:
        return {"controller": brokers[min(brokers)].controller_id(), "cut": sorted(state.zk.channel.cut)}
    c = state.active_controller()
    return {"controller": None if c is None else c.node_id, "cut": sorted(state.controller_cut)}


# -- the log clock --------------------------------------------------------------------------------------------------
def clock(brokers: dict) -> list[dict]:
    """Each broker's log clock: the wall clock plus what it was advanced by."""
    out = []
    for bid, b in sorted(brokers.items()):
        rm = b.replicas
        if rm is not None:
            out.append({"broker": bid, "advanced_ms": rm.clock_advanced_ms, "now_ms": rm.log_now_ms()})
    return out


def advance_clock(brokers: dict, ms: int, broker_id: int | None = None) -> list[dict]:
    """Move the log clock of this process's brokers (or one) `ms` ahead: what retention, the log cleaner, segment
    rolls (segment.ms) and LogAppendTime read; the other timers (sessions, replication lag, quotas) keep the wall
    clock. It only goes forward."""
    if ms < 0:
        raise ValueError("the log clock only goes forward: advance_ms >= 0")
    done = set()
    for bid, b in sorted(brokers.items()):
        rm = b.replicas
        if broker_id in (None, bid) and rm is not None and id(rm) not in done:
            done.add(id(rm))
            rm.clock_advanced_ms += ms
    return clock(brokers)


# -- data controls: compaction and retention now (kfake's Compact, ApplyRetention) -----------------------------------
def _local_logs(brokers: dict, topic: str | None, partition: int | None):
    """(broker id, topic, partition, log) of every replica of this process's live brokers (of topic/partition)."""
    if not brokers:
        return
    state = brokers[min(brokers)].state
    for bid, b in sorted(brokers.items()):
        if b.replicas is None or (state.zk is None and bid not in state.brokers):  # a stopped in-process broker
            continue
        for (t, p), lg in sorted(b.replicas.logs.items()):
            if (topic is None or t == topic) and (partition is None or p == partition):
                yield bid, t, p, lg


async def compact(brokers: dict, topic: str | None, partition: int | None) -> list[dict]:
    """Clean every compacted replica (of topic/partition) from its start now, as the log cleaner would once due:
    the active segment is rolled first when it holds only records below the last stable offset, so every record
    committed so far is cleanable (Kafka never cleans the active segment; a test wants the latest value of each
    key and nothing older). The flush of the roll and the cleaning run in a worker thread; the result is swapped
    in on the loop unless the log changed meanwhile (then `swapped` is false and the log is as it was)."""
    import trio

    from ..gil_pacing import Pacer
    from ..storage.log_cleaner import LogCleaner
    out = []
    for bid, t, p, lg in list(_local_logs(brokers, topic, partition)):
        if not lg.config.compacted:
            continue
        now_ms = brokers[bid].replicas.log_now_ms()
        if lg.active.size and lg.log_end_offset <= lg.last_stable_offset:
            lg._roll(now_ms)  # LocalLog's roll (as roll_if_due's), its files finished by the flush below
        target, run = lg.deferred_flush()  # finishes the roll (its index files) in the worker
        await trio.to_thread.run_sync(run)
        lg.mark_flushed(target)
        cleaner = LogCleaner(pace=Pacer)  # (its job runs in a worker thread)
        read = cleaner.checkpoint_reads([lg])
        if read is not None:  # (the cleaner-offset-checkpoint file, in a worker thread)
            cleaner.loaded(await trio.to_thread.run_sync(read))
        job = cleaner.plan(lg, now_ms, name=f"{t}-{p}", force=True)
        removed, swapped = 0, True
        if job is not None:
            result = await trio.to_thread.run_sync(job.run)
            swapped = cleaner.swapped(job, result, await trio.to_thread.run_sync(cleaner.swap_work(job, result)))
            removed = result.records_removed if swapped else 0
            write = cleaner.checkpoint_writes()
            if write is not None:  # (the cleaner-offset-checkpoint file, in a worker thread)
                await trio.to_thread.run_sync(write)
        out.append({"broker": bid, "topic": t, "partition": p, "records_removed": removed, "swapped": swapped,
                    "log_start_offset": lg.log_start_offset, "log_end_offset": lg.log_end_offset})
    return out


async def apply_retention(brokers: dict, topic: str | None, partition: int | None,
                          advance_ms: int = 0) -> list[dict]:
    """Apply retention.ms/retention.bytes to every cleanup.policy=delete replica (of topic/partition) now, as the
    retention check would at the broker's log clock (or `advance_ms` past it, for this call only): closed segments
    past it go, and an active segment past it too (below the high watermark), after a roll, as Kafka does: the log
    start offset moves to its end.
    The deleted segments' files are renamed `.deleted` in a worker thread, as the broker's retention check does."""
    import trio
    out = []
    for bid, t, p, lg in list(_local_logs(brokers, topic, partition)):
        if "delete" not in lg.config.cleanup_policy or lg.busy:
            continue
        now_ms = brokers[bid].replicas.log_now_ms() + advance_ms
        before = lg.log_start_offset
        deleted = lg.enforce_retention(now_ms, defer_renames=True)
        renames = lg.renames()
        if renames is not None:
            await trio.to_thread.run_sync(renames)
            lg.schedule_renamed()
        if lg.log_start_offset != before:
            brokers[bid].replicas.notify(t, p)
        out.append({"broker": bid, "topic": t, "partition": p, "segments_deleted": deleted,
                    "log_start_offset": lg.log_start_offset, "log_end_offset": lg.log_end_offset})
    return out


# -- reset to empty -----------------------------------------------------------------------------------------------------
def can_empty(brokers: dict) -> tuple:
    """(state, live brokers by id) to empty, or ValueError saying why not (before anything changed)."""
    state = brokers[min(brokers)].state if brokers else None
    if state is None or state.zk is not None:
        raise ValueError("emptying the brokers is served for one-process clusters (kafkite serve, KafkiteCluster); "
                         "in ZooKeeper mode: not yet")
    live = {bid: b for bid, b in brokers.items() if bid in state.brokers}
    if not live:
        raise ValueError("no broker of this process is running")
    return state, live


async def empty(brokers: dict) -> dict:
    """Make a one-process cluster (or a single broker) empty, as a test's next run wants it: every topic but the
    internal ones deleted (their logs, and the producer state in them, go with them), every group deleted (its
    committed offsets with it; a group with members left is kept and named: its clients are still running), every
    ACL, SCRAM user and group config removed. The brokers keep running on their ports; the controls and the request
    log are the caller's (POST /v1/reset {"data": true} resets them too)."""
    state, live = can_empty(brokers)
    first = live[min(live)]
    topics = sorted(t.name for t in state.metadata.topics.values() if not t.name.startswith("__"))
    if topics:  # with one metadata write for all
        failed = await first.admin.delete_topics(topics)
        if failed:
            raise next(iter(failed.values()))
    groups, kept = await delete_groups(live.values())
    acls = list(state.metadata.acls)
    if acls:
        await first.admin.alter_acls([], acls)
    users = sorted(state.metadata.users)
    if users:
        await first.admin.set_user_configs({u: {} for u in users})
    group_configs = sorted(state.metadata.group_configs)
    if group_configs:
        await first.admin.set_group_configs({g: {} for g in group_configs})
    return {"topics_deleted": topics, "groups_deleted": sorted(groups), "groups_kept": kept, "acls_deleted": len(acls),
            "users_deleted": users, "group_configs_deleted": group_configs}


async def delete_groups(brokers) -> tuple[list[str], dict[str, str]]:
    """Every group these brokers coordinate deleted as DeleteGroups deletes it -> (the deleted, {group: why kept})
    (a group with members is kept: NON_EMPTY_GROUP)."""
    deleted, kept = [], {}
    for b in brokers:
        for gid, *_ in b.groups.coordinator.list_groups():
            code = await b.groups.delete_group(group_id=gid)
            if code:
                kept[gid] = error_name(code)
            else:
                deleted.append(gid)
    return deleted, kept
