"""The consumer embedded protocol (Kafka's ConsumerProtocol) as a group coordinator reads and writes it
when a consumer group holds classic members: the subscription in a JoinGroup's protocol metadata and
the assignment a SyncGroup answers. The codec is kafka-python's ConsumerProtocolSubscription /
ConsumerProtocolAssignment (Kafka's JSON schemas); a version above the highest known one is read as
the highest, as Kafka's ConsumerProtocol does (later versions only add fields at the end).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Callable

from .consumer_group_records import Assignment
from ..wire.lazy_kafka import lazy_names

# kafka-python's classes, imported when a classic member first joins (wire/lazy_kafka.py LazyName)
ConsumerProtocolAssignment, ConsumerProtocolSubscription = lazy_names(
    globals(), "kafka.protocol.consumer.metadata", "ConsumerProtocolAssignment", "ConsumerProtocolSubscription")

PROTOCOL_TYPE = "consumer"


class MalformedProtocol(ValueError):
    pass


def version_of(metadata: bytes) -> int:
    """The version a subscription was written with, capped to the versions known (Kafka's deserializeVersion)."""
    if len(metadata) < 2:
        raise MalformedProtocol("the consumer protocol metadata is shorter than its version")
    v = int.from_bytes(metadata[:2], "big", signed=True)
    if v < 0:
        raise MalformedProtocol(f"unknown consumer protocol version {v}")
    return min(v, ConsumerProtocolSubscription.max_version)


@dataclass
class Subscription:
    topics: list[str]
    owned: list[tuple[str, list[int]]]  # (topic name, partitions); empty before version 1
    rack_id: str | None


def decode_subscription(metadata: bytes) -> Subscription:
    try:
        s = ConsumerProtocolSubscription.decode(bytes(metadata), version=version_of(metadata))
    except MalformedProtocol:
        raise
    except Exception as exc:  # kafka-python raises assorted errors on short or garbled bytes
        raise MalformedProtocol(f"malformed consumer protocol subscription: {exc!r}") from None
    if s.topics is None:
        raise MalformedProtocol("null topics in a consumer protocol subscription")
    owned = [(tp.topic, list(tp.partitions)) for tp in getattr(s, "owned_partitions", None) or ()]
    return Subscription(list(s.topics), owned, getattr(s, "rack_id", None) or None)


def encode_assignment(assignment: Assignment, name_of: Callable[[uuid.UUID], str | None], version: int) -> bytes:
    """A member's partitions as the ConsumerProtocolAssignment of `version` (the one of its subscription);
    a topic whose name is not known any more is left out, as Kafka's toConsumerProtocolAssignment does."""
    A = ConsumerProtocolAssignment
    tps = []
    for tid, ps in sorted(assignment.items(), key=lambda kv: str(kv[0])):
        name = name_of(tid)
        if name is not None and ps:
            tps.append(A.TopicPartition(topic=name, partitions=sorted(ps)))
    version = max(0, min(version, A.max_version))
    return bytes(A(version=version, assigned_partitions=tps, user_data=None).encode())


def decode_assignment(data: bytes) -> list[tuple[str, list[int]]]:
    """(topic, partitions) of a ConsumerProtocolAssignment; nothing for empty bytes."""
    if not data:
        return []
    try:
        a = ConsumerProtocolAssignment.decode(bytes(data), version=version_of(data))
    except MalformedProtocol:
        raise
    except Exception as exc:
        raise MalformedProtocol(f"malformed consumer protocol assignment: {exc!r}") from None
    return [(tp.topic, list(tp.partitions)) for tp in a.assigned_partitions or ()]
