"""ApiVersions, Metadata, DescribeCluster, DescribeTopicPartitions."""
from __future__ import annotations

import uuid

from ...controller.metadata import MetadataError, validate_topic_name
from ...security.authorizer import CLUSTER_NAME, Op, ResourceType
from ...wire.errors import E
from ...wire.lazy_kafka import lazy_names
from ..context import RequestContext
from ...network.listeners import endpoint_for
from ..kafka_apis import KafkaApis

# kafka-python's classes, imported on their API's first request (wire/lazy_kafka.py LazyName)
(DescribeClusterResponse,) = lazy_names(globals(), "kafka.protocol.admin.cluster", "DescribeClusterResponse")
(ApiVersionsResponse,) = lazy_names(globals(), "kafka.protocol.metadata.api_versions", "ApiVersionsResponse")
(MetadataResponse,) = lazy_names(globals(), "kafka.protocol.metadata.metadata", "MetadataResponse")
(DescribeTopicPartitionsResponse,) = lazy_names(globals(), "kafka.protocol.admin.topics",
                                                "DescribeTopicPartitionsResponse")

ZERO_UUID = uuid.UUID(int=0)
AUTH_OPS_UNSET = -2147483648  # "not requested"


def _bits(*ops: int) -> int:
    v = 0
    for op in ops:
        v |= 1 << op
    return v


# AclOperation codes: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9,
# DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12. With no authorizer Kafka reports
# every operation the resource type supports.
TOPIC_OP_SET = frozenset({3, 4, 5, 6, 7, 8, 10, 11})
CLUSTER_OP_SET = frozenset({5, 7, 8, 9, 10, 11, 12})
TOPIC_OPS = _bits(*TOPIC_OP_SET)  # for int32 fields
CLUSTER_OPS = _bits(*CLUSTER_OP_SET)


def api_versions_response(version: int, supported: dict[int, tuple[int, int]], error: int = 0
                          ) -> ApiVersionsResponse:
    AV = ApiVersionsResponse.ApiVersion
    keys = [AV(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in sorted(supported.items())]
    return ApiVersionsResponse(version=version, error_code=int(error), api_keys=keys, throttle_time_ms=0)


async def handle_api_versions(apis: KafkaApis, ctx: RequestContext):
    body = ctx.body
    if ctx.version >= 3:
        import re
        ok = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")
        if not (ok.match(body.client_software_name or "") and ok.match(body.client_software_version or "")):
            return ApiVersionsResponse(version=ctx.version, error_code=int(E.INVALID_REQUEST), api_keys=[],
                                       throttle_time_ms=0)
        ctx.log.debug("client.software", name=body.client_software_name, version=body.client_software_version)
    supported = apis.api_versions
    if apis.faults is not None:  # the control plane's version caps (control/model.py)
        supported = apis.faults.advertised(apis.node_id, supported)
    return api_versions_response(ctx.version, supported)


def broker_entries(apis):
    return sorted(apis.metadata_cache.brokers.values(), key=lambda b: b.node_id)


def listener_endpoints(apis, listener: str | None) -> list[tuple[object, str, int]]:
    """(broker info, host, port) of each live broker on `listener`, the one the request came on (its context's;
    None: the primary one): as Kafka, a broker without that listener is left out."""
    out = []
    for x in broker_entries(apis):
        ep = endpoint_for(x, listener)
        if ep is not None:
            out.append((x, ep[0], ep[1]))
    return out


def node_endpoint(node, listener: str | None) -> tuple[str, int] | None:
    """A broker's (host, port) on the request's listener (its context's), None when it has none there."""
    return endpoint_for(node, listener)


def _partitions(topic, cls, apis, listener: str | None, listener_error: bool = False):
    """`listener_error` (Metadata v6+): a live leader without the request's listener answers LISTENER_NOT_FOUND, as
    Kafka's metadata cache does (LEADER_NOT_AVAILABLE before v6)."""
    live = set(apis.metadata_cache.live_broker_ids)
    reachable = {x.node_id for x, _, _ in listener_endpoints(apis, listener)}
    # replicas in an offline log dir (this process's brokers whose data dir failed) are offline
    # replicas, as Kafka lists them; the leader stays and answers KAFKA_STORAGE_ERROR
    failed = {i for i, b in apis.brokers.items() if b.replicas.log_dir_offline}
    out = []
    for p in topic.partitions:
        offline = [r for r in p.replicas if r not in live or r in failed]
        err = 0 if p.leader in live else E.LEADER_NOT_AVAILABLE
        leader = p.leader if p.leader in live else -1
        if leader != -1 and leader not in reachable:
            err, leader = (E.LISTENER_NOT_FOUND if listener_error else E.LEADER_NOT_AVAILABLE), -1
        out.append(cls(error_code=int(err), partition_index=p.index, leader_id=leader,
                       leader_epoch=p.leader_epoch, replica_nodes=list(p.replicas),
                       isr_nodes=[r for r in p.isr if r in live], offline_replicas=offline))
    return out


async def handle_metadata(apis: KafkaApis, ctx: RequestContext):
    body = ctx.body
    md = apis.metadata_cache
    v = ctx.version
    T = MetadataResponse.MetadataResponseTopic
    P = T.MetadataResponsePartition
    include_ops = bool(getattr(body, "include_topic_authorized_operations", False)) if v >= 8 else False

    def topic_entry(t):
        return T(error_code=0, name=t.name, topic_id=t.topic_id, is_internal=t.internal,
                 partitions=_partitions(t, P, apis, ctx.listener, v >= 6),
                 authorized_operations=apis.authorized_operations(ctx, ResourceType.TOPIC, t.name) if include_ops
                 else None)

    def denied(name, tid=ZERO_UUID, internal=False):
        return T(error_code=int(E.TOPIC_AUTHORIZATION_FAILED), name=name, topic_id=tid, is_internal=internal,
                 partitions=[])

    topics = []
    req_topics = body.topics
    if req_topics is None or (v == 0 and not req_topics):
        # Kafka: the topics this principal may not describe are left out
        described = apis.authorize(ctx, Op.DESCRIBE, ResourceType.TOPIC, md.topics, log_denied=False)
        topics = [topic_entry(t) for t in sorted(md.topics.values(), key=lambda t: t.name) if t.name in described]
    else:
        ids = [] if v < 10 else [rt.topic_id for rt in req_topics if rt.topic_id not in (None, ZERO_UUID)]
        if v < 12 and (ids or any(rt.name is None for rt in req_topics)):
            # Kafka: "Topic IDs are not supported in requests for version 10/11" (a null name neither): the request
            # is refused, every topic it names answered INVALID_REQUEST (a null name as "")
            return MetadataResponse(version=v, throttle_time_ms=0, brokers=[], cluster_id=None,
                                    controller_id=-1, authorized_operations=None, topics=[
                                        T(error_code=int(E.INVALID_REQUEST), name=rt.name or "",
                                          topic_id=rt.topic_id or ZERO_UUID, is_internal=False, partitions=[])
                                        for rt in req_topics])
        if ids:
            # Kafka (v12+): when any topic is asked by id, the ids are looked up and the names beside them are not
            # read (the Java consumer 4.x resolves an assignment's topic ids so, with names ""): the unknown ids
            # (UNKNOWN_TOPIC_ID) first, then the topics found, then those this principal may not describe
            # (TOPIC_AUTHORIZATION_FAILED with their id: ids are not secret), each once
            known = {}
            for tid in dict.fromkeys(ids):
                t = md.topic_by_id(tid)
                if t is None:
                    topics.append(T(error_code=int(E.UNKNOWN_TOPIC_ID), name=None, topic_id=tid, partitions=[]))
                else:
                    known.setdefault(t.name, t)
            refused = []
            for name, t in known.items():
                if apis.authorized(ctx, Op.DESCRIBE, ResourceType.TOPIC, name):
                    topics.append(topic_entry(t))
                else:
                    refused.append(denied(None, t.topic_id))
            topics += refused
        else:
            allow_auto = body.allow_auto_topic_creation if v >= 4 else True
            for rt in req_topics:
                name = rt.name
                if name is None:  # v12+, no id either
                    topics.append(T(error_code=int(E.UNKNOWN_TOPIC_ID), name=None, topic_id=ZERO_UUID, partitions=[]))
                    continue
                if not apis.authorized(ctx, Op.DESCRIBE, ResourceType.TOPIC, name):
                    topics.append(denied(name))
                    continue
                t = md.topic(name)
                if t is None and allow_auto and apis.config.get("auto.create.topics.enable") and not (
                        apis.authorized_cluster(ctx, Op.CREATE, False)
                        or apis.authorized(ctx, Op.CREATE, ResourceType.TOPIC, name)):
                    topics.append(denied(name))  # Kafka: auto-creation needs CREATE on the cluster or the topic
                    continue
                if t is None:
                    err, t = await apis.maybe_auto_create_topic(name, allow_auto)
                    if err:
                        topics.append(T(error_code=err, name=name, topic_id=ZERO_UUID, partitions=[]))
                        continue
                topics.append(topic_entry(t))

    B = MetadataResponse.MetadataResponseBroker
    brokers = [B(node_id=x.node_id, host=host, port=port, rack=x.rack)
               for x, host, port in listener_endpoints(apis, ctx.listener)]
    cluster_ops = None  # kafka-python's bitfield: a set of operations, None = not requested
    if 8 <= v <= 10 and getattr(body, "include_cluster_authorized_operations", False):
        cluster_ops = apis.authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
    return MetadataResponse(version=v, throttle_time_ms=0, brokers=brokers, cluster_id=md.cluster_id,
                            controller_id=apis.metadata_cache.controller_id, topics=topics,
                            authorized_operations=cluster_ops)


async def handle_describe_cluster(apis: KafkaApis, ctx: RequestContext):
    body = ctx.body
    B = DescribeClusterResponse.DescribeClusterBroker
    if ctx.version >= 1 and body.endpoint_type not in (1,):
        # 1 = brokers; Kafka answers UNSUPPORTED_ENDPOINT_TYPE for controllers on a broker listener.
        return DescribeClusterResponse(version=ctx.version, error_code=int(E.UNSUPPORTED_ENDPOINT_TYPE),
                                       error_message="The request was sent to an endpoint of type BROKER, "
                                                     f"but we wanted an endpoint of type {body.endpoint_type}",
                                       endpoint_type=1, cluster_id=apis.metadata_cache.cluster_id, controller_id=-1,
                                       brokers=[])
    return DescribeClusterResponse(
        version=ctx.version, throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=1,
        cluster_id=apis.metadata_cache.cluster_id, controller_id=apis.metadata_cache.controller_id,
        brokers=[B(broker_id=x.node_id, host=host, port=port, rack=x.rack)
                 for x, host, port in listener_endpoints(apis, ctx.listener)],
        authorized_operations=apis.authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
        if body.include_cluster_authorized_operations else None)


async def handle_describe_topic_partitions(apis: KafkaApis, ctx: RequestContext):
    """KIP-966's paginated topic describe (Java AdminClient 3.8+ uses it for describeTopics)."""
    body = ctx.body
    md = apis.metadata_cache
    R = DescribeTopicPartitionsResponse
    T = R.DescribeTopicPartitionsResponseTopic
    P = T.DescribeTopicPartitionsResponsePartition
    limit = max(1, min(body.response_partition_limit or 2000, 2000))
    cursor = body.cursor
    if body.topics:
        names = sorted({t.name for t in body.topics})
        described = apis.authorize(ctx, Op.DESCRIBE, ResourceType.TOPIC, names)
    else:  # Kafka: the topics this principal may not describe are left out
        described = apis.authorize(ctx, Op.DESCRIBE, ResourceType.TOPIC, md.topics, log_denied=False)
        names = sorted(described)
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    topics, next_cursor, budget = [], None, limit
    for name in names:
        t = md.topic(name)
        if name not in described:
            topics.append(T(error_code=int(E.TOPIC_AUTHORIZATION_FAILED), name=name, topic_id=ZERO_UUID,
                            is_internal=False, partitions=[], topic_authorized_operations=AUTH_OPS_UNSET))
            continue
        if t is None:
            try:
                validate_topic_name(name)
                code = E.UNKNOWN_TOPIC_OR_PARTITION
            except MetadataError:
                code = E.INVALID_TOPIC_EXCEPTION
            topics.append(T(error_code=int(code), name=name, topic_id=ZERO_UUID, is_internal=False, partitions=[],
                            topic_authorized_operations=AUTH_OPS_UNSET))
            continue
        start = cursor.partition_index if cursor is not None and cursor.topic_name == name else 0
        parts = _partitions(t, P, apis, ctx.listener, True)[start:]
        if budget <= 0:
            next_cursor = R.Cursor(topic_name=name, partition_index=start)
            break
        if len(parts) > budget:
            next_cursor = R.Cursor(topic_name=name, partition_index=start + budget)
            parts = parts[:budget]
        for p in parts:  # KIP-966 ELR is off: empty lists (the Java client does not accept null here)
            p.eligible_leader_replicas = []
            p.last_known_elr = []
        budget -= len(parts)
        topics.append(T(error_code=0, name=name, topic_id=t.topic_id, is_internal=t.internal, partitions=parts,
                        topic_authorized_operations=_bits(*apis.authorized_operations(ctx, ResourceType.TOPIC, name))))
        if next_cursor is not None:
            break
    return R(version=0, throttle_time_ms=0, topics=topics, next_cursor=next_cursor)


async def handle_sasl_handshake(apis: KafkaApis, ctx):
    """A SaslHandshake that reaches the request handler: the connection is not on a SASL listener, or authenticated
    already (security/sasl.py runs the exchange before): Kafka's KafkaApis answers ILLEGAL_SASL_STATE."""
    from kafka.protocol.sasl import SaslHandshakeResponse
    return SaslHandshakeResponse(version=ctx.version, error_code=int(E.ILLEGAL_SASL_STATE), mechanisms=[])


async def handle_sasl_authenticate(apis: KafkaApis, ctx):
    """As handle_sasl_handshake: ILLEGAL_SASL_STATE, with Kafka's message."""
    from kafka.protocol.sasl import SaslAuthenticateResponse
    return SaslAuthenticateResponse(version=ctx.version, error_code=int(E.ILLEGAL_SASL_STATE),
                                    error_message="SaslAuthenticate request received after successful "
                                                  "authentication", auth_bytes=b"", session_lifetime_ms=0)
