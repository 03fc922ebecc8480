"""Kafka's LogValidator: checks on a produced partition's records before they reach the log
(ProduceRequest.validateRecords, UnifiedLog.analyzeAndValidateRecords and LogValidator), and
the append-time rewrite: maxTimestamp set from the records, batches recompressed when the
topic's compression.type names another codec (or a compressed batch's offsets are not
0, 1, 2, ...), then offsets assigned, leader epoch and LogAppendTime stamped.

The answers, in the order Kafka reaches them (Kafka 4, produce v3+, v2 batches only). Only
record errors (step 4) carry a message in the response, as in Kafka (its other exceptions
have no "custom" message); every message is logged.

1. ProduceRequest.validateRecords (the batch iterator first) -- log start offset -1 in the answer:
   - batchLength < 14 ("less than the minimum record overhead") or a magic above 2 or below 0
     ("Invalid magic found in record") -> CORRUPT_MESSAGE (2); a batch of 14..48 bytes, whose
     header is cut, is CORRUPT_MESSAGE too (Kafka's CRC check fails on it);
   - no complete batch, first batch magic != 2, a second batch -> INVALID_RECORD (87);
   - ZSTD before produce v7 -> UNSUPPORTED_COMPRESSION_TYPE (76);
   - a compression id above 4 -> UNKNOWN_SERVER_ERROR (-1: Kafka's IllegalArgumentException).
   Bytes after the last complete batch are trimmed silently (UnifiedLog.trimInvalidBytes).
2. analyzeAndValidateRecords, per batch: baseOffset != 0 -> INVALID_RECORD; size >
   max.message.bytes -> MESSAGE_TOO_LARGE (10); CRC32C mismatch -> CORRUPT_MESSAGE.
3. LogValidator.validateBatch -> INVALID_RECORD: lastOffsetDelta < 0, recordsCount <= 0,
   recordsCount != lastOffsetDelta + 1, a control batch from a client, a producer id
   with baseSequence < 0.
4. Every record is read (default_record.py): uncompressed in place, compressed through a
   bounded decompressing stream (compression.py), exactly `recordsCount` of them.
   - a malformed record, fewer or more records than the count -> INVALID_RECORD (Kafka's
     InvalidRecordException, no record errors);
   - a payload its codec cannot decode -> UNKNOWN_SERVER_ERROR (Kafka's KafkaException);
   - records expanding to more than `records_bound` bytes -> MESSAGE_TOO_LARGE (see below);
   - LogValidator.validateRecord, collected per record as record errors (KIP-467: index
     and message): compacted topic and a null key -> INVALID_RECORD; CreateTime topic and a
     timestamp outside [now - message.timestamp.before.max.ms, now +
     message.timestamp.after.max.ms] (KIP-937), or otherwise a batch flagged LogAppendTime by
     its producer (on any topic) -> INVALID_TIMESTAMP (32). INVALID_TIMESTAMP wins
     if any record has it, else INVALID_RECORD, with "One or more records have been rejected".
5. The rewrite (`prepare_append`): a CreateTime batch whose maxTimestamp is not its records'
   largest gets it (as Kafka's setMaxTimestamp; a producer's LogAppendTime flag is cleared
   the same way); recompression, then the recompressed size checked against
   max.message.bytes -> MESSAGE_TOO_LARGE ("Message batch size is ...").

The bound on decompression: a batch's records may expand to at most
RECORDS_BOUND_FACTOR (64) x max.message.bytes (64 MiB at the default 1 MiB). Kafka bounds
only the compressed batch; it streams the records and its memory stays small whatever they
expand to, but each byte still costs it decompression time, and Kafkite also materialises
the records to recompress them. Real producers stay far below the bound: the Java producer
builds batches of batch.size (16 KiB) compressed and a single record of at most
max.request.size (1 MiB), librdkafka's batch.size (1 MB) counts uncompressed bytes. A batch
above it is refused with MESSAGE_TOO_LARGE: Kafka's answer for a batch the broker finds too
large (RecordTooLargeException), on which the Java producer splits the batch and retries.

Cost: records are read in place with no objects built (~15 ns a record by the compiled walk,
~0.5-1 us in pure Python: default_record.py); when the inline limits below are exceeded, `prepare_append(..., inline=True)` raises
`NeedsWorker` and the caller runs it again in a worker thread (inline=False).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

import kafka.errors as kerr

from .batch import (CRC_START, HEADER_SIZE, LOG_OVERHEAD, MIN_BATCH_LENGTH, TIMESTAMP_TYPE_BIT, ZSTD, BatchHeader,
                    Record, crc32c_of, crc_ok, decode_batch, iter_batches, patch_base_offset,
                    patch_partition_leader_epoch, read_header, rebuild_batch, set_log_append_time)
from . import batch as _batch
from .compression import CorruptStream, DecompressedTooLarge, Inflater
from .default_record import (COMPILED, InvalidRecord, RecordChecks, ScanResult, _records, copy_out, scan_stream,
                             scan_uncompressed)

MAX_LONG = 9223372036854775807
NO_TIMESTAMP = -1

NONE = 0
UNKNOWN_SERVER_ERROR = kerr.UnknownError.errno                       # -1
CORRUPT_MESSAGE = kerr.CorruptRecordError.errno                      # 2
MESSAGE_TOO_LARGE = kerr.MessageSizeTooLargeError.errno              # 10
INVALID_TIMESTAMP = kerr.InvalidTimestampError.errno                 # 32
UNSUPPORTED_COMPRESSION_TYPE = kerr.UnsupportedCompressionTypeError.errno  # 76
INVALID_RECORD = kerr.InvalidRecordError.errno                       # 87

RECORDS_BOUND_FACTOR = 64  # a batch's records may expand to 64 x max.message.bytes (module comment)
# Work done on the caller's thread at most (else NeedsWorker): ~2-3 ms of CPython.
INLINE_RECORDS = 4096
# an uncompressed batch read by the compiled walk (default_record.COMPILED, ~15 ns a record): ~1 ms
INLINE_RECORDS_COMPILED = 65536
INLINE_BATCH_BYTES = 2 << 20  # a batch's bytes (its CRC, its copy): every batch under the default max.message.bytes
INLINE_DECOMPRESSED_BYTES = 1 << 20
INLINE_RECOMPRESS_BYTES = 64 << 10
MIN_RECORD_OVERHEAD = 14  # LegacyRecord.RECORD_OVERHEAD_V0: the batch iterator's smallest batchLength
_MAGIC_POS = 16


class NeedsWorker(Exception):
    """The batch is too large to validate or recompress on the caller's thread."""


@dataclass
class Validated:
    """error 0: `batches` are the (position, header) of the batches to append, only the first
    `valid_bytes` of the input are to be appended, and `scans` say what their records hold;
    after prepare_append, `data` holds the bytes to append. Else error, error_message (for
    the log) and, for per-record failures, record_errors [(batch index, message)] as in
    ProduceResponse. `in_response`: the message goes in the response too (record errors
    only, as Kafka); `log_start`: the answer carries the log start offset (errors raised by
    the log's append, not by the request's checks)."""
    error: int = NONE
    error_message: str | None = None
    batches: list[tuple[int, BatchHeader]] = field(default_factory=list)
    record_errors: list[tuple[int, str | None]] = field(default_factory=list)
    valid_bytes: int = 0
    scans: list[ScanResult] = field(default_factory=list)
    data: bytearray | None = None
    in_response: bool = False
    log_start: bool = True

    @property
    def ok(self) -> bool:
        return self.error == NONE


def _fail(code: int, message: str, record_errors=None, log_start: bool = True) -> Validated:
    return Validated(code, message, record_errors=record_errors or [], in_response=bool(record_errors),
                     log_start=log_start)


def _request_fail(code: int, message: str) -> Validated:
    """Refused by the request's checks (KafkaApis) or as CORRUPT_MESSAGE / MESSAGE_TOO_LARGE:
    Kafka's answer has no log start offset (-1)."""
    return _fail(code, message, log_start=False)


def _batches(records, single_batch: bool) -> tuple[list[tuple[int, BatchHeader]], Validated | None]:
    """Kafka's ByteBufferLogInputStream: complete batches from the start, stopping at a partial
    one; an impossible length or magic is CORRUPT_MESSAGE wherever the iterator meets it."""
    out: list[tuple[int, BatchHeader]] = []
    pos, n = 0, len(records)
    while n - pos >= LOG_OVERHEAD:
        length = int.from_bytes(records[pos + 8:pos + 12], "big", signed=True)
        if length < MIN_RECORD_OVERHEAD:
            return out, _request_fail(CORRUPT_MESSAGE, f"Record size {length} is less than the minimum record "
                                                       f"overhead ({MIN_RECORD_OVERHEAD})")
        if n - pos < LOG_OVERHEAD + 5:
            break
        magic = int.from_bytes(records[pos + _MAGIC_POS:pos + _MAGIC_POS + 1], "big", signed=True)
        if magic < 0 or magic > 2:
            return out, _request_fail(CORRUPT_MESSAGE, f"Invalid magic found in record: {magic}")
        if n - pos < length + LOG_OVERHEAD:
            break
        if length < MIN_BATCH_LENGTH:  # a magic-2 batch too short for its header: its CRC check fails
            if magic == 2 and not out:
                return out, _request_fail(CORRUPT_MESSAGE, f"Record batch is corrupt (the size {length + LOG_OVERHEAD} "
                                                           f"is smaller than the minimum allowed overhead {HEADER_SIZE})")
            out.append((pos, None))  # a legacy batch: only its magic matters
        else:
            out.append((pos, read_header(records, pos)))
        pos += length + LOG_OVERHEAD
        if single_batch and len(out) > 1:
            break
    return out, None


def validate_produce(records: bytes, *, max_message_bytes: int, timestamp_type: str = "CreateTime",
                     timestamp_before_max_ms: int = MAX_LONG, timestamp_after_max_ms: int = 3600000,
                     now_ms: int, compacted: bool = False, produce_version: int | None = None,
                     single_batch: bool = True, topic_partition: str = "", records_bound: int | None = None,
                     inline: bool = False) -> Validated:
    """Validate one partition's records of a Produce request (see the module comment).

    timestamp_type is the topic's message.timestamp.type ('CreateTime' | 'LogAppendTime');
    produce_version, when given, adds Kafka's "ZSTD needs produce v7+" check
    (UNSUPPORTED_COMPRESSION_TYPE); single_batch=False lifts the one-batch rule for the
    broker's own multi-batch appends; records_bound defaults to RECORDS_BOUND_FACTOR x
    max_message_bytes; inline=True raises NeedsWorker past the inline limits."""
    produce = "Produce requests" if produce_version is None else f"Produce requests with version {produce_version}"
    batches, corrupt = _batches(records, single_batch)
    if corrupt is not None:
        return corrupt
    if not batches:
        return _request_fail(INVALID_RECORD, f"{produce} must have at "
                                             "least one record batch per partition")
    first = batches[0][1]
    if first is None or first.magic != 2:
        return _request_fail(INVALID_RECORD, f"{produce} are only allowed "
                                             "to contain record batches with magic version 2")
    if first.compression > ZSTD:
        return _request_fail(UNKNOWN_SERVER_ERROR, f"Unknown compression type id: {first.compression}")
    if produce_version is not None and produce_version < 7 and first.compression == ZSTD:
        return _request_fail(UNSUPPORTED_COMPRESSION_TYPE, "Produce requests with version "
                                                           f"{produce_version} cannot use ZStandard compression")
    if single_batch and len(batches) > 1:
        return _request_fail(INVALID_RECORD, f"{produce} are only allowed "
                                             "to contain exactly one record batch per partition")
    if records_bound is None:
        records_bound = RECORDS_BOUND_FACTOR * max_message_bytes
    tp = topic_partition
    in_tp = f" in topic partition {tp}"
    lo = hi = None
    if timestamp_type != "LogAppendTime":  # Java's long arithmetic: now - Long.MAX does not overflow
        lo, hi = now_ms - timestamp_before_max_ms, _wrap(now_ms + timestamp_after_max_ms)
    scans = []
    for pos, h in batches:
        # -- UnifiedLog.analyzeAndValidateRecords
        if h is None or h.magic != first.magic:
            magic = records[pos + _MAGIC_POS]
            return _fail(INVALID_RECORD, f"Batch magic {magic} is not the same as the first batch's magic byte "
                                         f"{first.magic}{in_tp}")
        if h.base_offset != 0:
            return _fail(INVALID_RECORD, f"The baseOffset of the record batch in the append to {tp} should be 0, "
                                         f"but it is {h.base_offset}")
        if h.size > max_message_bytes:
            return _request_fail(MESSAGE_TOO_LARGE, f"The record batch size in the append to {tp} is {h.size} bytes "
                                                    f"which exceeds the maximum configured value of {max_message_bytes}.")
        compiled = COMPILED and h.compression == 0
        if inline and (h.size > INLINE_BATCH_BYTES or h.record_count > (INLINE_RECORDS_COMPILED if compiled
                                                                        else INLINE_RECORDS)):
            raise NeedsWorker  # (the checks above are cheap: the worker runs them all again)
        if not crc_ok(records, pos, h):
            return _request_fail(CORRUPT_MESSAGE, f"Record is corrupt (stored crc = {h.crc}) in topic partition {tp}.")
        # -- LogValidator.validateBatch
        if h.last_offset_delta < 0:
            return _fail(INVALID_RECORD, f"Batch has an invalid offset range: [0, {h.last_offset_delta}]{in_tp}")
        if h.record_count <= 0:
            return _fail(INVALID_RECORD, f"Invalid reported count for record batch: {h.record_count}{in_tp}")
        if h.record_count != h.last_offset_delta + 1:
            return _fail(INVALID_RECORD, f"Inconsistent batch offset range [0, {h.last_offset_delta}] and "
                                         f"count of records {h.record_count}{in_tp}")
        if h.is_control:
            return _fail(INVALID_RECORD, f"Clients are not allowed to write control records{in_tp}")
        if h.producer_id >= 0 and h.base_sequence < 0:
            return _fail(INVALID_RECORD, f"Invalid sequence number {h.base_sequence} in record batch with "
                                         f"producerId {h.producer_id}{in_tp}")
        # -- every record: LogValidator's iteration and validateRecord
        checks = RecordChecks(compacted=compacted, lo=lo, hi=hi, topic_partition=tp,
                              log_append_time=h.max_timestamp if h.log_append_time else None)
        try:
            if h.compression == 0:
                scan = scan_uncompressed(records, pos + HEADER_SIZE, pos + h.size, h.record_count, h.base_timestamp,
                                         checks)
            else:
                bound = min(records_bound, INLINE_DECOMPRESSED_BYTES) if inline else records_bound
                payload = memoryview(records)[pos + HEADER_SIZE:pos + h.size]
                scan = scan_stream(lambda: Inflater(h.compression, payload, bound), h.record_count,
                                   h.base_timestamp, checks)
        except InvalidRecord as exc:
            return _fail(INVALID_RECORD, f"{exc}{in_tp}")
        except DecompressedTooLarge:
            if inline and records_bound > INLINE_DECOMPRESSED_BYTES:
                raise NeedsWorker from None
            return _request_fail(MESSAGE_TOO_LARGE, f"The records of the batch in the append to {tp} expand to more "
                                                    f"than {records_bound} bytes ({RECORDS_BOUND_FACTOR} x "
                                                    f"max.message.bytes {max_message_bytes})")
        except CorruptStream as exc:
            return _fail(UNKNOWN_SERVER_ERROR, f"Failed to decompress record stream{in_tp}: {exc}")
        if scan.record_errors:
            errors = [(i, m) for i, m, _ in scan.record_errors]
            if any(ts for _, _, ts in scan.record_errors):
                return _fail(INVALID_TIMESTAMP, "One or more records have been rejected due to invalid timestamp",
                             errors)
            shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
            return _fail(INVALID_RECORD, f"One or more records have been rejected due to {len(errors)} record "
                                         f"errors in total, and only showing the first three errors at most: [{shown}]",
                         errors)
        scans.append(scan)
    last_pos, last = batches[-1]
    return Validated(batches=batches, valid_bytes=last_pos + last.size, scans=scans)


_UNPACK_HEADER = _batch._HDR.unpack_from  # (the header's fields as read_header unpacks them, without its tuple)
KEPT_AS_IS = ("producer", "uncompressed")  # compression.type values that keep an uncompressed batch as it is


def prepare_simple(records, config, now_ms: int) -> bytearray | None:
    """prepare_append's answer for the common produced partition, in one pass over its header and records: one
    whole uncompressed batch (no bytes after it) at base offset 0, CreateTime, neither transactional nor control
    (an idempotent producer's too: a producer id with a sequence; its sequence is the log's producer state's to
    check, as after prepare_append), under max.message.bytes and the inline limits, its CRC and its records sound and
    their timestamps in the topic's window, to a topic that keeps it as it is (compression.type producer or
    uncompressed, message.timestamp.type CreateTime, not compacted) -> the log's copy of it, its maxTimestamp set
    to its records' largest as prepare_append sets it. None for anything else, errors included: prepare_append
    takes it and makes every check and answer (the checks here are a subset of its, and every batch that passes
    them passes its with the same bytes)."""
    n = len(records)
    if n < HEADER_SIZE or _records is None or config.compression_type not in KEPT_AS_IS or \
            config.message_timestamp_type != "CreateTime" or config.compacted:
        return None
    base, length, _, magic, crc, attributes, lod, base_ts, max_ts, producer_id, _, sequence, count = \
        _UNPACK_HEADER(records, 0)
    if base or attributes or magic != 2 or length + LOG_OVERHEAD != n or lod < 0 or count != lod + 1 or \
            (producer_id >= 0 and sequence < 0) or n > config.max_message_bytes or n > INLINE_BATCH_BYTES or \
            count > INLINE_RECORDS_COMPILED or _batch.crc32c_of(memoryview(records)[CRC_START:]) != crc:
        return None
    walked = _records.walk(records, HEADER_SIZE, n, 0, count)  # (default_record._walk_c's reading)
    if walked is None or walked[0] != n or walked[1] != count:
        return None
    # (validate_produce's window, Java's long arithmetic: now - Long.MAX does not overflow, now + after wraps)
    if base_ts + walked[2] < now_ms - config.message_timestamp_before_max_ms or \
            base_ts + walked[3] > (now_ms + config.message_timestamp_after_max_ms + (1 << 63)) % (1 << 64) - (1 << 63):
        return None
    buf = copy_out(records, 0, n)
    largest = base_ts + walked[3]
    if largest != max_ts:  # (as prepare_append sets it)
        _set_max_timestamp(buf, 0, read_header(buf, 0), largest)
    return buf


def _wrap(v: int) -> int:
    """A Java long's overflow."""
    return (v + (1 << 63)) % (1 << 64) - (1 << 63)


def prepare_append(records: bytes, config, *, now_ms: int, topic_partition: str = "",
                   produce_version: int | None = None, single_batch: bool = True, inline: bool = False) -> Validated:
    """validate_produce with a topic's LogConfig, then the rewrite of step 5: `data` is what to
    append (the input itself when nothing changes). With inline=True, raises NeedsWorker when
    the batch is too large for the caller's thread: call again with inline=False in a worker."""
    v = validate_produce(records, max_message_bytes=config.max_message_bytes,
                         timestamp_type=config.message_timestamp_type,
                         timestamp_before_max_ms=config.message_timestamp_before_max_ms,
                         timestamp_after_max_ms=config.message_timestamp_after_max_ms, now_ms=now_ms,
                         compacted=config.compacted, produce_version=produce_version, single_batch=single_batch,
                         topic_partition=topic_partition, inline=inline)
    if not v.ok:
        return v
    buf = copy_out(records, 0, v.valid_bytes)  # the log's own copy, patched in place
    target = CODECS.get(config.compression_type)
    create_time = config.message_timestamp_type != "LogAppendTime"
    rebuild = [target is not None and h.compression != target or h.compression and not scan.offsets_in_order
               for (_, h), scan in zip(v.batches, v.scans)]
    if any(rebuild):
        if inline and len(buf) > INLINE_RECOMPRESS_BYTES:
            raise NeedsWorker
        out, mv = [], memoryview(buf)
        for (pos, h), again in zip(v.batches, rebuild):
            if not again:
                out.append(mv[pos:pos + h.size])
                continue
            if create_time:
                h = h._replace(attributes=h.attributes & ~TIMESTAMP_TYPE_BIT)
            try:
                recs = decode_batch(mv[pos:pos + h.size])
            except Exception as exc:  # valid for Kafka, not for kafka-python's decoder (a non-UTF-8 header key)
                return _fail(UNKNOWN_SERVER_ERROR, f"Cannot rebuild the batch for {topic_partition}: {exc}")
            recs = [Record(i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(recs)]
            out.append(rebuild_batch(h, recs, compression=h.compression if target is None else target))
        buf = bytearray(b"".join(out))
        v.batches = list(iter_batches(buf))
        for _, h in v.batches:
            # UnifiedLog.append re-checks sizes that recompression may have changed
            if h.size > config.max_message_bytes:
                return _request_fail(MESSAGE_TOO_LARGE, f"Message batch size is {h.size} bytes in append to"
                                                        f"partition {topic_partition} which exceeds the maximum "
                                                        f"configured size of {config.max_message_bytes}.")
    elif create_time:
        # in place, Kafka's setMaxTimestamp(CREATE_TIME, the records' largest): a no-op when right
        changed = False
        for (pos, h), scan in zip(v.batches, v.scans):
            if h.max_timestamp != scan.max_timestamp or h.log_append_time:
                _set_max_timestamp(buf, pos, h, scan.max_timestamp)
                changed = True
        if changed:
            v.batches = [(pos, read_header(buf, pos)) for pos, _ in v.batches]
    v.data = buf
    return v


def _set_max_timestamp(buf: bytearray, pos: int, h: BatchHeader, ts: int) -> None:
    struct.pack_into(">h", buf, pos + 21, h.attributes & ~TIMESTAMP_TYPE_BIT)
    struct.pack_into(">q", buf, pos + 35, ts)
    struct.pack_into(">I", buf, pos + 17, crc32c_of(memoryview(buf)[pos + CRC_START:pos + h.size]))


# compression.type -> batch attribute codec (`producer`: none, the batch keeps its own)
CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def recompress(buf: bytearray, target: int) -> bytearray:
    """Each batch of `buf` whose codec is not `target` (control batches aside) rebuilt with it:
    records, timestamps and producer fields kept, a new CRC."""
    if not any(h.compression != target and not h.is_control for _, h in iter_batches(buf)):
        return buf
    mv = memoryview(buf)
    return bytearray(b"".join(
        rebuild_batch(h, decode_batch(mv[pos:pos + h.size]), compression=target)
        if h.compression != target and not h.is_control else mv[pos:pos + h.size]
        for pos, h in iter_batches(buf)))


def assign_offsets_and_compress(buf: bytearray, base_offset: int, leader_epoch: int, log_append_time_ms: int,
                                compression_type: str = "producer") -> tuple[bytearray, list[tuple[int, BatchHeader]]]:
    """The append-time rewrite of validated batches (LogValidator.validateMessagesAndAssignOffsets):
    a batch whose codec differs from the topic's compression.type is rebuilt with that codec
    (prepare_append has done so already for produced batches, off the event loop when large);
    then offsets are assigned from `base_offset` by patching baseOffset, the leader epoch
    stamped, and LogAppendTime set when `log_append_time_ms` >= 0. `buf` is patched in place
    unless a batch was recompressed. Returns the bytes and their (position, header)s."""
    target = CODECS.get(compression_type)
    if target is not None:
        buf = recompress(buf, target)
    offset, headers = base_offset, []
    for pos, h in list(iter_batches(buf)):
        patch_base_offset(buf, pos, offset)
        patch_partition_leader_epoch(buf, pos, leader_epoch)
        if log_append_time_ms >= 0:
            set_log_append_time(buf, pos, log_append_time_ms)
        h = read_header(buf, pos)
        headers.append((pos, h))
        offset = h.next_offset
    return buf, headers


__all__ = ["assign_offsets_and_compress", "CODECS", "KEPT_AS_IS", "NeedsWorker", "Validated", "prepare_append",
           "prepare_simple", "recompress", "validate_produce", "CORRUPT_MESSAGE", "MESSAGE_TOO_LARGE",
           "INVALID_TIMESTAMP", "INVALID_RECORD", "UNKNOWN_SERVER_ERROR", "UNSUPPORTED_COMPRESSION_TYPE", "HEADER_SIZE",
           "RECORDS_BOUND_FACTOR"]
