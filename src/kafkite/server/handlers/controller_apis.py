"""LeaderAndIsr, UpdateMetadata, StopReplica (a broker applying its controller's requests), ControlledShutdown and
AlterPartition (the controller taking a broker's request), as a ZooKeeper-mode Kafka broker does them.

Served only on the inter-broker listener of a ZooKeeper-mode broker (router.INTER_BROKER_ROUTES), never advertised;
an in-process cluster's brokers serve AlterPartition there (their controller's commands are calls).

Fencing, as Kafka's ReplicaManager and MetadataCache:
- a request whose controller epoch is older than the newest this broker has seen is refused whole with
  STALE_CONTROLLER_EPOCH and changes nothing (every partition of a LeaderAndIsr answers it too);
- a request for an older registration of this broker (broker epoch below its own, not -1) gets STALE_BROKER_EPOCH;
- within a LeaderAndIsr, a partition whose leader epoch is not newer than the one this broker has is
  answered STALE_CONTROLLER_EPOCH and left as it is.
"""
from __future__ import annotations

import structlog

from ...controller.metadata import BrokerInfo, PartitionInfo
from ...wire.errors import E
from ..context import RequestContext
from ..kafka_apis import KafkaApis
from ...wire.lazy_kafka import lazy_names

# the controller-to-broker APIs' classes, imported on the first of their requests (wire/lazy_kafka.py LazyName)
(AlterPartitionResponse, ControlledShutdownResponse, LeaderAndIsrResponse, StopReplicaResponse,
 UpdateMetadataResponse) = lazy_names(globals(), "kafkite.wire.interbroker", "AlterPartitionResponse",
                                      "ControlledShutdownResponse", "LeaderAndIsrResponse", "StopReplicaResponse",
                                      "UpdateMetadataResponse")

log = structlog.get_logger("kafkite.controller_apis")
LEADER_DURING_DELETE = -2


def _fenced(apis: KafkaApis, ctx: RequestContext, *, check_only: bool = False) -> int:
    """0, or why the request must change nothing (and the log line that says so); `check_only`: nothing logged or
    learnt."""
    r = ctx.body
    cache = apis.metadata_cache
    if check_only:
        return int(r.controller_epoch < cache.latest_controller_epoch
                   or (r.broker_epoch != -1 and r.broker_epoch < apis.broker.broker_epoch))
    if r.controller_epoch < cache.latest_controller_epoch:
        log.warning("controller_request.stale_controller_epoch", api=ctx.request.api_name, sender=r.controller_id,
                    got=r.controller_epoch, newest=cache.latest_controller_epoch)
        return int(E.STALE_CONTROLLER_EPOCH)
    if r.broker_epoch != -1 and r.broker_epoch < apis.broker.broker_epoch:
        log.warning("controller_request.stale_broker_epoch", api=ctx.request.api_name, sender=r.controller_id,
                    got=r.broker_epoch, current=apis.broker.broker_epoch)
        return int(E.STALE_BROKER_EPOCH)
    cache.latest_controller_epoch = r.controller_epoch
    cache.controller_epoch = r.controller_epoch
    cache.controller_id = r.controller_id
    return 0


async def _learn_topics(apis: KafkaApis, ctx: RequestContext, topics: list[tuple[str, object]]) -> None:
    """Topics new to this broker's cache: added with their configs (read from ZooKeeper) and no partitions yet."""
    new = [(name, tid) for name, tid in topics if apis.metadata_cache.topic(name) is None]
    if not new:
        return
    configs = await apis.admin.topic_configs([name for name, _ in new])
    for name, tid in new:
        if apis.metadata_cache.topic(name) is None:  # (a cache's persist is a no-op)
            apis.metadata_cache.create_topic(name, [], configs.get(name, {}), topic_id=tid)


def _upsert(apis, topic: str, index: int, state: PartitionInfo) -> None:
    t = apis.metadata_cache.topic(topic)
    while len(t.partitions) <= index:  # not known yet: a placeholder without a leader until its state comes
        t.partitions.append(PartitionInfo(index=len(t.partitions), replicas=[], leader=-1, leader_epoch=-1))
    t.partitions[index] = state


async def handle_leader_and_isr(apis: KafkaApis, ctx: RequestContext):
    """Kafka's becomeLeaderOrFollower. The logs new to this broker are made (or loaded and recovered) in a worker
    thread first, as Kafka makes them on its request handler threads, not its network threads; one LeaderAndIsr at
    a time (making_logs)."""
    rm = apis.replica_manager.lifecycle
    async with rm.making_logs:
        new = await _prepare_new_logs(apis, ctx)
        try:
            return await _leader_and_isr(apis, ctx)
        finally:
            for info, indexes in new:
                rm.discard_prepared(info, indexes)


async def _prepare_new_logs(apis: KafkaApis, ctx: RequestContext) -> list[tuple[object, list[int]]]:
    r = ctx.body
    if _fenced(apis, ctx, check_only=True):
        return []
    await _learn_topics(apis, ctx, [(t.topic_name, t.topic_id) for t in r.topic_states])
    new = []
    for t in r.topic_states:
        info = apis.metadata_cache.topic(t.topic_name)
        indexes = [ps.partition_index for ps in t.partition_states
                   if apis.node_id in ps.replicas
                   and (t.topic_name, ps.partition_index) not in apis.replica_manager.logs]
        if info is not None and indexes:
            await apis.replica_manager.lifecycle.prepare_logs(info, indexes)
            new.append((info, indexes))
    return new


async def _leader_and_isr(apis: KafkaApis, ctx: RequestContext):
    r, v = ctx.body, ctx.version
    T, P = LeaderAndIsrResponse.LeaderAndIsrTopicError, LeaderAndIsrResponse.LeaderAndIsrTopicError.LeaderAndIsrPartitionError
    err = _fenced(apis, ctx)
    if err:
        return LeaderAndIsrResponse(version=v, error_code=err, topics=[
            T(topic_id=t.topic_id, partition_errors=[P(partition_index=p.partition_index, error_code=err)
                                                     for p in t.partition_states]) for t in r.topic_states])
    await _learn_topics(apis, ctx, [(t.topic_name, t.topic_id) for t in r.topic_states])
    epochs = apis.replica_manager.leader_epochs
    topics = []
    for t in r.topic_states:
        errors = []
        info = apis.metadata_cache.topic(t.topic_name)
        for ps in t.partition_states:
            key = (t.topic_name, ps.partition_index)
            if apis.node_id not in ps.replicas:
                errors.append(P(partition_index=ps.partition_index, error_code=int(E.UNKNOWN_TOPIC_OR_PARTITION)))
                continue
            if key in epochs and ps.leader_epoch <= epochs[key]:
                log.info("leader_and_isr.stale_leader_epoch", topic=t.topic_name, partition=ps.partition_index,
                         got=ps.leader_epoch, current=epochs[key])
                errors.append(P(partition_index=ps.partition_index, error_code=int(E.STALE_CONTROLLER_EPOCH)))
                continue
            state = PartitionInfo(index=ps.partition_index, replicas=list(ps.replicas), leader=ps.leader,
                                  leader_epoch=ps.leader_epoch, isr=list(ps.isr), partition_epoch=ps.partition_epoch)
            _upsert(apis, t.topic_name, ps.partition_index, state)
            code = apis.replica_manager.become_replica(info, state)
            errors.append(P(partition_index=ps.partition_index, error_code=code))
            log.info("leader_and_isr.applied", topic=t.topic_name, partition=ps.partition_index,
                     role="leader" if ps.leader == apis.node_id else "follower", leader=ps.leader,
                     leader_epoch=ps.leader_epoch, isr=list(ps.isr))
        topics.append(T(topic_id=t.topic_id, partition_errors=errors))
    apis.group_coordinator.on_metadata(apis.metadata_cache)
    apis.txn_coordinator.on_metadata(apis.metadata_cache)
    return LeaderAndIsrResponse(version=v, error_code=0, topics=topics)


async def handle_update_metadata(apis: KafkaApis, ctx: RequestContext):
    r, v = ctx.body, ctx.version
    err = _fenced(apis, ctx)
    if err:
        return UpdateMetadataResponse(version=v, error_code=err)
    await _learn_topics(apis, ctx, [(t.topic_name, t.topic_id) for t in r.topic_states
                                    if any(p.leader != LEADER_DURING_DELETE for p in t.partition_states)])
    brokers = {}
    for lb in r.live_brokers:
        # the client listener: the first endpoint that is not the inter-broker one (the controller sends it first)
        client = next((e for e in lb.endpoints if e.listener != "INTERNAL"), lb.endpoints[0] if lb.endpoints else None)
        if client is None:
            continue
        others = [[e.listener, e.host, e.port] for e in lb.endpoints if e is not client]
        brokers[lb.id] = BrokerInfo(lb.id, client.host, client.port, lb.rack, others, listener=client.listener)
    apis.metadata_cache.brokers = brokers
    for t in r.topic_states:
        if any(p.leader == LEADER_DURING_DELETE for p in t.partition_states):
            apis.metadata_cache.forget_topic(t.topic_name)
            continue
        for ps in t.partition_states:
            _upsert(apis, t.topic_name, ps.partition_index, PartitionInfo(
                index=ps.partition_index, replicas=list(ps.replicas), leader=ps.leader, leader_epoch=ps.leader_epoch,
                isr=list(ps.isr), partition_epoch=ps.zk_version))
            if ps.leader == apis.node_id:  # an ISR the controller changed (a follower gone, an AlterPartition)
                apis.replica_manager.on_isr_changed(t.topic_name, ps.partition_index, list(ps.isr), ps.zk_version)
    for fn in apis.metadata_cache.listeners:
        fn(None, apis.metadata_cache)
    return UpdateMetadataResponse(version=v, error_code=0)


async def handle_stop_replica(apis: KafkaApis, ctx: RequestContext):
    r, v = ctx.body, ctx.version
    P = StopReplicaResponse.StopReplicaPartitionError
    err = _fenced(apis, ctx)
    if err:
        return StopReplicaResponse(version=v, error_code=err, partition_errors=[])
    out = []
    for t in r.topic_states:
        for ps in t.partition_states:
            apis.replica_manager.stop_replica(t.topic_name, ps.partition_index, delete=bool(ps.delete_partition))
            out.append(P(topic_name=t.topic_name, partition_index=ps.partition_index, error_code=0))
    apis.group_coordinator.on_metadata(apis.metadata_cache)
    apis.txn_coordinator.on_metadata(apis.metadata_cache)
    return StopReplicaResponse(version=v, error_code=0, partition_errors=out)


async def handle_controlled_shutdown(apis: KafkaApis, ctx: RequestContext):
    r, v = ctx.body, ctx.version
    R = ControlledShutdownResponse.RemainingPartition
    epoch = r.broker_epoch if v >= 2 else -1  # v0-1 carry none: not checked, as Kafka's controller
    err, left = await apis.admin.controlled_shutdown(r.broker_id, epoch)
    log.info("controlled_shutdown.request", broker=r.broker_id, error=E(err).name if err else None,
             remaining=len(left))
    return ControlledShutdownResponse(version=v, error_code=err, remaining_partitions=[
        R(topic_name=t, partition_index=p) for t, p in left])


async def handle_alter_partition(apis: KafkaApis, ctx: RequestContext):
    """AlterPartition (the controller taking a partition leader's new ISR): see ZkController.alter_partition."""
    r, v = ctx.body, ctx.version
    T, P = AlterPartitionResponse.TopicData, AlterPartitionResponse.TopicData.PartitionData
    items = [(t.topic_name, p.partition_index, p.leader_epoch, list(p.new_isr), p.partition_epoch)
             for t in r.topics for p in t.partitions]
    err, out = await apis.admin.alter_partition(r.broker_id, r.broker_epoch, items)
    if err:
        return AlterPartitionResponse(version=v, throttle_time_ms=0, error_code=err, topics=[])
    topics: dict[str, list] = {}
    for topic, index, code, leader, leader_epoch, isr, partition_epoch in out:
        topics.setdefault(topic, []).append(P(partition_index=index, error_code=code, leader_id=leader,
                                              leader_epoch=leader_epoch, isr=isr, leader_recovery_state=0,
                                              partition_epoch=partition_epoch))
    return AlterPartitionResponse(version=v, throttle_time_ms=0, error_code=0,
                                  topics=[T(topic_name=t, partitions=ps) for t, ps in topics.items()])
