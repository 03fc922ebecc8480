"""Each API authorizes as Kafka's KafkaApis (raw requests over a SASL_PLAINTEXT listener with an authorizer; admin is
a super user, bob has the ACLs each test gives him): CreateTopics / DeleteTopics / CreatePartitions, DescribeConfigs,
Metadata (hidden topics, TOPIC_AUTHORIZATION_FAILED when named, no auto-creation without CREATE, KIP-430 authorized
operations), FindCoordinator, OffsetCommit / OffsetFetch, DescribeGroups / ListGroups / DeleteGroups, ListOffsets,
DescribeCluster, the SCRAM APIs; a transactional producer (confluent-kafka) without and with its ACLs."""
from __future__ import annotations

import uuid

import pytest
from kafka.admin import ACLOperation, NewTopic, ResourceType
from kafka.protocol.admin import (CreatePartitionsRequest, CreateTopicsRequest, DeleteGroupsRequest,
                                  DeleteTopicsRequest, DescribeClusterRequest, DescribeConfigsRequest,
                                  DescribeGroupsRequest, DescribeUserScramCredentialsRequest, ListGroupsRequest)
from kafka.protocol.consumer import ListOffsetsRequest, OffsetCommitRequest, OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from helpers import kp_read
from kafkite.testing.wire_client import WireClient
from kafkite.wire.errors import E

from test_acls import ck, grant, kp, _login, secured_broker

env = pytest.fixture(scope="module", name="env")(secured_broker)

READ, WRITE, DESCRIBE, CREATE = ACLOperation.READ, ACLOperation.WRITE, ACLOperation.DESCRIBE, ACLOperation.CREATE


def topic(adm) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    adm.create_topics([NewTopic(name, 1, 1)])
    return name


def bob(b) -> WireClient:
    w = WireClient.connect(b.bootstrap_servers)
    _login(w, "bob")
    return w


def test_create_delete_topics_and_partitions(env):
    b, adm = env
    mine = f"bob-{uuid.uuid4().hex[:6]}"
    T = CreateTopicsRequest.CreatableTopic
    with bob(b) as w:
        r = w.request(CreateTopicsRequest(topics=[T(name=mine, num_partitions=1, replication_factor=1, assignments=[],
                                                    configs=[])], timeout_ms=5000, validate_only=False), 5)
        assert [t.error_code for t in r.topics] == [E.TOPIC_AUTHORIZATION_FAILED]
        grant(adm, ResourceType.TOPIC, mine, CREATE)
        r = w.request(CreateTopicsRequest(topics=[T(name=mine, num_partitions=1, replication_factor=1, assignments=[],
                                                    configs=[])], timeout_ms=5000, validate_only=False), 5)
        assert [(t.error_code, t.topic_config_error_code, t.num_partitions, t.configs) for t in r.topics] == [
            (0, E.TOPIC_AUTHORIZATION_FAILED, -1, None)]  # created; its configs need DESCRIBE_CONFIGS
        P = CreatePartitionsRequest.CreatePartitionsTopic
        r = w.request(CreatePartitionsRequest(topics=[P(name=mine, count=2, assignments=None)], timeout_ms=5000,
                                              validate_only=False), 1)
        assert [t.error_code for t in r.results] == [E.TOPIC_AUTHORIZATION_FAILED]
        r = w.request(DeleteTopicsRequest(topic_names=[mine, "no-such-topic"], timeout_ms=5000), 4)
        assert sorted((x.name, x.error_code) for x in r.responses) == [
            (mine, E.TOPIC_AUTHORIZATION_FAILED), ("no-such-topic", E.TOPIC_AUTHORIZATION_FAILED)]
        grant(adm, ResourceType.TOPIC, mine, ACLOperation.DELETE)
        r = w.request(DeleteTopicsRequest(topic_names=[mine], timeout_ms=5000), 4)
        assert [x.error_code for x in r.responses] == [0]


def test_metadata_hides_names_and_reports_authorized_operations(env):
    b, adm = env
    seen, hidden = topic(adm), topic(adm)
    grant(adm, ResourceType.TOPIC, seen, READ)
    with bob(b) as w:
        r = w.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                      include_cluster_authorized_operations=True,
                                      include_topic_authorized_operations=True), 8)
        names = {t.name for t in r.topics}
        assert seen in names and hidden not in names
        ops = next(t for t in r.topics if t.name == seen).authorized_operations
        assert set(ops) == {3, 8}  # READ and the DESCRIBE it implies
        assert not r.authorized_operations  # nothing on the cluster
        T = MetadataRequest.MetadataRequestTopic
        r = w.request(MetadataRequest(topics=[T(name=hidden), T(name="bob-auto")], allow_auto_topic_creation=True,
                                      include_topic_authorized_operations=False), 9)
        assert [(t.name, t.error_code) for t in r.topics] == [(hidden, E.TOPIC_AUTHORIZATION_FAILED),
                                                              ("bob-auto", E.TOPIC_AUTHORIZATION_FAILED)]
        grant(adm, ResourceType.TOPIC, "bob-auto", DESCRIBE)  # describable, but no CREATE: still refused
        r = w.request(MetadataRequest(topics=[T(name="bob-auto")], allow_auto_topic_creation=True), 9)
        assert r.topics[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
        assert "bob-auto" not in adm.list_topics()
        grant(adm, ResourceType.TOPIC, "bob-auto", CREATE)
        r = w.request(MetadataRequest(topics=[T(name="bob-auto")], allow_auto_topic_creation=True), 9)
        assert r.topics[0].error_code in (0, E.LEADER_NOT_AVAILABLE)
        r = w.request(DescribeClusterRequest(include_cluster_authorized_operations=True), 0)
        assert r.error_code == 0 and not r.authorized_operations
    with WireClient.connect(b.bootstrap_servers) as w:  # admin: every operation
        _login(w, "admin")
        r = w.request(DescribeClusterRequest(include_cluster_authorized_operations=True), 0)
        assert set(r.authorized_operations) == {5, 7, 8, 9, 10, 11, 12}


def test_configs_list_offsets_and_scram_apis(env):
    b, adm = env
    t = topic(adm)
    with bob(b) as w:
        R = DescribeConfigsRequest.DescribeConfigsResource
        r = w.request(DescribeConfigsRequest(resources=[R(resource_type=2, resource_name=t, configuration_keys=None),
                                                        R(resource_type=4, resource_name="1",
                                                          configuration_keys=None)]), 1)
        assert [x.error_code for x in r.results] == [E.TOPIC_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED]
        LT = ListOffsetsRequest.ListOffsetsTopic
        r = w.request(ListOffsetsRequest(replica_id=-1, topics=[LT(name=t, partitions=[
            LT.ListOffsetsPartition(partition_index=0, timestamp=-1, current_leader_epoch=-1)])]), 4)
        assert r.topics[0].partitions[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
        r = w.request(DescribeUserScramCredentialsRequest(users=None), 0)
        assert r.error_code == E.CLUSTER_AUTHORIZATION_FAILED
        grant(adm, ResourceType.TOPIC, t, ACLOperation.ALTER_CONFIGS)  # implies DESCRIBE_CONFIGS
        r = w.request(DescribeConfigsRequest(resources=[R(resource_type=2, resource_name=t,
                                                          configuration_keys=None)]), 1)
        assert r.results[0].error_code == 0 and r.results[0].configs


def test_group_configs_need_describe_configs_and_alter_configs_on_the_group(env):
    """Kafka's ConfigHelper / ControllerApis: a GROUP config resource needs DESCRIBE_CONFIGS / ALTER_CONFIGS on the
    group, else GROUP_AUTHORIZATION_FAILED (ALTER_CONFIGS implies DESCRIBE_CONFIGS)."""
    from kafka.protocol.admin import AlterConfigsRequest, IncrementalAlterConfigsRequest
    b, adm = env
    g = f"gcfg-{uuid.uuid4().hex[:6]}"
    D = DescribeConfigsRequest.DescribeConfigsResource
    IA = IncrementalAlterConfigsRequest.AlterConfigsResource
    LA = AlterConfigsRequest.AlterConfigsResource

    def answers(w) -> list[int]:
        d = w.request(DescribeConfigsRequest(resources=[D(resource_type=32, resource_name=g,
                                                          configuration_keys=None)]), 4).results[0]
        i = w.request(IncrementalAlterConfigsRequest(resources=[IA(resource_type=32, resource_name=g, configs=[
            IA.AlterableConfig(name="consumer.heartbeat.interval.ms", config_operation=0, value="6000")])],
            validate_only=False), 1).responses[0]
        a = w.request(AlterConfigsRequest(resources=[LA(resource_type=32, resource_name=g, configs=[
            LA.AlterableConfig(name="consumer.heartbeat.interval.ms", value="7000")])], validate_only=False),
            2).responses[0]
        return [d.error_code, i.error_code, a.error_code]
    with bob(b) as w:
        assert answers(w) == [E.GROUP_AUTHORIZATION_FAILED] * 3
        grant(adm, ResourceType.GROUP, g, ACLOperation.DESCRIBE_CONFIGS)
        assert answers(w) == [0, E.GROUP_AUTHORIZATION_FAILED, E.GROUP_AUTHORIZATION_FAILED]
        grant(adm, ResourceType.GROUP, g, ACLOperation.ALTER_CONFIGS)
        assert answers(w) == [0, 0, 0]


def test_group_apis(env):
    b, adm = env
    t, group, other = topic(adm), f"g-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    # admin commits offsets for both groups on the topic
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    commit = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                 group_instance_id=None, retention_time_ms=-1, topics=[T(name=t, partitions=[
                                     T.OffsetCommitRequestPartition(partition_index=0, committed_offset=0,
                                                                    committed_leader_epoch=-1,
                                                                    committed_metadata="")])])
    with WireClient.connect(b.bootstrap_servers) as w:
        _login(w, "admin")
        for g in (group, other):
            commit.group_id = g
            assert w.request(FindCoordinatorRequest(key=g, key_type=0), 3).error_code == 0
            assert w.request(commit, 7).topics[0].partitions[0].error_code == 0
    with bob(b) as w:
        assert w.request(FindCoordinatorRequest(key=group, key_type=0), 3).error_code == E.GROUP_AUTHORIZATION_FAILED
        commit.group_id = group
        assert w.request(commit, 7).topics[0].partitions[0].error_code == E.GROUP_AUTHORIZATION_FAILED
        assert w.request(commit, 9).topics[0].partitions[0].error_code == E.GROUP_AUTHORIZATION_FAILED  # (kio decodes)
        r = w.request(OffsetFetchRequest(group_id=group, topics=None), 7)
        assert r.error_code == E.GROUP_AUTHORIZATION_FAILED
        grant(adm, ResourceType.GROUP, group, READ)
        assert w.request(FindCoordinatorRequest(key=group, key_type=0), 3).error_code == 0
        # READ on the group, none on the topic: the partition fails, "all offsets" leaves the topic out
        assert w.request(commit, 7).topics[0].partitions[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
        assert w.request(commit, 9).topics[0].partitions[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
        r = w.request(OffsetFetchRequest(group_id=group, topics=None), 7)
        assert r.error_code == 0 and r.topics == []
        FT = OffsetFetchRequest.OffsetFetchRequestTopic
        r = w.request(OffsetFetchRequest(group_id=group, topics=[FT(name=t, partition_indexes=[0])]), 7)
        assert r.topics[0].partitions[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
        grant(adm, ResourceType.TOPIC, t, READ)
        assert w.request(commit, 7).topics[0].partitions[0].error_code == 0
        r = w.request(OffsetFetchRequest(group_id=group, topics=None), 7)
        assert [(x.name, x.partitions[0].committed_offset) for x in r.topics] == [(t, 0)]
        r = w.request(DescribeGroupsRequest(groups=[group, other], include_authorized_operations=True), 3)
        assert [(g.group_id, g.error_code) for g in r.groups] == [(group, 0), (other, E.GROUP_AUTHORIZATION_FAILED)]
        assert set(r.groups[0].authorized_operations) == {3, 8}  # READ, DESCRIBE
        listed = {g.group_id for g in w.request(ListGroupsRequest(), 2).groups}
        assert group in listed and other not in listed
        r = w.request(DeleteGroupsRequest(groups_names=[other]), 1)
        assert r.results[0].error_code == E.GROUP_AUTHORIZATION_FAILED


def test_transactional_producer_needs_its_transactional_id_acl(env):
    from confluent_kafka import KafkaException, Producer
    b, adm = env
    t, tid = topic(adm), f"tx-{uuid.uuid4().hex[:6]}"
    grant(adm, ResourceType.TOPIC, t, WRITE)
    p = Producer({"bootstrap.servers": b.bootstrap_servers, **ck("bob"), "transactional.id": tid})
    with pytest.raises(KafkaException) as info:
        p.init_transactions(20)
    assert info.value.args[0].name() == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    grant(adm, ResourceType.TRANSACTIONAL_ID, tid, WRITE)
    p = Producer({"bootstrap.servers": b.bootstrap_servers, **ck("bob"), "transactional.id": tid})
    p.init_transactions(20)
    p.begin_transaction()
    p.produce(t, b"in-txn")
    p.commit_transaction(20)
    from kafka import KafkaConsumer
    kc = KafkaConsumer(t, bootstrap_servers=b.bootstrap_servers, auto_offset_reset="earliest",
                       isolation_level="read_committed", **kp("admin"))
    assert [m.value for m in kp_read(kc, 1)] == [b"in-txn"]
    kc.close()


def test_produce_of_transactional_records_needs_the_transactional_id(env):
    """Kafka's handleProduceRequest: transactional records need WRITE on the request's transactional id (none at
    all: refused too) and every partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED; plain records under a
    transactional id are not checked against it."""
    from kafka.protocol.producer import ProduceRequest
    from raw_batches import batch, records
    b, adm = env
    t = topic(adm)
    grant(adm, ResourceType.TOPIC, t, WRITE)
    TD = ProduceRequest.TopicProduceData

    def produce(w, tid, raw):
        req = ProduceRequest(transactional_id=tid, acks=1, timeout_ms=5000, topic_data=[
            TD(name=t, partition_data=[TD.PartitionProduceData(index=0, records=raw)])])
        return w.request(req, 9).responses[0].partition_responses[0].error_code
    txn = batch(records(1), 1, attributes=0x10, producer_id=1000, producer_epoch=0, base_sequence=0)
    with bob(b) as w:
        assert produce(w, "tx-none", txn) == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert produce(w, None, txn) == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert produce(w, "tx-none", batch(records(1), 1)) == 0  # not transactional: the topic's WRITE is enough


def test_transaction_admin_apis_delete_records_and_offset_delete(env):
    """DescribeProducers READ on the topic, DescribeTransactions DESCRIBE on the transactional id (ListTransactions
    lists only those), DeleteRecords DELETE on the topic, OffsetDelete DELETE on the group (then READ on the topic)."""
    from confluent_kafka import Producer
    from kafka.protocol.admin import DeleteRecordsRequest
    from kafka.protocol.admin.transactions import (DescribeProducersRequest, DescribeTransactionsRequest,
                                                   ListTransactionsRequest)
    from kafka.protocol.consumer import OffsetDeleteRequest
    b, adm = env
    t, tid = topic(adm), f"tx-{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": b.bootstrap_servers, **ck("admin"), "transactional.id": tid})
    p.init_transactions(20)
    p.begin_transaction()
    p.produce(t, b"open")
    p.flush(20)  # left open: the transaction is listed and described
    with bob(b) as w:
        DP = DescribeProducersRequest.TopicRequest
        r = w.request(DescribeProducersRequest(topics=[DP(name=t, partition_indexes=[0])]), 0)
        assert r.topics[0].partitions[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
        r = w.request(DescribeTransactionsRequest(transactional_ids=[tid]), 0)
        assert r.transaction_states[0].error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        r = w.request(ListTransactionsRequest(state_filters=[], producer_id_filters=[]), 0)
        assert tid not in {s.transactional_id for s in r.transaction_states}
        DR = DeleteRecordsRequest.DeleteRecordsTopic
        r = w.request(DeleteRecordsRequest(topics=[DR(name=t, partitions=[DR.DeleteRecordsPartition(
            partition_index=0, offset=0)])], timeout_ms=5000), 1)
        assert r.topics[0].partitions[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
        OD = OffsetDeleteRequest.OffsetDeleteRequestTopic
        r = w.request(OffsetDeleteRequest(group_id="g-od", topics=[OD(name=t, partitions=[
            OD.OffsetDeleteRequestPartition(partition_index=0)])]), 0)
        assert r.error_code == E.GROUP_AUTHORIZATION_FAILED
        grant(adm, ResourceType.TOPIC, t, READ)
        grant(adm, ResourceType.TRANSACTIONAL_ID, tid, DESCRIBE)
        r = w.request(DescribeProducersRequest(topics=[DP(name=t, partition_indexes=[0])]), 0)
        assert r.topics[0].partitions[0].error_code == 0 and r.topics[0].partitions[0].active_producers
        r = w.request(DescribeTransactionsRequest(transactional_ids=[tid]), 0)
        assert r.transaction_states[0].error_code == 0 and r.transaction_states[0].topics[0].topic == t
        r = w.request(ListTransactionsRequest(state_filters=[], producer_id_filters=[]), 0)
        assert tid in {s.transactional_id for s in r.transaction_states}
    p.abort_transaction(20)


def test_consumer_group_heartbeat_and_describe(env):
    """KIP-848's APIs as Kafka's KafkaApis authorizes them: ConsumerGroupHeartbeat needs READ on the group
    (GROUP_AUTHORIZATION_FAILED) and DESCRIBE on every subscribed topic (TOPIC_AUTHORIZATION_FAILED); with both bob
    joins and gets the partition. ConsumerGroupDescribe needs DESCRIBE on each group it names."""
    from test_consumer_group_protocol import hb
    from kafkite.wire.consumer_group_api import ConsumerGroupDescribeRequest
    b, adm = env
    t = topic(adm)
    group = f"g848-{uuid.uuid4().hex[:6]}"

    def describe(w):
        return w.request(ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False),
                         0).groups[0].error_code
    with bob(b) as w:
        assert hb(w, group, topics=(t,)).error_code == E.GROUP_AUTHORIZATION_FAILED
        assert describe(w) == E.GROUP_AUTHORIZATION_FAILED
        grant(adm, ResourceType.GROUP, group, READ)
        assert hb(w, group, topics=(t,)).error_code == E.TOPIC_AUTHORIZATION_FAILED
        grant(adm, ResourceType.TOPIC, t, DESCRIBE)
        assert w.request(FindCoordinatorRequest(key=group, key_type=0), 3).error_code == 0  # __consumer_offsets made
        r = hb(w, group, topics=(t,))
        assert r.error_code == 0 and r.member_epoch >= 1, r
        assert describe(w) == 0  # READ on the group implies DESCRIBE
