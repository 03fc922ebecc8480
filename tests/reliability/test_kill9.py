"""kill -9 right after acks=all acknowledgements; restart on the same data dir: nothing acknowledged is lost (records,
and the cluster metadata changes clients were answered: topics, partitions, configs, SCRAM users, producer ids)."""
from __future__ import annotations

import os
import signal

from helpers import ck_consume_all, ck_produce, make_records, start_serve
from kafkite.testing.wire_client import WireClient


def start(data_dir):
    return start_serve("--data-dir", str(data_dir))


def test_kill9_keeps_acknowledged_records(tmp_path):
    data = tmp_path / "data"
    proc, bs = start(data)
    try:
        from kafka.admin import KafkaAdminClient, NewTopic
        a = KafkaAdminClient(bootstrap_servers=bs)
        a.create_topics([NewTopic("durable", 3, 1)])
        a.close()
        recs = make_records(5_000, prefix="d")
        delivered = ck_produce(bs, "durable", recs, compression="lz4")  # acks=all, all acknowledged
        assert len(delivered) == 5_000
        pid = change_metadata(bs)  # each change answered once the snapshot holding it was written
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    proc, bs = start(data)
    try:
        check_metadata(bs, pid)
        got = ck_consume_all(bs, "durable", 5_000)
        assert sorted((p, o) for p, o, *_ in got) == sorted(delivered)
        more = ck_produce(bs, "durable", make_records(300, prefix="e"))
        # offsets continue without gaps after recovery
        per_part = {}
        for p, o in delivered + more:
            per_part.setdefault(p, []).append(o)
        for p, offs in per_part.items():
            assert sorted(offs) == list(range(len(offs))), f"gap in partition {p}"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)


def init_producer_id(bs: str) -> int:
    from kafka.protocol.producer import InitProducerIdRequest
    with WireClient.connect(bs, timeout=30) as w:
        r = w.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 1)
    assert r.error_code == 0
    return r.producer_id


def change_metadata(bs: str) -> int:
    """Metadata changes by confluent-kafka's AdminClient, each one acknowledged; the last one's answer comes right
    before the kill -> a producer id handed out (InitProducerId)."""
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions,
                                       NewTopic, ResourceType, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic("meta", 1, 1), NewTopic("gone", 1, 1)]).values():
        f.result(30)
    for f in admin.create_partitions([NewPartitions("meta", 3)]).values():
        f.result(30)
    res = ConfigResource(ResourceType.TOPIC, "meta", incremental_configs=[
        ConfigEntry("retention.ms", "4321", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(30)
    upsert = UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw")
    for f in admin.alter_user_scram_credentials([upsert]).values():
        f.result(30)
    for f in admin.delete_topics(["gone"]).values():
        f.result(30)
    return init_producer_id(bs)


def check_metadata(bs: str, pid: int) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
    admin = AdminClient({"bootstrap.servers": bs})
    md = admin.list_topics(timeout=30)
    assert "gone" not in md.topics and len(md.topics["meta"].partitions) == 3
    configs = next(iter(admin.describe_configs([ConfigResource(ResourceType.TOPIC, "meta")]).values())).result(30)
    assert configs["retention.ms"].value == "4321"
    assert list(admin.describe_user_scram_credentials().result(30)) == ["alice"]
    assert init_producer_id(bs) > pid  # never handed out twice
