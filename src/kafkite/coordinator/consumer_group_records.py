"""The `__consumer_offsets` records of KIP-848 consumer groups, in Kafka 4's key/value formats.

Key versions (Kafka's record types): 3 ConsumerGroupMetadata (group epoch), 4
ConsumerGroupPartitionMetadata (the subscribed topics' ids and partition counts), 5
ConsumerGroupMemberMetadata (a member's subscription), 6 ConsumerGroupTargetAssignmentMetadata
(assignment epoch), 7 ConsumerGroupTargetAssignmentMember (a member's target partitions), 8
ConsumerGroupCurrentMemberAssignment (a member's epochs, state, assigned and pending-revocation
partitions), 16 ConsumerGroupRegularExpression (the topics a subscribed regular expression resolved
to, with the metadata version and the time of the resolution). A null value is a tombstone. The schemas are Kafka's JSON definitions
(``coordinator/schemas``) read by kafka-python's ApiData: a key is an int16 version then the
non-flexible key struct, a value an int16 version then the flexible value struct.

The tagged fields later Kafka versions add are in the schemas, so their records load: MetadataHash (4.1, KIP-1101,
in ConsumerGroupMetadataValue; 4.1 no longer writes ConsumerGroupPartitionMetadata), CreationTimeMs, AssignmentEpochs
and AssignmentTimestamp (later). Kafkite writes them at their defaults, i.e. 4.0's bytes: a group loaded without its
topics' metadata (4.1's shape) gets a new group epoch at its next heartbeat, as 4.1 does when the hash differs, and
Kafka 4.1 reading Kafkite's records sees hash 0 and rebalances once the same way.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

from kafka.protocol.api_data import ApiData

from . import schemas
from .records import RecordDecodeError
from ..wire.varint import write_uvarint

Assignment = dict[uuid.UUID, frozenset[int]]  # topic id -> partitions


class ConsumerGroupMetadataKey(ApiData, load_json=schemas): pass
class ConsumerGroupMetadataValue(ApiData, load_json=schemas): pass
class ConsumerGroupPartitionMetadataKey(ApiData, load_json=schemas): pass
class ConsumerGroupPartitionMetadataValue(ApiData, load_json=schemas): pass
class ConsumerGroupMemberMetadataKey(ApiData, load_json=schemas): pass
class ConsumerGroupMemberMetadataValue(ApiData, load_json=schemas): pass
class ConsumerGroupTargetAssignmentMetadataKey(ApiData, load_json=schemas): pass
class ConsumerGroupTargetAssignmentMetadataValue(ApiData, load_json=schemas): pass
class ConsumerGroupTargetAssignmentMemberKey(ApiData, load_json=schemas): pass
class ConsumerGroupTargetAssignmentMemberValue(ApiData, load_json=schemas): pass
class ConsumerGroupCurrentMemberAssignmentKey(ApiData, load_json=schemas): pass
class ConsumerGroupCurrentMemberAssignmentValue(ApiData, load_json=schemas): pass
class ConsumerGroupRegularExpressionKey(ApiData, load_json=schemas): pass


@dataclass
class RegularExpressionValue:
    """ConsumerGroupRegularExpressionValue v0 (flexible). Coded here rather than by ApiData: its `Version`
    field has the name of ApiData's schema-version argument. Layout: int16 0, compact array of compact
    strings (Topics), int64 Version, int64 Timestamp, empty tagged fields."""
    topics: list[str]
    version: int
    timestamp: int

    def encode(self) -> bytes:
        out = bytearray(b"\x00\x00")
        out += write_uvarint(len(self.topics) + 1)
        for t in self.topics:
            b = t.encode()
            out += write_uvarint(len(b) + 1) + b
        out += self.version.to_bytes(8, "big", signed=True) + self.timestamp.to_bytes(8, "big", signed=True)
        return bytes(out + b"\x00")

    @classmethod
    def decode(cls, data: bytes) -> "RegularExpressionValue":
        if int.from_bytes(data[:2], "big", signed=True) != 0:
            raise RecordDecodeError("ConsumerGroupRegularExpressionValue: unknown version")
        pos = 2
        n, pos = _read_uvarint(data, pos)
        topics = []
        for _ in range(n - 1):
            ln, pos = _read_uvarint(data, pos)
            if ln < 1 or pos + ln - 1 > len(data):
                raise RecordDecodeError("ConsumerGroupRegularExpressionValue: bad topic")
            topics.append(data[pos:pos + ln - 1].decode())
            pos += ln - 1
        if pos + 16 > len(data):
            raise RecordDecodeError("ConsumerGroupRegularExpressionValue: truncated")
        version = int.from_bytes(data[pos:pos + 8], "big", signed=True)
        timestamp = int.from_bytes(data[pos + 8:pos + 16], "big", signed=True)
        return cls(topics, version, timestamp)


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        if pos >= len(data) or shift > 28:
            raise RecordDecodeError("bad varint")
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return n, pos
        shift += 7




# key version -> (key class, value class)
TYPES: dict[int, tuple[type[ApiData], type[ApiData]]] = {
    3: (ConsumerGroupMetadataKey, ConsumerGroupMetadataValue),
    4: (ConsumerGroupPartitionMetadataKey, ConsumerGroupPartitionMetadataValue),
    5: (ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue),
    6: (ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue),
    7: (ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue),
    8: (ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue),
    16: (ConsumerGroupRegularExpressionKey, RegularExpressionValue),
}
GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = range(3, 9)
REGULAR_EXPRESSION = 16


@dataclass(frozen=True)
class TopicMetadata:
    topic_id: uuid.UUID
    name: str
    num_partitions: int
    # per partition the racks of its replicas' brokers (broker.rack); () when no replica has one. A change of
    # them bumps the group epoch, as Kafka 4.1 rebalances on rack topology changes (KIP-1101)
    racks: tuple[frozenset[str], ...] = ()


def topic_metadata_of(t) -> TopicMetadata:
    """A ConsumerGroupPartitionMetadataValue topic -> TopicMetadata, with the racks of its PartitionMetadata."""
    racks: list[frozenset[str]] = [frozenset()] * max(t.num_partitions, 0)
    for pm in t.partition_metadata or ():
        if 0 <= pm.partition < len(racks):
            racks[pm.partition] = frozenset(pm.racks or ())
    return TopicMetadata(t.topic_id, t.topic_name, t.num_partitions, tuple(racks) if any(racks) else ())


def _key(version: int, group_id: str, member_id: str | None = None) -> bytes:
    cls = TYPES[version][0]
    kw = {"group_id": group_id} if member_id is None else {"group_id": group_id, "member_id": member_id}
    if version == REGULAR_EXPRESSION:  # its second key field is the regex
        kw = {"group_id": group_id, "regular_expression": member_id}
    return cls(version=version, **kw).encode()


def _value(record_type: int, **fields) -> bytes:
    return TYPES[record_type][1](version=0, **fields).encode()


def _tps(struct, assignment: Assignment) -> list:
    return [struct(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(assignment.items()) if ps]


def _from_tps(tps) -> Assignment:
    return {tp.topic_id: frozenset(tp.partitions) for tp in tps or () if tp.partitions}


# -- records --------------------------------------------------------------------------------------------------
def group_epoch(group_id: str, epoch: int):
    return _key(GROUP_METADATA, group_id), _value(GROUP_METADATA, epoch=epoch)


def partition_metadata(group_id: str, topics: dict[str, TopicMetadata]):
    """The subscribed topics; each partition's racks in PartitionMetadata as Kafka 3.7 wrote them (Kafka 4.0
    writes the list empty and reads it not; without racks it is empty here too)."""
    V = ConsumerGroupPartitionMetadataValue
    PM = V.TopicMetadata.PartitionMetadata
    return _key(PARTITION_METADATA, group_id), _value(PARTITION_METADATA, topics=[
        V.TopicMetadata(topic_id=t.topic_id, topic_name=t.name, num_partitions=t.num_partitions,
                        partition_metadata=[PM(partition=p, racks=sorted(r)) for p, r in enumerate(t.racks) if r])
        for t in sorted(topics.values(), key=lambda t: t.name)])


def member_metadata(group_id: str, m) -> tuple[bytes, bytes]:
    """A member's subscription; a member using the classic protocol also gets its ClassicMemberMetadata
    (tagged field 0: session timeout and JoinGroup protocols)."""
    C = ConsumerGroupMemberMetadataValue.ClassicMemberMetadata
    classic = None if m.classic is None else C(
        session_timeout_ms=m.classic.session_timeout_ms,
        supported_protocols=[C.ClassicProtocol(name=n, metadata=md) for n, md in m.classic.protocols])
    return _key(MEMBER_METADATA, group_id, m.member_id), _value(
        MEMBER_METADATA, instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
        client_host=m.client_host, subscribed_topic_names=sorted(m.subscribed_topic_names),
        subscribed_topic_regex=m.subscribed_topic_regex, rebalance_timeout_ms=m.rebalance_timeout_ms,
        server_assignor=m.server_assignor, classic_member_metadata=classic)


def target_epoch(group_id: str, epoch: int):
    return _key(TARGET_METADATA, group_id), _value(TARGET_METADATA, assignment_epoch=epoch)


def target_member(group_id: str, member_id: str, assignment: Assignment):
    return _key(TARGET_MEMBER, group_id, member_id), _value(
        TARGET_MEMBER, topic_partitions=_tps(ConsumerGroupTargetAssignmentMemberValue.TopicPartition, assignment))


def current_assignment(group_id: str, m):
    V = ConsumerGroupCurrentMemberAssignmentValue
    return _key(CURRENT_ASSIGNMENT, group_id, m.member_id), _value(
        CURRENT_ASSIGNMENT, member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
        state=int(m.state), assigned_partitions=_tps(V.TopicPartitions, m.assigned),
        partitions_pending_revocation=_tps(V.TopicPartitions, m.pending_revocation))


def regular_expression(group_id: str, regex: str, topics, version: int, timestamp_ms: int):
    """A resolved regular expression (Kafka's ConsumerGroupRegularExpression record)."""
    # positional: the value's Version field shares its name with ApiData's schema-version argument
    return (_key(REGULAR_EXPRESSION, group_id, regex),
            RegularExpressionValue(sorted(topics), version, timestamp_ms).encode())


def tombstone(version: int, group_id: str, member_id: str | None = None):
    return _key(version, group_id, member_id), None


def decode(key: bytes, value: bytes | None):
    """(key version, key object, value object or None) of a consumer group record."""
    try:
        version = int.from_bytes(key[:2], "big", signed=True)
        kcls, vcls = TYPES[version]
        k = kcls.decode(key)
        v = vcls.decode(value) if value is not None else None
    except RecordDecodeError:
        raise
    except Exception as exc:  # kafka-python raises assorted errors on short or garbled bytes
        raise RecordDecodeError(f"consumer group record: {exc!r}") from exc
    return version, k, v


def assignment_of(tps) -> Assignment:
    return _from_tps(tps)
