"""CreateAcls (API 29), DescribeAcls (30), DeleteAcls (31), v0-3, as Kafka's AclApis.

Describing needs DESCRIBE on the cluster, creating and deleting ALTER on the cluster
(CLUSTER_AUTHORIZATION_FAILED); with no authorizer configured every one answers SECURITY_DISABLED. An ACL Kafka
would refuse (unknown or ANY type/operation/permission, a CLUSTER resource not named kafka-cluster, an empty
name, a principal without "type:") and a filter with an UNKNOWN element answer INVALID_REQUEST. The ACLs are
kept in the cluster metadata (controller/metadata.py), which every broker of the process authorizes from, or in
ZooKeeper mode under /kafka-acl (server/zk_acls.py), which every broker follows.
"""
from __future__ import annotations

from ...security.authorizer import AclBinding, AclError, AclFilter, Op, validate_binding, validate_filter
from ...wire.errors import E
from ..context import RequestContext
from ..kafka_apis import KafkaApis

_DISABLED = "No Authorizer is configured."
# (kafka-python's ACL classes, kafka.protocol.admin.acl, are imported by the handlers on the first ACL request: not
# at start, wire/lazy_kafka.py)


def _filter(f) -> AclFilter:
    return AclFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
                     f.host_filter, f.operation, f.permission_type)




def _refused(apis, ctx: RequestContext, op: int) -> tuple[int, str] | None:
    if not apis.authorized_cluster(ctx, op):
        return int(E.CLUSTER_AUTHORIZATION_FAILED), "Cluster authorization failed."
    if apis.authorizer is None:
        return int(E.SECURITY_DISABLED), _DISABLED
    return None


async def handle_create_acls(apis: KafkaApis, ctx: RequestContext):
    from kafka.protocol.admin.acl import CreateAclsResponse
    _Created = CreateAclsResponse.AclCreationResult
    creations = ctx.body.creations or []
    refused = _refused(apis, ctx, Op.ALTER)
    if refused:
        return CreateAclsResponse(version=ctx.version, throttle_time_ms=0,
                                  results=[_Created(error_code=refused[0], error_message=refused[1])
                                           for _ in creations])
    results, valid = [], []
    for c in creations:
        b = AclBinding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host, c.operation,
                       c.permission_type)
        try:
            validate_binding(b)
        except AclError as exc:
            results.append([int(E.INVALID_REQUEST), str(exc)])
            continue
        valid.append(b)
        results.append([0, None])
    if valid:
        try:
            await apis.admin.alter_acls(valid, ())
        except Exception as exc:  # the metadata (OSError) or ZooKeeper could not be written
            for r in results:
                if r[0] == 0:
                    r[:] = [int(E.KAFKA_STORAGE_ERROR if isinstance(exc, OSError) else E.UNKNOWN_SERVER_ERROR),
                            str(exc) or type(exc).__name__]
        else:
            ctx.log.info("acls.created", acls=[b.describe() for b in valid], principal=ctx.principal)
    return CreateAclsResponse(version=ctx.version, throttle_time_ms=0,
                              results=[_Created(error_code=c, error_message=m) for c, m in results])


async def handle_describe_acls(apis: KafkaApis, ctx: RequestContext):
    from kafka.protocol.admin.acl import DescribeAclsResponse
    _Res = DescribeAclsResponse.DescribeAclsResource
    _Desc = _Res.AclDescription

    def answer(code=0, message=None, resources=()):
        return DescribeAclsResponse(version=ctx.version, throttle_time_ms=0, error_code=int(code),
                                    error_message=message, resources=list(resources))
    refused = _refused(apis, ctx, Op.DESCRIBE)
    if refused:
        return answer(*refused)
    flt = _filter(ctx.body)
    try:
        validate_filter(flt)
    except AclError as exc:
        return answer(E.INVALID_REQUEST, str(exc))
    grouped: dict[tuple, list] = {}
    for b in apis.authorizer.matching(flt):
        grouped.setdefault((b.resource_type, b.name, b.pattern_type), []).append(
            _Desc(principal=b.principal, host=b.host, operation=b.operation, permission_type=b.permission))
    return answer(resources=[_Res(resource_type=rt, resource_name=n, pattern_type=pt, acls=acls)
                             for (rt, n, pt), acls in grouped.items()])


async def handle_delete_acls(apis: KafkaApis, ctx: RequestContext):
    from kafka.protocol.admin.acl import DeleteAclsResponse
    _FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
    _Matching = _FilterResult.DeleteAclsMatchingAcl
    filters = ctx.body.filters or []
    refused = _refused(apis, ctx, Op.ALTER)
    if refused:
        return DeleteAclsResponse(version=ctx.version, throttle_time_ms=0,
                                  filter_results=[_FilterResult(error_code=refused[0], error_message=refused[1],
                                                                matching_acls=[]) for _ in filters])
    auth = apis.authorizer
    results, doomed = [], set()
    for f in filters:
        flt = _filter(f)
        try:
            validate_filter(flt)
        except AclError as exc:
            results.append((int(E.INVALID_REQUEST), str(exc), []))
            continue
        matched = auth.matching(flt)
        doomed.update(matched)
        results.append((0, None, matched))
    code, message = 0, None
    if doomed:
        try:
            await apis.admin.alter_acls((), doomed)
        except Exception as exc:  # the metadata (OSError) or ZooKeeper could not be written
            code, message = int(E.KAFKA_STORAGE_ERROR if isinstance(exc, OSError) else E.UNKNOWN_SERVER_ERROR), \
                str(exc) or type(exc).__name__
        else:
            ctx.log.info("acls.deleted", acls=[b.describe() for b in sorted(doomed, key=AclBinding.to_json)],
                         principal=ctx.principal)
    out = []
    for c, m, matched in results:
        out.append(_FilterResult(error_code=c, error_message=m, matching_acls=[
            _Matching(error_code=code, error_message=message, resource_type=b.resource_type, resource_name=b.name,
                      pattern_type=b.pattern_type, principal=b.principal, host=b.host, operation=b.operation,
                      permission_type=b.permission) for b in matched]))
    return DeleteAclsResponse(version=ctx.version, throttle_time_ms=0, filter_results=out)
