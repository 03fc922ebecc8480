"""v2 record batches built byte by byte, to corrupt one thing at a time: records as raw bytes
(`record`, or any bytes at all), compressed with a codec (or any payload at all), wrapped in a
header whose fields and CRC32C are set as asked (the CRC right unless told otherwise)."""
from __future__ import annotations

import struct

import crc32c
import zstandard
from kafka import codec as kcodec

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}


def varint(v: int) -> bytes:
    """Zig-zag varint (Kafka's ByteUtils.writeVarint/writeVarlong)."""
    z = (v << 1) ^ (v >> 63)
    z &= (1 << 64) - 1
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def record(offset_delta: int = 0, ts_delta: int = 0, key: bytes | None = b"k", value: bytes | None = b"v",
           headers: list[tuple[bytes, bytes | None]] = (), length: int | None = None) -> bytes:
    """One DefaultRecord; `length` overrides its length prefix."""
    body = bytearray(b"\x00" + varint(ts_delta) + varint(offset_delta))
    body += varint(-1) if key is None else varint(len(key)) + key
    body += varint(-1) if value is None else varint(len(value)) + value
    body += varint(len(headers))
    for hk, hv in headers:
        body += varint(len(hk)) + hk + (varint(-1) if hv is None else varint(len(hv)) + hv)
    return varint(len(body) if length is None else length) + bytes(body)


def records(n: int, *, keys: bool = True, value: bytes = b"value") -> bytes:
    return b"".join(record(i, i, b"k%d" % i if keys else None, value) for i in range(n))


def compress(codec: int, data: bytes) -> bytes:
    if codec == NONE:
        return data
    if codec == GZIP:
        return kcodec.gzip_encode(data)
    if codec == SNAPPY:
        return kcodec.snappy_encode(data, xerial_compatible=True)
    if codec == LZ4:
        return kcodec.lz4_encode(data)
    return zstandard.ZstdCompressor().compress(data)


def batch(payload: bytes, count: int, *, codec: int = NONE, compressed: bool = False, base_ts: int = 0,
          max_ts: int | None = None, last_offset_delta: int | None = None, attributes: int | None = None,
          magic: int = 2, base_offset: int = 0, producer_id: int = -1, producer_epoch: int = -1,
          base_sequence: int = -1, crc: int | None = None) -> bytes:
    """A batch around `payload` (raw records, compressed here with `codec` unless `compressed`)."""
    body = payload if compressed or codec == NONE else compress(codec, payload)
    attrs = codec if attributes is None else attributes
    after_crc = struct.pack(">hiqqqhii", attrs, count - 1 if last_offset_delta is None else last_offset_delta,
                            base_ts, base_ts + count - 1 if max_ts is None else max_ts, producer_id,
                            producer_epoch, base_sequence, count) + body
    c = crc32c.crc32c(after_crc) if crc is None else crc
    rest = struct.pack(">ib", -1, magic) + struct.pack(">I", c) + after_crc
    return struct.pack(">qi", base_offset, len(rest)) + rest


def good(n: int = 3, codec: int = NONE, base_ts: int = 0, keys: bool = True) -> bytes:
    return batch(records(n, keys=keys), n, codec=codec, base_ts=base_ts)


def zstd_bomb(expand_to: int, records: int = 1, chunk: int = 1 << 20) -> bytes:
    """A zstd payload of `records` records whose values are zero bytes, `expand_to` bytes in all,
    compressed as a stream (the test never holds the expansion in memory)."""
    c = zstandard.ZstdCompressor(level=1).compressobj()
    out = []
    zeros = bytes(chunk)
    for i in range(records):
        size = expand_to // records
        body_prefix = b"\x00" + varint(0) + varint(i) + varint(1) + b"k" + varint(size)
        out.append(c.compress(varint(len(body_prefix) + size + 1) + body_prefix))
        left = size
        while left:
            n = min(left, chunk)
            out.append(c.compress(zeros[:n]))
            left -= n
        out.append(c.compress(b"\x00"))  # no headers
    out.append(c.flush())
    return b"".join(out)
