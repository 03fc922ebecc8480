"""The tagged fields later Kafka versions add to the KIP-848 records of `__consumer_offsets`: Kafkite reads both
the records it writes (Kafka 4.0's bytes) and Kafka 4.1+'s (MetadataHash, KIP-1101), and trunk's (CreationTimeMs,
KIP-1282; AssignmentEpochs, KIP-1251; AssignmentTimestamp, KIP-1263); a group written in 4.1's shape (a metadata
hash, no ConsumerGroupPartitionMetadata) loads and its members keep their partitions. Bytes are written out here
by hand from Kafka's message format: an int16 version, the fields, then the tagged fields (an unsigned varint
count, then per field its tag, its size and its bytes)."""
from __future__ import annotations

import uuid

from kafkite.coordinator import consumer_group_records as CR

from test_consumer_group_model import ORDERS, Runtime

HASH = 0x1122334455667788
TOPIC = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


def test_group_metadata_value_with_and_without_the_metadata_hash():
    kafka_4_0 = bytes.fromhex("0000" "00000005" "00")  # Epoch 5, no tagged field
    kafka_4_1 = bytes.fromhex("0000" "00000005" "01" "00" "08" "1122334455667788")  # + MetadataHash (tag 0)
    trunk = bytes.fromhex("0000" "00000005" "02" "00" "08" "1122334455667788" "01" "08" "0000019a2b3c4d5e")
    v = CR.ConsumerGroupMetadataValue.decode(kafka_4_0)
    assert (v.epoch, v.metadata_hash, v.creation_time_ms) == (5, 0, -1)  # the defaults
    v = CR.ConsumerGroupMetadataValue.decode(kafka_4_1)
    assert (v.epoch, v.metadata_hash, v.creation_time_ms) == (5, HASH, -1)
    v = CR.ConsumerGroupMetadataValue.decode(trunk)
    assert (v.epoch, v.metadata_hash, v.creation_time_ms) == (5, HASH, 0x19A2B3C4D5E)
    # what Kafkite writes: 4.0's bytes (4.1 reads a missing hash as 0: it recomputes it and rebalances)
    assert CR.group_epoch("g", 5)[1] == kafka_4_0
    # the same fields encode to the same bytes
    assert CR.ConsumerGroupMetadataValue(version=0, epoch=5, metadata_hash=HASH).encode() == kafka_4_1
    # a negative hash (Java longs are signed) round-trips
    assert CR.ConsumerGroupMetadataValue.decode(
        CR.ConsumerGroupMetadataValue(version=0, epoch=1, metadata_hash=-2).encode()).metadata_hash == -2


def test_current_member_assignment_with_assignment_epochs_in_a_topic_partitions_struct():
    tp = TOPIC.hex + "03" "00000000" "00000001"  # topic id, Partitions [0, 1]
    kafka_4_0 = bytes.fromhex("0000" "00000007" "00000006" "00" "02" + tp + "00" "01" "00")
    # AssignmentEpochs [4, 6] as tag 0 of the struct: compact array (3) of two int32s, 9 bytes
    trunk = bytes.fromhex("0000" "00000007" "00000006" "00" "02" + tp + "01" "00" "09" "03" "00000004" "00000006"
                          + "01" "00")
    old, new = (CR.ConsumerGroupCurrentMemberAssignmentValue.decode(b) for b in (kafka_4_0, trunk))
    for v in (old, new):
        assert (v.member_epoch, v.previous_member_epoch, v.state) == (7, 6, 0)
        assert CR.assignment_of(v.assigned_partitions) == {TOPIC: frozenset({0, 1})}
        assert v.partitions_pending_revocation == []
    assert not old.assigned_partitions[0].assignment_epochs  # absent: kafka-python's default for it is []
    assert new.assigned_partitions[0].assignment_epochs == [4, 6]


def test_target_assignment_metadata_with_the_assignment_timestamp():
    kafka_4_0 = bytes.fromhex("0000" "00000003" "00")
    kafka_4_3 = bytes.fromhex("0000" "00000003" "01" "00" "08" "0000019a2b3c4d5e")
    assert CR.target_epoch("g", 3)[1] == kafka_4_0
    v = CR.ConsumerGroupTargetAssignmentMetadataValue.decode(kafka_4_0)
    assert (v.assignment_epoch, v.assignment_timestamp) == (3, 0)
    v = CR.ConsumerGroupTargetAssignmentMetadataValue.decode(kafka_4_3)
    assert (v.assignment_epoch, v.assignment_timestamp) == (3, 0x19A2B3C4D5E)


def test_a_group_written_in_kafka_4_1s_shape_loads_and_its_members_keep_their_partitions():
    """Kafka 4.1 writes a metadata hash and no ConsumerGroupPartitionMetadata (a tombstone for an older one).
    Loaded here, the group has its epochs, members and assignment; its topics' metadata is unknown, so the next
    heartbeat bumps the group epoch, as 4.1 does when the hash no longer matches, and the sticky assignor leaves
    every partition where it was."""
    V = CR.ConsumerGroupCurrentMemberAssignmentValue
    log = [
        (CR.group_epoch("g", 2)[0], CR.ConsumerGroupMetadataValue(version=0, epoch=2, metadata_hash=HASH).encode()),
        CR.tombstone(CR.PARTITION_METADATA, "g"),
    ]
    owned = {"a": [0, 1, 2], "b": [3, 4, 5]}
    for m, ps in owned.items():
        log.append((CR._key(CR.MEMBER_METADATA, "g", m), CR.ConsumerGroupMemberMetadataValue(
            version=0, instance_id=None, rack_id=None, client_id="c", client_host="/127.0.0.1",
            subscribed_topic_names=["orders"], subscribed_topic_regex=None, rebalance_timeout_ms=1000,
            server_assignor=None, classic_member_metadata=None).encode()))
    log.append((CR.target_epoch("g", 2)[0], CR.ConsumerGroupTargetAssignmentMetadataValue(
        version=0, assignment_epoch=2, assignment_timestamp=1_700_000_000_000).encode()))
    for m, ps in owned.items():
        log.append(CR.target_member("g", m, {ORDERS: frozenset(ps)}))
        log.append((CR._key(CR.CURRENT_ASSIGNMENT, "g", m), V(
            version=0, member_epoch=2, previous_member_epoch=1, state=0,
            assigned_partitions=[V.TopicPartitions(topic_id=ORDERS, partitions=ps, assignment_epochs=[2] * 3)],
            partitions_pending_revocation=[]).encode()))
    rt = Runtime(logs={0: log})
    g = rt.group
    assert (g.group_epoch, g.assignment_epoch, g.subscription_metadata) == (2, 2, {})
    assert {m: x.assigned for m, x in g.members.items()} == {m: {ORDERS: frozenset(ps)} for m, ps in owned.items()}
    for m, ps in owned.items():
        r = rt.hb(m, 2, topics=None, owned=ps)
        assert (r.error, r.member_epoch) == (0, 3)
        assert r.assignment is None or sorted(r.assignment[ORDERS]) == ps  # unchanged (then not sent again)
    assert {m: x.assigned for m, x in rt.group.members.items()} == {m: {ORDERS: frozenset(ps)}
                                                                      for m, ps in owned.items()}
    assert (rt.group.group_epoch, rt.group.state.value) == (3, "Stable")
    assert set(rt.group.subscription_metadata) == {"orders"}
