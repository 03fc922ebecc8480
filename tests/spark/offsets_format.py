"""A small encoder of Kafka's __consumer_offsets records, written from Kafka's message specs
(OffsetCommitKey.json, OffsetCommitValue.json, GroupMetadataKey.json) and independent of
kafkite.coordinator.records, so the Spark decoder is checked against the format, not against
our own writer.

OffsetCommitKey   v0-1: group string, topic string, partition int32
GroupMetadataKey  v2:   group string
OffsetCommitValue v0: offset int64, metadata string, commit_timestamp int64
                  v1: v0 + expire_timestamp int64
                  v2: as v0
                  v3: offset int64, leader_epoch int32, metadata string, commit_timestamp int64
                  v4: as v3, flexible (compact string, tagged fields)
"""
from __future__ import annotations

import struct


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        if n < 0x80:
            out.append(n)
            return bytes(out)
        out.append((n & 0x7F) | 0x80)
        n >>= 7


def _compact_string(s: str) -> bytes:
    b = s.encode()
    return _uvarint(len(b) + 1) + b


def offset_commit_key(group: str, topic: str, partition: int, version: int = 1) -> bytes:
    assert version in (0, 1)
    return struct.pack(">h", version) + _string(group) + _string(topic) + struct.pack(">i", partition)


def group_metadata_key(group: str) -> bytes:
    return struct.pack(">h", 2) + _string(group)


def offset_commit_value(offset: int, version: int = 3, leader_epoch: int = -1, metadata: str = "",
                        commit_timestamp: int = 1_700_000_000_000, expire_timestamp: int = -1) -> bytes:
    v = struct.pack(">h", version) + struct.pack(">q", offset)
    if version in (0, 2):
        return v + _string(metadata) + struct.pack(">q", commit_timestamp)
    if version == 1:
        return v + _string(metadata) + struct.pack(">qq", commit_timestamp, expire_timestamp)
    if version == 3:
        return v + struct.pack(">i", leader_epoch) + _string(metadata) + struct.pack(">q", commit_timestamp)
    if version == 4:
        return (v + struct.pack(">i", leader_epoch) + _compact_string(metadata) + struct.pack(">q", commit_timestamp)
                + _uvarint(0))  # no tagged fields
    raise ValueError(version)
