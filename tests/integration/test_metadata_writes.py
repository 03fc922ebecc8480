"""Concurrent metadata changes of a broker with a data dir while its snapshot write is slow (200 ms each, in the
worker thread): the changes that arrive during a write go into the next single one, every client is answered once
its change is on disk, two IncrementalAlterConfigs of one topic both take (the second reads the first's change, not
the configs before it), and a topic deleted by two DeleteTopics at once is deleted once (the other: unknown)."""
from __future__ import annotations

import threading
import time

from kafka.protocol.admin import CreateTopicsRequest, DeleteTopicsRequest, IncrementalAlterConfigsRequest

from kafkite.controller.metadata import FileMetadataStore
from kafkite.testing.runner import BrokerThread
from kafkite.testing.wire_client import WireClient
from kafkite.wire.errors import E

SLOW_S = 0.2


def create(name: str) -> CreateTopicsRequest:
    T = CreateTopicsRequest.CreatableTopic
    return CreateTopicsRequest(topics=[T(name=name, num_partitions=1, replication_factor=1, assignments=[],
                                         configs=[])], timeout_ms=30000, validate_only=False)


def set_config(topic: str, key: str, value: str) -> IncrementalAlterConfigsRequest:
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    return IncrementalAlterConfigsRequest(resources=[R(resource_type=2, resource_name=topic, configs=[
        R.AlterableConfig(name=key, config_operation=0, value=value)])], validate_only=False)


def at_once(bs: str, requests: list[tuple[object, int]]) -> list:
    """Each request on a connection of its own, all sent together -> their answers."""
    out: list = [None] * len(requests)
    clients = [WireClient.connect(bs, timeout=30) for _ in requests]
    go = threading.Barrier(len(requests))

    def run(i: int) -> None:
        go.wait()
        out[i] = clients[i].request(*requests[i])
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for c in clients:
        c.close()
    return out


def test_changes_during_a_slow_snapshot_write(tmp_path, monkeypatch):
    with BrokerThread(data_dir=tmp_path / "data") as b:
        bs = b.bootstrap_servers
        with WireClient.connect(bs, timeout=30) as w:
            for name in ("configured", "doomed"):
                assert w.request(create(name), 5).topics[0].error_code == 0
        real = FileMetadataStore.save
        saved: list[set[str]] = []

        def slow(self, snapshot):
            time.sleep(SLOW_S)
            real(self, snapshot)
            saved.append({t["name"] for t in snapshot["topics"]})
        monkeypatch.setattr(FileMetadataStore, "save", slow)
        writes = b.state.writer.writes
        names = [f"new-{i}" for i in range(6)]
        answers = at_once(bs, [(create(n), 5) for n in names]
                          + [(set_config("configured", "retention.ms", "1000"), 0),
                             (set_config("configured", "segment.ms", "2000"), 0),
                             (DeleteTopicsRequest(topic_names=["doomed"], timeout_ms=30000), 4),
                             (DeleteTopicsRequest(topic_names=["doomed"], timeout_ms=30000), 4)])
        creates, configs, deletes = answers[:6], answers[6:8], answers[8:]
        assert [a.topics[0].error_code for a in creates] == [0] * 6
        for name in names:  # each answered only once a snapshot holding it was on disk
            assert any(name in s for s in saved)
        assert [a.responses[0].error_code for a in configs] == [0, 0]
        assert b.state.metadata.topic("configured").configs == {"retention.ms": "1000", "segment.ms": "2000"}
        assert sorted(a.responses[0].error_code for a in deletes) == [0, E.UNKNOWN_TOPIC_OR_PARTITION]
        # one write at a time, the changes made meanwhile together: far fewer writes than the 9 changes (one
        # creation at a time makes its logs; the second IncrementalAlterConfigs waits for the first)
        assert b.state.writer.writes - writes <= 6, (b.state.writer.writes - writes, saved)
    with BrokerThread(data_dir=tmp_path / "data") as b:
        md = b.state.metadata
        assert {n for n in md.topics if not n.startswith("__")} == {"configured", *names}
        assert md.topic("configured").configs == {"retention.ms": "1000", "segment.ms": "2000"}
