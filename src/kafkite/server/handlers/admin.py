"""CreateTopics, DeleteTopics, CreatePartitions."""
from __future__ import annotations

import uuid

from ...controller.metadata import MAX_RECORDS_PER_USER_OP, BatchTooLarge, MetadataError, TopicInfo
from ...security.authorizer import Op, ResourceType
from ...wire.errors import E
from ..context import RequestContext
from .configs import topic_config_entries
from ..kafka_apis import KafkaApis
from ...wire.lazy_kafka import lazy_names

# kafka-python's classes, imported on their API's first request (wire/lazy_kafka.py LazyName)
CreatePartitionsResponse, CreateTopicsResponse, DeleteTopicsResponse = lazy_names(
    globals(), "kafka.protocol.admin.topics", "CreatePartitionsResponse", "CreateTopicsResponse",
    "DeleteTopicsResponse")

ZERO_UUID = uuid.UUID(int=0)


async def handle_create_topics(apis: KafkaApis, ctx: RequestContext):
    body = ctx.body
    v = ctx.version
    R = CreateTopicsResponse.CreatableTopicResult
    C = R.CreatableTopicConfigs
    validate_only = bool(body.validate_only) if v >= 1 else False
    names = [t.name for t in body.topics]
    dupes = {n for n in names if names.count(n) > 1}
    too_large = _over_records_bound(apis, body, dupes)
    if too_large is not None:  # Kafka: the whole request fails, nothing is created
        ctx.log.info("create_topics.rejected", topics=len(names), error=E.POLICY_VIOLATION.name,
                     message=too_large.message)
        return CreateTopicsResponse(version=v, throttle_time_ms=0, topics=[
            R(name=t.name, topic_id=ZERO_UUID, error_code=too_large.code, error_message=too_large.message,
              num_partitions=-1, replication_factor=-1, configs=None) for t in body.topics])
    results = []
    # Kafka: CREATE on the cluster, or on the topic
    creatable = ({t.name for t in body.topics} if apis.authorized_cluster(ctx, Op.CREATE, False)
                 else apis.authorize(ctx, Op.CREATE, ResourceType.TOPIC, (t.name for t in body.topics)))
    # each topic checked and made in request order (validated only: checked), then the creations waited for
    # together: one metadata write for all of them (on one broker process)
    outcomes: dict[int, TopicInfo | Exception] = {}
    order: list[int] = []

    def entries():  # (taken one at a time: each topic is made before the next is looked at)
        for i, t in enumerate(body.topics):
            if t.name in dupes or t.name not in creatable:
                continue
            configs = {c.name: c.value for c in t.configs}
            assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments}
            if validate_only:
                try:
                    outcomes[i] = apis.admin.check_create_topic(t.name, t.num_partitions, t.replication_factor,
                                                                assignments, configs)
                except MetadataError as exc:
                    outcomes[i] = exc
            elif not apis.admin.is_admin_controller():
                outcomes[i] = MetadataError(E.NOT_CONTROLLER, "This is not the correct controller for this cluster.")
            else:
                order.append(i)
                yield t.name, t.num_partitions, t.replication_factor, assignments, configs
    made = await apis.admin.create_topics(entries())
    outcomes.update(zip(order, made))
    for i, t in enumerate(body.topics):
        if t.name not in dupes and t.name not in creatable:
            results.append(R(name=t.name, topic_id=ZERO_UUID, error_code=int(E.TOPIC_AUTHORIZATION_FAILED),
                             error_message="Authorization failed.", num_partitions=-1, replication_factor=-1,
                             configs=None))
            continue
        if t.name in dupes:
            results.append(R(name=t.name, topic_id=ZERO_UUID, error_code=int(E.INVALID_REQUEST),
                             error_message="Create topics request from client contains multiple topics with the "
                                           "same name", num_partitions=-1, replication_factor=-1, configs=None))
            continue
        info = outcomes[i]
        if isinstance(info, MetadataError):
            exc = info
            ctx.log.info("create_topics.rejected", topic=t.name, error=E(exc.code).name, message=exc.message)
            results.append(R(name=t.name, topic_id=ZERO_UUID, error_code=exc.code, error_message=exc.message,
                             num_partitions=-1, replication_factor=-1, configs=None))
            continue
        if "." in t.name or "_" in t.name:
            ctx.log.warning("create_topics.name_warning", topic=t.name,
                            message="Due to limitations in metric names, topics with a period ('.') or underscore "
                                    "('_') could collide. To avoid issues it is best to use either, but not both.")
        if not apis.authorized(ctx, Op.DESCRIBE_CONFIGS, ResourceType.TOPIC, t.name, log_denied=False):
            # Kafka: created, but its configs and layout are shown only to who may describe its configs
            results.append(R(name=t.name, topic_id=info.topic_id, error_code=0, error_message=None,
                             topic_config_error_code=int(E.TOPIC_AUTHORIZATION_FAILED), num_partitions=-1,
                             replication_factor=-1, configs=None))
            continue
        entries = [C(name=e.name, value=e.value, read_only=e.read_only, config_source=e.config_source,
                     is_sensitive=False)
                   for e in topic_config_entries(apis, info.name, info.configs, None, synonyms=False, version=1)]
        results.append(R(name=t.name, topic_id=info.topic_id, error_code=0, error_message=None,
                         num_partitions=len(info.partitions), replication_factor=len(info.partitions[0].replicas),
                         configs=entries))
    return CreateTopicsResponse(version=v, throttle_time_ms=0, topics=results)


def _over_records_bound(apis, body, dupes) -> BatchTooLarge | None:
    """KRaft makes one batch of metadata records for a CreateTopics (per topic a TopicRecord, its ConfigRecords
    and a PartitionRecord per partition); over MAX_RECORDS_PER_USER_OP the controller refuses the whole request.
    A dry run in request order, each topic checked against what the ones before it left, placing nothing
    beyond the bound."""
    left = MAX_RECORDS_PER_USER_OP
    for t in body.topics:
        if t.name in dupes:
            continue
        configs = {c.name: c.value for c in t.configs}
        assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments}
        try:
            info = apis.admin.check_create_topic(t.name, t.num_partitions, t.replication_factor, assignments, configs,
                                                 max_records=left)
        except BatchTooLarge as exc:
            return exc
        except MetadataError:
            continue  # answered with its own error; it makes no records
        left -= 1 + len(info.partitions) + len(configs)
    return None


async def handle_delete_topics(apis: KafkaApis, ctx: RequestContext):
    """Kafka's ControllerApis.deleteTopics: every row is checked before anything is deleted. A row with
    neither or both of name and id, a name or id given twice, a name whose id another row gives: each is
    answered INVALID_REQUEST once and deletes nothing; the other rows proceed. (Kafka shuffles its
    answers; these come in the order of the rows.)"""
    v = ctx.version
    R = DeleteTopicsResponse.DeletableTopicResult
    md = apis.metadata_cache
    if v >= 6:
        rows = [(t.name, t.topic_id if t.topic_id != ZERO_UUID else None) for t in ctx.body.topics]
    else:
        rows = [(n, None) for n in ctx.body.topic_names]
    answers: dict[int, tuple] = {}  # row -> (name, id, code, message); rows not in it get no answer
    first: dict[object, int] = {}  # a name or an id -> the row that gave it first
    dups: set = set()
    for i, (name, tid) in enumerate(rows):
        if name is None and tid is None:
            answers[i] = (None, None, E.INVALID_REQUEST, "Neither topic name nor id were specified.")
        elif name is not None and tid is not None:
            answers[i] = (name, tid, E.INVALID_REQUEST, "You may not specify both topic name and topic id.")
        elif (key := name if name is not None else tid) in first:
            dups.add(key)
            answers[first[key]] = (name, tid, E.INVALID_REQUEST,
                                   "Duplicate topic name." if name is not None else "Duplicate topic id.")
        else:
            first[key] = i
    to_delete: dict[uuid.UUID, int] = {}  # topic id -> row
    for key, i in first.items():  # ids, then names: a name may name a topic an id row already gave
        if key in dups or not isinstance(key, uuid.UUID):
            continue
        t = md.topic_by_id(key)
        if t is None:
            answers[i] = (None, key, E.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")
        elif not apis.authorized(ctx, Op.DELETE, ResourceType.TOPIC, t.name):  # Kafka: DELETE on the topic
            answers[i] = (None, key, E.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
        else:
            to_delete[key] = i
    for key, i in first.items():
        if key in dups or isinstance(key, uuid.UUID):
            continue
        t = md.topic(key)
        if not apis.authorized(ctx, Op.DELETE, ResourceType.TOPIC, key):
            answers[i] = (key, None, E.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
        elif t is None:
            answers[i] = (key, None, E.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        elif t.topic_id in to_delete or t.topic_id in dups:
            answers.pop(to_delete.pop(t.topic_id, -1), None)
            answers[i] = (key, t.topic_id, E.INVALID_REQUEST,
                          "The provided topic name maps to an ID that was already supplied.")
        else:
            to_delete[t.topic_id] = i
    # everything checked: now the deletions (in-process: all with one metadata write)
    doomed: dict[str, tuple[int, uuid.UUID]] = {}  # name -> (row, topic id)
    for tid, i in to_delete.items():
        name = md.topic_by_id(tid).name
        if not apis.config.get("delete.topic.enable"):
            answers[i] = (name, tid, E.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        elif not apis.admin.is_admin_controller():
            answers[i] = (name, tid, E.NOT_CONTROLLER, "This is not the correct controller for this cluster.")
        else:
            doomed[name] = (i, tid)
    if doomed:
        # e.g. KAFKA_STORAGE_ERROR: the metadata could not be written
        failed = await apis.admin.delete_topics(list(doomed))
        for name, (i, tid) in doomed.items():
            exc = failed.get(name)
            answers[i] = (name, tid, 0, None) if exc is None else (name, tid, exc.code, exc.message)
    results = [R(name=n, topic_id=t or ZERO_UUID, error_code=int(c), error_message=m)
               for n, t, c, m in (answers[i] for i in sorted(answers))]
    return DeleteTopicsResponse(version=v, throttle_time_ms=0, responses=results)


async def handle_create_partitions(apis: KafkaApis, ctx: RequestContext):
    body = ctx.body
    R = CreatePartitionsResponse.CreatePartitionsTopicResult
    names = [t.name for t in body.topics]
    results = []
    answered = set()
    left = MAX_RECORDS_PER_USER_OP  # PartitionRecords this request may make (KRaft's bound, see above)
    for t in body.topics:
        if names.count(t.name) > 1:  # Kafka's ControllerApis.createPartitions: answered once, nothing grows
            if t.name not in answered:
                answered.add(t.name)
                results.append(R(name=t.name, error_code=int(E.INVALID_REQUEST), error_message="Duplicate topic name."))
            continue
        if not apis.authorized(ctx, Op.ALTER, ResourceType.TOPIC, t.name):  # Kafka: ALTER on the topic
            results.append(R(name=t.name, error_code=int(E.TOPIC_AUTHORIZATION_FAILED),
                             error_message="Authorization failed."))
            continue
        assignments = None if t.assignments is None else [list(a.broker_ids) for a in t.assignments]
        try:
            if not apis.admin.is_admin_controller():
                raise MetadataError(E.NOT_CONTROLLER, "This is not the correct controller for this cluster.")
            left -= await apis.admin.create_partitions(t.name, t.count, assignments,
                                                       validate_only=bool(body.validate_only), max_records=left)
        except MetadataError as exc:
            ctx.log.info("create_partitions.rejected", topic=t.name, error=E(exc.code).name, message=exc.message)
            results.append(R(name=t.name, error_code=exc.code, error_message=exc.message))
            continue
        results.append(R(name=t.name, error_code=0, error_message=None))
    return CreatePartitionsResponse(version=ctx.version, throttle_time_ms=0, results=results)
