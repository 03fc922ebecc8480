"""Fetch responses (versions 4-16) encoded by hand, records by reference.

Every other response goes through kafka-python's generated classes (codec.encode_response).
A Fetch response is mostly record bytes, and encoding it that way copies them into one new
buffer per response (twice, with the read). Here the frame is a list of buffers: small
encoded pieces, and the record batches exactly as the log holds them (a memory log's stored
batch objects, a file log's read buffer) -- the connection writes them out in order, so
record data is never copied by Python on the way to the socket.

Layout (Kafka's FetchResponse.json, flexible from v12): throttle_time_ms int32 | error_code
int16 (v7+) | session_id int32 (v7+) | responses [ topic string (v<13) or topic_id uuid
(v13+) | partitions [ partition_index int32 | error_code int16 | high_watermark int64 |
last_stable_offset int64 | log_start_offset int64 (v5+) | aborted_transactions nullable
[producer_id int64, first_offset int64] | preferred_read_replica int32 (v11+) | records
nullable ] ]. Flexible versions use compact lengths (unsigned varint n+1) and end every
struct with (empty) tagged fields. tests/unit/test_fetch_response.py checks the bytes
against kafka-python's encoder for every version.
"""
from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from typing import Sequence
from .varint import write_uvarint

_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_PART_HEAD = struct.Struct(">ihqq")   # partition_index, error_code, high_watermark, last_stable_offset
_ABORTED = struct.Struct(">qq")
_LEADER = struct.Struct(">Bii")  # KIP-951's CurrentLeader (partition tag 1): its size, leader id, leader epoch
FIRST_VERSION, LAST_VERSION, FIRST_FLEXIBLE = 4, 16, 12
_SMALL = 64 << 10  # buffers under this are merged into one write


@dataclass(slots=True)
class PartitionData:
    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: list[tuple[int, int]] | None = None
    preferred_read_replica: int = -1
    records: Sequence = ()  # record batch buffers, in order (empty: no records); None: null
    current_leader: tuple[int, int] | None = None  # (leader id, leader epoch), KIP-951: flexible versions only

    @property
    def records_size(self) -> int:
        return 0 if self.records is None else sum(len(r) for r in self.records)


@dataclass(slots=True)
class TopicData:
    topic: str | None
    topic_id: uuid.UUID | None
    partitions: list[PartitionData] = field(default_factory=list)


@dataclass(slots=True)
class FetchResponseData:
    responses: list[TopicData]
    throttle_time_ms: int = 0
    error_code: int = 0
    session_id: int = 0
    # KIP-951 (v16+): (node id, host, port, rack) of the leaders the partitions' current_leader names
    node_endpoints: list[tuple[int, str, int, str | None]] = field(default_factory=list)

    def encode_frames(self, version: int, correlation_id: int) -> list:
        """The whole response frame (size, header, body) as a list of buffers to write in order."""
        if not FIRST_VERSION <= version <= LAST_VERSION:
            raise ValueError(f"Fetch v{version} is not encoded here")
        flex = version >= FIRST_FLEXIBLE
        chunks: list = []
        cur = bytearray(_I32.pack(correlation_id))
        if flex:
            cur.append(0)  # response header v1: tagged fields
        cur += _I32.pack(self.throttle_time_ms)
        if version >= 7:
            cur += _I16.pack(self.error_code)
            cur += _I32.pack(self.session_id)

        def array_len(n: int | None) -> bytes:
            if flex:
                return write_uvarint(0 if n is None else n + 1)
            return _I32.pack(-1 if n is None else n)

        cur += array_len(len(self.responses))
        for t in self.responses:
            if version >= 13:
                cur += (t.topic_id or uuid.UUID(int=0)).bytes
            else:
                name = (t.topic or "").encode()
                cur += write_uvarint(len(name) + 1) if flex else _I16.pack(len(name))
                cur += name
            cur += array_len(len(t.partitions))
            for p in t.partitions:
                cur += _PART_HEAD.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset)
                if version >= 5:
                    cur += _I64.pack(p.log_start_offset)
                aborted = p.aborted_transactions
                cur += array_len(None if aborted is None else len(aborted))
                for producer_id, first_offset in aborted or ():
                    cur += _ABORTED.pack(producer_id, first_offset)
                    if flex:
                        cur.append(0)
                if version >= 11:
                    cur += _I32.pack(p.preferred_read_replica)
                if p.records is None:
                    cur += write_uvarint(0) if flex else _I32.pack(-1)
                else:
                    size = p.records_size
                    cur += write_uvarint(size + 1) if flex else _I32.pack(size)
                    for r in p.records:
                        if len(r) < _SMALL:
                            cur += r
                        elif len(r):
                            chunks.append(cur)
                            chunks.append(r)
                            cur = bytearray()
                if flex:  # partition tagged fields: CurrentLeader (tag 1) when not the default (-1, -1)
                    leader = p.current_leader
                    if leader is None or leader == (-1, -1):
                        cur.append(0)
                    else:
                        cur += b"\x01\x01" + _LEADER.pack(9, *leader) + b"\x00"
            if flex:
                cur.append(0)  # topic tagged fields
        if version >= 16 and self.node_endpoints:  # top-level tagged fields: NodeEndpoints (tag 0)
            body = bytearray(write_uvarint(len(self.node_endpoints) + 1))
            for node_id, host, port, rack in self.node_endpoints:
                body += _I32.pack(node_id) + _compact_string(host) + _I32.pack(port) + _compact_string(rack) + b"\x00"
            cur += b"\x01\x00" + write_uvarint(len(body)) + body
        elif flex:
            cur.append(0)  # top-level tagged fields
        chunks.append(cur)
        size = sum(len(c) for c in chunks)
        chunks[0][0:0] = _I32.pack(size)  # chunks[0] is always one of the bytearrays built here
        return chunks


def _compact_string(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    raw = value.encode()
    return write_uvarint(len(raw) + 1) + raw
