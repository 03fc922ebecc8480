"""Kafka's LogValidator: checks on a produced partition's records before they reach the log
(ProduceRequest.validateRecords, UnifiedLog.analyzeAndValidateRecords and LogValidator), and
the append-time rewrite: offsets assigned, leader epoch and LogAppendTime stamped, and batches
recompressed when the topic's compression.type names a codec (`producer` keeps the producer's
bytes as produced).

The answers, in the order Kafka reaches them (Kafka 4, produce v3+, v2 batches only):

1. ProduceRequest.validateRecords -> INVALID_RECORD (87)
   - no complete batch ("must have at least one record batch"),
   - first batch magic != 2 ("only allowed to contain record batches with magic version 2"),
   - a second complete batch ("exactly one record batch").
   Before that, a batchLength too small to be a batch is CORRUPT_MESSAGE (2), as Kafka's
   batch iterator throws CorruptRecordException. Bytes after the last complete batch are
   trimmed silently (UnifiedLog.trimInvalidBytes): `valid_bytes` says how many to keep.
2. analyzeAndValidateRecords, per batch:
   - baseOffset != 0 -> INVALID_RECORD,
   - size > max.message.bytes -> MESSAGE_TOO_LARGE (10),
   - CRC32C mismatch -> CORRUPT_MESSAGE (2).
3. LogValidator.validateBatch -> INVALID_RECORD: lastOffsetDelta < 0, recordsCount <= 0,
   recordsCount != lastOffsetDelta + 1, a control batch from a client, a producer id
   with baseSequence < 0.
4. LogValidator.validateRecord, per record, collected as record errors (batch index):
   - compacted topic and a null key -> INVALID_RECORD,
   - CreateTime topic: now - ts > message.timestamp.before.max.ms or
     ts - now > message.timestamp.after.max.ms (KIP-937) -> INVALID_TIMESTAMP (32);
     a batch flagged LogAppendTime by the producer -> INVALID_TIMESTAMP.
   INVALID_TIMESTAMP wins if any record has it, else INVALID_RECORD.

Records are decoded only when the header cannot settle step 4 (maxTimestamp beyond
after.max.ms, a finite before.max.ms, compacted topics, a LogAppendTime flag);
a malformed record found then is INVALID_RECORD. Unlike Kafka, a well-framed batch whose
records are never decoded is not checked record by record (records stay bytes).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import kafka.errors as kerr

from .batch import (HEADER_SIZE, LOG_OVERHEAD, MIN_BATCH_LENGTH, ZSTD, BatchHeader, crc_ok, decode_batch,
                    iter_batches, patch_base_offset, patch_partition_leader_epoch, peek_size, read_header,
                    rebuild_batch, set_log_append_time)

MAX_LONG = 9223372036854775807
NO_TIMESTAMP = -1

NONE = 0
CORRUPT_MESSAGE = kerr.CorruptRecordError.errno                      # 2
MESSAGE_TOO_LARGE = kerr.MessageSizeTooLargeError.errno              # 10
INVALID_TIMESTAMP = kerr.InvalidTimestampError.errno                 # 32
UNSUPPORTED_COMPRESSION_TYPE = kerr.UnsupportedCompressionTypeError.errno  # 76
INVALID_RECORD = kerr.InvalidRecordError.errno                       # 87


@dataclass
class Validated:
    """error 0: `batches` are the (position, header) of the batches to append, and only the
    first `valid_bytes` of the input are to be appended. Else error, error_message and, for
    per-record failures, record_errors [(batch index, message)] as in ProduceResponse."""
    error: int = NONE
    error_message: str | None = None
    batches: list[tuple[int, BatchHeader]] = field(default_factory=list)
    record_errors: list[tuple[int, str | None]] = field(default_factory=list)
    valid_bytes: int = 0

    @property
    def ok(self) -> bool:
        return self.error == NONE


def _fail(code: int, message: str, record_errors=None) -> Validated:
    return Validated(code, message, record_errors=record_errors or [])


def validate_produce(records: bytes, *, max_message_bytes: int, timestamp_type: str = "CreateTime",
                     timestamp_before_max_ms: int = MAX_LONG, timestamp_after_max_ms: int = 3600000,
                     now_ms: int, compacted: bool = False, produce_version: int | None = None,
                     single_batch: bool = True) -> Validated:
    """Validate one partition's records of a Produce request (see the module comment).

    timestamp_type is the topic's message.timestamp.type ('CreateTime' | 'LogAppendTime');
    produce_version, when given, adds Kafka's "ZSTD needs produce v7+" check
    (UNSUPPORTED_COMPRESSION_TYPE); single_batch=False lifts the one-batch rule for the
    broker's own multi-batch appends."""
    batches = list(iter_batches(records))
    valid = batches[-1][0] + batches[-1][1].size if batches else 0
    # Kafka's batch iterator throws CorruptRecordException on an impossible batch length
    # where it would otherwise stop (a merely short tail is not an error, it is trimmed).
    if len(records) - valid >= LOG_OVERHEAD + 5:  # up to magic, like HEADER_SIZE_UP_TO_MAGIC
        size = peek_size(records, valid)
        if size is not None and size - LOG_OVERHEAD < MIN_BATCH_LENGTH:
            return _fail(CORRUPT_MESSAGE, f"Record batch size {size - LOG_OVERHEAD} is smaller than the "
                                          f"minimum allowed overhead {MIN_BATCH_LENGTH}")
    if not batches:
        if len(records) >= 17 and records[16] != 2:
            return _fail(INVALID_RECORD, "Produce requests are only allowed to contain record batches "
                                         "with magic version 2")
        return _fail(INVALID_RECORD, "Produce requests must have at least one record batch")
    first = batches[0][1]
    if first.magic != 2:
        return _fail(INVALID_RECORD, "Produce requests are only allowed to contain record batches "
                                     "with magic version 2")
    if single_batch and len(batches) > 1:
        return _fail(INVALID_RECORD, "Produce requests are only allowed to contain exactly one record batch")
    if produce_version is not None and produce_version < 7 and first.compression == ZSTD:
        return _fail(UNSUPPORTED_COMPRESSION_TYPE, "Produce requests with version "
                                                   f"{produce_version} cannot use ZStandard compression")

    log_append_time = timestamp_type == "LogAppendTime"
    for index, (pos, h) in enumerate(batches):
        # -- UnifiedLog.analyzeAndValidateRecords
        if h.magic != first.magic:
            return _fail(INVALID_RECORD, f"Batch magic {h.magic} is not the same as the first batch's "
                                         f"magic byte {first.magic}")
        if h.base_offset != 0:
            return _fail(INVALID_RECORD, f"The baseOffset of the record batch should be 0, but it is "
                                         f"{h.base_offset}")
        if h.size > max_message_bytes:
            return _fail(MESSAGE_TOO_LARGE, f"The record batch size in the append is {h.size} bytes which "
                                            f"exceeds the maximum configured value of {max_message_bytes}.")
        if not crc_ok(records, pos, h):
            return _fail(CORRUPT_MESSAGE, f"Record is corrupt (stored crc = {h.crc})")
        # -- LogValidator.validateBatch
        if h.last_offset_delta < 0:
            return _fail(INVALID_RECORD, f"Batch has an invalid offset range: [0, {h.last_offset_delta}]")
        if h.record_count <= 0:
            return _fail(INVALID_RECORD, f"Invalid reported count for record batch: {h.record_count}")
        if h.record_count != h.last_offset_delta + 1:
            return _fail(INVALID_RECORD, f"Inconsistent batch offset range [0, {h.last_offset_delta}] and "
                                         f"count of records {h.record_count}")
        if h.is_control:
            return _fail(INVALID_RECORD, "Clients are not allowed to write control records")
        if h.producer_id >= 0 and h.base_sequence < 0:
            return _fail(INVALID_RECORD, f"Invalid sequence number {h.base_sequence} in record batch with "
                                         f"producerId {h.producer_id}")
        # -- LogValidator.validateRecord: decode only when the header cannot vouch for every record
        # maxTimestamp bounds every record from above; nothing in the header bounds them from
        # below (record timestamp deltas may be negative), so a finite before.max.ms decodes.
        ts_check = not log_append_time and (
            timestamp_before_max_ms < MAX_LONG or h.max_timestamp > _hi(now_ms, timestamp_after_max_ms))
        if not (ts_check or compacted or h.log_append_time):
            continue
        try:
            recs = decode_batch(memoryview(records)[pos:pos + h.size])
        except Exception as exc:  # malformed records or compressed payload
            return _fail(INVALID_RECORD, f"Found invalid record structure: {exc}")
        errors: list[tuple[int, str | None]] = []
        any_ts_error = False
        for i, r in enumerate(recs):
            if compacted and r.key is None:
                errors.append((i, "Compacted topic cannot accept message without key"))
            elif not log_append_time and r.timestamp != NO_TIMESTAMP:
                if now_ms - r.timestamp > timestamp_before_max_ms or r.timestamp - now_ms > timestamp_after_max_ms:
                    any_ts_error = True
                    errors.append((i, f"Timestamp {r.timestamp} of message with offset {i} is out of range. "
                                      f"The timestamp should be within [{_lo(now_ms, timestamp_before_max_ms)}, "
                                      f"{_hi(now_ms, timestamp_after_max_ms)}]"))
            elif h.log_append_time:
                any_ts_error = True
                errors.append((i, "Invalid timestamp type in message. Producer should not set timestamp "
                                  "type to LogAppendTime."))
        if errors:
            if any_ts_error:
                return _fail(INVALID_TIMESTAMP, "One or more records have been rejected due to invalid "
                                                "timestamp", errors)
            return _fail(INVALID_RECORD, f"One or more records have been rejected due to {len(errors)} "
                                         "record errors in total", errors)
    return Validated(batches=batches, valid_bytes=valid)


def _lo(now_ms: int, before_max_ms: int) -> int:
    return -MAX_LONG - 1 if before_max_ms >= MAX_LONG else now_ms - before_max_ms


def _hi(now_ms: int, after_max_ms: int) -> int:
    return MAX_LONG if after_max_ms >= MAX_LONG else now_ms + after_max_ms


# compression.type -> batch attribute codec (`producer`: none, the batch keeps its own)
CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def assign_offsets_and_compress(buf: bytearray, base_offset: int, leader_epoch: int, log_append_time_ms: int,
                                compression_type: str = "producer") -> tuple[bytearray, list[tuple[int, BatchHeader]]]:
    """The append-time rewrite of validated batches (LogValidator.validateMessagesAndAssignOffsets):
    a batch whose codec differs from the topic's compression.type is rebuilt with that codec
    (records, timestamps and producer fields kept, a new CRC); then offsets are assigned from
    `base_offset` by patching baseOffset, the leader epoch stamped, and LogAppendTime set when
    `log_append_time_ms` >= 0. `buf` is patched in place unless a batch was recompressed.
    Returns the bytes and their (position, header)s."""
    target = CODECS.get(compression_type)
    if target is not None and any(h.compression != target and not h.is_control for _, h in iter_batches(buf)):
        mv = memoryview(buf)
        buf = bytearray(b"".join(
            rebuild_batch(h, decode_batch(mv[pos:pos + h.size]), compression=target)
            if h.compression != target and not h.is_control else mv[pos:pos + h.size]
            for pos, h in iter_batches(buf)))
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


__all__ = ["assign_offsets_and_compress", "CODECS", "Validated", "validate_produce", "CORRUPT_MESSAGE", "MESSAGE_TOO_LARGE", "INVALID_TIMESTAMP",
           "INVALID_RECORD", "UNSUPPORTED_COMPRESSION_TYPE", "HEADER_SIZE"]
