"""ACLs in ZooKeeper mode, in Kafka 3.x's layout: CreateAcls through any broker writes /kafka-acl/<Type>/<name> (or
/kafka-acl-extended/prefixed/...) with AclEntry's JSON and a /kafka-acl-changes (or -extended-changes) notification
that every broker follows; a broker started afterwards loads them all; a deletion empties the node away. Checked
by producing as a SASL user on every broker of a 3-broker cluster."""
from __future__ import annotations

import json
import time

import pytest
from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, KafkaAdminClient,
                         ResourcePattern, ResourcePatternFilter, ResourceType)

from kafkite.testing.process_cluster import ProcessCluster

pytestmark = pytest.mark.timeout(300)

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="root" password="root-pw" '
        'user_root="root-pw" user_alice="alice-pw";')
SECURED = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
           "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS, "default.replication.factor": "3",
           "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:root"}


def auth(user: str) -> dict:
    return dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_plain_username=user,
                sasl_plain_password=f"{user}-pw")


def can_write(bootstrap: str, topic: str) -> bool:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", max_block_ms=5000, retries=0, **auth("alice"))
    try:
        p.send(topic, b"v").get(timeout=15)
        return True
    except KafkaError:
        return False
    finally:
        p.close(timeout=5)


def until(c: ProcessCluster, check, what: str, timeout: float = 45.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}\n{c.log_tails(20)}")
        time.sleep(0.2)


def test_acls_follow_zookeeper_on_every_broker(kafkite_zookeeper):
    with ProcessCluster(3, zookeeper_connect=kafkite_zookeeper.connect_string, chroot="/kafkite-test-acls",
                        overrides=SECURED) as c:
        root = KafkaAdminClient(bootstrap_servers=c.bootstrap_of(1), **auth("root"))
        from kafka.admin import NewTopic
        root.create_topics([NewTopic("zk-acl", 1, 3), NewTopic("app-orders", 1, 3)])
        assert not can_write(c.bootstrap_of(2), "zk-acl")
        r = root.create_acls([ACL("User:alice", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
                                  ResourcePattern(ResourceType.TOPIC, "zk-acl"))])
        assert not r["failed"], r
        assert c.zk_get("/kafka-acl/Topic/zk-acl") == {"version": 1, "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Write", "host": "*"}]}
        changes = [c.zk.get(f"/kafka-acl-changes/{n}")[0] for n in c.zk_children("/kafka-acl-changes")]
        assert b"Topic:zk-acl" in changes and all(n.startswith("acl_changes_")
                                                  for n in c.zk_children("/kafka-acl-changes"))
        until(c, lambda: all(can_write(c.bootstrap_of(i), "zk-acl") for i in (1, 2, 3)),
              "alice cannot write on every broker")
        # a PREFIXED ACL through another broker: the extended layout and notification
        root2 = KafkaAdminClient(bootstrap_servers=c.bootstrap_of(2), **auth("root"))
        r = root2.create_acls([ACL("User:alice", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
                                   ResourcePattern(ResourceType.TOPIC, "app-", ACLResourcePatternType.PREFIXED))])
        assert not r["failed"], r
        assert c.zk_get("/kafka-acl-extended/prefixed/Topic/app-")["acls"][0]["operation"] == "Write"
        ext = [json.loads(c.zk.get(f"/kafka-acl-extended-changes/{n}")[0])
               for n in c.zk_children("/kafka-acl-extended-changes")]
        assert {"version": 1, "resourceType": "Topic", "name": "app-", "patternType": "Prefixed"} in ext
        until(c, lambda: all(can_write(c.bootstrap_of(i), "app-orders") for i in (1, 2, 3)),
              "the prefixed ACL did not reach every broker")
        # a broker started afterwards loads every ACL
        c.stop_broker(3)
        c.start_broker(3)
        until(c, lambda: can_write(c.bootstrap_of(3), "zk-acl") and can_write(c.bootstrap_of(3), "app-orders"),
              "a restarted broker does not have the ACLs")
        acls, err = root.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                                 ResourcePatternFilter(ResourceType.ANY, None,
                                                                       ACLResourcePatternType.ANY)))
        assert len(acls) == 2
        # deleted through broker 3: the node goes, and every broker refuses again
        root3 = KafkaAdminClient(bootstrap_servers=c.bootstrap_of(3), **auth("root"))
        (_, gone, err), = root3.delete_acls([ACLFilter("User:alice", None, ACLOperation.ANY, ACLPermissionType.ANY,
                                                       ResourcePatternFilter(ResourceType.TOPIC, "zk-acl",
                                                                             ACLResourcePatternType.LITERAL))])
        assert len(gone) == 1
        with pytest.raises(KeyError):
            c.zk_get("/kafka-acl/Topic/zk-acl")
        until(c, lambda: not any(can_write(c.bootstrap_of(i), "zk-acl") for i in (1, 2, 3)),
              "a deleted ACL still lets alice write somewhere")
        for a in (root, root2, root3):
            a.close()
