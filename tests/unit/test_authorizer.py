"""security/authorizer.py: Kafka's ACL semantics (AclAuthorizer / StandardAuthorizer), sans-IO."""
from __future__ import annotations

import pytest

from kafkite.config import BrokerConfig, ConfigError
from kafkite.security.authorizer import (AclBinding, AclError, AclFilter, Authorizer, Op, PatternType, Permission,
                                         ResourceType, validate_binding, validate_filter)

T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def acl(rt, name, op, principal="User:alice", perm=ALLOW, pattern=LIT, host="*"):
    return AclBinding(rt, name, pattern, principal, host, op, perm)


def test_no_acl_denies_unless_allow_everyone():
    assert not Authorizer().authorize("User:alice", "1.2.3.4", Op.READ, T, "t")
    assert Authorizer(allow_if_no_acl=True).authorize("User:alice", "1.2.3.4", Op.READ, T, "t")
    # an ACL on the resource (of anyone) ends "no ACL found"
    a = Authorizer(allow_if_no_acl=True, acls=[acl(T, "t", Op.READ, principal="User:bob")])
    assert not a.authorize("User:alice", "1.2.3.4", Op.READ, T, "t")
    assert a.authorize("User:alice", "1.2.3.4", Op.READ, T, "other")


def test_implied_operations_and_all():
    a = Authorizer(acls=[acl(T, "t", Op.WRITE), acl(T, "u", Op.ALTER_CONFIGS), acl(G, "g", Op.ALL)])
    assert a.authorize("User:alice", "h", Op.WRITE, T, "t")
    assert a.authorize("User:alice", "h", Op.DESCRIBE, T, "t")  # WRITE implies DESCRIBE
    assert not a.authorize("User:alice", "h", Op.READ, T, "t")
    assert a.authorize("User:alice", "h", Op.DESCRIBE_CONFIGS, T, "u")
    assert not a.authorize("User:alice", "h", Op.DESCRIBE, T, "u")
    assert all(a.authorize("User:alice", "h", op, G, "g") for op in (Op.READ, Op.DESCRIBE, Op.DELETE))
    assert a.authorized_operations("User:alice", "h", T, "t") == {Op.WRITE, Op.DESCRIBE}


def test_deny_beats_allow_and_deny_all():
    a = Authorizer(acls=[acl(T, "*", Op.ALL), acl(T, "secret", Op.READ, perm=DENY)])
    assert a.authorize("User:alice", "h", Op.READ, T, "public")
    assert not a.authorize("User:alice", "h", Op.READ, T, "secret")
    assert a.authorize("User:alice", "h", Op.DESCRIBE, T, "secret")  # a DENY of READ does not deny DESCRIBE
    a = Authorizer(acls=[acl(T, "t", Op.READ), acl(T, "t", Op.ALL, principal="User:*", perm=DENY)])
    assert not a.authorize("User:alice", "h", Op.READ, T, "t")


def test_prefixed_wildcards_principal_and_host():
    a = Authorizer(acls=[acl(T, "app-", Op.READ, pattern=PRE), acl(T, "x", Op.READ, principal="User:*"),
                         acl(T, "y", Op.READ, host="10.0.0.1")])
    assert a.authorize("User:alice", "h", Op.READ, T, "app-orders")
    assert not a.authorize("User:alice", "h", Op.READ, T, "ap")
    assert not a.authorize("User:alice", "h", Op.READ, G, "app-orders")  # another resource type
    assert a.authorize("User:bob", "h", Op.READ, T, "x")
    assert a.authorize("User:alice", "10.0.0.1", Op.READ, T, "y")
    assert not a.authorize("User:alice", "10.0.0.2", Op.READ, T, "y")


def test_super_users_and_config():
    cfg = BrokerConfig(static={"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                               "super.users": "User:admin;User:CN=broker,O=org"})
    a = Authorizer.from_config(cfg)
    assert a.super_users == {"User:admin", "User:CN=broker,O=org"} and not a.allow_if_no_acl
    assert a.authorize("User:admin", "h", Op.ALTER, C, "kafka-cluster")
    assert Authorizer.from_config(BrokerConfig(static={})) is None
    std = BrokerConfig(static={"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                               "allow.everyone.if.no.acl.found": "true"})
    assert Authorizer.from_config(std).allow_if_no_acl
    with pytest.raises(ConfigError, match="not an authorizer Kafkite has"):
        Authorizer.from_config(BrokerConfig(static={"authorizer.class.name": "com.example.MyAuthorizer"}))


def test_filters_match_as_kafkas_acl_binding_filter():
    acls = [acl(T, "app-", Op.READ, pattern=PRE), acl(T, "*", Op.READ), acl(T, "app-1", Op.WRITE),
            acl(G, "g", Op.READ, principal="User:bob", perm=DENY)]
    a = Authorizer(acls=acls)

    def f(rt=ResourceType.ANY, name=None, pt=PatternType.ANY, principal=None, op=Op.ANY, perm=Permission.ANY):
        return a.matching(AclFilter(rt, name, pt, principal, None, op, perm))
    assert len(f()) == 4
    assert f(pt=PatternType.MATCH, name="app-1", rt=T) == sorted(acls[:3], key=AclBinding.to_json)
    assert f(pt=LIT, name="app-1") == [acls[2]]
    assert f(pt=PatternType.ANY, name="app-") == [acls[0]]
    assert f(principal="User:bob") == [acls[3]] and f(perm=DENY) == [acls[3]] and f(op=Op.WRITE) == [acls[2]]


def test_validation_refuses_what_kafka_refuses():
    validate_binding(acl(T, "t", Op.READ))
    for bad, msg in ((acl(C, "other", Op.ALTER), "kafka-cluster"), (acl(T, "", Op.READ), "empty resource name"),
                     (acl(T, "t", Op.ANY), "Invalid operation"), (acl(ResourceType.ANY, "t", Op.READ), "resourceType"),
                     (acl(T, "t", Op.READ, perm=Permission.ANY), "permissionType"),
                     (acl(T, "t", Op.READ, pattern=PatternType.MATCH), "patternType"),
                     (acl(T, "t", Op.READ, principal="alice"), "principal")):
        with pytest.raises(AclError, match=msg):
            validate_binding(bad)
    with pytest.raises(AclError, match="UNKNOWN"):
        validate_filter(AclFilter(T, None, PatternType.ANY, None, None, Op.UNKNOWN, Permission.ANY))
    validate_filter(AclFilter(ResourceType.ANY, None, PatternType.ANY, None, None, Op.ANY, Permission.ANY))


def test_authorize_any_for_idempotent_producers():
    a = Authorizer(acls=[acl(T, "app-", Op.WRITE, pattern=PRE)])
    assert a.authorize_any("User:alice", "h", Op.WRITE, T)
    assert not a.authorize_any("User:bob", "h", Op.WRITE, T)
    # Kafka's default authorizeByResourceType: a DENY of a prefix covering every ALLOW, or of "*", wins
    assert not Authorizer(acls=[acl(T, "app-", Op.WRITE, pattern=PRE), acl(T, "app", Op.ALL, perm=DENY, pattern=PRE)]
                          ).authorize_any("User:alice", "h", Op.WRITE, T)
    assert not Authorizer(acls=[acl(T, "x", Op.WRITE), acl(T, "*", Op.WRITE, perm=DENY)]).authorize_any(
        "User:alice", "h", Op.WRITE, T)
    assert Authorizer(acls=[acl(T, "x", Op.WRITE), acl(T, "y", Op.WRITE, perm=DENY)]).authorize_any(
        "User:alice", "h", Op.WRITE, T)
    assert Authorizer(["User:root"]).authorize_any("User:root", "h", Op.WRITE, T)
    assert Authorizer(allow_if_no_acl=True).authorize_any("User:x", "h", Op.WRITE, T)


def _reference(acls, supers, allow_if_none, principal, host, op, rt, name) -> bool:
    """Kafka's rules written out plainly, without the store's indexes."""
    if principal in supers:
        return True
    matching = [a for a in acls if a.resource_type == rt and (
        (a.pattern_type == LIT and a.name in (name, "*")) or (a.pattern_type == PRE and name.startswith(a.name)))]
    if not matching:
        return allow_if_none
    mine = [a for a in matching if a.principal in (principal, "User:*") and a.host in (host, "*")]
    if any(a.permission == DENY and a.operation in (op, Op.ALL) for a in mine):
        return False
    implied = {Op.DESCRIBE: {Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER},
               Op.DESCRIBE_CONFIGS: {Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}}.get(op, {op})
    return any(a.permission == ALLOW and (a.operation == Op.ALL or a.operation in implied) for a in mine)


def test_the_indexed_store_decides_as_the_plain_rules():
    from hypothesis import given, settings, strategies as st
    names = st.sampled_from(["a", "ab", "abc", "b", "*", "ba"])
    principals = st.sampled_from(["User:alice", "User:bob", "User:*"])
    ops = st.sampled_from([Op.ALL, Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALTER, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS])
    binding = st.builds(AclBinding, st.sampled_from([T, G]), names, st.sampled_from([LIT, PRE]), principals,
                        st.sampled_from(["*", "10.0.0.1"]), ops, st.sampled_from([ALLOW, DENY]))

    @settings(max_examples=300, deadline=None)
    @given(st.lists(binding, max_size=12), st.booleans(), st.sampled_from(["User:alice", "User:bob"]),
           st.sampled_from(["10.0.0.1", "10.0.0.2"]), ops.filter(lambda o: o != Op.ALL), st.sampled_from([T, G]),
           st.sampled_from(["a", "ab", "abc", "b", "bab", "c"]))
    def check(acls, allow_if_none, principal, host, op, rt, name):
        a = Authorizer(["User:root"], allow_if_none, acls)
        assert a.authorize(principal, host, op, rt, name) == _reference(acls, {"User:root"}, allow_if_none,
                                                                         principal, host, op, rt, name)
    check()
