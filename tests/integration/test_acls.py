"""ACLs as Kafka has them (issue "Security as Kafka has it", item 5): a SASL_PLAINTEXT listener with PLAIN users,
`authorizer.class.name` set, admin a super user. Real clients (confluent-kafka, kafka-python) are refused with
Kafka's errors without ACLs, work with them; DENY beats ALLOW; PREFIXED ACLs; allow.everyone.if.no.acl.found;
Metadata hides what a user may not describe; the admin clients create, describe and delete ACLs; the ACLs survive a
restart; CreateAcls / DescribeAcls / DeleteAcls errors over raw requests (every version 0-3)."""
from __future__ import annotations

import time
import uuid

import pytest
from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, KafkaAdminClient,
                         NewTopic, ResourcePattern, ResourcePatternFilter, ResourceType)
from kafka.protocol.admin import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest

from helpers import kp_group_consumer, kp_poll_until_assigned, kp_read
from kafkite.testing.process import BrokerProcess
from kafkite.testing.runner import BrokerThread
from kafkite.testing.wire_client import WireClient
from kafkite.wire.errors import E

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" '
        'user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";')
SASL = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS}
SECURED = {**SASL, "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin"}


def kp(user: str) -> dict:
    return dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_plain_username=user,
                sasl_plain_password=user + "-secret")


def ck(user: str) -> dict:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": user,
            "sasl.password": user + "-secret"}


def allow(principal, rt, name, op, pattern=ACLResourcePatternType.LITERAL, perm=ACLPermissionType.ALLOW):
    return ACL(principal, "*", op, perm, ResourcePattern(rt, name, pattern))


ANY_FILTER = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                       ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))


def secured_broker(tmp_path_factory):
    """A process broker (confluent-kafka group consumers need one) with a data dir, and admin's admin client:
    the body of each ACL test module's module-scoped fixture."""
    data = tmp_path_factory.mktemp("acl-data")
    with BrokerProcess(data_dir=data, overrides=SECURED) as b:
        adm = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers, **kp("admin"))
        try:
            yield b, adm
        finally:
            adm.close()


secured = pytest.fixture(scope="module", name="secured")(secured_broker)


def fresh(adm, prefix: str = "t") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    adm.create_topics([NewTopic(name, 1, 1)])
    return name


def add(adm, *acls):
    r = adm.create_acls(list(acls))
    assert not r["failed"], r


def grant(adm, rt, name, *ops, principal="User:bob"):
    """ALLOW `principal` each of `ops` on the literal resource."""
    add(adm, *(allow(principal, rt, name, op) for op in ops))


def ck_delivery_error(bs: str, user: str, topic: str):
    from confluent_kafka import Producer
    errors = []
    p = Producer({"bootstrap.servers": bs, **ck(user), "message.timeout.ms": 15000})

    def report(err, msg):  # (confluent-kafka leaves an exception set for a message with no partition: name it here)
        errors.append(err.name() if err is not None else None)
    p.produce(topic, b"v", on_delivery=report)
    p.flush(30)
    return errors[0] if errors else "no delivery report"


def test_no_acls_topic_authorization_failed_in_both_clients(secured):
    from kafka import KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError
    b, adm = secured
    topic = fresh(adm)
    err = ck_delivery_error(b.bootstrap_servers, "alice", topic)
    assert err == "TOPIC_AUTHORIZATION_FAILED"
    p = KafkaProducer(bootstrap_servers=b.bootstrap_servers, max_block_ms=10000, **kp("alice"))
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            p.send(topic, b"v").get(timeout=20)
    finally:
        p.close()


def test_write_and_read_acls_let_a_user_produce_and_group_consume(secured):
    from confluent_kafka import Consumer, Producer
    b, adm = secured
    topic, group = fresh(adm), f"g-{uuid.uuid4().hex[:6]}"
    add(adm, allow("User:alice", ResourceType.TOPIC, topic, ACLOperation.WRITE),
        allow("User:alice", ResourceType.TOPIC, topic, ACLOperation.READ),
        allow("User:alice", ResourceType.GROUP, group, ACLOperation.READ))
    p = Producer({"bootstrap.servers": b.bootstrap_servers, **ck("alice")})
    for i in range(5):
        p.produce(topic, b"m%d" % i)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": b.bootstrap_servers, **ck("alice"), "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 5 and time.monotonic() < deadline:
        m = c.poll(1)
        if m is not None:
            assert m.error() is None, m.error()
            got.append(m.value())
    c.commit(asynchronous=False)
    c.close()
    assert got == [b"m%d" % i for i in range(5)]
    # kafka-python, the same user: consumes through the group and its committed offsets
    from kafka import TopicPartition
    kc = kp_group_consumer(topic, bootstrap_servers=b.bootstrap_servers, group_id=group, auto_offset_reset="earliest",
                           **kp("alice"))
    try:
        assert kp_poll_until_assigned(kc) == []
        assert kc.position(TopicPartition(topic, 0)) == 5  # everything was committed by the confluent consumer
    finally:
        kc.close()


def test_group_without_read_is_group_authorization_failed(secured):
    from confluent_kafka import Consumer, KafkaError
    from kafka import KafkaConsumer
    from kafka.errors import GroupAuthorizationFailedError
    b, adm = secured
    topic = fresh(adm)
    add(adm, allow("User:alice", ResourceType.TOPIC, topic, ACLOperation.READ))
    c = Consumer({"bootstrap.servers": b.bootstrap_servers, **ck("alice"), "group.id": "g-denied",
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    err = None
    deadline = time.monotonic() + 30
    while err is None and time.monotonic() < deadline:
        m = c.poll(1)
        if m is not None and m.error() is not None:
            err = m.error()
    c.close()
    assert err is not None and err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, err
    kc = KafkaConsumer(topic, bootstrap_servers=b.bootstrap_servers, group_id="g-denied", consumer_timeout_ms=60000,
                       **kp("alice"))
    with pytest.raises(GroupAuthorizationFailedError):
        list(kc)
    kc.close()


def test_deny_beats_allow_and_prefixed_acls(secured):
    from kafka import KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError
    b, adm = secured
    prefix = f"app{uuid.uuid4().hex[:6]}-"
    ok, secret = fresh(adm, prefix + "orders"), fresh(adm, prefix + "secret")
    add(adm, allow("User:bob", ResourceType.TOPIC, prefix, ACLOperation.WRITE, ACLResourcePatternType.PREFIXED),
        allow("User:bob", ResourceType.TOPIC, secret, ACLOperation.WRITE, perm=ACLPermissionType.DENY))
    p = KafkaProducer(bootstrap_servers=b.bootstrap_servers, max_block_ms=10000, **kp("bob"))
    try:
        assert p.send(ok, b"v").get(timeout=20).offset == 0
        with pytest.raises(TopicAuthorizationFailedError):
            p.send(secret, b"v").get(timeout=20)
    finally:
        p.close()


def test_super_user_bypasses_and_metadata_hides_undescribable_topics(secured):
    b, adm = secured
    hidden, shown = fresh(adm, "hidden"), fresh(adm, "shown")
    add(adm, allow("User:bob", ResourceType.TOPIC, shown, ACLOperation.DESCRIBE))
    bob = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers, **kp("bob"))
    try:
        names = set(bob.list_topics())
        assert shown in names and hidden not in names
    finally:
        bob.close()
    assert {hidden, shown} <= set(adm.list_topics())  # admin is a super user: no ACL needed
    from confluent_kafka.admin import AdminClient
    md = AdminClient({"bootstrap.servers": b.bootstrap_servers, **ck("bob")}).list_topics(hidden, timeout=10)
    assert md.topics[hidden].error is not None and md.topics[hidden].error.code() == 29  # TOPIC_AUTHORIZATION_FAILED


def test_admin_clients_describe_and_delete_acls(secured):
    b, adm = secured
    name = f"d-{uuid.uuid4().hex[:6]}"
    add(adm, allow("User:carol", ResourceType.TOPIC, name, ACLOperation.READ),
        allow("User:carol", ResourceType.GROUP, name, ACLOperation.READ))
    flt = ACLFilter("User:carol", None, ACLOperation.ANY, ACLPermissionType.ANY,
                    ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))
    acls, err = adm.describe_acls(flt)
    assert err.errno == 0 and {(a.resource_pattern.resource_type, a.resource_pattern.resource_name) for a in acls} == {
        (ResourceType.TOPIC, name), (ResourceType.GROUP, name)}
    # confluent-kafka's AdminClient sees the same
    from confluent_kafka.admin import AclBindingFilter, AdminClient, AclOperation, AclPermissionType
    from confluent_kafka.admin import ResourcePatternType, ResourceType as CRT
    cadm = AdminClient({"bootstrap.servers": b.bootstrap_servers, **ck("admin")})
    cf = AclBindingFilter(CRT.ANY, None, ResourcePatternType.ANY, "User:carol", None, AclOperation.ANY,
                          AclPermissionType.ANY)
    assert len(cadm.describe_acls(cf).result(timeout=20)) == 2
    from confluent_kafka.admin import AclBinding
    created = cadm.create_acls([AclBinding(CRT.TRANSACTIONAL_ID, "tx-", ResourcePatternType.PREFIXED, "User:carol",
                                           "*", AclOperation.WRITE, AclPermissionType.ALLOW)])
    assert [f.result(timeout=20) for f in created.values()] == [None]
    assert len(cadm.describe_acls(cf).result(timeout=20)) == 3
    bad = cadm.create_acls([AclBinding(CRT.BROKER, "not-kafka-cluster", ResourcePatternType.LITERAL, "User:carol",
                                       "*", AclOperation.ALTER, AclPermissionType.ALLOW)])
    with pytest.raises(Exception, match="kafka-cluster"):
        list(bad.values())[0].result(timeout=20)
    gone_tx = cadm.delete_acls([AclBindingFilter(CRT.TRANSACTIONAL_ID, None, ResourcePatternType.ANY, None, None,
                                                 AclOperation.ANY, AclPermissionType.ANY)])
    assert [len(f.result(timeout=20)) for f in gone_tx.values()] == [1]
    deleted = cadm.delete_acls([AclBindingFilter(CRT.GROUP, None, ResourcePatternType.ANY, "User:carol", None,
                                                 AclOperation.ANY, AclPermissionType.ANY)])
    assert len(list(deleted.values())[0].result(timeout=20)) == 1
    (_, gone, err), = adm.delete_acls([flt])
    assert err.errno == 0 and [a.resource_pattern.resource_type for a in gone] == [ResourceType.TOPIC]
    assert adm.describe_acls(flt)[0] == []


def test_acls_survive_a_restart(tmp_path):
    from kafka import KafkaProducer
    with BrokerProcess(data_dir=tmp_path, overrides=SECURED) as b:
        adm = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers, **kp("admin"))
        adm.create_topics([NewTopic("kept", 1, 1)])
        add(adm, allow("User:alice", ResourceType.TOPIC, "kept", ACLOperation.WRITE))
        adm.close()
    with BrokerProcess(data_dir=tmp_path, overrides=SECURED) as b:
        p = KafkaProducer(bootstrap_servers=b.bootstrap_servers, max_block_ms=10000, **kp("alice"))
        assert p.send("kept", b"v").get(timeout=20).offset == 0
        p.close()
        adm = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers, **kp("admin"))
        assert len(adm.describe_acls(ANY_FILTER)[0]) == 1
        adm.close()


def test_allow_everyone_if_no_acl_found():
    from kafka import KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError
    with BrokerThread(overrides={**SECURED, "allow.everyone.if.no.acl.found": "true"}) as b:
        p = KafkaProducer(bootstrap_servers=b.bootstrap_servers, max_block_ms=10000, **kp("bob"))
        assert p.send("open", b"v").get(timeout=20).offset == 0  # no ACL on it: allowed (and auto-created)
        adm = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers, **kp("admin"))
        add(adm, allow("User:alice", ResourceType.TOPIC, "open", ACLOperation.WRITE))
        adm.close()
        p.close()
        p = KafkaProducer(bootstrap_servers=b.bootstrap_servers, max_block_ms=10000, **kp("bob"))
        with pytest.raises(TopicAuthorizationFailedError):  # now it has one, and not for bob
            p.send("open", b"v").get(timeout=20)
        p.close()


# -- raw requests ------------------------------------------------------------------------------------------------
def _login(w, user: str) -> None:
    from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
    assert w.request(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
    pw = (user + "-secret").encode()
    assert w.request(SaslAuthenticateRequest(auth_bytes=b"\0" + user.encode() + b"\0" + pw), 1).error_code == 0


def _creation(version, rt=2, name="t", principal="User:x", op=3, perm=3, pattern=3, host="*"):
    C = CreateAclsRequest.AclCreation
    return C(resource_type=rt, resource_name=name, resource_pattern_type=pattern, principal=principal, host=host,
             operation=op, permission_type=perm)


def _describe(rt=1, name=None, pattern=1, principal=None, op=1, perm=1):
    return DescribeAclsRequest(resource_type_filter=rt, resource_name_filter=name, pattern_type_filter=pattern,
                               principal_filter=principal, host_filter=None, operation=op, permission_type=perm)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_acl_apis_every_version_and_their_errors(version):
    with BrokerThread(overrides=SECURED) as b:
        with WireClient.connect(b.bootstrap_servers) as w:
            _login(w, "admin")
            r = w.request(CreateAclsRequest(creations=[
                _creation(version, name=f"t{version}"), _creation(version, rt=4, name="other"),
                _creation(version, name=""), _creation(version, op=1), _creation(version, principal="nocolon"),
                _creation(version, rt=4, name="kafka-cluster", op=7)]), version)
            assert [x.error_code for x in r.results] == [0, E.INVALID_REQUEST, E.INVALID_REQUEST, E.INVALID_REQUEST,
                                                         E.INVALID_REQUEST, 0]
            assert "kafka-cluster" in r.results[1].error_message
            pattern = 3 if version == 0 else 1  # v0 knows LITERAL only
            d = w.request(_describe(pattern=pattern), version)
            assert d.error_code == 0
            assert sorted((x.resource_type, x.resource_name, len(x.acls)) for x in d.resources) == [
                (2, f"t{version}", 1), (4, "kafka-cluster", 1)]
            assert w.request(_describe(op=0), version).error_code == E.INVALID_REQUEST  # UNKNOWN in a filter
            F = DeleteAclsRequest.DeleteAclsFilter
            dr = w.request(DeleteAclsRequest(filters=[
                F(resource_type_filter=2, resource_name_filter=None, pattern_type_filter=pattern,
                  principal_filter=None, host_filter=None, operation=1, permission_type=1),
                F(resource_type_filter=0, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
                  host_filter=None, operation=1, permission_type=1)]), version)
            assert [x.error_code for x in dr.filter_results] == [0, E.INVALID_REQUEST]
            assert [a.resource_name for a in dr.filter_results[0].matching_acls] == [f"t{version}"]
            assert [x.resource_name for x in w.request(_describe(pattern=pattern), version).resources] == [
                "kafka-cluster"]
        with WireClient.connect(b.bootstrap_servers) as w:  # bob: not allowed on the cluster
            _login(w, "bob")
            assert [x.error_code for x in w.request(CreateAclsRequest(creations=[_creation(version)]),
                                                    version).results] == [E.CLUSTER_AUTHORIZATION_FAILED]
            assert w.request(_describe(pattern=3), version).error_code == E.CLUSTER_AUTHORIZATION_FAILED


def test_acl_apis_without_an_authorizer_are_security_disabled(broker):
    with WireClient.connect(broker.bootstrap_servers) as w:
        assert [x.error_code for x in w.request(CreateAclsRequest(creations=[_creation(1)]), 1).results] == [
            E.SECURITY_DISABLED]
        assert w.request(_describe(), 1).error_code == E.SECURITY_DISABLED
        F = DeleteAclsRequest.DeleteAclsFilter
        r = w.request(DeleteAclsRequest(filters=[F(resource_type_filter=1, resource_name_filter=None,
                                                   pattern_type_filter=1, principal_filter=None, host_filter=None,
                                                   operation=1, permission_type=1)]), 1)
        assert [x.error_code for x in r.filter_results] == [E.SECURITY_DISABLED]


def test_an_unknown_authorizer_class_stops_the_start():
    from kafkite.config import ConfigError
    with pytest.raises(RuntimeError) as info:
        with BrokerThread(overrides={"authorizer.class.name": "com.example.Nope"}):
            pass
    assert isinstance(info.value.__cause__, ConfigError) and "not an authorizer Kafkite has" in str(
        info.value.__cause__)


def _kafkite(*args: str):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "kafkite.cli", *args], capture_output=True, text=True, timeout=60)


def test_cli_acls_add_list_remove(secured, tmp_path):
    """`kafkite acls` as kafka-acls: --add (with --consumer), --list, --remove, with --command-config for SASL."""
    b, adm = secured
    topic, group = fresh(adm, "cli"), f"gcli-{uuid.uuid4().hex[:6]}"
    props = tmp_path / "admin.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
                     "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" "
                     "password=\"admin-secret\";\n")
    base = ("acls", "--bootstrap-server", b.bootstrap_servers, "--command-config", str(props))
    out = _kafkite(*base, "--add", "--allow-principal", "User:alice", "--consumer", "--topic", topic, "--group", group)
    assert out.returncode == 0, out.stderr
    assert f"Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)`" \
        in out.stdout
    out = _kafkite(*base, "--list", "--topic", topic)
    assert out.returncode == 0, out.stderr
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in out.stdout
    assert "(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)" in out.stdout
    kc = kp_group_consumer(topic, bootstrap_servers=b.bootstrap_servers, group_id=group, auto_offset_reset="earliest",
                           **kp("alice"))
    try:  # allowed: it joins and is assigned the (empty) topic; no GROUP/TOPIC_AUTHORIZATION_FAILED
        assert kp_poll_until_assigned(kc) == []
    finally:
        kc.close()
    out = _kafkite(*base, "--remove", "--allow-principal", "User:alice", "--operation", "Read", "--topic", topic)
    assert out.returncode == 0 and "operation=READ" in out.stdout, out.stderr
    out = _kafkite(*base, "--list", "--topic", topic)
    assert "operation=READ" not in out.stdout and "operation=DESCRIBE" in out.stdout
    out = _kafkite(*base, "--remove", "--topic", topic, "--group", group, "--force")
    assert out.returncode == 0, out.stderr
    assert _kafkite(*base, "--list", "--topic", topic).stdout.strip() == ""
    out = _kafkite("acls", "--bootstrap-server", b.bootstrap_servers, "--add", "--operation", "Fly",
                   "--allow-principal", "User:x", "--topic", "t")
    assert out.returncode == 2 and "Invalid operation" in out.stderr


def test_ssl_client_certificate_dn_is_the_principal(tmp_path):
    """On an SSL listener with client authentication the principal is the certificate's subject DN (RFC 2253, as
    Kafka's default principal builder): a super user by its DN, an ACL for another certificate's DN."""
    trustme = pytest.importorskip("trustme")
    from cryptography import x509
    from kafka import KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError
    ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    keystore, ca_file = tmp_path / "broker.pem", tmp_path / "ca.pem"
    keystore.write_bytes(server.private_key_pem.bytes() + b"".join(c.bytes() for c in server.cert_chain_pems))
    ca.cert_pem.write_to_path(str(ca_file))
    files, dns = {}, {}
    for who in ("admin", "alice", "bob"):
        cert = ca.issue_cert(f"{who}.example", common_name=who)
        files[who] = (tmp_path / f"{who}.crt", tmp_path / f"{who}.key")
        files[who][0].write_bytes(cert.cert_chain_pems[0].bytes())
        files[who][1].write_bytes(cert.private_key_pem.bytes())
        dns[who] = "User:" + x509.load_pem_x509_certificate(cert.cert_chain_pems[0].bytes()).subject.rfc4514_string()
    assert dns["alice"].startswith("User:CN=alice,")

    def kp_ssl(who):
        return dict(security_protocol="SSL", ssl_cafile=str(ca_file), ssl_certfile=str(files[who][0]),
                    ssl_keyfile=str(files[who][1]), ssl_check_hostname=False)
    overrides = {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore),
                 "ssl.client.auth": "required", "ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca_file),
                 "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                 "super.users": dns["admin"]}
    with BrokerThread(overrides=overrides) as b:
        adm = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers, **kp_ssl("admin"))
        adm.create_topics([NewTopic("certs", 1, 1)])
        add(adm, allow(dns["alice"], ResourceType.TOPIC, "certs", ACLOperation.WRITE))
        adm.close()
        p = KafkaProducer(bootstrap_servers=b.bootstrap_servers, max_block_ms=10000, **kp_ssl("alice"))
        assert p.send("certs", b"v").get(timeout=20).offset == 0
        p.close()
        p = KafkaProducer(bootstrap_servers=b.bootstrap_servers, max_block_ms=10000, **kp_ssl("bob"))
        with pytest.raises(TopicAuthorizationFailedError):
            p.send("certs", b"v").get(timeout=20)
        p.close()


@pytest.mark.usefixtures("java_client")
def test_java_client_topic_authorization(secured):
    """Java kafka-clients 3.9 and 4.3 (idempotent by default: InitProducerId is let in by WRITE on some topic):
    refused with TopicAuthorizationException without an ACL, produces and group-consumes with WRITE, READ and the
    group's READ."""
    from clients.drivers import java_available, run_java, summary
    if not java_available():
        pytest.skip("the Java kafka-clients driver is not available")
    b, adm = secured
    topic, group = fresh(adm, "java"), f"gjava-{uuid.uuid4().hex[:6]}"
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
            'password="alice-secret";')
    props = ["--prop", "security.protocol=SASL_PLAINTEXT", "--prop", "sasl.mechanism=PLAIN",
             "--prop", f"sasl.jaas.config={jaas}"]
    bs = b.bootstrap_servers
    out = run_java("produce", bs, topic, 1, *props, "--prop", "max.block.ms=5000", "--prop",
                   "delivery.timeout.ms=5000", "--prop", "request.timeout.ms=4000", check=False)
    assert "TopicAuthorizationException" in str(out), out[-1]
    add(adm, allow("User:alice", ResourceType.TOPIC, topic, ACLOperation.WRITE),
        allow("User:alice", ResourceType.TOPIC, topic, ACLOperation.READ),
        allow("User:alice", ResourceType.GROUP, group, ACLOperation.READ))
    out = run_java("produce", bs, topic, 10, *props)
    assert out[-1]["acked"] == 10 and out[-1]["errors"] == 0, out[-1]
    got = summary(run_java("consume-group", bs, topic, group, 10, "--timeout-ms", 30000, *props))
    assert got["consumed"] == 10, got


def test_an_in_process_cluster_replicates_under_an_authorizer():
    """Replication (followers' fetches, AlterPartition) uses the inter-broker listener, never refused: alice, with
    WRITE and READ only, produces acks=all to a topic of 3 replicas and reads it back through another broker."""
    from kafka import KafkaConsumer, KafkaProducer
    from kafkite.testing.cluster import KafkiteCluster
    with KafkiteCluster(3, overrides=SECURED) as c:
        adm = KafkaAdminClient(bootstrap_servers=c.bootstrap_of(1), **kp("admin"))
        adm.create_topics([NewTopic("replicated", 1, 3)])
        add(adm, allow("User:alice", ResourceType.TOPIC, "replicated", ACLOperation.WRITE),
            allow("User:alice", ResourceType.TOPIC, "replicated", ACLOperation.READ))
        adm.close()
        p = KafkaProducer(bootstrap_servers=c.bootstrap_of(2), acks="all", **kp("alice"))
        for i in range(5):
            p.send("replicated", b"%d" % i).get(timeout=30)
        p.close()
        kc = KafkaConsumer("replicated", bootstrap_servers=c.bootstrap_of(3), auto_offset_reset="earliest",
                           **kp("alice"))
        assert [m.value for m in kp_read(kc, 5)] == [b"%d" % i for i in range(5)]
        kc.close()
