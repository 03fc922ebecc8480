"""Kafka v2 record batches as bytes: a header view, CRC32C, offset patching, record decoding.

The broker never re-encodes producer batches. It reads the 61-byte header,
checks the CRC32C (C-accelerated `crc32c`), patches baseOffset (and the
partition leader epoch, both outside the CRC) and stores/serves the bytes.
Record contents are decoded only where a feature needs them (timestamps of
compressed batches, compaction, the coordinator reading __consumer_offsets),
with kafka-python's record classes.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterator, NamedTuple

import crc32c
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength
_HDR = struct.Struct(">qiiBIhiqqqhii")
CRC_START = 21  # attributes onward are covered by the CRC

COMPRESSION_NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> int:
        return self.attributes & 0x07

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)


def read_header(buf, pos: int = 0) -> BatchHeader:
    return BatchHeader(*_HDR.unpack_from(buf, pos))


def peek_size(buf, pos: int) -> int | None:
    """The whole batch size at pos, or None if not even the length is there."""
    if len(buf) - pos < LOG_OVERHEAD:
        return None
    return struct.unpack_from(">i", buf, pos + 8)[0] + LOG_OVERHEAD


def iter_batches(buf, start: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each complete batch; stops at a partial one (check `valid_prefix`)."""
    end = len(buf) if end is None else end
    pos = start
    while end - pos >= HEADER_SIZE:
        h = read_header(buf, pos)
        if h.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + h.size > end:
            return
        yield pos, h
        pos += h.size


def crc_ok(buf, pos: int, h: BatchHeader) -> bool:
    return crc32c.crc32c(memoryview(buf)[pos + CRC_START:pos + h.size]) == h.crc


def patch_base_offset(buf: bytearray, pos: int, base_offset: int) -> None:
    struct.pack_into(">q", buf, pos, base_offset)


def patch_partition_leader_epoch(buf: bytearray, pos: int, epoch: int) -> None:
    struct.pack_into(">i", buf, pos + 12, epoch)


def set_log_append_time(buf: bytearray, pos: int, ts: int) -> None:
    """LogAppendTime: the broker's time becomes max timestamp; type bit set; CRC recomputed."""
    h = read_header(buf, pos)
    struct.pack_into(">h", buf, pos + 21, h.attributes | TIMESTAMP_TYPE_BIT)
    struct.pack_into(">q", buf, pos + 35, ts)
    struct.pack_into(">I", buf, pos + 17, crc32c.crc32c(memoryview(buf)[pos + CRC_START:pos + h.size]))


@dataclass(slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]


def decode_batch(data) -> list[Record]:
    b = DefaultRecordBatch(bytes(data))
    return [Record(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in b]


def decode_records(buf) -> list[Record]:
    """Every record of every complete batch in buf (control batches skipped)."""
    out: list[Record] = []
    mv = memoryview(buf)
    for pos, h in iter_batches(buf):
        if h.is_control:
            continue
        out.extend(decode_batch(mv[pos:pos + h.size]))
    return out


def build_batch(records: list[tuple[bytes | None, bytes | None, list]], *, base_offset: int = 0,
                timestamp_ms: int, producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                compression: int = COMPRESSION_NONE) -> bytes:
    """A v2 batch the broker writes itself (e.g. to __consumer_offsets)."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=False,
                                  producer_id=producer_id, producer_epoch=producer_epoch,
                                  base_sequence=base_sequence, batch_size=1 << 31)
    for i, (k, v, h) in enumerate(records):
        b.append(i, timestamp=timestamp_ms, key=k, value=v, headers=h)
    data = bytearray(b.build())
    if base_offset:
        patch_base_offset(data, 0, base_offset)
    return bytes(data)


def record_timestamps(data) -> list[int]:
    """Timestamps of a batch's records (decompresses if needed)."""
    return [r.timestamp for r in DefaultRecordBatch(bytes(data))]


def rebuild_batch(header: BatchHeader, records: list[Record]) -> bytes:
    """A batch holding a subset of an existing batch's records, offsets and timestamps preserved
    (the log cleaner's output). Compression and producer fields are kept."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=header.compression,
                                  is_transactional=header.is_transactional, producer_id=header.producer_id,
                                  producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
                                  batch_size=1 << 31)
    base = records[0].offset
    for r in records:
        b.append(r.offset - base, timestamp=r.timestamp, key=r.key, value=r.value, headers=r.headers)
    data = bytearray(b.build())
    patch_base_offset(data, 0, base)
    patch_partition_leader_epoch(data, 0, header.partition_leader_epoch)
    if header.log_append_time:
        set_log_append_time(data, 0, header.max_timestamp)
    return bytes(data)
