"""Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, InitProducerId: the data path."""
from __future__ import annotations

import trio

from ...security.authorizer import Op, ResourceType
from ...wire.errors import E
from ...storage.batch import transactional_header
from ..replica_manager import AppendOutcome
from ...wire.fetch_response import FetchResponseData, PartitionData, TopicData
from ...wire.produce_response import PartitionAnswer, ProduceAnswer, TopicAnswer
from ...network.peer import wait_unless_peer_closed
from ..context import RequestContext, now_ms
from ..fetch_session import FINAL_EPOCH, ZERO_UUID, PartitionRequest, TopicIdPartition
from ..kafka_apis import KafkaApis
from .leader_hints import fill_fetch, fill_produce, follow
from ...wire.lazy_kafka import lazy_names

# kafka-python's classes, imported on their API's first request (wire/lazy_kafka.py LazyName)
ListOffsetsResponse, OffsetForLeaderEpochResponse = lazy_names(
    globals(), "kafka.protocol.consumer.offsets", "ListOffsetsResponse", "OffsetForLeaderEpochResponse")
(InitProducerIdResponse,) = lazy_names(globals(), "kafka.protocol.producer.transaction", "InitProducerIdResponse")


# -- Produce -------------------------------------------------------------------
async def handle_produce(apis: KafkaApis, ctx: RequestContext):
    body = ctx.body
    rm = apis.replica_manager
    acks = body.acks
    topics = []
    now = rm.log_now_ms()  # the log clock: LogAppendTime, the time index, segment.ms
    waits = []
    # Kafka's handleProduceRequest: transactional records need WRITE on the transactional id (else the whole
    # request fails), each topic WRITE (else its partitions fail)
    tid = body.transactional_id if ctx.version >= 3 else None
    transactional = apis.authorizing(ctx) and any(  # Kafka's RequestUtils.hasTransactionalRecords
        transactional_header(pd.records) is not None for td in body.topic_data for pd in td.partition_data)
    if transactional and (tid is None or not apis.authorized(ctx, Op.WRITE, ResourceType.TRANSACTIONAL_ID, tid)):
        return ProduceAnswer([TopicAnswer(td.name, [
            PartitionAnswer(pd.index, int(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), -1, -1, -1)
            for pd in td.partition_data]) for td in body.topic_data])
    writable = apis.authorize(ctx, Op.WRITE, ResourceType.TOPIC, (td.name for td in body.topic_data))
    unverified = await _verify_transaction(apis, ctx, writable)
    for td in body.topic_data:
        name = td.name
        parts = []
        if name in writable and apis.metadata_cache.topic(name) is None and (
                apis.authorized_cluster(ctx, Op.CREATE, False)
                or apis.authorized(ctx, Op.CREATE, ResourceType.TOPIC, name)):
            await apis.maybe_auto_create_topic(name)
        for pd in td.partition_data:
            if name not in writable:
                out = AppendOutcome(error=int(E.TOPIC_AUTHORIZATION_FAILED))
            elif (name, pd.index) in unverified:
                code, message = unverified[(name, pd.index)]
                out = AppendOutcome(error=code, error_message=message)
            else:
                out = await rm.append_records(apis.metadata_cache, name, pd.index, pd.records or b"", acks=acks,
                                              now_ms=now, produce_version=ctx.version)
                # the request's records (views of its frame) are not needed past here, while its answer may wait
                # for the fsync or the ISR: the frame is freed now, not when the answer leaves
                pd.records = None
            if out.error:
                ctx.log.info("produce.rejected", topic=name, partition=pd.index, error=E(out.error).name,
                             message=out.log_message or out.error_message)
                P_errs = [PartitionAnswer.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                          for i, m in out.record_errors] if out.record_errors else ()
                part = PartitionAnswer(pd.index, int(out.error), out.base_offset, out.log_append_time_ms,
                                       out.log_start_offset, P_errs, out.error_message)
            else:  # (positional: a class called with keywords builds a dict of them)
                part = PartitionAnswer(pd.index, 0, out.base_offset, out.log_append_time_ms, out.log_start_offset)
            parts.append(part)
            # answered once written (and fsynced), and with acks=all on a replicated partition once the ISR has it
            if out.durable_wait is not None or (not out.error and acks == -1 and rm.replicated(name, pd.index)):
                waits.append((out.durable_wait, out.last_offset, name, part))
        topics.append(TopicAnswer(name, parts))
    if acks == 0:  # no answer: the writes and fsyncs run in a worker all the same, whatever the connection does
        rm.complete_in_background([write for write, *_ in waits if write is not None])
        return None
    if waits:
        deadline = trio.current_time() + max(0, body.timeout_ms) / 1000.0

        def fail(part, code: int) -> None:
            part.error_code, part.base_offset = int(code), -1
            part.log_append_time_ms = part.log_start_offset = -1

        async def fsynced():
            for write, last_offset, topic, part in waits:
                # Kafka's DelayedProduce: written (and fsynced), with acks=all in the whole ISR, or an error
                code = await rm.complete_produce(topic, part.index, write, last_offset, acks_all=acks == -1,
                                                 deadline=deadline)
                if code == E.KAFKA_STORAGE_ERROR:  # the write failed: the log dir is offline
                    ctx.log.warning("produce.failed", topic=topic, partition=part.index, error=E(code).name)
                elif code:
                    ctx.log.info("produce.not_replicated", topic=topic, partition=part.index, error=E(code).name)
                if code:
                    fail(part, code)
            fill_produce(apis, ctx.version, response, ctx.listener)  # KIP-951: after the waits (their errors too)
        ctx.before_send.append(fsynced)
    response = ProduceAnswer(topics)
    if not waits:
        fill_produce(apis, ctx.version, response, ctx.listener)  # KIP-951: a NOT_LEADER_OR_FOLLOWER: the leader
    return response


# KIP-890 part 1: verification errors as a Produce answers them (Kafka's ReplicaManager), by produce version
_RETRY_AS_NOT_ENOUGH_REPLICAS = (E.CONCURRENT_TRANSACTIONS, E.NETWORK_EXCEPTION, E.COORDINATOR_LOAD_IN_PROGRESS,
                                 E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR)
TRANSACTION_ABORTABLE_SINCE = 11  # Produce v11 (KIP-890): older producers get INVALID_TXN_STATE


def _verification_error(code: int, version: int) -> tuple[int, str | None]:
    if code == E.PRODUCER_FENCED:
        return int(E.INVALID_PRODUCER_EPOCH), None
    if code == E.TRANSACTION_ABORTABLE and version < TRANSACTION_ABORTABLE_SINCE:
        code = E.INVALID_TXN_STATE
    if code in _RETRY_AS_NOT_ENOUGH_REPLICAS:
        return int(E.NOT_ENOUGH_REPLICAS), ("Unable to verify the partition has been added to the transaction. "
                                            f"Underlying error: {E(code).name}")
    if code == E.INVALID_TXN_STATE:
        return int(code), "Partition was not added to the transaction"
    return int(code), None


async def _verify_transaction(apis: KafkaApis, ctx: RequestContext, writable
                              ) -> dict[tuple[str, int], tuple[int, str | None]]:
    """KIP-890 part 1 (transaction.partition.verification.enable, on by default in Kafka 3.6+): a transactional
    batch to a partition where its producer has no ongoing transaction yet is appended only if the transaction
    coordinator says the partition was added to the transaction, so a late or stray write can leave no hanging
    transaction. -> the refused partitions with their error and message."""
    body = ctx.body
    tid = body.transactional_id if ctx.version >= 3 else None
    if not tid:
        return {}
    need: dict[tuple[int, int], list[tuple[str, int]]] = {}
    for td in body.topic_data:
        if td.name not in writable:
            continue
        for pd in td.partition_data:
            h = transactional_header(pd.records)
            if h is not None and apis.replica_manager.needs_txn_verification(td.name, pd.index, h.producer_id,
                                                                             h.producer_epoch):
                need.setdefault((h.producer_id, h.producer_epoch), []).append((td.name, pd.index))
    out = {}
    for (pid, epoch), parts in need.items():
        codes = await apis.txn_coordinator.verify(tid, pid, epoch, parts)
        for tp, code in codes.items():
            if code:
                out[tp] = _verification_error(code, ctx.version)
                ctx.log.info("produce.not_in_transaction", transactional_id=tid, topic=tp[0], partition=tp[1],
                             producer_id=pid, producer_epoch=epoch, error=E(code).name)
    return out


# -- Fetch ---------------------------------------------------------------------
async def handle_fetch(apis: KafkaApis, ctx: RequestContext):
    """Kafka's handleFetchRequest: the fetch session context (server/fetch_session.py) says which partitions
    to read -- the request's, or an incremental session's -- and which of them the response carries."""
    body = ctx.body
    v = ctx.version
    rm = apis.replica_manager
    md = apis.metadata_cache
    # a follower's fetch (Kafka: replica id in the body, in ReplicaState from v15): reads up to the log end
    # (a tagged field from v15: absent for consumers)
    replica_id = body.replica_id if v < 15 else (body.replica_state.replica_id if body.replica_state else -1)
    fetch_data, to_forget = _fetch_data(body, v, md)

    def topic_name(topic_id):
        meta = md.topic_by_id(topic_id)
        return meta.name if meta is not None else None
    context = apis.fetch_manager.new_context(
        v, body.session_id if v >= 7 else 0, body.session_epoch if v >= 7 else FINAL_EPOCH, replica_id >= 0,
        fetch_data, to_forget, topic_name, now_ms())
    # Kafka's KafkaApis: a partition of an unknown topic id, a topic not authorized (READ; a follower's fetch needs
    # CLUSTER_ACTION) or an unknown topic is answered at once (after the others)
    parts = list(context.partitions())
    if replica_id >= 0:
        readable = {tp.topic for tp, _ in parts} if apis.authorized_cluster(ctx, Op.CLUSTER_ACTION) else set()
    else:
        readable = apis.authorize(ctx, Op.READ, ResourceType.TOPIC,
                                  (tp.topic for tp, _ in parts if tp.topic is not None))
    interesting, erroneous = [], []
    for tp, req in parts:
        if tp.topic is None:
            erroneous.append((tp, PartitionData(tp.partition, int(E.UNKNOWN_TOPIC_ID), -1, -1, -1)))
        elif tp.topic not in readable:
            erroneous.append((tp, PartitionData(tp.partition, int(E.TOPIC_AUTHORIZATION_FAILED), -1, -1, -1)))
        elif md.partition(tp.topic, tp.partition) is None:
            erroneous.append((tp, PartitionData(tp.partition, int(E.UNKNOWN_TOPIC_OR_PARTITION), -1, -1, -1)))
        else:
            interesting.append((tp, req))
    # a Fetch with nothing to read is answered at once, whatever max_wait_ms (Kafka's handleFetchRequest:
    # `if (interesting.isEmpty) processResponseCallback(Seq.empty)`)
    max_wait = max(0, body.max_wait_ms) if interesting else 0
    min_bytes = body.min_bytes
    max_bytes = body.max_bytes if v >= 3 else 2**31 - 1
    deadline = trio.current_time() + max_wait / 1000.0
    # the partitions this fetch reads: an append to any of them ends the wait (Kafka's DelayedFetch)
    watched = [(tp.topic, tp.partition) for tp, _ in interesting]
    while True:
        with rm.purgatory.watching(watched) as event:  # DelayedFetch: an append to any of them wakes it
            read = _read_fetch(apis, body, v, interesting, max_bytes, replica_id)
            if max_wait == 0:
                break
            # what the response would carry (an incremental session leaves unchanged partitions out): only its
            # bytes count toward min_bytes; an error or a preferred read replica answers at once (DelayedFetch),
            # and so does a context another request of its session made stale (it can carry nothing)
            carried = context.carried(read)
            if (sum(p.records_size for _, p in carried) >= min_bytes
                    or any(p.error_code or p.preferred_read_replica >= 0 for _, p in carried)
                    or getattr(context, "stale", False)):
                break
            with trio.move_on_at(deadline):
                await wait_unless_peer_closed(event.wait)  # a client gone ends the wait (and the connection)
        if trio.current_time() >= deadline:
            read = _read_fetch(apis, body, v, interesting, max_bytes, replica_id)
            break
    # the session records what this response carries: once per answered request
    error, session_id, updates = context.update_and_generate(read + erroneous)
    # encoded by wire/fetch_response.py: record batches go to the socket as the log holds them
    response = FetchResponseData(responses=_group_by_topic(updates, v), error_code=error, session_id=session_id)
    fill_fetch(apis, v, response, ctx.listener)  # KIP-951: a NOT_LEADER_OR_FOLLOWER names the current leader
    return response


def _fetch_data(body, v: int, md) -> tuple[dict[TopicIdPartition, PartitionRequest], list[TopicIdPartition]]:
    """The request's partitions (Kafka's FetchRequest.fetchData: in order, one entry per partition, names resolved
    from topic ids from v13 -- None when unknown) and, from v7, its forgotten ones."""
    def tip(ft_topic, ft_topic_id, partition) -> TopicIdPartition:
        if v >= 13:
            tid = ft_topic_id if ft_topic_id is not None else ZERO_UUID
            meta = md.topic_by_id(tid)
            return TopicIdPartition(tid, meta.name if meta is not None else None, partition)
        return TopicIdPartition(ZERO_UUID, ft_topic, partition)
    data: dict[TopicIdPartition, PartitionRequest] = {}
    for ft in body.topics or ():
        for fp in ft.partitions or ():
            data[tip(ft.topic if v < 13 else None, ft.topic_id if v >= 13 else None, fp.partition)] = PartitionRequest(
                fp.fetch_offset, fp.log_start_offset if v >= 5 else -1, fp.partition_max_bytes,
                fp.current_leader_epoch if v >= 9 else -1, fp.last_fetched_epoch if v >= 12 else -1)
    forget = []
    if v >= 7:
        for ft in body.forgotten_topics_data or ():
            forget += [tip(ft.topic if v < 13 else None, ft.topic_id if v >= 13 else None, p)
                       for p in ft.partitions or ()]
    return data, forget


def _read_fetch(apis, body, v: int, interesting, max_bytes: int, replica_id: int = -1):
    """[(TopicIdPartition, PartitionData)] read from the logs, in the context's order, within max_bytes."""
    rm = apis.replica_manager
    md = apis.metadata_cache
    now = now_ms()
    out = []
    total = 0
    for tp, req in interesting:
        name = tp.topic
        if tp.topic_id.int:  # by topic id (v13+)
            meta = md.topic(name)
            if meta is not None and meta.topic_id != tp.topic_id:
                # a session's topic deleted and created again under its name (Kafka's ReplicaManager check)
                out.append((tp, PartitionData(tp.partition, int(E.INCONSISTENT_TOPIC_ID), -1, -1, -1)))
                continue
        budget = min(req.max_bytes, max(0, max_bytes - total))
        # Kafka: the first non-empty partition gets at least one whole batch
        if replica_id >= 0:
            r = rm.read_for_follower(md, name, tp.partition, replica_id, req.fetch_offset, req.current_leader_epoch,
                                     budget, now)
        else:
            r = rm.read(md, name, tp.partition, req.fetch_offset, req.current_leader_epoch, budget,
                        min_one=total == 0, client_rack=(body.rack_id or "") if v >= 11 else None,
                        read_committed=body.isolation_level == 1)
        p = PartitionData(tp.partition, int(r.error), r.high_watermark, r.last_stable_offset, r.log_start_offset,
                          aborted_transactions=r.aborted_transactions,
                          preferred_read_replica=r.preferred_read_replica,
                          records=r.records if r.records is not None else ())  # Kafka: empty, never null
        follow(apis, v, replica_id, name, p)  # a follower a test set: the consumer is sent there
        total += p.records_size
        out.append((tp, p))
    return out


def _group_by_topic(updates, v: int) -> list[TopicData]:
    """Kafka's FetchResponse.of: consecutive partitions of one topic share a topic entry."""
    responses: list[TopicData] = []
    for tp, p in updates:
        last = responses[-1] if responses else None
        if last is not None and last.topic == tp.topic and (v < 13 or last.topic_id == tp.topic_id):
            last.partitions.append(p)
        else:
            responses.append(TopicData(tp.topic, tp.topic_id if v >= 13 else None, [p]))
    return responses


# -- ListOffsets -----------------------------------------------------------------
async def handle_list_offsets(apis: KafkaApis, ctx: RequestContext):
    body = ctx.body
    v = ctx.version
    rm = apis.replica_manager
    T = ListOffsetsResponse.ListOffsetsTopicResponse
    P = T.ListOffsetsPartitionResponse
    topics = []
    described = apis.authorize(ctx, Op.DESCRIBE, ResourceType.TOPIC, (lt.name for lt in body.topics))
    for lt in body.topics:
        parts = []
        for lp in lt.partitions:
            if lt.name not in described:
                code = int(E.TOPIC_AUTHORIZATION_FAILED)
                parts.append(P(partition_index=lp.partition_index, error_code=code, old_style_offsets=[]) if v == 0
                             else P(partition_index=lp.partition_index, error_code=code, timestamp=-1, offset=-1,
                                    leader_epoch=-1))
                continue
            err, ts_out, off, le = rm.fetch_offset_for_timestamp(
                apis.metadata_cache, lt.name, lp.partition_index, lp.timestamp,
                lp.current_leader_epoch if v >= 4 else -1,
                max_timestamp=v >= 7, read_committed=v >= 2 and body.isolation_level == 1)
            if v == 0:
                parts.append(P(partition_index=lp.partition_index, error_code=int(err),
                               old_style_offsets=[off] if off >= 0 else []))
            else:
                parts.append(P(partition_index=lp.partition_index, error_code=int(err), timestamp=ts_out, offset=off,
                               leader_epoch=le))
        topics.append(T(name=lt.name, partitions=parts))
    return ListOffsetsResponse(version=v, throttle_time_ms=0, topics=topics)


# -- OffsetForLeaderEpoch ----------------------------------------------------------
async def handle_offset_for_leader_epoch(apis: KafkaApis, ctx: RequestContext):
    body = ctx.body
    rm = apis.replica_manager
    T = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
    P = T.EpochEndOffset
    topics = []
    described = apis.authorize(ctx, Op.DESCRIBE, ResourceType.TOPIC, (t.topic for t in body.topics))
    for t in body.topics:
        parts = []
        for p in t.partitions:
            if t.topic not in described:
                parts.append(P(error_code=int(E.TOPIC_AUTHORIZATION_FAILED), partition=p.partition, leader_epoch=-1,
                               end_offset=-1))
                continue
            err, epoch, end = rm.last_offset_for_leader_epoch(apis.metadata_cache, t.topic, p.partition,
                                                              p.current_leader_epoch, p.leader_epoch)
            parts.append(P(error_code=int(err), partition=p.partition, leader_epoch=epoch, end_offset=end))
        topics.append(T(topic=t.topic, partitions=parts))
    return OffsetForLeaderEpochResponse(version=ctx.version, throttle_time_ms=0, topics=topics)


# -- InitProducerId ------------------------------------------------------------------
async def handle_init_producer_id(apis: KafkaApis, ctx: RequestContext):
    body = ctx.body
    v = ctx.version
    if body.transactional_id is not None:  # a transactional producer: its transaction coordinator answers
        if not apis.authorized(ctx, Op.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
            return InitProducerIdResponse(version=v, throttle_time_ms=0, producer_id=-1, producer_epoch=-1,
                                          error_code=int(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
        from .txn import init_transactional_producer_id
        return await init_transactional_producer_id(apis, ctx)
    # Kafka: an idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic
    if (not apis.authorized_cluster(ctx, Op.IDEMPOTENT_WRITE, False)
            and not apis.authorize_any(ctx, Op.WRITE, ResourceType.TOPIC)):
        return InitProducerIdResponse(version=v, throttle_time_ms=0, producer_id=-1, producer_epoch=-1,
                                      error_code=int(E.CLUSTER_AUTHORIZATION_FAILED))
    # An idempotent producer (no transactional id) always gets a new producer id at epoch 0, whatever id and epoch
    # it names (v3+): Kafka's TransactionCoordinator.handleInitProducerId "blindly accepts" it. KIP-360's epoch bump
    # of an idempotent producer is the client's own (it sends the next epoch, which the partitions take).
    pid = await apis.admin.allocate_producer_id()
    return InitProducerIdResponse(version=v, throttle_time_ms=0, error_code=0, producer_id=pid, producer_epoch=0)


# -- DeleteRecords ------------------------------------------------------------------------
async def handle_delete_records(apis: KafkaApis, ctx: RequestContext):
    from kafka.protocol.admin import DeleteRecordsResponse
    rm = apis.replica_manager
    T = DeleteRecordsResponse.DeleteRecordsTopicResult
    P = T.DeleteRecordsPartitionResult
    topics, done = [], []
    deletable = apis.authorize(ctx, Op.DELETE, ResourceType.TOPIC, (t.name for t in ctx.body.topics))
    for t in ctx.body.topics:
        parts = []
        for p in t.partitions:
            if t.name not in deletable:
                parts.append(P(partition_index=p.partition_index, low_watermark=-1,
                               error_code=int(E.TOPIC_AUTHORIZATION_FAILED)))
                continue
            err, low = rm.delete_records(apis.metadata_cache, t.name, p.partition_index, p.offset)
            parts.append(P(partition_index=p.partition_index, low_watermark=low, error_code=int(err)))
            if not err:
                done.append((t.name, p.partition_index))
        topics.append(T(name=t.name, partitions=parts))
    await rm.rename_deleted_segments(done)  # (in a worker thread)
    return DeleteRecordsResponse(version=ctx.version, throttle_time_ms=0, topics=topics)
