"""Kafka v2 record batches as bytes: a header view, CRC32C, offset patching, record decoding.

The broker never re-encodes producer batches. It reads the 61-byte header,
checks the CRC32C (C-accelerated `crc32c`), patches baseOffset and the
partition leader epoch (both outside the CRC) and stores/serves the bytes.
Record contents are decoded only where a feature needs them (timestamps of
out-of-range batches, compaction, ListOffsets by time, the coordinator reading
__consumer_offsets), with kafka-python's `kafka.record` classes, which handle
every compression codec (gzip, snappy, lz4, zstd).

v2 batch header, big-endian (Kafka's DefaultRecordBatch)::

    offset  size  field
    0       8     baseOffset
    8       4     batchLength            (bytes after this field)
    12      4     partitionLeaderEpoch   \\ outside the CRC
    16      1     magic (2)
    17      4     crc (CRC32C of bytes 21..end)
    21      2     attributes             bits 0-2 compression, 3 timestamp type,
                                         4 transactional, 5 control
    23      4     lastOffsetDelta
    27      8     baseTimestamp
    35      8     maxTimestamp
    43      8     producerId
    51      2     producerEpoch
    53      4     baseSequence
    57      4     recordsCount
    61            records...
"""
from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from typing import Callable, Iterator, NamedTuple

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part of a batch not counted in batchLength
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49: a batchLength below this cannot hold a header
_HDR = struct.Struct(">qiibIhiqqqhii")
CRC_START = 21  # attributes onward are covered by the CRC

# positions of the fields the broker patches
_PLE_POS, _MAGIC_POS, _CRC_POS, _ATTR_POS, _MAX_TS_POS, _PRODUCER_ID_POS = 12, 16, 17, 21, 35, 43

COMPRESSION_NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CREATE_TIME, LOG_APPEND_TIME = 0, 1
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
INT32_MAX = (1 << 31) - 1


# BatchHeader(*fields) without the namedtuple's generated __new__ (a Python function): the tuple made directly, from
# the 13 fields in order (every batch read or built makes one)
_new_header = tuple.__new__


class BatchHeader(NamedTuple):
    """The 61-byte v2 header, field names as in Kafka's DefaultRecordBatch."""
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
        """The whole batch on the wire/on disk: batchLength + 12."""
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
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return 1 if self.attributes & TIMESTAMP_TYPE_BIT else 0

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
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; sequences wrap from Int32 max to 0 (Kafka's incrementSequence)."""
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) % (INT32_MAX + 1)


def has_producer_id(buf, pos: int = 0) -> bool:
    """Whether the batch at `pos` carries a producer id (an idempotent or transactional producer's: its int64 is not
    negative), read from the one byte of its sign without reading the header."""
    return buf[pos + _PRODUCER_ID_POS] < 0x80


def read_header(buf, pos: int = 0) -> BatchHeader:
    """The header at pos (buf must hold at least 61 bytes from pos)."""
    return _new_header(BatchHeader, _HDR.unpack_from(buf, pos))


def transactional_header(records) -> BatchHeader | None:
    """The first batch's header when it is a v2 transactional data batch with a producer id (what a Produce is
    checked against for KIP-890's verification), else None. Validation proper comes later, on the append."""
    if not records or len(records) < HEADER_SIZE:
        return None
    h = read_header(records, 0)
    if h.magic != 2 or not h.is_transactional or h.is_control or h.producer_id < 0:
        return None
    return h


def peek_size(buf, pos: int) -> int | None:
    """The whole batch size at pos, or None if not even baseOffset+batchLength are there."""
    if len(buf) - pos < LOG_OVERHEAD:
        return None
    return struct.unpack_from(">i", buf, pos + 8)[0] + LOG_OVERHEAD


def iter_batches(buf, start: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each complete batch from start; stops silently at a partial or
    impossible one (batchLength < 49). `valid_prefix` says where it stopped."""
    end = len(buf) if end is None else end
    pos = start
    while end - pos >= HEADER_SIZE:
        h = read_header(buf, pos)
        if h.batch_length < MIN_BATCH_LENGTH or pos + h.size > end:
            return
        yield pos, h
        pos += h.size


def valid_prefix(buf, start: int = 0, end: int | None = None) -> int:
    """Position just past the last complete batch that iter_batches yields (== start if none)."""
    pos = start
    for p, h in iter_batches(buf, start, end):
        pos = p + h.size
    return pos


def _crc32c_function() -> Callable:
    """The `crc32c` package's C function, from its extension module loaded alone: the package's __init__ imports
    importlib.metadata (with email, zipfile, csv...: 2 MB of memory) for its version string, 14-60 ms that a
    broker's first Produce waited for (185 ms on a loaded machine, py-spy). Found by importlib.util.find_spec, which
    does not run the package; anything unexpected falls back to the package's own import."""
    try:
        import importlib.machinery
        import importlib.util
        import os
        spec = importlib.util.find_spec("crc32c")
        for folder in (spec.submodule_search_locations or []) if spec else []:
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                path = os.path.join(folder, "_crc32c" + suffix)
                if os.path.exists(path):
                    loader = importlib.machinery.ExtensionFileLoader("crc32c._crc32c", path)
                    ext = importlib.util.spec_from_file_location("crc32c._crc32c", path, loader=loader)
                    module = importlib.util.module_from_spec(ext)
                    loader.exec_module(module)
                    return module.crc32c
    except Exception:  # pragma: no cover - another layout of the package
        pass
    from crc32c import crc32c
    return crc32c


def crc32c_of(data) -> int:
    """CRC32C of data, by the `crc32c` package's C function, loaded on the first call, not at start (see
    `_crc32c_function`). The first call puts the C function in this name's place, so later calls through it are
    direct (modules that imported the name before keep this function, which hands over)."""
    global crc32c_of
    if crc32c_of is _crc32c_of_first:
        crc32c_of = _crc32c_function()
    return crc32c_of(data)


_crc32c_of_first = crc32c_of


def crc_ok(buf, pos: int, h: BatchHeader) -> bool:
    """CRC32C over attributes..end of the batch matches the header's crc."""
    return crc32c_of(memoryview(buf)[pos + CRC_START:pos + h.size]) == h.crc


def patch_base_offset(buf: bytearray, pos: int, base_offset: int) -> None:
    """Assign the batch's offsets (baseOffset is outside the CRC)."""
    struct.pack_into(">q", buf, pos, base_offset)


def patch_partition_leader_epoch(buf: bytearray, pos: int, epoch: int) -> None:
    """Stamp the leader's epoch (outside the CRC)."""
    struct.pack_into(">i", buf, pos + _PLE_POS, epoch)


def set_log_append_time(buf: bytearray, pos: int, ts: int) -> None:
    """LogAppendTime: the broker's time becomes the max timestamp, the timestamp-type bit is
    set, and the CRC is recomputed (both fields are inside it). Records keep their deltas;
    readers use maxTimestamp for every record of a LogAppendTime batch."""
    h = read_header(buf, pos)
    struct.pack_into(">h", buf, pos + _ATTR_POS, h.attributes | TIMESTAMP_TYPE_BIT)
    struct.pack_into(">q", buf, pos + _MAX_TS_POS, ts)
    struct.pack_into(">I", buf, pos + _CRC_POS, crc32c_of(memoryview(buf)[pos + CRC_START:pos + h.size]))


@dataclass(slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]


def iter_records(data):
    """The records of one whole batch as kafka-python decodes them, one at a time, none kept (the log cleaner's
    reading). Raises kafka.errors.CorruptRecordError (or a codec error) on a malformed batch."""
    return iter(_default_records().DefaultRecordBatch(bytes(data)))


def decode_batch(data, pace: Callable[[], None] | None = None) -> list[Record]:
    """The records of one whole batch (decompressing as needed). Raises kafka.errors.CorruptRecordError
    (or a codec error) on a malformed batch. `pace()`, when given, is called after each record (the log cleaner's
    worker giving the GIL up: kafkite.gil_pacing.Pacer)."""
    if pace is None:
        return [Record(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in iter_records(data)]
    out = []
    for r in iter_records(data):
        out.append(Record(r.offset, r.timestamp, r.key, r.value, list(r.headers)))
        pace()
    return out


def decode_records(buf) -> list[Record]:
    """Every record of every complete batch in buf, in offset order (control batches skipped)."""
    out: list[Record] = []
    mv = memoryview(buf)
    for pos, h in iter_batches(buf):
        if h.is_control:
            continue
        out.extend(decode_batch(mv[pos:pos + h.size]))
    return out


def record_timestamps(data) -> list[int]:
    """Timestamps of one batch's records (decompresses if needed)."""
    return [r.timestamp for r in _default_records().DefaultRecordBatch(bytes(data))]


def _default_records():
    """kafka-python's kafka.record.default_records, imported on first use: it imports kafka.codec, which imports every
    compression library (snappy, lz4, zstandard, gzip: 2 MB of a broker's idle memory), and a broker needs it only
    to decode records or build a batch through kafka-python (the cleaner, ListOffsets by time, transaction markers,
    a compressed batch it writes), never to store or serve a produced batch."""
    from kafka.record import default_records
    return default_records


@functools.cache
def _builder():
    """kafka-python's batch builder, but a batch is always stored with its codec: kafka-python
    keeps a batch uncompressed when compression does not shrink it, Kafka never does (and a
    topic's compression.type says what is stored). gzip at Kafka's default level (6). (A class made on first use:
    see _default_records.)"""
    from kafka import codec

    class _Builder(_default_records().DefaultRecordBatchBuilder):
        _ENCODE = {1: lambda d: codec.gzip_encode(d, compresslevel=6), 2: codec.snappy_encode,
                   3: codec.lz4_encode, 4: codec.zstd_encode}

        def _maybe_compress(self) -> bool:
            if self._compression_type == self.CODEC_NONE:
                return False
            header_size = self.HEADER_STRUCT.size
            compressed = self._ENCODE[self._compression_type](bytes(self._buffer[header_size:]))
            del self._buffer[header_size:]
            self._buffer += compressed
            return True

    return _Builder


def build_batch(records: list[tuple[bytes | None, bytes | None, list]], *, base_offset: int = 0,
                timestamp_ms: int, producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                compression: int = COMPRESSION_NONE, is_transactional: bool = False,
                partition_leader_epoch: int = -1) -> bytes:
    """A v2 batch the broker writes itself (e.g. to __consumer_offsets): records are
    (key, value, headers) with offset deltas 0..n-1, all with timestamp_ms. An uncompressed batch
    (the coordinators' every write) is encoded here in one pass: the records, the header fields the
    CRC covers in one pack, the CRC32C once; a compressed one goes through kafka-python's builder."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    if compression != COMPRESSION_NONE:
        return _build_with_kafka_python(records, base_offset, timestamp_ms, producer_id, producer_epoch,
                                        base_sequence, compression, is_transactional, partition_leader_epoch)
    return build_batch_with_header(records, base_offset=base_offset, timestamp_ms=timestamp_ms,
                                   producer_id=producer_id, producer_epoch=producer_epoch,
                                   base_sequence=base_sequence, is_transactional=is_transactional,
                                   partition_leader_epoch=partition_leader_epoch)[0]


def build_batch_with_header(records, *, base_offset: int, timestamp_ms: int, producer_id: int = -1,
                            producer_epoch: int = -1, base_sequence: int = -1, is_transactional: bool = False,
                            partition_leader_epoch: int = -1, headerless: bool = False
                            ) -> tuple[bytes, BatchHeader]:
    """build_batch's uncompressed batch and its header, as the builder knows it (not parsed back): what a
    coordinator's append hands the log (ReplicaManager.append_coordinator_batch). `headerless`: records are
    (key, value) pairs, every record with no headers."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    if headerless and len(records) == 1:  # (a coordinator's usual write, one offset commit: in one pass, no loop)
        return build_one_record_batch(records[0][0], records[0][1], base_offset, timestamp_ms, producer_id,
                                      producer_epoch, base_sequence, is_transactional, partition_leader_epoch)
    parts = [b""]  # the CRC-covered header goes first
    if headerless:
        small = _SMALL_VARINTS  # (lengths and deltas below 64 are one byte: no call)
        for delta, (k, v) in enumerate(records):
            rec = b"".join(((b"\x00\x00", small[delta] if delta < 64 else _varint(delta))
                            + ((b"\x01",) if k is None else (small[len(k)] if len(k) < 64 else _varint(len(k)), k))
                            + ((b"\x01",) if v is None else (small[len(v)] if len(v) < 64 else _varint(len(v)), v))
                            + (b"\x00",)))
            parts += (small[len(rec)] if len(rec) < 64 else _varint(len(rec)), rec)
        return _finish_batch(parts, len(records), base_offset, timestamp_ms, producer_id, producer_epoch,
                             base_sequence, is_transactional, partition_leader_epoch)
    for delta, (k, v, h) in enumerate(records):
        # attributes (0), timestampDelta (0), offsetDelta, key, value, headers: Kafka's DefaultRecord
        body = [b"\x00\x00", _varint(delta)]
        body += (b"\x01",) if k is None else (_varint(len(k)), k)
        body += (b"\x01",) if v is None else (_varint(len(v)), v)
        body.append(_varint(len(h)))
        for hk, hv in h:
            hk = hk.encode() if isinstance(hk, str) else hk
            body += (_varint(len(hk)), hk) + ((b"\x01",) if hv is None else (_varint(len(hv)), hv))
        rec = b"".join(body)
        parts += (_varint(len(rec)), rec)
    return _finish_batch(parts, len(records), base_offset, timestamp_ms, producer_id, producer_epoch,
                         base_sequence, is_transactional, partition_leader_epoch)


def build_one_record_batch(k: bytes | None, v: bytes | None, base_offset: int, timestamp_ms: int, producer_id: int,
                           producer_epoch: int, base_sequence: int, is_transactional: bool, partition_leader_epoch: int
                           ) -> tuple[bytes, BatchHeader]:
    """build_batch_with_header's batch of one record (key k, value v, no headers), in one pass: a coordinator's usual
    write (one offset commit). Positional arguments (a call with keywords costs more)."""
    small = _SMALL_VARINTS
    # attributes (0), timestampDelta (0), offsetDelta (0), key, value, no headers
    rec = b"".join((b"\x00\x00\x00", b"\x01" if k is None else small[len(k)] if len(k) < 64 else _varint(len(k)),
                    k or b"", b"\x01" if v is None else small[len(v)] if len(v) < 64 else _varint(len(v)),
                    v or b"", b"\x00"))
    attributes = TRANSACTIONAL_BIT if is_transactional else 0
    tail = b"".join((_CRC_COVERED.pack(attributes, 0, timestamp_ms, timestamp_ms, producer_id, producer_epoch,
                                       base_sequence, 1),
                     small[len(rec)] if len(rec) < 64 else _varint(len(rec)), rec))
    crc = crc32c_of(tail)
    # (_finish_batch's steps for one record: keep them alike)
    return (_BEFORE_CRC.pack(base_offset, len(tail) + 9, partition_leader_epoch, 2, crc) + tail,
            _new_header(BatchHeader, (base_offset, len(tail) + 9, partition_leader_epoch, 2, crc, attributes, 0,
                                      timestamp_ms, timestamp_ms, producer_id, producer_epoch, base_sequence, 1)))


def _finish_batch(parts: list, n: int, base_offset: int, timestamp_ms: int, producer_id: int, producer_epoch: int,
                  base_sequence: int, is_transactional: bool, partition_leader_epoch: int
                  ) -> tuple[bytes, BatchHeader]:
    """parts[1:]: the encoded records -> the batch (its CRC computed once) and its header."""
    attributes = TRANSACTIONAL_BIT if is_transactional else 0
    parts[0] = _CRC_COVERED.pack(attributes, n - 1, timestamp_ms, timestamp_ms, producer_id, producer_epoch,
                                 base_sequence, n)
    tail = b"".join(parts)
    crc = crc32c_of(tail)
    h = _new_header(BatchHeader, (base_offset, len(tail) + 9, partition_leader_epoch, 2, crc, attributes, n - 1,
                                  timestamp_ms, timestamp_ms, producer_id, producer_epoch, base_sequence, n))
    return _BEFORE_CRC.pack(base_offset, h.batch_length, partition_leader_epoch, 2, crc) + tail, h


_BEFORE_CRC = struct.Struct(">qiibI")  # baseOffset, batchLength, partitionLeaderEpoch, magic, crc
_CRC_COVERED = struct.Struct(">hiqqqhii")  # attributes .. recordsCount
_SMALL_VARINTS = tuple(bytes((((n << 1) ^ (n >> 63)) & 0xFF,)) for n in range(64))  # zigzag 0..63: one byte


def _varint(n: int) -> bytes:
    """Kafka's zigzag varint (ByteUtils.writeVarint/writeVarlong)."""
    if 0 <= n < 64:
        return _SMALL_VARINTS[n]
    v = (n << 1) ^ (n >> 63)
    if v < 0x4000:
        return bytes((v & 0x7F | 0x80, v >> 7))
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _build_with_kafka_python(records, base_offset, timestamp_ms, producer_id, producer_epoch, base_sequence,
                             compression, is_transactional, partition_leader_epoch) -> bytes:
    b = _builder()(magic=2, compression_type=compression, is_transactional=is_transactional,
                 producer_id=producer_id, producer_epoch=producer_epoch,
                 base_sequence=base_sequence, batch_size=1 << 31)
    for i, (k, v, h) in enumerate(records):
        b.append(i, timestamp=timestamp_ms, key=k, value=v, headers=h)
    data = bytearray(b.build())
    patch_base_offset(data, 0, base_offset)
    patch_partition_leader_epoch(data, 0, partition_leader_epoch)
    return bytes(data)


def rebuild_batch(header: BatchHeader, records: list[Record], compression: int | None = None) -> bytes:
    """A batch holding a subset of an existing batch's records, offsets and timestamps preserved
    (the log cleaner's output, or a recompressed batch). Compression (unless `compression` names
    another codec), producer fields, leader epoch and the timestamp type are kept. The offset
    range shrinks to the kept records, as Kafka's cleaner does."""
    b = _builder()(magic=2, compression_type=header.compression if compression is None else compression,
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


# -- transaction markers (control batches) ------------------------------------------------------
ABORT_MARKER, COMMIT_MARKER = 0, 1  # Kafka's ControlRecordType
_CONTROL_KEY = struct.Struct(">hh")  # version 0, type
_MARKER_VALUE = struct.Struct(">hi")  # EndTransactionMarker: version 0, coordinator epoch


def build_control_batch(producer_id: int, producer_epoch: int, *, commit: bool, coordinator_epoch: int,
                        timestamp_ms: int) -> bytes:
    """A transaction marker as Kafka's EndTransactionMarker writes it: one control record (key: version 0 and
    the type, 1 commit / 0 abort; value: version 0 and the coordinator epoch) in a batch with the
    transactional and control bits, the producer's id and epoch and no sequence."""
    key = _CONTROL_KEY.pack(0, COMMIT_MARKER if commit else ABORT_MARKER)
    value = _MARKER_VALUE.pack(0, coordinator_epoch)
    b = _builder()(magic=2, compression_type=COMPRESSION_NONE, is_transactional=True, producer_id=producer_id,
                 producer_epoch=producer_epoch, base_sequence=-1, batch_size=1 << 31)
    b.append(0, timestamp=timestamp_ms, key=key, value=value, headers=[])
    data = bytearray(b.build())
    h = read_header(data, 0)
    struct.pack_into(">h", data, _ATTR_POS, h.attributes | CONTROL_BIT)
    struct.pack_into(">I", data, _CRC_POS, crc32c_of(memoryview(data)[CRC_START:h.size]))
    return bytes(data)


def control_type(buf, pos: int, h: BatchHeader) -> int | None:
    """The marker type (COMMIT_MARKER / ABORT_MARKER) of the control batch at pos, or None when its record does
    not read as a control record (control batches are never compressed)."""
    marker = read_marker(buf, pos, h)
    return None if marker is None else marker[0]


def read_marker(buf, pos: int, h: BatchHeader) -> tuple[int, int] | None:
    """(marker type, coordinator epoch) of the control batch at pos (Kafka's EndTransactionMarker; the epoch is -1
    when the value does not hold one), or None when its record does not read as a control record."""
    if not h.is_control or h.compression != COMPRESSION_NONE or h.record_count < 1:
        return None
    try:
        recs = _default_records().DefaultRecordBatch(bytes(memoryview(buf)[pos:pos + h.size]))
        for r in recs:
            key = r.key
            if key is None or len(key) < 4:
                return None
            value = r.value
            epoch = _MARKER_VALUE.unpack_from(value)[1] if value is not None and len(value) >= 6 else -1
            return _CONTROL_KEY.unpack_from(key)[1], epoch
    except Exception:
        return None
    return None
