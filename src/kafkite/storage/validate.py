"""Checks on produced record batches before they reach the log (Kafka's LogValidator).

Errors, as Kafka answers them: CORRUPT_MESSAGE for a torn, truncated or
CRC-failing batch; UNSUPPORTED_FOR_MESSAGE_FORMAT for magic < 2 (Kafka 4 takes v2
only); INVALID_RECORD for a record count that does not match the offset delta;
MESSAGE_TOO_LARGE for a batch over max.message.bytes; INVALID_TIMESTAMP (with
per-record errors) for CreateTime timestamps outside
message.timestamp.before/after.max.ms.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..wire.errors import E
from .batch import HEADER_SIZE, BatchHeader, crc_ok, iter_batches, peek_size, record_timestamps

MAX_LONG = 9223372036854775807


@dataclass
class Validated:
    error: int = 0
    error_message: str | None = None
    batches: list[tuple[int, BatchHeader]] = field(default_factory=list)
    record_errors: list[tuple[int, str | None]] = field(default_factory=list)


def validate_produce(records: bytes, *, max_message_bytes: int, timestamp_type: str,
                     timestamp_before_max_ms: int, timestamp_after_max_ms: int, now_ms: int) -> Validated:
    if not records:
        return Validated(E.CORRUPT_MESSAGE, "empty record set")
    batches = list(iter_batches(records))
    consumed = sum(h.size for _, h in batches)
    if consumed != len(records):
        size = peek_size(records, consumed)
        if size is not None and len(records) - consumed >= HEADER_SIZE and size - 12 < HEADER_SIZE - 12:
            return Validated(E.CORRUPT_MESSAGE, "batch length smaller than a batch header")
        return Validated(E.CORRUPT_MESSAGE, f"truncated record batch at byte {consumed} of {len(records)}")
    out = Validated(batches=batches)
    for pos, h in batches:
        if h.magic != 2:
            return Validated(E.UNSUPPORTED_FOR_MESSAGE_FORMAT, f"magic {h.magic} not supported (v2 only)")
        if not crc_ok(records, pos, h):
            return Validated(E.CORRUPT_MESSAGE, "record batch CRC mismatch")
        if h.size > max_message_bytes:
            return Validated(E.MESSAGE_TOO_LARGE,
                             f"batch of {h.size} bytes exceeds max.message.bytes={max_message_bytes}")
        if h.record_count <= 0 or h.record_count != h.last_offset_delta + 1:
            return Validated(E.INVALID_RECORD,
                             f"record count {h.record_count} does not match last offset delta {h.last_offset_delta}")
        if h.is_control:
            return Validated(E.INVALID_RECORD, "clients may not send control batches")
        if timestamp_type == "CreateTime" and (timestamp_before_max_ms < MAX_LONG or timestamp_after_max_ms < MAX_LONG):
            # cheap check on the header's range first; decode only if it may be out of bounds
            lo_ok = timestamp_before_max_ms >= MAX_LONG or h.base_timestamp >= now_ms - timestamp_before_max_ms
            hi_ok = timestamp_after_max_ms >= MAX_LONG or h.max_timestamp <= now_ms + timestamp_after_max_ms
            if not (lo_ok and hi_ok):
                for i, ts in enumerate(record_timestamps(memoryview(records)[pos:pos + h.size])):
                    if now_ms - ts > timestamp_before_max_ms or ts - now_ms > timestamp_after_max_ms:
                        out.record_errors.append((i, f"Timestamp {ts} of message with offset {i} is out of range. "
                                                     f"The timestamp should be within [{now_ms - timestamp_before_max_ms}, "
                                                     f"{now_ms + timestamp_after_max_ms}]"))
                if out.record_errors:
                    return Validated(E.INVALID_TIMESTAMP, "One or more records have been rejected due to invalid "
                                     "timestamp", record_errors=out.record_errors)
    return out
