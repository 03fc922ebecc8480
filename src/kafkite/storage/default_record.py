"""Reading a v2 batch's records the way Kafka's DefaultRecord / DefaultRecordBatch read them,
without building record objects: the broker's check that every record of a produced batch
is well formed, and the facts LogValidator needs from each (timestamp, key present,
offset delta).

A record (Kafka's DefaultRecord)::

    length: varint            size of the rest of the record
    attributes: int8
    timestampDelta: varlong
    offsetDelta: varint
    keyLength: varint         < 0: null key
    key: byte[keyLength]
    valueLength: varint       < 0: null value
    value: byte[valueLength]
    headers count: varint
    headers: [keyLength varint (>= 0), key, valueLength varint, value]

Uncompressed records are read in place, as DefaultRecord.readFrom(ByteBuffer) reads them
(a record may not read past the batch end; its fields must add up to its length).
Compressed records come from a bounded `Inflater` stream, as readFrom(InputStream) reads
them (a record's length bytes are read first, then its fields within them). Either way the
header's record count is the number of records: fewer bytes than that many records is
"premature EOF", bytes after them is "records still remaining". Failures raise
`InvalidRecord` with Kafka's messages (Kafka's InvalidRecordException); the one failure Kafka
lets escape as a plain IllegalArgumentException (an over-long length varint in an
uncompressed batch) raises `RecordStreamError`, as do codec failures (compression.py).

Cost: well-formed records pass through one walk (`_walk`) that gathers only what LogValidator
needs; anything unusual sends the batch to the exact reading, which finds Kafka's message. The
walk is compiled (`_records.c`, ~10 ns a record) where `pip install` found a C compiler, else
pure Python (~0.5-1 us a record); both give the same results (tests/unit/test_record_walk.py).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from .compression import CorruptStream, Inflater

NO_TIMESTAMP = -1
_PREMATURE = "Incorrect declared batch size, premature EOF reached"
_REMAINING = "Incorrect declared batch size, records still remaining in file"
_STRUCTURE = "Found invalid record structure"
_READ = 16 * 1024  # decompressed bytes read ahead
_FAR = 1 << 64  # beyond any timestamp delta


class InvalidRecord(Exception):
    """Kafka's InvalidRecordException while reading records (INVALID_RECORD)."""


class RecordStreamError(CorruptStream):
    """A failure Kafka does not turn into InvalidRecordException (UNKNOWN_SERVER_ERROR)."""


class _Underflow(Exception):
    """BufferUnderflowException / IllegalArgumentException inside a record's fields."""


@dataclass
class RecordChecks:
    """What LogValidator.validateRecord checks per record. `lo`/`hi`: CreateTime bounds
    [now - before.max.ms, now + after.max.ms], or None when the topic uses LogAppendTime;
    `log_append_time` is the batch's own timestamp-type flag, whose records all carry the
    batch's maxTimestamp."""
    compacted: bool = False
    lo: int | None = None
    hi: int | None = None
    log_append_time: int | None = None  # the batch's maxTimestamp when it is flagged LogAppendTime
    topic_partition: str = ""


@dataclass
class ScanResult:
    max_timestamp: int = NO_TIMESTAMP
    offsets_in_order: bool = True  # offset deltas 0, 1, 2, ...
    # (index, message, is a timestamp error) for LogValidator's record errors (KIP-467)
    record_errors: list[tuple[int, str, bool]] = field(default_factory=list)


def _zigzag(buf, p: int, end: int, max_bytes: int, mask: int, too_long: Exception) -> tuple[int, int]:
    """Kafka's ByteUtils zig-zag varint/varlong: at most `max_bytes` bytes, kept to `mask`'s width;
    `_Underflow` at the end of the input, `too_long` past `max_bytes`."""
    value = shift = 0
    for _ in range(max_bytes):
        if p >= end:
            raise _Underflow
        b = buf[p]
        p += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            value &= mask
            return (value >> 1) ^ -(value & 1), p
        shift += 7
    raise too_long


def _varint(buf, p: int, end: int) -> tuple[int, int]:
    """ByteUtils.readVarint: 5 bytes at most, 32 bits ("Varint is too long": ValueError)."""
    return _zigzag(buf, p, end, 5, 0xFFFFFFFF, ValueError("Varint is too long"))


def _varlong(buf, p: int, end: int) -> tuple[int, int]:
    """ByteUtils.readVarlong: 10 bytes at most, 64 bits ("Varlong is too long", an IllegalArgumentException,
    counts as running out of the record: `_Underflow`)."""
    return _zigzag(buf, p, end, 10, 0xFFFFFFFFFFFFFFFF, _Underflow())


def _fields(buf, p: int, end: int, size: int, index: int, base_ts: int, checks: RecordChecks,
            out: ScanResult) -> int:
    """One record's fields from p (its length already read), up to `end` at most; returns
    where the record ends. Applies `checks` and adds to `out`."""
    start = p
    try:
        if p >= end:
            raise _Underflow
        p += 1  # attributes
        b = buf[p] if p < end else 0x80
        if b < 0x80:
            ts_delta = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            ts_delta, p = _varlong(buf, p, end)
        b = buf[p] if p < end else 0x80
        if b < 0x80:
            offset_delta = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            offset_delta, p = _varint(buf, p, end)
        key_size, p = _varint(buf, p, end)
        if key_size > 0:
            if p + key_size > end:
                raise _Underflow
            p += key_size
        value_size, p = _varint(buf, p, end)
        if value_size > 0:
            if p + value_size > end:
                raise _Underflow
            p += value_size
        headers, p = _varint(buf, p, end)
        if headers < 0:
            raise InvalidRecord(f"Found invalid number of record headers {headers}")
        if headers > end - p:
            raise InvalidRecord(f"Found invalid number of record headers. {headers} is larger than the "
                                "remaining size of the buffer")
        for _ in range(headers):
            hk, p = _varint(buf, p, end)
            if hk < 0:
                raise InvalidRecord(f"Invalid negative header key size {hk}")
            if p + hk > end:
                raise _Underflow
            p += hk
            hv, p = _varint(buf, p, end)
            if hv > 0:
                if p + hv > end:
                    raise _Underflow
                p += hv
    except (_Underflow, ValueError):
        raise InvalidRecord(_STRUCTURE) from None
    if p - start != size:
        raise InvalidRecord(f"Invalid record size: expected to read {size} bytes in record payload, but "
                            f"instead read {p - start}")
    # -- LogValidator.validateRecord
    ts = checks.log_append_time if checks.log_append_time is not None else base_ts + ts_delta
    if ts > out.max_timestamp:
        out.max_timestamp = ts
    if offset_delta != index:
        out.offsets_in_order = False
    if checks.compacted and key_size < 0:
        out.record_errors.append((index, "Compacted topic cannot accept message without key in topic "
                                         f"partition {checks.topic_partition}", False))
    elif checks.lo is not None and ts != NO_TIMESTAMP and (ts < checks.lo or ts > checks.hi):
        out.record_errors.append((index, f"Timestamp {ts} of message with offset {offset_delta} is out of "
                                         f"range. The timestamp should be within [{checks.lo}, {checks.hi}]",
                                  True))
    elif checks.log_append_time is not None:  # whatever the topic's timestamp type, as Kafka's validateTimestamp
        out.record_errors.append((index, f"Invalid timestamp type in message DefaultRecord(offset={offset_delta}, "
                                         f"timestamp={ts}, key={max(key_size, 0)} bytes, value="
                                         f"{max(value_size, 0)} bytes). Producer should not set timestamp type to "
                                         "LogAppendTime.", True))
    return p


def _walk_py(buf, p: int, end: int, index: int, count: int, st: list, _v=_varint, _vl=_varlong):
    """The fast path (pure Python; `_walk_c` is its compiled twin): records index.. of `count` that
    lie whole in buf[p:end], with no object
    built and only the facts LogValidator needs gathered in st = [min timestamp delta, max
    timestamp delta, null keys, offsets in order]. Returns (position, index) where it stopped
    (a record not whole in the buffer, or the last one read), or None at anything unusual:
    the exact reading (`_fields`) then says what, with Kafka's message. Only well-formed
    records pass: each field is read as Kafka reads it and must end at the record's length."""
    min_d, max_d, null_keys, in_order = st
    try:
        while index < count:
            # length: zig-zag, 1 or 2 bytes inline (z odd: negative)
            z = buf[p]
            if z < 0x80:
                p += 1
            else:
                c = buf[p + 1]
                if c >= 0x80:
                    size, q = _v(buf, p, end)
                    z, p = size << 1, q
                else:
                    z = (z & 0x7F) | (c << 7)
                    p += 2
            if z & 1:
                break
            rec_end = p + (z >> 1)
            if rec_end > end:
                break
            # attributes, then the timestamp delta
            z = buf[p + 1]
            if z < 0x80:
                p += 2
            else:
                c = buf[p + 2]
                if c >= 0x80:
                    d, p = _vl(buf, p + 1, rec_end)
                    z = d << 1 if d >= 0 else (-d << 1) - 1
                else:
                    z = (z & 0x7F) | (c << 7)
                    p += 3
            d = (z >> 1) ^ -(z & 1)
            if d < min_d:
                min_d = d
            if d > max_d:
                max_d = d
            # offset delta: index, zig-zag
            z = buf[p]
            if z < 0x80:
                p += 1
            else:
                c = buf[p + 1]
                if c >= 0x80:
                    od, p = _v(buf, p, rec_end)
                    z = od << 1 if od >= 0 else 1
                else:
                    z = (z & 0x7F) | (c << 7)
                    p += 2
            if z != index << 1:
                in_order = False
            # key: -1 (null) or a length
            z = buf[p]
            if z == 1:
                null_keys += 1
                p += 1
            elif z < 0x80:
                if z & 1:
                    return None
                p += 1 + (z >> 1)
            else:
                k, p = _v(buf, p, rec_end)
                if k < 0:
                    return None
                p += k
            # value
            z = buf[p]
            if z < 0x80:
                p += 1 if z & 1 else 1 + (z >> 1)
            else:
                c = buf[p + 1]
                if c < 0x80:
                    z = (z & 0x7F) | (c << 7)
                    p += 2 if z & 1 else 2 + (z >> 1)
                else:
                    v, p = _v(buf, p, rec_end)
                    if v > 0:
                        p += v
            # headers
            z = buf[p]
            p += 1
            if z:
                if z >= 0x80 or z & 1:
                    return None
                for _ in range(z >> 1):
                    hk = buf[p]
                    if hk >= 0x80 or hk & 1:
                        return None
                    p += 1 + (hk >> 1)
                    hv = buf[p]
                    if hv < 0x80:
                        p += 1 if hv & 1 else 1 + (hv >> 1)
                    else:
                        hv, p = _v(buf, p, rec_end)
                        if hv > 0:
                            p += hv
            if p != rec_end:
                return None
            index += 1
    except (IndexError, ValueError, _Underflow):
        return None
    st[:] = (min_d, max_d, null_keys, in_order)
    return p, index


def _walk_c(buf, p: int, end: int, index: int, count: int, st: list):
    """`_walk_py` by the compiled reader (_records.c): the same contract, the same results for every
    batch the exact reading accepts."""
    r = _records.walk(buf, p, end, index, count)
    if r is None:
        return None
    q, i, lo, hi, null_keys, in_order = r
    if i > index:
        if lo < st[0]:
            st[0] = lo
        if hi > st[1]:
            st[1] = hi
        st[2] += null_keys
        st[3] = st[3] and in_order
    return q, i


try:  # built by `pip install` where a C compiler is (setup.py); else, or with KAFKITE_PURE_PYTHON=1, pure Python
    if os.environ.get("KAFKITE_PURE_PYTHON"):
        raise ImportError
    from . import _records
except ImportError:
    _records = None
_walk = _walk_c if _records is not None else _walk_py
COMPILED = _records is not None


def _copy_py(buf, start: int, end: int) -> bytearray:
    return bytearray(memoryview(buf)[start:end])


# copy_out(buf, start, end) -> bytearray(buf[start:end]): a produced batch's copy into the log; the compiled one makes
# its new pages present in one call first (_records.c copy: a third off the page faults, most of a copy's cost)
copy_out = getattr(_records, "copy", None) or _copy_py


def _needs_exact(st: list, base_ts: int, checks: RecordChecks) -> bool:
    """True when some record may fail validateRecord: then the exact reading lists them."""
    if checks.log_append_time is not None or (checks.compacted and st[2]):
        return True
    return checks.lo is not None and (base_ts + st[0] < checks.lo or base_ts + st[1] > checks.hi)


def _fast_result(st: list, base_ts: int, count: int) -> ScanResult:
    return ScanResult(max_timestamp=base_ts + st[1], offsets_in_order=st[3])


def scan_uncompressed(buf, start: int, end: int, count: int, base_ts: int, checks: RecordChecks) -> ScanResult:
    """The `count` records in buf[start:end] (an uncompressed batch's records), read in place."""
    st = [_FAR, -_FAR, 0, True]
    r = _walk(buf, start, end, 0, count, st)
    if r is not None and r == (end, count) and not _needs_exact(st, base_ts, checks):
        return _fast_result(st, base_ts, count)
    return _scan_uncompressed_exact(buf, start, end, count, base_ts, checks)


def _scan_uncompressed_exact(buf, start: int, end: int, count: int, base_ts: int, checks: RecordChecks) -> ScanResult:
    out = ScanResult()
    p = start
    for index in range(count):
        # the length is read before Kafka's try: underflow is premature EOF, too long escapes
        b = buf[p] if p < end else -1
        if 0 <= b < 0x80:
            size = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            try:
                size, p = _varint(buf, p, end)
            except _Underflow:
                raise InvalidRecord(_PREMATURE) from None
            except ValueError as exc:
                raise RecordStreamError(str(exc)) from None
        if end - p < size:
            raise InvalidRecord(f"Invalid record size: expected {size} bytes in record payload, but instead "
                                f"the buffer has only {end - p} remaining bytes.")
        p = _fields(buf, p, end, size, index, base_ts, checks, out)
    if p != end:
        raise InvalidRecord(_REMAINING)
    return out


def scan_stream(open_stream, count: int, base_ts: int, checks: RecordChecks) -> ScanResult:
    """The `count` records of a compressed batch, read from the decompressing stream that
    `open_stream()` opens (a second time when the fast reading meets anything unusual)."""
    st = [_FAR, -_FAR, 0, True]
    stream = open_stream()
    buf, p, index = b"", 0, 0
    while index < count:
        if len(buf) - p < 5:
            buf, p = buf[p:] + stream.read(_READ), 0
        try:
            size, q = _varint(buf, p, len(buf))
        except (_Underflow, ValueError):
            break
        if size < 0:
            break
        whole = q - p + size
        if p + whole > len(buf):
            buf, p = buf[p:] + stream.read(max(whole - (len(buf) - p), _READ)), 0
            if whole > len(buf):
                break
        r = _walk(buf, p, len(buf), index, count, st)
        if r is None:
            break
        p, index = r
    else:
        if len(buf) == p and not stream.read(1) and not _needs_exact(st, base_ts, checks):
            return _fast_result(st, base_ts, count)
    return _scan_stream_exact(open_stream(), count, base_ts, checks)


def _scan_stream_exact(stream: Inflater, count: int, base_ts: int, checks: RecordChecks) -> ScanResult:
    out = ScanResult()
    buf, p = b"", 0
    for index in range(count):
        if len(buf) - p < 5:
            buf, p = buf[p:] + stream.read(4096), 0
        try:
            size, p = _varint(buf, p, len(buf))
        except (_Underflow, ValueError):  # InputStream.read() gives -1 at the end: a 5-byte 0xFF varint
            raise InvalidRecord(_PREMATURE) from None
        if size < 0:  # ByteBuffer.allocate(negative)
            raise InvalidRecord(_PREMATURE)
        if len(buf) - p < size:
            buf, p = buf[p:] + stream.read(max(size - (len(buf) - p), 4096)), 0
            if len(buf) < size:
                raise InvalidRecord(f"Invalid record size: expected {size} bytes in record payload, but the "
                                    "record payload reached EOF.")
        p = _fields(buf, p, p + size, size, index, base_ts, checks, out)
    if len(buf) > p or stream.read(1):
        raise InvalidRecord(_REMAINING)
    return out
