"""Unsigned varints (Kafka's ByteUtils.writeUnsignedVarint): the compact lengths of flexible versions."""
from __future__ import annotations


def write_uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
