"""Kafka's __consumer_offsets record formats (keys and values), encode and decode.

Keys: version 0/1 = OffsetCommitKey (group, topic, partition); version 2 =
GroupMetadataKey (group). Values: OffsetCommitValue v0-v4 (we write v3: offset,
leader epoch, metadata, commit timestamp; v1 when an expire timestamp is set)
and GroupMetadataValue v0-v4 (we write v3). A null value is a tombstone.

Key versions 3-8 are the records of KIP-848 consumer groups, decoded and replayed by
consumer_group_records.py / the shard. Key versions 9 and up are record types of group kinds this
broker does not run (share groups, streams groups, regular expressions, ...): `decode_key` returns an
`IgnoredKey` for them, and the loader skips them as Kafka skips a record type it does not know.
Anything else that does not decode -- truncated fields, an unknown value version -- raises
ValueError (`RecordDecodeError`); the shard logs and skips such a record.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field


class _W:
    def __init__(self) -> None:
        self.b = bytearray()

    def i16(self, v): self.b += struct.pack(">h", v); return self
    def i32(self, v): self.b += struct.pack(">i", v); return self
    def i64(self, v): self.b += struct.pack(">q", v); return self

    def string(self, s: str | None):
        if s is None:
            return self.i16(-1)
        e = s.encode()
        self.i16(len(e))
        self.b += e
        return self

    def bytes_(self, v: bytes | None):
        if v is None:
            return self.i32(-1)
        self.i32(len(v))
        self.b += v
        return self


class RecordDecodeError(ValueError):
    """A record (or a consumer protocol subscription) whose bytes do not follow its schema."""


class _R:
    def __init__(self, data: bytes):
        self.d = memoryview(data)
        self.p = 0

    def _u(self, fmt, n):
        self._need(n)
        v = struct.unpack_from(fmt, self.d, self.p)[0]
        self.p += n
        return v

    def _need(self, n: int) -> None:
        if n < 0 or self.p + n > len(self.d):
            raise RecordDecodeError(f"{n} bytes needed at position {self.p} of {len(self.d)}")

    def _take(self, n: int) -> bytes:
        self._need(n)
        v = bytes(self.d[self.p:self.p + n])
        self.p += n
        return v

    def i16(self): return self._u(">h", 2)
    def i32(self): return self._u(">i", 4)
    def i64(self): return self._u(">q", 8)

    def uvarint(self) -> int:
        shift = v = 0
        while True:
            self._need(1)
            if shift > 28:
                raise RecordDecodeError("varint longer than 5 bytes")
            b = self.d[self.p]
            self.p += 1
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                return v
            shift += 7

    def string(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self._take(n).decode()  # a UnicodeDecodeError is a ValueError too

    def compact_string(self) -> str | None:
        n = self.uvarint() - 1
        return None if n < 0 else self._take(n).decode()

    def bytes_(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else self._take(n)

    def compact_bytes(self) -> bytes | None:
        n = self.uvarint() - 1
        return None if n < 0 else self._take(n)

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


@dataclass(frozen=True)
class IgnoredKey:
    """A record type of a group kind this broker does not run (key version 3 and up)."""
    version: int


@dataclass
class OffsetValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1


@dataclass
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberValue] = field(default_factory=list)


_KEY_HEAD = struct.Struct(">hh")  # key version, group length
_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_V3_HEAD = struct.Struct(">hqih")  # value version 3, offset, leader epoch, metadata length
_V3_NO_METADATA = struct.Struct(">hqihq")  # _V3_HEAD with a metadata length 0, then the commit timestamp
_V1_HEAD = struct.Struct(">hqh")  # value version 1, offset, metadata length
_TWO_I64 = struct.Struct(">qq")


def offset_key(group: str, topic: str, partition: int) -> bytes:
    g, t = group.encode(), topic.encode()
    return b"".join((_KEY_HEAD.pack(1, len(g)), g, _I16.pack(len(t)), t, _I32.pack(partition)))


# The decoded form of the offset commit records encoded last (offset_commit_record): the coordinator runtime replays
# a record right after appending it, and decode_record takes the key and value from here instead of decoding the
# bytes just encoded -- the values decoding them gives (the leader epoch is not in a v1 value, nor the expire
# timestamp in a v3 one). By the id of the value's bytes object (held here, so no other object has its id while it
# is: an int is cheaper to hash than the bytes), each entry (key, value, decoded key, decoded value), taken when the
# replayed record is that very value object and an equal key. Bounded: a record never replayed (a failed append) goes
# at the next clearing.
_JUST_ENCODED: dict[int, tuple[bytes, bytes, "OffsetKey", "OffsetValue"]] = {}
_JUST_ENCODED_MAX = 1024


# The key of each (group, topic, partition) committed to lately, encoded and decoded: a consumer commits the same
# partitions again and again. Bounded as _JUST_ENCODED (cleared when full).
_KEYS: dict[tuple[str, str, int], tuple[bytes, "OffsetKey"]] = {}
_KEYS_MAX = 4096


def offset_commit_record(group: str, topic: str, partition: int, v: OffsetValue) -> tuple[bytes, bytes]:
    """The (key, value) of one committed offset, as offset_key and offset_value encode them."""
    k = _KEYS.get((group, topic, partition))
    if k is None:
        if len(_KEYS) >= _KEYS_MAX:
            _KEYS.clear()
        k = _KEYS[(group, topic, partition)] = (offset_key(group, topic, partition), OffsetKey(group, topic, partition))
    key, md = k[0], v.metadata
    if md == "" and v.expire_timestamp < 0:  # (offset_value's v3 value with no metadata, a consumer's usual one)
        value = _V3_NO_METADATA.pack(3, v.offset, v.leader_epoch, 0, v.commit_timestamp)
    elif md is not None and v.expire_timestamp < 0:  # (offset_value's v3 value, inline: every commit comes here)
        md = md.encode()
        value = b"".join((_V3_HEAD.pack(3, v.offset, v.leader_epoch, len(md)), md, _I64.pack(v.commit_timestamp)))
    else:
        value = offset_value(v)
    if len(_JUST_ENCODED) >= _JUST_ENCODED_MAX:
        _JUST_ENCODED.clear()
    if v.expire_timestamp >= 0:  # a v1 value: no leader epoch in it
        decoded = OffsetValue(v.offset, -1, v.metadata, v.commit_timestamp, v.expire_timestamp)
    elif v.expire_timestamp == -1 and v.metadata is not None:  # a v3 value: v itself decodes from it
        decoded = v
    else:
        decoded = OffsetValue(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, -1)
    _JUST_ENCODED[id(value)] = (key, value, k[1], decoded)
    return key, value


def group_key(group: str) -> bytes:
    return bytes(_W().i16(2).string(group).b)


def offset_value(v: OffsetValue) -> bytes:
    if v.metadata is not None:  # (the common case, in one join: the same bytes as below)
        md = v.metadata.encode()
        if v.expire_timestamp >= 0:
            return b"".join((_V1_HEAD.pack(1, v.offset, len(md)), md,
                             _TWO_I64.pack(v.commit_timestamp, v.expire_timestamp)))
        return b"".join((_V3_HEAD.pack(3, v.offset, v.leader_epoch, len(md)), md, _I64.pack(v.commit_timestamp)))
    if v.expire_timestamp >= 0:
        return bytes(_W().i16(1).i64(v.offset).string(v.metadata).i64(v.commit_timestamp)
                     .i64(v.expire_timestamp).b)
    return bytes(_W().i16(3).i64(v.offset).i32(v.leader_epoch).string(v.metadata).i64(v.commit_timestamp).b)


def group_value(g: GroupValue) -> bytes:
    w = _W().i16(3).string(g.protocol_type).i32(g.generation).string(g.protocol).string(g.leader)
    w.i64(g.current_state_timestamp).i32(len(g.members))
    for m in g.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
        w.i32(m.rebalance_timeout).i32(m.session_timeout).bytes_(m.subscription).bytes_(m.assignment)
    return bytes(w.b)


def decode_key(key: bytes) -> OffsetKey | GroupKey | IgnoredKey:
    r = _R(key)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.string() or "", r.string() or "", r.i32())
    if version == 2:
        return GroupKey(r.string() or "")
    if version >= 3:
        return IgnoredKey(version)  # e.g. share-group or new-protocol records this broker does not use
    raise RecordDecodeError(f"invalid record key version {version}")


def decode_offset_value(value: bytes) -> OffsetValue:
    r = _R(value)
    version = r.i16()
    if version == 0:
        return OffsetValue(r.i64(), -1, r.string() or "", r.i64())
    if version == 1:
        off = r.i64()
        md = r.string() or ""
        return OffsetValue(off, -1, md, r.i64(), r.i64())
    if version == 2:
        off = r.i64()
        md = r.string() or ""
        return OffsetValue(off, -1, md, r.i64())
    if version == 3:
        off = r.i64()
        le = r.i32()
        md = r.string() or ""
        return OffsetValue(off, le, md, r.i64())
    if version == 4:  # flexible
        off = r.i64()
        le = r.i32()
        md = r.compact_string() or ""
        return OffsetValue(off, le, md, r.i64())
    raise RecordDecodeError(f"unknown OffsetCommitValue version {version}")


def decode_group_value(value: bytes) -> GroupValue:
    r = _R(value)
    version = r.i16()
    if not 0 <= version <= 4:
        raise RecordDecodeError(f"unknown GroupMetadataValue version {version}")
    flexible = version >= 4
    s = r.compact_string if flexible else r.string
    b = r.compact_bytes if flexible else r.bytes_
    g = GroupValue(s() or "", r.i32(), s(), s())
    if version >= 2:
        g.current_state_timestamp = r.i64()
    n = (r.uvarint() - 1) if flexible else r.i32()
    for _ in range(max(n, 0)):
        mid = s() or ""
        iid = s() if version >= 3 else None
        cid = s() or ""
        host = s() or ""
        rt = r.i32() if version >= 1 else -1
        st = r.i32()
        sub = b() or b""
        asg = b() or b""
        if flexible:
            r.skip_tags()
        g.members.append(MemberValue(mid, iid, cid, host, rt if version >= 1 else st, st, sub, asg))
    return g


def just_encoded(key: bytes, value: bytes) -> tuple["OffsetKey", "OffsetValue"] | None:
    """The decoded key and value of the offset commit record offset_commit_record encoded last as these very bytes
    objects (taken from _JUST_ENCODED), else None."""
    got = _JUST_ENCODED.pop(id(value), None)
    if got is not None and got[1] is value and got[0] == key:
        return got[2], got[3]
    return None


def decode_record(key: bytes, value: bytes | None):
    """(key, value or None for a tombstone); (IgnoredKey, None) for record types we don't use.
    Raises RecordDecodeError (a ValueError) when the bytes do not follow the schema."""
    if type(key) is bytes and type(value) is bytes:
        got = just_encoded(key, value)
        if got is not None:
            return got
    k = decode_key(key)
    if isinstance(k, IgnoredKey) or value is None:
        return k, None
    if isinstance(k, OffsetKey):
        return k, decode_offset_value(value)
    return k, decode_group_value(value)


def subscribed_topics(metadata: bytes) -> list[str]:
    """The topics of a consumer protocol subscription (a "consumer" group member's protocol
    metadata). As Kafka's ClassicGroup.computeSubscribedTopics: the version prefix, then the
    schema's version 0 (topics, user data), which every later version starts with, whatever
    the version says. Raises RecordDecodeError when the bytes do not follow it."""
    r = _R(metadata)
    r.i16()
    n = r.i32()
    if n < 0:
        raise RecordDecodeError("null topics in a consumer protocol subscription")
    topics = []
    for _ in range(n):
        t = r.string()
        if t is None:
            raise RecordDecodeError("null topic in a consumer protocol subscription")
        topics.append(t)
    r.bytes_()  # user data
    return topics
