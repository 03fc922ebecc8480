"""replication-offset-checkpoint: a replica's log reopens at the high watermark it had, not its log end offset."""
from __future__ import annotations

import uuid

from kafka.record.default_records import DefaultRecordBatchBuilder

from kafkite.config import BrokerConfig
from kafkite.controller.metadata import PartitionInfo, TopicInfo
from kafkite.server.broker import ClusterState
from kafkite.server.replica_manager import ReplicaManager
from kafkite.storage.checkpoint_file import read_offsets
from kafkite.storage.log_manager import HIGH_WATERMARK_CHECKPOINT_FILE

TOPIC = TopicInfo("t", uuid.uuid4(), [PartitionInfo(0, [1, 2], 1, 0, [1, 2])], {})


def _batch(n: int) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=1_700_000_000_000 + i, key=None, value=b"v%d" % i, headers=[])
    return bytes(b.build())


def _rm(state, path) -> ReplicaManager:
    rm = ReplicaManager(state, node_id=1, data_dir=path, in_memory=False, replicated=True)
    rm.lifecycle.open_all(0)
    return rm


def test_a_replica_reopens_at_its_checkpointed_high_watermark(tmp_path):
    state = ClusterState(BrokerConfig(static={}), data_dir=tmp_path, in_memory=False)
    rm = _rm(state, tmp_path / "broker-1")
    leading = PartitionInfo(0, [1, 2], leader=1, leader_epoch=0, isr=[1, 2], partition_epoch=0)
    assert rm.become_replica(TOPIC, leading) == 0
    out = rm.append("t", 0, _batch(3), 1_700_000_000_000, leader_epoch=0)
    assert out.error == 0
    lg = rm.get("t", 0)
    assert (lg.log_end_offset, lg.high_watermark) == (3, 0)  # follower 2 has not fetched: nothing confirmed
    rm.partitions[("t", 0)].update_follower_fetch(2, 2, 3, now_ms=0)  # broker 2 holds offsets 0 and 1
    assert lg.high_watermark == 2
    rm.close()
    assert read_offsets(tmp_path / "broker-1" / HIGH_WATERMARK_CHECKPOINT_FILE) == {("t", 0): 2}

    again = _rm(state, tmp_path / "broker-1")
    following = PartitionInfo(0, [1, 2], leader=2, leader_epoch=1, isr=[2], partition_epoch=1)
    assert again.become_replica(TOPIC, following) == 0
    lg = again.get("t", 0)
    assert (lg.log_end_offset, lg.high_watermark) == (3, 2)  # offset 2 was never confirmed: not visible
    again.close()


def test_a_partition_without_a_checkpoint_starts_at_zero(tmp_path):
    state = ClusterState(BrokerConfig(static={}), data_dir=tmp_path, in_memory=False)
    rm = _rm(state, tmp_path / "b")
    follower = PartitionInfo(0, [1, 2], leader=2, leader_epoch=0, isr=[1, 2], partition_epoch=0)
    assert rm.become_replica(TOPIC, follower) == 0
    assert rm.get("t", 0).high_watermark == 0
    rm.close()
    # a single broker's data dir never gets the file (its logs are not replicated)
    single = ReplicaManager(state, node_id=1, data_dir=tmp_path / "single", in_memory=False, replicated=False)
    single.lifecycle.open_all(0)
    single.close()
    assert not (tmp_path / "single" / HIGH_WATERMARK_CHECKPOINT_FILE).exists()
