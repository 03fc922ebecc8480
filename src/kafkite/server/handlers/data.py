"""Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, InitProducerId: the data path."""
from __future__ import annotations

import uuid

import trio
from kafka.protocol.consumer import ListOffsetsResponse, OffsetForLeaderEpochResponse
from kafka.protocol.producer import InitProducerIdResponse, ProduceResponse

from ...storage.log import OffsetOutOfRange
from ...wire.errors import E
from ...wire.fetch_response import FetchResponseData, PartitionData, TopicData
from ..context import RequestContext, now_ms

ZERO_UUID = uuid.UUID(int=0)
EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3


def _leader_check(b, topic: str, partition: int, current_leader_epoch: int = -1) -> int:
    """Kafka's partition-level checks before reading or writing: exists, we lead it, epoch matches."""
    p = b.metadata.partition(topic, partition)
    if p is None:
        return E.UNKNOWN_TOPIC_OR_PARTITION
    if p.leader != b.node_id:
        return E.NOT_LEADER_OR_FOLLOWER
    if current_leader_epoch is not None and current_leader_epoch >= 0:
        if current_leader_epoch < p.leader_epoch:
            return E.FENCED_LEADER_EPOCH
        if current_leader_epoch > p.leader_epoch:
            return E.UNKNOWN_LEADER_EPOCH
    return 0


# -- Produce -------------------------------------------------------------------
async def handle_produce(ctx: RequestContext):
    b = ctx.broker
    body = ctx.body
    rm = b.state.replicas
    T = ProduceResponse.TopicProduceResponse
    P = T.PartitionProduceResponse
    acks = body.acks
    if body.transactional_id is not None:
        ctx.log.warning("produce.transactional_unsupported", transactional_id=body.transactional_id)
    topics = []
    now = now_ms()
    durable_waits = []
    for td in body.topic_data:
        name = td.name
        parts = []
        meta = b.metadata.topic(name)
        if meta is None and b.config.get("auto.create.topics.enable"):
            from ...controller.metadata import MetadataError, validate_topic_name
            try:
                validate_topic_name(name)
                meta = b.auto_create_topic(name)
            except MetadataError:
                meta = None
        for pd in td.partition_data:
            if acks not in (0, 1, -1):
                parts.append(P(index=pd.index, error_code=int(E.INVALID_REQUIRED_ACKS), base_offset=-1,
                               log_append_time_ms=-1, log_start_offset=-1, record_errors=[]))
                continue
            if meta is not None and meta.internal and name == "__consumer_offsets":
                err = E.INVALID_TOPIC_EXCEPTION
            else:
                err = _leader_check(b, name, pd.index)
            if err:
                parts.append(P(index=pd.index, error_code=int(err), base_offset=-1, log_append_time_ms=-1,
                               log_start_offset=-1, record_errors=[]))
                continue
            pinfo = b.metadata.partition(name, pd.index)
            if acks == -1:
                lg = rm.get(name, pd.index)
                min_isr = lg.config.min_insync_replicas if lg is not None else 1
                if len(pinfo.isr) < min_isr:
                    # Kafka: acks=all needs min.insync.replicas in-sync replicas, checked before the append
                    parts.append(P(index=pd.index, error_code=int(E.NOT_ENOUGH_REPLICAS), base_offset=-1,
                                   log_append_time_ms=-1, log_start_offset=-1, record_errors=[],
                                   error_message=f"The size of the current ISR {pinfo.isr} is insufficient to "
                                                 f"satisfy the min.isr requirement of {min_isr}"))
                    continue
            # acks=0 has nobody to wait for the fsync: it is done inline
            out = rm.append(name, pd.index, pd.records or b"", now, leader_epoch=pinfo.leader_epoch,
                            defer_flush=acks != 0)
            if out.durable_wait is not None:
                durable_waits.append(out.durable_wait)
            if out.error:
                ctx.log.info("produce.rejected", topic=name, partition=pd.index, error=E(out.error).name,
                             message=out.error_message)
            P_errs = [P.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                      for i, m in (out.record_errors or [])]
            parts.append(P(index=pd.index, error_code=int(out.error), base_offset=out.base_offset,
                           log_append_time_ms=out.log_append_time_ms, log_start_offset=out.log_start_offset,
                           record_errors=P_errs, error_message=out.error_message))
        topics.append(T(name=name, partition_responses=parts))
    if acks == 0:
        return None
    if durable_waits:
        async def fsynced():
            for lg, offset in durable_waits:
                await rm.wait_durable(lg, offset)
        ctx.before_send.append(fsynced)
    return ProduceResponse(version=ctx.version, responses=topics, throttle_time_ms=0)


# -- Fetch ---------------------------------------------------------------------
async def handle_fetch(ctx: RequestContext):
    b = ctx.broker
    body = ctx.body
    v = ctx.version
    rm = b.state.replicas
    if v >= 7 and body.session_id != 0:
        # Kafkite declines incremental fetch sessions (KIP-227 permits it): every fetch is a full fetch.
        return FetchResponseData(responses=[], error_code=int(E.FETCH_SESSION_ID_NOT_FOUND))
    max_wait = max(0, body.max_wait_ms)
    min_bytes = body.min_bytes
    max_bytes = body.max_bytes if v >= 3 else 2**31 - 1
    deadline = trio.current_time() + max_wait / 1000.0
    while True:
        event = rm.event()
        responses, total = _read_fetch(b, body, v, max_bytes)
        if total >= min_bytes or max_wait == 0 or any(
                p.error_code for t in responses for p in t.partitions):
            break
        with trio.move_on_at(deadline):
            await event.wait()
        if trio.current_time() >= deadline:
            responses, total = _read_fetch(b, body, v, max_bytes)
            break
    # encoded by wire/fetch_response.py: record batches go to the socket as the log holds them
    return FetchResponseData(responses=responses)


def _read_fetch(b, body, v: int, max_bytes: int):
    rm = b.state.replicas
    responses = []
    total = 0
    for ft in body.topics:
        if v >= 13:
            meta = b.metadata.topic_by_id(ft.topic_id) if ft.topic_id is not None else None
            name = meta.name if meta is not None else None
        else:
            name = ft.topic
            meta = b.metadata.topic(name)
        parts = []
        for fp in ft.partitions:
            def empty(err, hw=-1, lso=-1, ls=-1):
                return PartitionData(fp.partition, int(err), hw, lso, ls)
            if meta is None:
                parts.append(empty(E.UNKNOWN_TOPIC_ID if v >= 13 else E.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            err = _leader_check(b, name, fp.partition, fp.current_leader_epoch if v >= 9 else -1)
            if err:
                parts.append(empty(err))
                continue
            lg = rm.get(name, fp.partition)
            hw = lg.high_watermark
            budget = min(fp.partition_max_bytes, max(0, max_bytes - total))
            min_one = total == 0  # Kafka: the first non-empty partition gets at least one whole batch
            try:
                data = lg.read_parts(fp.fetch_offset, budget if budget > 0 else 0, min_one=min_one, max_offset=hw)
            except OffsetOutOfRange:
                parts.append(empty(E.OFFSET_OUT_OF_RANGE, hw, hw, lg.log_start_offset))
                continue
            p = PartitionData(fp.partition, 0, hw, hw, lg.log_start_offset, records=data)
            total += p.records_size
            parts.append(p)
        responses.append(TopicData(name, ft.topic_id if v >= 13 else None, parts))
    return responses, total


# -- ListOffsets -----------------------------------------------------------------
async def handle_list_offsets(ctx: RequestContext):
    b = ctx.broker
    body = ctx.body
    v = ctx.version
    rm = b.state.replicas
    T = ListOffsetsResponse.ListOffsetsTopicResponse
    P = T.ListOffsetsPartitionResponse
    topics = []
    for lt in body.topics:
        parts = []
        for lp in lt.partitions:
            err = _leader_check(b, lt.name, lp.partition_index, lp.current_leader_epoch if v >= 4 else -1)
            if err:
                parts.append(P(partition_index=lp.partition_index, error_code=int(err), old_style_offsets=[],
                               timestamp=-1, offset=-1, leader_epoch=-1))
                continue
            lg = rm.get(lt.name, lp.partition_index)
            epoch = b.metadata.partition(lt.name, lp.partition_index).leader_epoch
            ts = lp.timestamp
            if ts == EARLIEST:
                r = (-1, lg.log_start_offset, epoch)
            elif ts == LATEST:
                r = (-1, lg.high_watermark, epoch)
            elif ts == MAX_TIMESTAMP and v >= 7:
                found = lg.max_timestamp_entry()
                r = (-1, -1, -1) if found is None else (found[1], found[0], found[2])
            elif ts < 0:
                parts.append(P(partition_index=lp.partition_index, error_code=int(E.UNSUPPORTED_VERSION)
                               if ts == MAX_TIMESTAMP else int(E.INVALID_REQUEST), old_style_offsets=[],
                               timestamp=-1, offset=-1, leader_epoch=-1))
                continue
            else:
                found = lg.offset_for_timestamp(ts)
                r = (-1, -1, -1) if found is None else (found[1], found[0], found[2])
            ts_out, off, le = r
            if v == 0:
                parts.append(P(partition_index=lp.partition_index, error_code=0,
                               old_style_offsets=[off] if off >= 0 else []))
            else:
                parts.append(P(partition_index=lp.partition_index, error_code=0, timestamp=ts_out, offset=off,
                               leader_epoch=le))
        topics.append(T(name=lt.name, partitions=parts))
    return ListOffsetsResponse(version=v, throttle_time_ms=0, topics=topics)


# -- OffsetForLeaderEpoch ----------------------------------------------------------
async def handle_offset_for_leader_epoch(ctx: RequestContext):
    b = ctx.broker
    body = ctx.body
    rm = b.state.replicas
    T = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
    P = T.EpochEndOffset
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            err = _leader_check(b, t.topic, p.partition, p.current_leader_epoch)
            if err:
                parts.append(P(error_code=int(err), partition=p.partition, leader_epoch=-1, end_offset=-1))
                continue
            lg = rm.get(t.topic, p.partition)
            epoch, end = lg.end_offset_for_epoch(p.leader_epoch)
            parts.append(P(error_code=0, partition=p.partition, leader_epoch=epoch, end_offset=end))
        topics.append(T(topic=t.topic, partitions=parts))
    return OffsetForLeaderEpochResponse(version=ctx.version, throttle_time_ms=0, topics=topics)


# -- InitProducerId ------------------------------------------------------------------
async def handle_init_producer_id(ctx: RequestContext):
    b = ctx.broker
    body = ctx.body
    v = ctx.version
    if body.transactional_id is not None:
        # Transactions are later work: say so clearly rather than hand out a half-working id.
        ctx.log.warning("init_producer_id.transactions_unsupported", transactional_id=body.transactional_id)
        return InitProducerIdResponse(version=v, throttle_time_ms=0, error_code=int(E.INVALID_REQUEST),
                                      producer_id=-1, producer_epoch=-1)
    pid, epoch = -1, -1
    if v >= 3:
        pid, epoch = body.producer_id, body.producer_epoch
    if pid >= 0 and epoch >= 0:
        # KIP-360: an idempotent producer asks to bump its epoch after a fatal sequence error.
        if epoch + 1 > 32767:
            pid, epoch = b.state.allocate_producer_id(), 0
        else:
            epoch += 1
    else:
        pid, epoch = b.state.allocate_producer_id(), 0
    return InitProducerIdResponse(version=v, throttle_time_ms=0, error_code=0, producer_id=pid,
                                  producer_epoch=epoch)


# -- DeleteRecords ------------------------------------------------------------------------
async def handle_delete_records(ctx: RequestContext):
    from kafka.protocol.admin import DeleteRecordsResponse
    b = ctx.broker
    rm = b.state.replicas
    T = DeleteRecordsResponse.DeleteRecordsTopicResult
    P = T.DeleteRecordsPartitionResult
    topics = []
    for t in ctx.body.topics:
        parts = []
        for p in t.partitions:
            err = _leader_check(b, t.name, p.partition_index)
            if err:
                parts.append(P(partition_index=p.partition_index, low_watermark=-1, error_code=int(err)))
                continue
            lg = rm.get(t.name, p.partition_index)
            target = lg.high_watermark if p.offset == -1 else p.offset  # -1: up to the high watermark
            if target < 0:
                parts.append(P(partition_index=p.partition_index, low_watermark=-1,
                               error_code=int(E.OFFSET_OUT_OF_RANGE)))
                continue
            try:
                low = lg.delete_records_before(target)
            except OffsetOutOfRange:
                parts.append(P(partition_index=p.partition_index, low_watermark=-1,
                               error_code=int(E.OFFSET_OUT_OF_RANGE)))
                continue
            parts.append(P(partition_index=p.partition_index, low_watermark=low, error_code=0))
        topics.append(T(name=t.name, partitions=parts))
    return DeleteRecordsResponse(version=ctx.version, throttle_time_ms=0, topics=topics)
