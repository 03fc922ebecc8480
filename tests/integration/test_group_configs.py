"""KIP-848's per-group configs (the GROUP config resource, type 32) as Kafka 4.0 serves them: confluent-kafka's
AdminClient describes and alters `consumer.session.timeout.ms` / `consumer.heartbeat.interval.ms` of a group
(existing or not); bad values, unknown keys, APPEND and an empty group name get Kafka's answers; the legacy
AlterConfigs replaces the whole set; ACLs on the GROUP resource; the configs survive a restart; and the consumer
group coordinator gives a group's members its own heartbeat interval and fences them after its own session
timeout (coordinator/group_config.py)."""
from __future__ import annotations

import time
import uuid

import pytest
from kafka.protocol.admin import AlterConfigsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest

from kafkite.testing.wire_client import WireClient
from kafkite.wire.consumer_group_api import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from kafkite.wire.errors import E

GROUP = 32
SESSION, HEARTBEAT = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"
SET, DELETE, APPEND = 0, 1, 2
DEFAULT_CONFIG, GROUP_CONFIG = 5, 8

confluent_kafka = pytest.importorskip("confluent_kafka")


def describe(w, group, keys=None, v=4):
    R = DescribeConfigsRequest.DescribeConfigsResource
    r = w.request(DescribeConfigsRequest(resources=[R(resource_type=GROUP, resource_name=group,
                                                      configuration_keys=keys)],
                                         include_synonyms=True, include_documentation=True), v).results[0]
    return r.error_code, r.error_message, {e.name: (e.value, e.config_source, [(s.name, s.value, s.source)
                                                                             for s in e.synonyms])
                                           for e in r.configs}


def incremental(w, group, *ops, validate_only=False):
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    r = w.request(IncrementalAlterConfigsRequest(resources=[R(resource_type=GROUP, resource_name=group, configs=[
        R.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])],
        validate_only=validate_only), 1).responses[0]
    return r.error_code, r.error_message


def legacy(w, group, configs):
    R = AlterConfigsRequest.AlterConfigsResource
    r = w.request(AlterConfigsRequest(resources=[R(resource_type=GROUP, resource_name=group, configs=[
        R.AlterableConfig(name=k, value=v) for k, v in configs.items()])], validate_only=False), 2).responses[0]
    return r.error_code, r.error_message


def test_confluent_admin_describes_and_alters_a_groups_configs(broker):
    """A group that does not exist has configs: the broker's group.consumer.* values, source DEFAULT_CONFIG (their
    one synonym themselves, as Kafka's ConfigHelper answers); SET makes one the group's own (GROUP_CONFIG), DELETE
    gives the default back."""
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                       ResourceType)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    res = ConfigResource(ResourceType.GROUP, "not-yet-a-group")

    def described() -> dict:
        got = admin.describe_configs([res])[res].result(30)
        return {k: (e.value, ConfigSource(e.source).name, e.is_default) for k, e in got.items()}
    assert described() == {SESSION: ("45000", "DEFAULT_CONFIG", True), HEARTBEAT: ("5000", "DEFAULT_CONFIG", True)}
    alter = ConfigResource(ResourceType.GROUP, "not-yet-a-group", incremental_configs=[
        ConfigEntry(SESSION, "50000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry(HEARTBEAT, "6000", incremental_operation=AlterConfigOpType.SET)])
    assert admin.incremental_alter_configs([alter])[alter].result(30) is None
    assert described() == {SESSION: ("50000", "GROUP_CONFIG", False), HEARTBEAT: ("6000", "GROUP_CONFIG", False)}
    bad = ConfigResource(ResourceType.GROUP, "not-yet-a-group", incremental_configs=[
        ConfigEntry(SESSION, "70000", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(confluent_kafka.KafkaException) as exc:
        admin.incremental_alter_configs([bad])[bad].result(30)
    err = exc.value.args[0]
    assert (err.code(), err.str()) == (confluent_kafka.KafkaError.INVALID_CONFIG, "consumer.session.timeout.ms must "
                                       "be less than or equal to group.consumer.max.session.timeout.ms")
    back = ConfigResource(ResourceType.GROUP, "not-yet-a-group", incremental_configs=[
        ConfigEntry(SESSION, None, incremental_operation=AlterConfigOpType.DELETE)])
    assert admin.incremental_alter_configs([back])[back].result(30) is None
    assert described() == {SESSION: ("45000", "DEFAULT_CONFIG", True), HEARTBEAT: ("6000", "GROUP_CONFIG", False)}
    with WireClient.connect(broker.bootstrap_servers) as w:  # the wire: synonyms, documentation, a key asked for
        assert describe(w, "not-yet-a-group", [HEARTBEAT, "nope"]) == (0, None, {
            HEARTBEAT: ("6000", GROUP_CONFIG, [(HEARTBEAT, "6000", GROUP_CONFIG)])})
        assert describe(w, "other")[2][SESSION] == ("45000", DEFAULT_CONFIG, [(SESSION, "45000", DEFAULT_CONFIG)])
        assert sorted(describe(w, "other", [])[2]) == [HEARTBEAT, SESSION]  # none listed: all, as Kafka


@pytest.mark.parametrize("ops, answer", [
    ([(SESSION, SET, "44999")], (E.INVALID_CONFIG, "consumer.session.timeout.ms must be greater than or equal to "
                                                   "group.consumer.min.session.timeout.ms")),
    ([(SESSION, SET, "60001")], (E.INVALID_CONFIG, "consumer.session.timeout.ms must be less than or equal to "
                                                   "group.consumer.max.session.timeout.ms")),
    ([(HEARTBEAT, SET, "4999")], (E.INVALID_CONFIG, "consumer.heartbeat.interval.ms must be greater than or equal "
                                                    "to group.consumer.min.heartbeat.interval.ms")),
    ([(HEARTBEAT, SET, "15001")], (E.INVALID_CONFIG, "consumer.heartbeat.interval.ms must be less than or equal to "
                                                     "group.consumer.max.heartbeat.interval.ms")),
    ([(SESSION, SET, "abc")], (E.INVALID_CONFIG, "Invalid value abc for configuration consumer.session.timeout.ms: "
                                                 "Not a number of type INT")),
    ([(SESSION, SET, "99999999999")], (E.INVALID_CONFIG, "Invalid value 99999999999 for configuration "
                                                         "consumer.session.timeout.ms: Not a number of type INT")),
    ([(HEARTBEAT, SET, "0")], (E.INVALID_CONFIG, "Invalid value 0 for configuration consumer.heartbeat.interval.ms: "
                                                 "Value must be at least 1")),
    ([("share.session.timeout.ms", SET, "45000")], (E.INVALID_CONFIG,
                                                     "Unknown group config name: share.session.timeout.ms")),
    ([(SESSION, APPEND, "50000")], (E.INVALID_CONFIG, "Can't APPEND to key consumer.session.timeout.ms because "
                                                      "its type is not LIST.")),
    ([(SESSION, SET, None)], (E.INVALID_REQUEST, "Null value not supported for : consumer.session.timeout.ms")),
    ([(SESSION, SET, "50000"), (SESSION, DELETE, None)], (E.INVALID_REQUEST, "Error due to duplicate config keys")),
])
def test_bad_changes_get_kafkas_answers_and_change_nothing(wire, ops, answer):
    assert incremental(wire, "g-bad", *ops) == answer
    assert describe(wire, "g-bad")[2][SESSION][:2] == ("45000", DEFAULT_CONFIG)


def test_session_over_heartbeat_empty_name_validate_only_and_legacy_alter_configs(broker_factory):
    """Kafka checks the group's whole new set over the broker's values: a session timeout not above the heartbeat
    interval is refused (here with the bounds lowered to reach it); validate_only changes nothing; the legacy
    AlterConfigs replaces the whole set (a key not given goes back to the default); "" is no group."""
    b = broker_factory(overrides={"group.consumer.min.session.timeout.ms": "1000",
                                  "group.consumer.min.heartbeat.interval.ms": "500"})
    with WireClient.connect(b.bootstrap_servers) as w:
        assert incremental(w, "g", (SESSION, SET, "5000")) == (E.INVALID_CONFIG, "consumer.session.timeout.ms must "
                                                                "be greater than consumer.heartbeat.interval.ms")
        assert incremental(w, "g", (SESSION, SET, "5000"), (HEARTBEAT, SET, "1000")) == (0, None)
        assert incremental(w, "g", (HEARTBEAT, SET, "5000")) == (E.INVALID_CONFIG, "consumer.session.timeout.ms "
                                                                  "must be greater than consumer.heartbeat.interval.ms")
        assert incremental(w, "g", (SESSION, SET, "2000"), validate_only=True) == (0, None)
        assert {k: v[:2] for k, v in describe(w, "g")[2].items()} == {SESSION: ("5000", GROUP_CONFIG),
                                                                     HEARTBEAT: ("1000", GROUP_CONFIG)}
        assert legacy(w, "g", {SESSION: "8000"}) == (0, None)
        assert {k: v[:2] for k, v in describe(w, "g")[2].items()} == {SESSION: ("8000", GROUP_CONFIG),
                                                                     HEARTBEAT: ("5000", DEFAULT_CONFIG)}
        assert legacy(w, "g", {"consumer.bogus": "1"}) == (E.INVALID_CONFIG, "Unknown group config name: "
                                                                             "consumer.bogus")
        assert incremental(w, "", (SESSION, SET, "5000")) == (E.INVALID_REQUEST,
                                                               "Default group resources are not allowed.")
        assert legacy(w, "", {}) == (E.INVALID_REQUEST, "Default group resources are not allowed.")
        assert describe(w, "")[:2] == (E.INVALID_REQUEST, "Group name must not be empty")


def test_group_configs_survive_a_restart(broker_factory, tmp_path):
    data = tmp_path / "data"
    b = broker_factory(data_dir=data)
    with WireClient.connect(b.bootstrap_servers) as w:
        assert incremental(w, "g/with:odd chars", (HEARTBEAT, SET, "7000")) == (0, None)
    b.stop()
    b = broker_factory(data_dir=data)
    with WireClient.connect(b.bootstrap_servers) as w:
        assert describe(w, "g/with:odd chars")[2][HEARTBEAT][:2] == ("7000", GROUP_CONFIG)


def hb(w, group, member_id, epoch, topics=("gc-t",)):
    HB = ConsumerGroupHeartbeatRequest
    args = dict(group_id=group, member_id=member_id, member_epoch=epoch, instance_id=None, rack_id=None,
                rebalance_timeout_ms=30000 if epoch == 0 else -1,
                subscribed_topic_names=list(topics) if epoch == 0 else None, server_assignor=None,
                topic_partitions=[] if epoch == 0 else None)
    for _ in range(200):
        r = w.request(HB(**args), 1)
        if r.error_code not in (E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR):
            return r
        time.sleep(0.05)
    return r


def members(w, group) -> list[str]:
    d = w.request(ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False), 1).groups[0]
    return [m.member_id for m in d.members]


def test_the_coordinator_uses_a_groups_own_heartbeat_interval_and_session_timeout(broker_factory):
    """Two groups on a broker whose consumer groups have a 30 s session: one of them given its own 1.5 s session and
    1 s heartbeat interval (taken at the next heartbeat of a member already in); its silent member is fenced after
    its group's session, the other group's is not."""
    from test_data_versions import create
    from test_group_versions import find
    b = broker_factory(overrides={"group.consumer.session.timeout.ms": "30000",
                                  "group.consumer.min.session.timeout.ms": "1000",
                                  "group.consumer.min.heartbeat.interval.ms": "500"})
    with WireClient.connect(b.bootstrap_servers) as w:
        create(w, "gc-t", 2)
        find(w, "gc-short")
        find(w, "gc-plain")
        short, plain = str(uuid.uuid4()), str(uuid.uuid4())
        r = hb(w, "gc-short", short, 0)
        assert (r.error_code, r.heartbeat_interval_ms) == (0, 5000)
        assert hb(w, "gc-plain", plain, 0).error_code == 0
        assert incremental(w, "gc-short", (SESSION, SET, "1500"), (HEARTBEAT, SET, "1000")) == (0, None)
        r = hb(w, "gc-short", short, r.member_epoch)
        assert (r.error_code, r.heartbeat_interval_ms) == (0, 1000)
        t0 = time.monotonic()
        while members(w, "gc-short") and time.monotonic() - t0 < 20:
            time.sleep(0.05)
        assert members(w, "gc-short") == [] and members(w, "gc-plain") == [plain]
        assert time.monotonic() - t0 >= 1.0  # its session, not at once
        assert hb(w, "gc-short", short, r.member_epoch).error_code == E.UNKNOWN_MEMBER_ID


def test_a_confluent_member_gets_its_groups_heartbeat_interval_and_is_fenced_after_its_session(tmp_path):
    """confluent-kafka (group.protocol=consumer, in its own process) on a broker whose consumer groups have Kafka's
    45 s session and 5 s heartbeat interval, in a group given 3 s and 0.5 s by confluent's AdminClient: the member
    stays in the group, epoch unchanged, for longer than the group's session (it heartbeats every 0.5 s: at the
    broker's 5 s it would be fenced), and once SIGKILLed it is fenced after the group's 3 s, not 45 s."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    from clients.group_scenario import produce_batch, python_consumer, wait_for
    from kafkite.testing.process import BrokerProcess
    from test_groups_clients import create
    with BrokerProcess(overrides={"group.consumer.min.session.timeout.ms": "1000",
                                  "group.consumer.min.heartbeat.interval.ms": "500"}) as broker:
        bs = broker.bootstrap_servers
        create(bs, "gcfg-real", 2)
        produce_batch(bs, "gcfg-real", 0, 20)
        admin = AdminClient({"bootstrap.servers": bs})
        res = ConfigResource(ResourceType.GROUP, "gcfg-real", incremental_configs=[
            ConfigEntry(SESSION, "3000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry(HEARTBEAT, "500", incremental_operation=AlterConfigOpType.SET)])
        assert admin.incremental_alter_configs([res])[res].result(30) is None
        k = python_consumer("confluent", bs, "gcfg-real", "gcfg-real", "consumer-protocol")
        try:
            wait_for(lambda: len(k.processed) >= 20, 60, "the member joined and read the records")
            with WireClient.connect(bs) as w:
                first = [(m.member_id, m.member_epoch) for m in _described(w, "gcfg-real").members]
                assert len(first) == 1
                t0 = time.monotonic()
                while time.monotonic() - t0 < 4.0:  # longer than the group's session
                    assert [(m.member_id, m.member_epoch) for m in _described(w, "gcfg-real").members] == first
                    time.sleep(0.2)
                k.crash()
                t_kill = time.monotonic()
                wait_for(lambda: not _described(w, "gcfg-real").members, 30, "the killed member fenced")
                assert time.monotonic() - t_kill >= 3.0 * 0.6  # after its session, not at once
        finally:
            k.stop()


def _described(w, group):
    for _ in range(200):
        d = w.request(ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False),
                      1).groups[0]
        if d.error_code not in (E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR):
            return d
        time.sleep(0.05)
    return d


def test_cli_shows_sets_and_deletes_a_groups_configs(broker, capsys):
    """`kafkite groups configs G [--add-config k=v] [--delete-config k]` (kafka-configs --entity-type groups)."""
    from kafkite.cli import main
    bs = ["--bootstrap-server", broker.bootstrap_servers]
    assert main(["groups", "configs", "cli-g", "--add-config", f"{HEARTBEAT}=6000,{SESSION}=50000", *bs]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["Completed updating config for group cli-g.", f"{HEARTBEAT}=6000\tDYNAMIC_GROUP_CONFIG",
                   f"{SESSION}=50000\tDYNAMIC_GROUP_CONFIG"]
    assert main(["groups", "configs", "cli-g", "--add-config", f"{HEARTBEAT}=60000", *bs]) == 1
    assert "must be less than or equal to group.consumer.max.heartbeat.interval.ms" in capsys.readouterr().err
    assert main(["groups", "configs", "cli-g", "--delete-config", HEARTBEAT, *bs]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == [f"{HEARTBEAT}=5000\tDEFAULT_CONFIG",
                                                       f"{SESSION}=50000\tDYNAMIC_GROUP_CONFIG"]
