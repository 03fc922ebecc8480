"""DescribeUserScramCredentials (API 50) and AlterUserScramCredentials (API 51), v0: users' SCRAM credentials
in the cluster metadata (security/scram.py has Kafka's rules; ZooKeeper mode keeps them in /config/users).

Every broker takes an AlterUserScramCredentials (as a KRaft cluster's brokers, which forward it to the
controller; a ZooKeeper-mode Kafka 3.x broker that is not the controller answers NOT_CONTROLLER instead).
"""
from __future__ import annotations

import structlog

from ...security import scram
from ...security.authorizer import Op
from ...wire.errors import E
from ..context import RequestContext
from ..kafka_apis import KafkaApis

log = structlog.get_logger("kafkite.scram")

# (kafka-python's classes of these two APIs, kafka.protocol.admin.users, are imported by the handlers on the first
# request of theirs: not at start, wire/lazy_kafka.py)


async def handle_describe_user_scram_credentials(apis: KafkaApis, ctx: RequestContext):
    from kafka.protocol.admin.users import DescribeUserScramCredentialsResponse
    _Described = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
    users = ctx.body.users
    if not apis.authorized_cluster(ctx, Op.DESCRIBE):  # Kafka: DESCRIBE on the cluster
        return DescribeUserScramCredentialsResponse(
            version=ctx.version, throttle_time_ms=0, error_code=int(E.CLUSTER_AUTHORIZATION_FAILED),
            error_message="Cluster authorization failed.", results=[])
    names = [u.name for u in users] if users else None  # null or empty: every user
    results = scram.describe(await apis.admin.user_configs(names), names)
    return DescribeUserScramCredentialsResponse(
        version=ctx.version, throttle_time_ms=0, error_code=0, error_message=None,
        results=[_Described(user=r["user"], error_code=r["error_code"], error_message=r["error_message"],
                            credential_infos=[_Described.CredentialInfo(mechanism=m, iterations=i)
                                              for m, i in r["credential_infos"]])
                 for r in results])


async def handle_alter_user_scram_credentials(apis: KafkaApis, ctx: RequestContext):
    from kafka.protocol.admin.users import AlterUserScramCredentialsResponse
    _Altered = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
    body = ctx.body
    if not apis.authorized_cluster(ctx, Op.ALTER):  # Kafka: ALTER on the cluster, every user fails
        names = dict.fromkeys(x.name for x in (*(body.upsertions or []), *(body.deletions or [])))
        return AlterUserScramCredentialsResponse(version=ctx.version, throttle_time_ms=0, results=[
            _Altered(user=u, error_code=int(E.CLUSTER_AUTHORIZATION_FAILED), error_message=None) for u in names])
    upsertions = [scram.Upsertion(u.name, u.mechanism, u.iterations, bytes(u.salt or b""),
                                  bytes(u.salted_password or b"")) for u in body.upsertions or []]
    deletions = [scram.Deletion(d.name, d.mechanism) for d in body.deletions or []]
    current = await apis.admin.user_configs([x.name for x in (*upsertions, *deletions)])
    results, changes = scram.alter(current, upsertions, deletions)
    if changes:
        try:
            await apis.admin.set_user_configs(changes)
        except Exception as exc:  # the store could not be written: every change of this request failed
            log.warning("scram.alter_failed", users=sorted(changes), error=repr(exc))
            code = E.KAFKA_STORAGE_ERROR if isinstance(exc, OSError) else E.UNKNOWN_SERVER_ERROR
            for r in results:
                if r["user"] in changes:
                    r["error_code"], r["error_message"] = int(code), str(exc) or type(exc).__name__
        else:
            ctx.log.info("scram.credentials_altered", users=sorted(changes),
                         deleted=[u for u, c in changes.items() if not any(m in c for m in scram.MECHANISMS)])
    return AlterUserScramCredentialsResponse(
        version=ctx.version, throttle_time_ms=0,
        results=[_Altered(user=r["user"], error_code=r["error_code"], error_message=r["error_message"])
                 for r in results])
