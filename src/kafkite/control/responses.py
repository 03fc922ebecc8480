"""Responses the control model answers with: a whole request failed with an error (built the way each API's
response carries it), a partition's error inside an otherwise served Produce, Fetch, ListOffsets or
OffsetForLeaderEpoch, a topic's (or partition's) error inside an otherwise served Metadata, a topic's error in an
AddPartitionsToTxn answer (the others not attempted), and KIP-511's answer to
an ApiVersions above the (capped) versions."""
from __future__ import annotations

import uuid

from kafka.protocol.api_key import ApiKey

from ..wire import registry
from ..wire.errors import E
from ..wire.fetch_response import PartitionData, TopicData


def error_response(req, error: int):
    """Kafka's "every partition / the whole request failed with this error" response for a request."""
    cls = registry.response_class(req.api_key)
    body = req.body
    v = req.api_version
    k = req.api_key
    if k == ApiKey.Produce:
        T = cls.TopicProduceResponse
        return cls(version=v, responses=[T(name=t.name, partition_responses=[
            T.PartitionProduceResponse(index=p.index, error_code=error, base_offset=-1, log_append_time_ms=-1,
                                       log_start_offset=-1, record_errors=[]) for p in t.partition_data])
            for t in body.topic_data], throttle_time_ms=0)
    if k == ApiKey.Fetch:
        T = cls.FetchableTopicResponse
        return cls(version=v, throttle_time_ms=0, error_code=0, session_id=0, responses=[T(
            topic=t.topic, topic_id=t.topic_id, partitions=[T.PartitionData(
                partition_index=p.partition, error_code=error, high_watermark=-1, last_stable_offset=-1,
                log_start_offset=-1, records=b"") for p in t.partitions]) for t in body.topics])
    if k == ApiKey.Metadata:
        T = cls.MetadataResponseTopic
        return cls(version=v, throttle_time_ms=0, brokers=[], controller_id=-1,
                   topics=[T(error_code=error, name=t.name, partitions=[]) for t in (body.topics or [])])
    # APIs with a top-level error code
    fields = cls.fields
    kwargs = {"version": v}
    if "error_code" in fields:
        kwargs["error_code"] = error
    if "throttle_time_ms" in fields:
        kwargs["throttle_time_ms"] = 0
    if "coordinators" in fields and getattr(body, "coordinator_keys", None):
        C = cls.Coordinator
        kwargs["coordinators"] = [C(key=key, node_id=-1, host="", port=-1, error_code=error)
                                  for key in body.coordinator_keys]
    return cls(**kwargs)


def unsupported_api_versions(advertised: dict[int, tuple[int, int]]):
    """KIP-511: an ApiVersions above the versions served is answered at v0 with UNSUPPORTED_VERSION and the
    list, so the client retries with a version both sides have."""
    from ..server.handlers.metadata import api_versions_response
    return api_versions_response(0, advertised, E.UNSUPPORTED_VERSION)


def _fetch_topic_name(ctx, ft) -> str | None:
    if ctx.version < 13:
        return ft.topic
    meta = ctx.broker.metadata.topic_by_id(ft.topic_id)
    return None if meta is None else meta.name


def _named(ctx):
    """(topic name, topic id or None, partition index) of every partition a Produce or Fetch names."""
    body = ctx.body
    k = ctx.request.api_key
    if k == ApiKey.Produce:
        return [(td.name, None, pd.index) for td in body.topic_data for pd in td.partition_data]
    if k == ApiKey.ListOffsets:
        return [(t.name, None, p.partition_index) for t in body.topics for p in t.partitions]
    if k == ApiKey.OffsetForLeaderEpoch:
        return [(t.topic, None, p.partition) for t in body.topics for p in t.partitions]
    return [(_fetch_topic_name(ctx, ft), ft.topic_id if ctx.version >= 13 else None, fp.partition)
            for ft in body.topics for fp in ft.partitions]


def _metadata_topics(ctx) -> list[str]:
    """The topics a Metadata answer lists: those it names (by name, or by id from v10), or every topic."""
    md = ctx.broker.metadata
    if ctx.body.topics is None or (ctx.version == 0 and not ctx.body.topics):
        return list(md.topics)
    out = []
    for rt in ctx.body.topics:
        if rt.name is not None:
            out.append(rt.name)
        else:
            t = md.topic_by_id(getattr(rt, "topic_id", None))
            if t is not None:
                out.append(t.name)
    return out


def add_partitions_to_txn_error(req, topic: str, partition: int | None, error: int):
    """AddPartitionsToTxn (v0-3) with an error for a topic (or one partition of it), as Kafka answers a request one of
    whose partitions fails (e.g. unknown): those partitions the error, the others OPERATION_NOT_ATTEMPTED; none is
    added to the transaction (librdkafka's rd_kafka_mock_topic_set_error)."""
    cls = registry.response_class(req.api_key)
    T = cls.AddPartitionsToTxnTopicResult
    P = T.AddPartitionsToTxnPartitionResult
    return cls(version=req.api_version, throttle_time_ms=0, results_by_topic_v3_and_below=[T(
        name=t.name, results_by_partition=[P(partition_index=p, partition_error_code=error if (
            t.name == topic and partition in (None, p)) else int(E.OPERATION_NOT_ATTEMPTED)) for p in t.partitions])
        for t in req.body.v3_and_below_topics])


def names_partition(ctx, topic: str, partition: int | None) -> bool:
    if ctx.request.api_key == ApiKey.AddPartitionsToTxn:
        return ctx.version <= 3 and any(t.name == topic and partition in (None, p)
                                        for t in ctx.body.v3_and_below_topics for p in t.partitions)
    if ctx.request.api_key == ApiKey.Metadata:
        if topic not in _metadata_topics(ctx):
            return False
        info = ctx.broker.metadata.topic(topic)
        return partition is None or (info is not None and 0 <= partition < len(info.partitions))
    return any(t == topic and partition in (None, p) for t, _, p in _named(ctx))


def strip_partition(ctx, topic: str, partition: int | None, error: int) -> list[tuple[str, object, int, int]]:
    """The partitions that answer `error`: taken out of a Produce (nothing is appended to them, as when a
    broker refuses a partition); a Fetch keeps them (its session too) and answers at once, as Kafka does when
    a partition has an error; ListOffsets and OffsetForLeaderEpoch read them, and their answer is replaced.
    -> [(topic, topic id, partition, error)]"""
    if ctx.request.api_key == ApiKey.Metadata:  # the answer is patched: the topic's (or partition's) entry
        return [(topic, None, partition, error)]
    hit = [(t, tid, p, error) for t, tid, p in _named(ctx) if t == topic and partition in (None, p)]
    body = ctx.body
    if ctx.request.api_key == ApiKey.Produce:
        for td in body.topic_data:
            if td.name == topic:
                td.partition_data = [pd for pd in td.partition_data if partition not in (None, pd.index)]
        body.topic_data = [td for td in body.topic_data if td.partition_data]
    elif ctx.request.api_key == ApiKey.Fetch:
        body.max_wait_ms = 0
    return hit


def add_partition_errors(ctx, response, errors: list[tuple[str, object, int, int]]) -> None:
    """Put each (topic, topic id, partition, error) into the served response, as the API carries it."""
    if ctx.request.api_key == ApiKey.Produce:
        cls = registry.response_class(ApiKey.Produce)
        T = cls.TopicProduceResponse
        topics = {t.name: t for t in response.responses}
        for name, _, index, err in errors:
            if name not in topics:
                topics[name] = T(name=name, partition_responses=[])
                response.responses.append(topics[name])
            topics[name].partition_responses.append(T.PartitionProduceResponse(
                index=index, error_code=err, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1,
                record_errors=[], error_message=None))
        return
    if ctx.request.api_key == ApiKey.Metadata:
        _metadata_errors(response, errors)
        return
    if ctx.request.api_key in (ApiKey.ListOffsets, ApiKey.OffsetForLeaderEpoch):
        lo = ctx.request.api_key == ApiKey.ListOffsets
        failed = {(name, index): err for name, _, index, err in errors}
        for t in response.topics:
            for p in t.partitions:
                err = failed.get((t.name, p.partition_index) if lo else (t.topic, p.partition))
                if err is None:
                    continue
                p.error_code = err
                if lo:
                    p.timestamp, p.offset, p.leader_epoch, p.old_style_offsets = -1, -1, -1, []
                else:
                    p.leader_epoch, p.end_offset = -1, -1
        return
    v13 = ctx.version >= 13
    for name, tid, index, err in errors:
        t = next((t for t in response.responses if (t.topic_id == tid if v13 else t.topic == name)), None)
        if t is None:
            t = TopicData(topic=None if v13 else name, topic_id=tid)
            response.responses.append(t)
        failed = PartitionData(partition_index=index, error_code=err)
        t.partitions = [failed if p.partition_index == index else p for p in t.partitions]
        if not any(p is failed for p in t.partitions):
            t.partitions.append(failed)


# a partition without a leader as Kafka's metadata cache lists it (the leader -1)
_NO_LEADER = (E.LEADER_NOT_AVAILABLE, E.LISTENER_NOT_FOUND)


def _metadata_errors(response, errors: list[tuple[str, object, int | None, int]]) -> None:
    """A topic's error as Kafka answers one (LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION,
    TOPIC_AUTHORIZATION_FAILED, ...): its entry with the error, no topic id, no partitions; a partition's error in
    its entry (LEADER_NOT_AVAILABLE and LISTENER_NOT_FOUND with leader -1, as for an offline partition)."""
    for name, _, index, err in errors:
        for t in response.topics:
            if t.name != name:
                continue
            if index is None:
                t.error_code, t.partitions, t.is_internal, t.topic_id = err, [], False, uuid.UUID(int=0)
                continue
            for p in t.partitions:
                if p.partition_index == index:
                    p.error_code = err
                    if err in _NO_LEADER:
                        p.leader_id = -1
