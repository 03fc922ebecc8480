"""Reset to empty in ZooKeeper mode (POST /v1/reset {"data": true} on a ZooKeeper-mode broker's control listener;
`ProcessCluster.empty()` asks every broker's).

What lives in ZooKeeper goes cluster-wide, whichever broker is asked: every topic but the internal ones is marked
under /admin/delete_topics at once and the answer waits until the controller has deleted each (its replicas answered
StopReplica, its nodes and marker gone: a topic of the same name can be created again at once), every ACL
(/kafka-acl), every SCRAM user (/config/users, emptied as Kafka's AdminZkClient leaves it) and every group's own
configs (/config/groups, likewise). Groups live with
their coordinator: those this broker coordinates are deleted (a group with members is kept and named); ask every
broker's listener for all of them."""
from __future__ import annotations

import trio

from ..controller import zk_data as z
from .views import delete_groups

DELETE_TIMEOUT_S = 30.0


async def empty(brokers: dict) -> dict:
    b = brokers[min(brokers)]
    zk = b.state.zk
    topics = sorted(name for name in b.cache.topics if not name.startswith("__"))

    def mark() -> None:
        for name in topics:
            zk.admin.delete_topic(name)

    def left() -> list[str]:
        return [n for n in topics if zk.store.get(z.topic_path(n)) is not None
                or zk.store.get(z.delete_topic_path(n)) is not None]
    await zk.call(mark)
    remaining = topics
    with trio.move_on_after(DELETE_TIMEOUT_S):
        while remaining:
            remaining = await zk.call(left)
            if remaining:
                await trio.sleep(0.02)
    if remaining:
        raise TimeoutError(f"topics not deleted by the controller within {DELETE_TIMEOUT_S:.0f}s: {remaining}")
    groups, kept = await delete_groups([b])
    acls = list(await zk.call(zk.acls.load_all))
    if acls:
        await b.admin.alter_acls([], acls)
    users = sorted(u for u, config in (await zk.user_configs()).items() if config)
    if users:
        await b.admin.set_user_configs({u: {} for u in users})
    group_configs = sorted(await b.admin.group_configs())
    if group_configs:
        await b.admin.set_group_configs({g: {} for g in group_configs})
    return {"topics_deleted": topics, "groups_deleted": sorted(groups), "groups_kept": kept, "acls_deleted": len(acls),
            "users_deleted": users, "group_configs_deleted": group_configs, "groups_of_broker": b.node_id}
