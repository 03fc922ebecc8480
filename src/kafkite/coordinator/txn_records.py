"""Kafka's __transaction_state record formats (TransactionLogKey, TransactionLogValue), encode and decode.

Key: version 0, then the transactional id (string). Value: version 0 (what Kafka 3.9 writes for
classic transactions; version 1 is the flexible one of KIP-890, read too): producer id, producer
epoch, transaction timeout, status (int8, the TxnState number), partitions ([topic, [partition]]),
last update and start timestamps. A null value is a tombstone (an expired transactional id).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .records import RecordDecodeError, _R, _W


@dataclass
class TxnValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int
    partitions: list[tuple[str, int]] = field(default_factory=list)
    last_update_ms: int = -1
    start_ms: int = -1


def txn_key(transactional_id: str) -> bytes:
    return bytes(_W().i16(0).string(transactional_id).b)


def txn_value(v: TxnValue) -> bytes:
    w = _W().i16(0).i64(v.producer_id).i16(v.producer_epoch).i32(v.timeout_ms)
    w.b += bytes([v.state & 0xFF])
    topics: dict[str, list[int]] = {}
    for t, p in sorted(v.partitions):
        topics.setdefault(t, []).append(p)
    w.i32(len(topics))
    for t, ps in topics.items():
        w.string(t).i32(len(ps))
        for p in ps:
            w.i32(p)
    return bytes(w.i64(v.last_update_ms).i64(v.start_ms).b)


def decode_txn_key(key: bytes) -> str:
    r = _R(key)
    version = r.i16()
    if version != 0:
        raise RecordDecodeError(f"unknown TransactionLogKey version {version}")
    tid = r.string()
    if tid is None:
        raise RecordDecodeError("null transactional id")
    return tid


def decode_txn_value(value: bytes) -> TxnValue:
    r = _R(value)
    version = r.i16()
    if version not in (0, 1):
        raise RecordDecodeError(f"unknown TransactionLogValue version {version}")
    flexible = version >= 1
    pid, epoch, timeout = r.i64(), r.i16(), r.i32()
    state = r._take(1)[0]
    n = (r.uvarint() - 1) if flexible else r.i32()
    parts = []
    for _ in range(max(n, 0)):
        topic = (r.compact_string() if flexible else r.string()) or ""
        m = (r.uvarint() - 1) if flexible else r.i32()
        for _ in range(max(m, 0)):
            parts.append((topic, r.i32()))
        if flexible:
            r.skip_tags()
    v = TxnValue(pid, epoch, timeout, state, parts, r.i64(), r.i64())
    if flexible:
        r.skip_tags()
    return v
