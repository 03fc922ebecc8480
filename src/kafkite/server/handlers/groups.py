"""FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
DescribeGroups, ListGroups, DeleteGroups, OffsetDelete: thin shells over the coordinator."""
from __future__ import annotations

import dataclasses
from types import CoroutineType


from ...controller.metadata import MetadataError
from ...coordinator.hashing import partition_for
from ...security.authorizer import Op, ResourceType
from ...wire import codec
from ...wire.errors import E
from ..context import RequestContext
from .metadata import node_endpoint
from ..group_coordinator_service import OFFSETS_TOPIC
from ..transaction_coordinator_service import TXN_TOPIC
from ..kafka_apis import KafkaApis
from ...wire.lazy_kafka import lazy_names

# kafka-python's classes (and KIP-848's), imported on their API's first request (wire/lazy_kafka.py LazyName)
DeleteGroupsResponse, DescribeGroupsResponse, ListGroupsResponse = lazy_names(
    globals(), "kafka.protocol.admin.groups", "DeleteGroupsResponse", "DescribeGroupsResponse", "ListGroupsResponse")
(HeartbeatResponse, JoinGroupResponse, LeaveGroupResponse, SyncGroupResponse, OffsetCommitResponse, OffsetFetchResponse,
 OffsetDeleteResponse) = lazy_names(
    globals(), "kafka.protocol.consumer.group", "HeartbeatResponse", "JoinGroupResponse", "LeaveGroupResponse",
    "SyncGroupResponse", "OffsetCommitResponse", "OffsetFetchResponse", "OffsetDeleteResponse")
(FindCoordinatorResponse,) = lazy_names(globals(), "kafka.protocol.metadata.find_coordinator",
                                        "FindCoordinatorResponse")
ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatResponse = lazy_names(
    globals(), "kafkite.wire.consumer_group_api", "ConsumerGroupDescribeResponse", "ConsumerGroupHeartbeatResponse")
(HeartbeatRequest,) = lazy_names(globals(), "kafkite.coordinator.consumer_group_manager", "HeartbeatRequest")

GROUP_KEY, TXN_KEY = 0, 1
_GROUP_DENIED = int(E.GROUP_AUTHORIZATION_FAILED)


def _group_ok(apis, ctx, op: int, group_id: str) -> bool:
    return apis.authorized(ctx, op, ResourceType.GROUP, group_id)


async def _ensure_internal_topic(apis, name: str, partitions: int, replication_factor: int,
                                 configs: dict[str, str]) -> bool:
    """An internal topic is created on first use, compacted, like Kafka's -> whether it exists now (in ZooKeeper
    mode it is written to ZooKeeper and comes once the controller elected its leaders: clients retry).
    The replication factor is capped by the brokers there are."""
    if apis.metadata_cache.topic(name) is not None:
        return True
    rf = max(1, min(replication_factor, len(apis.metadata_cache.brokers)))
    if "min.insync.replicas" in configs:
        configs = {**configs, "min.insync.replicas": str(min(rf, int(configs["min.insync.replicas"])))}
    try:
        await apis.admin.create_topic(name, partitions, rf, None, {"cleanup.policy": "compact", **configs}, wait=False)
    except MetadataError as exc:
        if exc.code != E.TOPIC_ALREADY_EXISTS:
            raise
    return apis.metadata_cache.topic(name) is not None


async def ensure_offsets_topic(apis) -> bool:
    """__consumer_offsets: offsets.topic.* settings."""
    cfg = apis.config
    return await _ensure_internal_topic(apis, OFFSETS_TOPIC, cfg.get("offsets.topic.num.partitions"),
                                        cfg.get("offsets.topic.replication.factor"),
                                        {"segment.bytes": str(cfg.get("offsets.topic.segment.bytes")),
                                         "compression.type": "producer"})


async def ensure_transaction_topic(apis) -> bool:
    """__transaction_state, as Kafka's TransactionStateManager creates it: transaction.state.log.* settings."""
    cfg = apis.config
    return await _ensure_internal_topic(apis, TXN_TOPIC, cfg.get("transaction.state.log.num.partitions"),
                                        cfg.get("transaction.state.log.replication.factor"),
                                        {"compression.type": "uncompressed",
                                         "segment.bytes": str(cfg.get("transaction.state.log.segment.bytes")),
                                         "min.insync.replicas": str(cfg.get("transaction.state.log.min.isr"))})


async def _coordinator_for(apis, ctx, key: str, key_type: int):
    """(error, message, node) for one FindCoordinator key (DESCRIBE on the group or transactional id first)."""
    if key_type not in (GROUP_KEY, TXN_KEY):
        return int(E.INVALID_REQUEST), f"Unknown coordinator key type {key_type}", None
    if key_type == GROUP_KEY and not apis.authorized(ctx, Op.DESCRIBE, ResourceType.GROUP, key):
        return _GROUP_DENIED, "Group authorization failed.", None
    if key_type == TXN_KEY and not apis.authorized(ctx, Op.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return int(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), "Transactional Id authorization failed.", None
    if key_type == TXN_KEY and not key:
        return int(E.INVALID_REQUEST), "Transactional id must not be empty", None
    topic = TXN_TOPIC if key_type == TXN_KEY else OFFSETS_TOPIC
    try:
        if not await (ensure_transaction_topic(apis) if key_type == TXN_KEY else ensure_offsets_topic(apis)):
            return int(E.COORDINATOR_NOT_AVAILABLE), "The coordinator is not available.", None
    except MetadataError:  # e.g. KAFKA_STORAGE_ERROR: the data dir is offline
        return int(E.COORDINATOR_NOT_AVAILABLE), "The coordinator is not available.", None
    n = len(apis.metadata_cache.topic(topic).partitions)
    p = apis.metadata_cache.partition(topic, partition_for(key, n))
    node = apis.metadata_cache.brokers.get(p.leader) if p is not None else None
    # the coordinator's endpoint on the listener this request came on (none there: not available, as Kafka)
    ep = node_endpoint(node, ctx.listener) if node is not None else None
    if ep is None:
        return int(E.COORDINATOR_NOT_AVAILABLE), "The coordinator is not available.", None
    return 0, None, _Node(node.node_id, ep[0], ep[1])


@dataclasses.dataclass
class _Node:
    node_id: int
    host: str
    port: int


async def handle_find_coordinator(apis: KafkaApis, ctx: RequestContext):
    body, v = ctx.body, ctx.version
    key_type = body.key_type if v >= 1 else GROUP_KEY
    if v >= 4:
        C = FindCoordinatorResponse.Coordinator
        coords = []
        for key in body.coordinator_keys:
            err, msg, node = await _coordinator_for(apis, ctx, key, key_type)
            coords.append(C(key=key, node_id=node.node_id if node else -1, host=node.host if node else "",
                            port=node.port if node else -1, error_code=err, error_message=msg))
        return FindCoordinatorResponse(version=v, throttle_time_ms=0, coordinators=coords)
    err, msg, node = await _coordinator_for(apis, ctx, body.key, key_type)
    return FindCoordinatorResponse(version=v, throttle_time_ms=0, error_code=err, error_message=msg,
                                   node_id=node.node_id if node else -1, host=node.host if node else "",
                                   port=node.port if node else -1)


def _host(ctx) -> str:
    return "/" + (ctx.peer.rsplit(":", 1)[0] if ctx.peer else "unknown")


async def handle_join_group(apis: KafkaApis, ctx: RequestContext):
    body, v = ctx.body, ctx.version
    if not _group_ok(apis, ctx, Op.READ, body.group_id):
        return JoinGroupResponse(version=v, throttle_time_ms=0, error_code=_GROUP_DENIED, generation_id=-1,
                                 protocol_type=None, protocol_name=None if v >= 7 else "", leader="",
                                 skip_assignment=False, member_id="", members=[])
    r = await apis.group_coordinator.join_group(
        group_id=body.group_id, member_id=body.member_id or "",
        group_instance_id=body.group_instance_id if v >= 5 else None, protocol_type=body.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in body.protocols], session_timeout_ms=body.session_timeout_ms,
        rebalance_timeout_ms=body.rebalance_timeout_ms if v >= 1 else body.session_timeout_ms,
        client_id=ctx.client_id or "", client_host=_host(ctx), require_known_member_id=v >= 4,
        reason=body.reason if v >= 8 else None)
    M = JoinGroupResponse.JoinGroupResponseMember
    return JoinGroupResponse(version=v, throttle_time_ms=0, error_code=int(r.error), generation_id=r.generation_id,
                             protocol_type=r.protocol_type,
                             protocol_name=r.protocol_name if r.protocol_name is not None or v >= 7 else "",
                             leader=r.leader, skip_assignment=r.skip_assignment, member_id=r.member_id,
                             members=[M(member_id=m, group_instance_id=i, metadata=md) for m, i, md in r.members])


async def handle_sync_group(apis: KafkaApis, ctx: RequestContext):
    body, v = ctx.body, ctx.version
    if not _group_ok(apis, ctx, Op.READ, body.group_id):
        return SyncGroupResponse(version=v, throttle_time_ms=0, error_code=_GROUP_DENIED, protocol_type=None,
                                 protocol_name=None, assignment=b"")
    r = await apis.group_coordinator.sync_group(
        group_id=body.group_id, generation_id=body.generation_id, member_id=body.member_id,
        group_instance_id=body.group_instance_id if v >= 3 else None,
        protocol_type=body.protocol_type if v >= 5 else None, protocol_name=body.protocol_name if v >= 5 else None,
        assignments={a.member_id: bytes(a.assignment) for a in body.assignments})
    return SyncGroupResponse(version=v, throttle_time_ms=0, error_code=int(r.error), protocol_type=r.protocol_type,
                             protocol_name=r.protocol_name, assignment=r.assignment)


async def handle_heartbeat(apis: KafkaApis, ctx: RequestContext):
    body, v = ctx.body, ctx.version
    if not _group_ok(apis, ctx, Op.READ, body.group_id):
        return HeartbeatResponse(version=v, throttle_time_ms=0, error_code=_GROUP_DENIED)
    err = await apis.group_coordinator.heartbeat(group_id=body.group_id, generation_id=body.generation_id,
                                                 member_id=body.member_id,
                                                 group_instance_id=body.group_instance_id if v >= 3 else None)
    return HeartbeatResponse(version=v, throttle_time_ms=0, error_code=int(err))


async def handle_leave_group(apis: KafkaApis, ctx: RequestContext):
    body, v = ctx.body, ctx.version
    if not _group_ok(apis, ctx, Op.READ, body.group_id):
        return LeaveGroupResponse(version=v, throttle_time_ms=0, error_code=_GROUP_DENIED, members=[])
    if v >= 3:
        members = [(m.member_id or "", m.group_instance_id) for m in body.members]
    else:
        members = [(body.member_id, None)]
    err, results = await apis.group_coordinator.leave_group(group_id=body.group_id, members=members)
    if v < 3:
        code = err or (results[0][2] if results else 0)
        return LeaveGroupResponse(version=v, throttle_time_ms=0, error_code=int(code))
    R = LeaveGroupResponse.MemberResponse
    return LeaveGroupResponse(version=v, throttle_time_ms=0, error_code=int(err),
                              members=[R(member_id=m, group_instance_id=i, error_code=c) for m, i, c in results])


async def handle_offset_commit(apis: KafkaApis, ctx: RequestContext):
    req = ctx.request
    body, v = req.body, req.api_version
    topics = body.topics
    readable = None  # every topic, unless an authorizer says otherwise
    if apis.authorizing(ctx):
        if not _group_ok(apis, ctx, Op.READ, body.group_id):  # Kafka: every partition fails
            return _commit_answer(v, tuple((t.name, tuple((p.partition_index, _GROUP_DENIED) for p in t.partitions))
                                           for t in topics))
        readable = apis.authorize(ctx, Op.READ, ResourceType.TOPIC, {t.name for t in topics})
    offsets, codes = [], {}
    partition = apis.metadata_cache.partition
    for t in topics:
        name = t.name
        if readable is not None and name not in readable:
            for p in t.partitions:
                codes[(name, p.partition_index)] = _TOPIC_DENIED
            continue
        for p in t.partitions:
            i = p.partition_index
            if partition(name, i) is None:
                codes[(name, i)] = _UNKNOWN_PARTITION
            else:
                offsets.append((name, i, p.committed_offset, p.committed_leader_epoch if v >= 6 else -1,
                                p.committed_metadata))
    if offsets:
        # (positional: a call with keywords costs more) group id, generation id, member id, group instance id,
        # offsets, retention, api version, now
        results = apis.group_coordinator.commit_offsets(
            body.group_id, body.generation_id_or_member_epoch if v >= 1 else -1, body.member_id if v >= 1 else "",
            body.group_instance_id if v >= 7 else None, offsets, body.retention_time_ms if 2 <= v <= 4 else -1, v,
            ctx.now_ms)
        if type(results) is CoroutineType:  # it must wait (an fsync, the ISR, an earlier write); else answered now
            results = await results
        if not codes and len(results) == 1:  # the request's one partition (a consumer's usual commit)
            name, i, code = results[0]
            key = ((name, ((i, code),)),)
            answer = _COMMIT_ANSWERS.get((v, key))  # (_commit_answer's cache, looked up here)
            return answer if answer is not None else _commit_answer(v, key)
        for name, i, code in results:
            codes[(name, i)] = code
    key = []
    for t in topics:
        name, parts = t.name, []
        for p in t.partitions:
            i = p.partition_index
            parts.append((i, codes[(name, i)]))
        key.append((name, tuple(parts)))
    answer = _COMMIT_ANSWERS.get((v, tuple(key)))  # (_commit_answer's cache, looked up here)
    return answer if answer is not None else _commit_answer(v, tuple(key))


def _commit_answer(v: int, key: tuple) -> codec.EncodedBody:
    """The OffsetCommit answer of ((topic, ((partition, error), ...)), ...): the same bytes for the same partitions and
    errors (a consumer commits the same partitions again and again), so encoded once, by kafka-python."""
    answer = _COMMIT_ANSWERS.get((v, key))
    if answer is None:
        T = OffsetCommitResponse.OffsetCommitResponseTopic
        P = T.OffsetCommitResponsePartition
        response = OffsetCommitResponse(version=v, throttle_time_ms=0, topics=[
            T(name=name, partitions=[P(partition_index=i, error_code=c) for i, c in parts]) for name, parts in key])
        answer = codec.encode_body(response, v)
        global _commit_answers_bytes
        if len(_COMMIT_ANSWERS) >= _COMMIT_ANSWERS_MAX or \
                _commit_answers_bytes + len(answer.data) > _COMMIT_ANSWERS_MAX_BYTES:
            _COMMIT_ANSWERS.clear()
            _commit_answers_bytes = 0
        _COMMIT_ANSWERS[(v, key)] = answer
        _commit_answers_bytes += len(answer.data)
    return answer


_TOPIC_DENIED, _UNKNOWN_PARTITION = int(E.TOPIC_AUTHORIZATION_FAILED), int(E.UNKNOWN_TOPIC_OR_PARTITION)


# OffsetCommit answers by (version, ((topic, ((partition, error), ...)), ...)); cleared when full: 4096 answers, or
# 1 MiB of encoded answers (each held twice, codec.EncodedBody; their keys take about ten times that: ~12 MB in all),
# so that commits of many partitions under ever new names cannot grow it to gigabytes (4096 answers of 10,000
# partitions: ~3 GB); a consumer's answer of 10 partitions is ~80 bytes
_COMMIT_ANSWERS: dict[tuple, codec.EncodedBody] = {}
_COMMIT_ANSWERS_MAX = 4096
_COMMIT_ANSWERS_MAX_BYTES = 1 << 20
_commit_answers_bytes = 0  # of the answers' bodies held


async def _fetch_group(apis, ctx, group_id, topics, require_stable, member_id=None, member_epoch=-1):
    """Kafka: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED), and the topics without DESCRIBE are left out
    of "all offsets" or answered TOPIC_AUTHORIZATION_FAILED when named."""
    if not _group_ok(apis, ctx, Op.DESCRIBE, group_id):
        return _GROUP_DENIED, []
    parts = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    if parts is None:
        err, rows = await apis.group_coordinator.fetch_offsets(group_id=group_id, partitions=None,
                                                               require_stable=require_stable, member_id=member_id,
                                                               member_epoch=member_epoch)
        described = apis.authorize(ctx, Op.DESCRIBE, ResourceType.TOPIC, {r[0] for r in rows})
        return err, [r for r in rows if r[0] in described]
    described = apis.authorize(ctx, Op.DESCRIBE, ResourceType.TOPIC, {t for t, _ in parts})
    err, rows = await apis.group_coordinator.fetch_offsets(group_id=group_id,
                                                           partitions=[tp for tp in parts if tp[0] in described],
                                                           require_stable=require_stable, member_id=member_id,
                                                           member_epoch=member_epoch)
    denied = [(t, p, None, int(E.TOPIC_AUTHORIZATION_FAILED)) for t, p in parts if t not in described]
    return err, list(rows) + denied


def _by_topic(rows):
    out: dict[str, list] = {}
    for t, p, entry, code in rows:
        out.setdefault(t, []).append((p, entry, code))
    return out


async def handle_offset_fetch(apis: KafkaApis, ctx: RequestContext):
    body, v = ctx.body, ctx.version
    if v >= 8:
        G = OffsetFetchResponse.OffsetFetchResponseGroup
        T = G.OffsetFetchResponseTopics
        P = T.OffsetFetchResponsePartitions
        groups = []
        for g in body.groups:
            err, rows = await _fetch_group(apis, ctx, g.group_id, g.topics, body.require_stable,
                                           *((g.member_id, g.member_epoch) if v >= 9 else ()))
            topics = [T(name=t, partitions=[P(partition_index=p, committed_offset=e.offset if e else -1,
                                              committed_leader_epoch=e.leader_epoch if e else -1,
                                              metadata=e.metadata if e else "", error_code=c)
                                            for p, e, c in ps])
                      for t, ps in _by_topic(rows).items()]
            groups.append(G(group_id=g.group_id, topics=topics, error_code=int(err)))
        return OffsetFetchResponse(version=v, throttle_time_ms=0, groups=groups)
    T = OffsetFetchResponse.OffsetFetchResponseTopic
    P = T.OffsetFetchResponsePartition
    topics_req = body.topics
    err, rows = await _fetch_group(apis, ctx, body.group_id, topics_req, body.require_stable if v >= 7 else False)
    if err and v < 2 and topics_req is not None:
        # v0/v1 have no top-level error: every partition carries it
        rows = [(t.name, p, None, int(err)) for t in topics_req for p in t.partition_indexes]
    topics = [T(name=t, partitions=[P(partition_index=p, committed_offset=e.offset if e else -1,
                                      committed_leader_epoch=e.leader_epoch if e else -1,
                                      metadata=e.metadata if e else "", error_code=c) for p, e, c in ps])
              for t, ps in _by_topic(rows).items()]
    return OffsetFetchResponse(version=v, throttle_time_ms=0, topics=topics, error_code=int(err))


async def handle_describe_groups(apis: KafkaApis, ctx: RequestContext):
    body, v = ctx.body, ctx.version
    G = DescribeGroupsResponse.DescribedGroup
    M = G.DescribedGroupMember
    out = []
    for gid in body.groups:
        if not _group_ok(apis, ctx, Op.DESCRIBE, gid):
            out.append(G(error_code=_GROUP_DENIED, group_id=gid, group_state="", protocol_type="", protocol_data="",
                         members=[], authorized_operations=None))
            continue
        d = await apis.group_coordinator.describe_group(group_id=gid)
        err = d.error
        if err == E.GROUP_ID_NOT_FOUND and v < 6:
            err = 0  # before v6 a missing group is described as Dead with no error
        out.append(G(error_code=int(err), group_id=gid, group_state=d.state, protocol_type=d.protocol_type,
                     protocol_data=d.protocol,
                     members=[M(member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                                client_host=m.client_host, member_metadata=m.metadata,
                                member_assignment=m.assignment) for m in d.members],
                     # KIP-430: READ, DELETE, DESCRIBE as allowed (all three with no authorizer)
                     authorized_operations=apis.authorized_operations(ctx, ResourceType.GROUP, gid)
                     if v >= 3 and body.include_authorized_operations else None))
    return DescribeGroupsResponse(version=v, throttle_time_ms=0, groups=out)


async def handle_list_groups(apis: KafkaApis, ctx: RequestContext):
    body, v = ctx.body, ctx.version
    states = list(body.states_filter) if v >= 4 and body.states_filter else None
    types = list(body.types_filter) if v >= 5 and body.types_filter else None
    groups = await apis.group_coordinator.list_groups(states=states, types=types)
    # Kafka: without DESCRIBE on the cluster, the describable groups
    if not apis.authorized_cluster(ctx, Op.DESCRIBE, False):
        allowed = apis.authorize(ctx, Op.DESCRIBE, ResourceType.GROUP, (g[0] for g in groups), log_denied=False)
        groups = [g for g in groups if g[0] in allowed]
    L = ListGroupsResponse.ListedGroup
    return ListGroupsResponse(version=v, throttle_time_ms=0, error_code=0,
                              groups=[L(group_id=g, protocol_type=pt, group_state=st, group_type=gt)
                                      for g, pt, st, gt in groups])


async def handle_delete_groups(apis: KafkaApis, ctx: RequestContext):
    body, v = ctx.body, ctx.version
    R = DeleteGroupsResponse.DeletableGroupResult
    out = []
    for gid in body.groups_names:
        if not _group_ok(apis, ctx, Op.DELETE, gid):
            out.append(R(group_id=gid, error_code=_GROUP_DENIED))
            continue
        err = await apis.group_coordinator.delete_group(group_id=gid)
        out.append(R(group_id=gid, error_code=int(err)))
    return DeleteGroupsResponse(version=v, throttle_time_ms=0, results=out)


async def handle_offset_delete(apis: KafkaApis, ctx: RequestContext):
    """Kafka's handleDeleteGroupOffsetsRequest: a partition of a topic the cluster does not know (or a partition
    the topic does not have) answers UNKNOWN_TOPIC_OR_PARTITION and never reaches the coordinator; a top-level
    error from the coordinator (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, ...) answers no topics."""
    body, v = ctx.body, ctx.version
    T = OffsetDeleteResponse.OffsetDeleteResponseTopic
    P = T.OffsetDeleteResponsePartition
    if not _group_ok(apis, ctx, Op.DELETE, body.group_id):
        return OffsetDeleteResponse(version=v, error_code=_GROUP_DENIED, throttle_time_ms=0, topics=[])
    readable = apis.authorize(ctx, Op.READ, ResourceType.TOPIC, (t.name for t in body.topics))
    known = [(t.name, p.partition_index) for t in body.topics for p in t.partitions
             if t.name in readable and apis.metadata_cache.partition(t.name, p.partition_index) is not None]
    err, rows = await apis.group_coordinator.delete_offsets(group_id=body.group_id, partitions=known)
    codes = {(t, p): c for t, p, c in rows}
    codes.update({(t.name, p.partition_index): int(E.TOPIC_AUTHORIZATION_FAILED) for t in body.topics
                  for p in t.partitions if t.name not in readable})
    codes.update({(t.name, p.partition_index): int(E.UNKNOWN_TOPIC_OR_PARTITION) for t in body.topics
                  for p in t.partitions if t.name in readable and (t.name, p.partition_index) not in set(known)})
    topics = [T(name=t.name, partitions=[P(partition_index=p.partition_index,
                                           error_code=codes.get((t.name, p.partition_index), 0))
                                         for p in t.partitions]) for t in body.topics] if not err else []
    return OffsetDeleteResponse(version=v, error_code=int(err), throttle_time_ms=0, topics=topics)


# -- KIP-848 consumer groups ------------------------------------------------------------------------------
async def handle_consumer_group_heartbeat(apis: KafkaApis, ctx: RequestContext):
    """ConsumerGroupHeartbeat (68): join (epoch 0), heartbeat, leave (-1; a static member -2)."""
    body, v = ctx.body, ctx.version
    R = ConsumerGroupHeartbeatResponse
    if not apis.group_coordinator.coordinator.cfg.consumer_enabled:
        return R(version=v, throttle_time_ms=0, error_code=int(E.UNSUPPORTED_VERSION),
                 error_message="The new consumer group protocol is not enabled.", member_id=None, member_epoch=0,
                 heartbeat_interval_ms=0, assignment=None)
    # Kafka's handleConsumerGroupHeartbeat: READ on the group, DESCRIBE on every subscribed topic
    denied = None
    if not _group_ok(apis, ctx, Op.READ, body.group_id):
        denied = E.GROUP_AUTHORIZATION_FAILED
    elif body.subscribed_topic_names and len(apis.authorize(ctx, Op.DESCRIBE, ResourceType.TOPIC,
                                                            body.subscribed_topic_names)) < len(set(
                                                                body.subscribed_topic_names)):
        denied = E.TOPIC_AUTHORIZATION_FAILED
    if denied is not None:
        return R(version=v, throttle_time_ms=0, error_code=int(denied), error_message=None, member_id=None,
                 member_epoch=0, heartbeat_interval_ms=0, assignment=None)
    owned = None if body.topic_partitions is None else [(tp.topic_id, list(tp.partitions))
                                                        for tp in body.topic_partitions]
    req = HeartbeatRequest(
        group_id=body.group_id, member_id=body.member_id or "", member_epoch=body.member_epoch,
        instance_id=body.instance_id, rack_id=body.rack_id, rebalance_timeout_ms=body.rebalance_timeout_ms,
        subscribed_topic_names=None if body.subscribed_topic_names is None else list(body.subscribed_topic_names),
        subscribed_topic_regex=body.subscribed_topic_regex if v >= 1 else None,
        server_assignor=body.server_assignor, owned=owned, client_id=ctx.client_id or "", client_host=_host(ctx),
        describable=(lambda names: apis.authorize(ctx, Op.DESCRIBE, ResourceType.TOPIC, names, log_denied=False))
        if apis.authorizing(ctx) else None)
    r = await apis.group_coordinator.consumer_group_heartbeat(req, v)
    assignment = None
    if r.assignment is not None:
        TP = R.Assignment.TopicPartitions
        assignment = R.Assignment(topic_partitions=[TP(topic_id=t, partitions=sorted(ps))
                                                    for t, ps in sorted(r.assignment.items(), key=lambda kv: str(kv[0]))])
    return R(version=v, throttle_time_ms=0, error_code=int(r.error), error_message=r.message, member_id=r.member_id,
             member_epoch=r.member_epoch, heartbeat_interval_ms=r.heartbeat_interval_ms, assignment=assignment)


async def handle_consumer_group_describe(apis: KafkaApis, ctx: RequestContext):
    """ConsumerGroupDescribe (69): epochs, assignor, members with their current and target assignments."""
    body, v = ctx.body, ctx.version
    R = ConsumerGroupDescribeResponse
    G = R.DescribedGroup
    A = G.Member.Assignment

    def assignment(a):
        out = []
        for t, ps in sorted(a.items(), key=lambda kv: str(kv[0])):
            info = apis.metadata_cache.topic_by_id(t)
            out.append(A.TopicPartitions(topic_id=t, topic_name=info.name if info else "", partitions=sorted(ps)))
        return A(topic_partitions=out)

    groups = []
    for gid in body.group_ids:
        if not _group_ok(apis, ctx, Op.DESCRIBE, gid):  # Kafka: DESCRIBE on each group, else that group's error
            groups.append(G(error_code=_GROUP_DENIED, error_message=None, group_id=gid, group_state="",
                            group_epoch=0, assignment_epoch=0, assignor_name="", members=[]))
            continue
        err, msg, g = await apis.group_coordinator.consumer_group_describe(gid)
        if g is None:
            groups.append(G(error_code=err, error_message=msg, group_id=gid, group_state="", group_epoch=0,
                            assignment_epoch=0, assignor_name="", members=[]))
            continue
        members = []
        for m in g.members.values():
            kw = {"member_type": 0 if m.uses_classic else 1} if v >= 1 else {}  # KIP-1099: 0 classic, 1 consumer
            members.append(G.Member(
                member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                client_id=m.client_id, client_host=m.client_host,
                subscribed_topic_names=sorted(m.subscribed_topic_names),
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=assignment(m.assigned), target_assignment=assignment(g.target.get(m.member_id, {})),
                **kw))
        assignor = g.preferred_assignor(apis.group_coordinator.coordinator.cfg.consumer_assignors[0])
        groups.append(G(error_code=0, error_message=None, group_id=gid, group_state=g.state.value,
                        group_epoch=g.group_epoch, assignment_epoch=g.assignment_epoch, assignor_name=assignor,
                        members=members,
                        authorized_operations=(1 << 3) | (1 << 6) | (1 << 8) if body.include_authorized_operations
                        else -2147483648))
    return R(version=v, throttle_time_ms=0, groups=groups)
