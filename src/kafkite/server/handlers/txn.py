"""InitProducerId with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit and
WriteTxnMarkers: thin shells over the transaction coordinator (and, for TxnOffsetCommit, the group coordinator).

Fencing answers PRODUCER_FENCED (KIP-588) to the versions that know it, INVALID_PRODUCER_EPOCH to older ones, as
Kafka's KafkaApis does: InitProducerId below v4, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn below v2,
TxnOffsetCommit below v3.
"""
from __future__ import annotations

from ...security.authorizer import Op, ResourceType
from ...wire.errors import E
from ..context import RequestContext
from ..transaction_coordinator_service import write_markers_locally
from ..kafka_apis import KafkaApis
from ...wire.lazy_kafka import lazy_names

# kafka-python's classes, imported on the first transactional request (wire/lazy_kafka.py LazyName)
(AddOffsetsToTxnResponse, AddPartitionsToTxnResponse, EndTxnResponse, InitProducerIdResponse, TxnOffsetCommitResponse,
 WriteTxnMarkersResponse) = lazy_names(globals(), "kafka.protocol.producer.transaction", "AddOffsetsToTxnResponse",
                                       "AddPartitionsToTxnResponse", "EndTxnResponse", "InitProducerIdResponse",
                                       "TxnOffsetCommitResponse", "WriteTxnMarkersResponse")

FENCED_SINCE = {"InitProducerId": 4, "AddPartitionsToTxn": 2, "AddOffsetsToTxn": 2, "EndTxn": 2,
                "TxnOffsetCommit": 3}


_TXN_DENIED = int(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)


def _txn_ok(apis, ctx, tid) -> bool:
    return apis.authorized(ctx, Op.WRITE, ResourceType.TRANSACTIONAL_ID, tid)


def _fenced(code: int, api: str, version: int) -> int:
    if code == E.PRODUCER_FENCED and version < FENCED_SINCE[api]:
        return int(E.INVALID_PRODUCER_EPOCH)
    return int(code)


async def init_transactional_producer_id(apis: KafkaApis, ctx: RequestContext):
    body, v = ctx.body, ctx.version
    pid, epoch = (body.producer_id, body.producer_epoch) if v >= 3 else (-1, -1)
    r = await apis.txn_coordinator.init_producer_id(body.transactional_id, body.transaction_timeout_ms, pid, epoch)
    if r.error:
        ctx.log.info("init_producer_id.refused", transactional_id=body.transactional_id, error=E(r.error).name)
    return InitProducerIdResponse(version=v, throttle_time_ms=0, error_code=_fenced(r.error, "InitProducerId", v),
                                  producer_id=r.producer_id if not r.error else -1,
                                  producer_epoch=r.producer_epoch if not r.error else -1)


async def handle_add_partitions_to_txn(apis: KafkaApis, ctx: RequestContext):
    body, v = ctx.body, ctx.version
    T = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
    P = T.AddPartitionsToTxnPartitionResult
    if v >= 4:  # the brokers' batched form (the inter-broker listener only): KIP-890 part 1's verification
        return await _add_partitions_batched(apis, ctx)
    wanted = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
    writable = apis.authorize(ctx, Op.WRITE, ResourceType.TOPIC, {t for t, _ in wanted})
    unknown = {tp for tp in wanted if tp[0] in writable and apis.metadata_cache.partition(*tp) is None}
    denied = {tp for tp in wanted if tp[0] not in writable}
    if not _txn_ok(apis, ctx, body.v3_and_below_transactional_id):
        codes = {tp: _TXN_DENIED for tp in wanted}
    elif unknown or denied:  # Kafka: the unauthorized / unknown ones answer their error, the rest OPERATION_NOT_ATTEMPTED
        codes = {tp: int(E.TOPIC_AUTHORIZATION_FAILED if tp in denied else E.UNKNOWN_TOPIC_OR_PARTITION
                         if tp in unknown else E.OPERATION_NOT_ATTEMPTED) for tp in wanted}
    else:
        err = await apis.txn_coordinator.add_partitions(body.v3_and_below_transactional_id,
                                                        body.v3_and_below_producer_id,
                                                        body.v3_and_below_producer_epoch, wanted)
        if err:
            ctx.log.info("add_partitions_to_txn.refused", transactional_id=body.v3_and_below_transactional_id,
                         error=E(err).name)
        codes = {tp: _fenced(err, "AddPartitionsToTxn", v) for tp in wanted}
    by_topic: dict[str, list] = {}
    for (t, p), code in codes.items():
        by_topic.setdefault(t, []).append(P(partition_index=p, partition_error_code=code))
    return AddPartitionsToTxnResponse(version=v, throttle_time_ms=0, results_by_topic_v3_and_below=[
        T(name=t, results_by_partition=ps) for t, ps in by_topic.items()])


async def _add_partitions_batched(apis: KafkaApis, ctx: RequestContext):
    """AddPartitionsToTxn v4: a partition leader asks whether partitions are in transactions (verify only), or adds
    them (a broker adding on a client's behalf). Each transaction is answered on its own, as Kafka's coordinator."""
    body, v = ctx.body, ctx.version
    R = AddPartitionsToTxnResponse.AddPartitionsToTxnResult
    T = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
    P = T.AddPartitionsToTxnPartitionResult
    results = []
    for txn in body.transactions:
        wanted = [(t.name, p) for t in txn.topics for p in t.partitions]
        if txn.verify_only:
            codes = await apis.txn_coordinator.verify(txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted)
        else:
            err = await apis.txn_coordinator.add_partitions(txn.transactional_id, txn.producer_id, txn.producer_epoch,
                                                            wanted)
            codes = {tp: int(err) for tp in wanted}
        by_topic: dict[str, list] = {}
        for (t, p), code in codes.items():
            by_topic.setdefault(t, []).append(P(partition_index=p, partition_error_code=code))
        results.append(R(transactional_id=txn.transactional_id,
                         topic_results=[T(name=t, results_by_partition=ps) for t, ps in by_topic.items()]))
    return AddPartitionsToTxnResponse(version=v, throttle_time_ms=0, error_code=0, results_by_transaction=results)


async def handle_add_offsets_to_txn(apis: KafkaApis, ctx: RequestContext):
    body, v = ctx.body, ctx.version
    # the group's __consumer_offsets partition by its hash, as Kafka's partitionFor: nothing is created here
    if not _txn_ok(apis, ctx, body.transactional_id):
        err = _TXN_DENIED
    elif not apis.authorized(ctx, Op.READ, ResourceType.GROUP, body.group_id):
        err = int(E.GROUP_AUTHORIZATION_FAILED)
    elif not body.group_id:
        err = int(E.INVALID_GROUP_ID)
    else:
        err = await apis.txn_coordinator.add_partitions(body.transactional_id, body.producer_id, body.producer_epoch,
                                                        [apis.txn_coordinator.offsets_partition(body.group_id)])
    return AddOffsetsToTxnResponse(version=v, throttle_time_ms=0, error_code=_fenced(err, "AddOffsetsToTxn", v))


async def handle_end_txn(apis: KafkaApis, ctx: RequestContext):
    body, v = ctx.body, ctx.version
    if not _txn_ok(apis, ctx, body.transactional_id):
        return EndTxnResponse(version=v, throttle_time_ms=0, error_code=_TXN_DENIED)
    err = await apis.txn_coordinator.end_txn(body.transactional_id, body.producer_id, body.producer_epoch,
                                             body.committed)
    if err:
        ctx.log.info("end_txn.refused", transactional_id=body.transactional_id, error=E(err).name)
    return EndTxnResponse(version=v, throttle_time_ms=0, error_code=_fenced(err, "EndTxn", v))


# Kafka's maybeConvertOffsetCommitError for a verification that failed
_OFFSET_COMMIT_ERROR = {E.NETWORK_EXCEPTION: E.COORDINATOR_LOAD_IN_PROGRESS,
                        E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
                        E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
                        E.REQUEST_TIMED_OUT: E.COORDINATOR_NOT_AVAILABLE,
                        E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR, E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR}
TXN_OFFSET_COMMIT_ABORTABLE_SINCE = 5  # TxnOffsetCommit v5 (KIP-890) knows TRANSACTION_ABORTABLE; not served yet


async def _verify_offsets_partition(apis: KafkaApis, ctx: RequestContext) -> int:
    """KIP-890 part 1 for TxnOffsetCommit (Kafka's GroupCoordinator.handleTxnCommitOffsets): the group's
    __consumer_offsets partition must be in the producer's ongoing transaction (AddOffsetsToTxn), at its current
    epoch, unless the producer already wrote there in this transaction -> 0 or the error every partition gets."""
    body, v = ctx.body, ctx.version
    if not body.group_id or not body.transactional_id:
        return 0  # the group coordinator answers these
    topic, partition = apis.txn_coordinator.offsets_partition(body.group_id)
    if not apis.replica_manager.needs_txn_verification(topic, partition, body.producer_id, body.producer_epoch):
        return 0
    code = (await apis.txn_coordinator.verify(body.transactional_id, body.producer_id, body.producer_epoch,
                                              [(topic, partition)]))[(topic, partition)]
    if not code:
        return 0
    ctx.log.info("txn_offset_commit.not_in_transaction", transactional_id=body.transactional_id,
                 group_id=body.group_id, producer_id=body.producer_id, producer_epoch=body.producer_epoch,
                 error=E(code).name)
    code = _OFFSET_COMMIT_ERROR.get(code, code)
    if code == E.TRANSACTION_ABORTABLE and v < TXN_OFFSET_COMMIT_ABORTABLE_SINCE:
        code = E.INVALID_TXN_STATE
    return _fenced(code, "TxnOffsetCommit", v)


async def handle_txn_offset_commit(apis: KafkaApis, ctx: RequestContext):
    body, v = ctx.body, ctx.version
    T = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
    P = T.TxnOffsetCommitResponsePartition
    if not _txn_ok(apis, ctx, body.transactional_id):
        err = _TXN_DENIED
    elif not apis.authorized(ctx, Op.READ, ResourceType.GROUP, body.group_id):
        err = int(E.GROUP_AUTHORIZATION_FAILED)
    else:
        err = await _verify_offsets_partition(apis, ctx)
    if err:
        return TxnOffsetCommitResponse(version=v, throttle_time_ms=0, topics=[
            T(name=t.name, partitions=[P(partition_index=p.partition_index, error_code=err) for p in t.partitions])
            for t in body.topics])
    readable = apis.authorize(ctx, Op.READ, ResourceType.TOPIC, (t.name for t in body.topics))
    offsets = [(t.name, p.partition_index, p.committed_offset, p.committed_leader_epoch if v >= 2 else -1,
                p.committed_metadata) for t in body.topics for p in t.partitions if t.name in readable]
    rows = [] if not offsets else await apis.group_coordinator.txn_commit_offsets(
        group_id=body.group_id, producer_id=body.producer_id, producer_epoch=body.producer_epoch,
        generation_id=body.generation_id if v >= 3 else -1, member_id=body.member_id if v >= 3 else "",
        group_instance_id=body.group_instance_id if v >= 3 else None, offsets=offsets)
    rows = list(rows) + [(t.name, p.partition_index, int(E.TOPIC_AUTHORIZATION_FAILED)) for t in body.topics
                         for p in t.partitions if t.name not in readable]
    by_topic: dict[str, list] = {}
    for t, p, code in rows:
        by_topic.setdefault(t, []).append(P(partition_index=p, error_code=_fenced(code, "TxnOffsetCommit", v)))
    return TxnOffsetCommitResponse(version=v, throttle_time_ms=0,
                                   topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()])


async def handle_write_txn_markers(apis: KafkaApis, ctx: RequestContext):
    """From a transaction coordinator on another broker (the inter-broker listener only)."""
    body, v = ctx.body, ctx.version
    R = WriteTxnMarkersResponse.WritableTxnMarkerResult
    T = R.WritableTxnMarkerTopicResult
    P = T.WritableTxnMarkerPartitionResult
    out = []
    for m in body.markers:
        parts = [(t.name, p) for t in m.topics for p in t.partition_indexes]
        codes = await write_markers_locally(apis.replica_manager, apis.group_coordinator, apis.metadata_cache,
                                            producer_id=m.producer_id, producer_epoch=m.producer_epoch,
                                            commit=m.transaction_result, coordinator_epoch=m.coordinator_epoch,
                                            partitions=parts)
        by_topic: dict[str, list] = {}
        for (t, p), code in codes.items():
            by_topic.setdefault(t, []).append(P(partition_index=p, error_code=code))
        out.append(R(producer_id=m.producer_id, topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()]))
    return WriteTxnMarkersResponse(version=v, markers=out)


async def handle_describe_transactions(apis: KafkaApis, ctx: RequestContext):
    from kafka.protocol.admin.transactions import DescribeTransactionsResponse
    S = DescribeTransactionsResponse.TransactionState
    coord = apis.txn_coordinator.coordinator
    out = []
    for tid in ctx.body.transactional_ids:
        err, m = coord.describe(tid)
        if not apis.authorized(ctx, Op.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
            err = _TXN_DENIED
        if err:
            out.append(S(error_code=int(err), transactional_id=tid, transaction_state="", transaction_timeout_ms=0,
                         transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1, topics=[]))
            continue
        topics: dict[str, list[int]] = {}
        described = apis.authorize(ctx, Op.DESCRIBE, ResourceType.TOPIC, {t for t, _ in m.partitions})
        for t, p in sorted(tp for tp in m.partitions if tp[0] in described):
            topics.setdefault(t, []).append(p)
        out.append(S(error_code=0, transactional_id=tid, transaction_state=m.state.kafka_name,
                     transaction_timeout_ms=m.timeout_ms, transaction_start_time_ms=m.start_ms,
                     producer_id=m.producer_id, producer_epoch=m.producer_epoch,
                     topics=[S.TopicData(topic=t, partitions=ps) for t, ps in topics.items()]))
    return DescribeTransactionsResponse(version=ctx.version, throttle_time_ms=0, transaction_states=out)


async def handle_list_transactions(apis: KafkaApis, ctx: RequestContext):
    """The transactions of the __transaction_state partitions this broker leads (an admin client asks every broker),
    filtered by state names, producer ids and (v1+) how long they have been running."""
    from kafka.protocol.admin.transactions import ListTransactionsResponse
    from ...coordinator.transaction import TxnState
    from ..context import now_ms
    body, v = ctx.body, ctx.version
    names = {s.kafka_name: s for s in TxnState}
    unknown = [s for s in body.state_filters or [] if s not in names]
    states = {names[s] for s in body.state_filters or [] if s in names}
    pids = set(body.producer_id_filters or [])
    duration = body.duration_filter if v >= 1 else -1
    now = now_ms()
    rows = []
    for m in sorted(apis.txn_coordinator.coordinator.list(), key=lambda m: m.transactional_id):
        if (body.state_filters and m.state not in states) or (pids and m.producer_id not in pids):
            continue
        if duration >= 0 and (m.start_ms < 0 or now - m.start_ms < duration):
            continue
        if not apis.authorized(ctx, Op.DESCRIBE, ResourceType.TRANSACTIONAL_ID, m.transactional_id):
            continue
        rows.append(ListTransactionsResponse.TransactionState(
            transactional_id=m.transactional_id, producer_id=m.producer_id, transaction_state=m.state.kafka_name))
    return ListTransactionsResponse(version=v, throttle_time_ms=0, error_code=0, unknown_state_filters=unknown,
                                    transaction_states=rows)


async def handle_describe_producers(apis: KafkaApis, ctx: RequestContext):
    """The producers a partition's leader knows (Kafka's ReplicaManager.activeProducerState)."""
    from kafka.protocol.admin.transactions import DescribeProducersResponse
    T = DescribeProducersResponse.TopicResponse
    P = T.PartitionResponse
    topics = []
    readable = apis.authorize(ctx, Op.READ, ResourceType.TOPIC, (t.name for t in ctx.body.topics))
    for t in ctx.body.topics:
        parts = []
        for i in t.partition_indexes:
            if t.name not in readable:
                parts.append(P(partition_index=i, error_code=int(E.TOPIC_AUTHORIZATION_FAILED), error_message=None,
                               active_producers=[]))
                continue
            err = apis.replica_manager.leader_check(apis.metadata_cache, t.name, i)
            lg = apis.replica_manager.get(t.name, i)
            if err or lg is None:
                parts.append(P(partition_index=i, error_code=int(err or E.UNKNOWN_TOPIC_OR_PARTITION),
                               error_message=None, active_producers=[]))
                continue
            ps = lg.producer_state
            active = [P.ProducerState(producer_id=pid, producer_epoch=e.epoch, last_sequence=e.last_seq,
                                      last_timestamp=e.last_timestamp, coordinator_epoch=e.coordinator_epoch,
                                      current_txn_start_offset=ps.ongoing.get(pid, -1))
                      for pid, e in sorted(ps.producers.items())]
            parts.append(P(partition_index=i, error_code=0, error_message=None, active_producers=active))
        topics.append(T(name=t.name, partitions=parts))
    return DescribeProducersResponse(version=ctx.version, throttle_time_ms=0, topics=topics)
