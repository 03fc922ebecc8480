"""A Produce's answer (ProduceResponse v3-v11) made and encoded without kafka-python's objects where it can be.

kafka-python's generated classes cost a Python __init__ with keyword arguments per partition and a field-by-field
encoder (about 300 bytecodes a partition, half a 6-partition Produce's handling of its answer). The handler builds
these slotted objects instead, with the same attribute names (leader_hints.fill_produce, control/responses.py and
the handler's own failure path read and change them as they would kafka-python's), and codec.encode_response asks
`ProduceAnswer.frame` for the frame: packed here when every partition is a PartitionAnswer with no record errors,
error message nor current leader and the answer names no node endpoints (every answer a producer gets while all
goes well, and most errors), else None, and the answer is then made into kafka-python's ProduceResponse
(`to_kafka`) and encoded by it. tests/unit/test_produce_response.py checks the bytes against kafka-python's for every
version served.
"""
from __future__ import annotations

import struct

_INT32 = struct.Struct(">i").pack
_INT16 = struct.Struct(">h").pack
_PACK_SIZE_AND_ID = struct.Struct(">ii").pack
# a partition's fixed fields: index, error code, base offset, log append time (v2+), log start offset (v5+)
_PARTITION_V3 = struct.Struct(">ihqq").pack
_PARTITION_V5 = struct.Struct(">ihqqq").pack
# after them: nothing (v3-v7); empty record errors and a null error message (v8: int32 0, int16 -1; v9+: compact,
# then no tagged fields)
_TAIL = {False: b"", True: b"\x00\x00\x00\x00\xff\xff"}
_FLEXIBLE_TAIL = b"\x01\x00\x00"
FLEXIBLE_SINCE = 9


_ONE_BYTE = [bytes((n,)) for n in range(0x80)]  # an unsigned varint below 128: its one byte


def _uvarint(n: int) -> bytes:
    if n < 0x80:
        return _ONE_BYTE[n]
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class _KafkaNames(type):
    """A class attribute not found here is kafka-python's class's of that name (LeaderIdAndEpoch, NodeEndpoint,
    BatchIndexAndErrorMessage: what code makes through `type(p).LeaderIdAndEpoch(...)`), imported on first use."""

    def __getattr__(cls, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(cls._kafka_class(), name)


def _kafka_response():
    from kafka.protocol.producer.produce import ProduceResponse
    return ProduceResponse


class PartitionAnswer(metaclass=_KafkaNames):
    """One partition's answer: ProduceResponse's PartitionProduceResponse, same attributes."""
    __slots__ = ("index", "error_code", "base_offset", "log_append_time_ms", "log_start_offset", "record_errors",
                 "error_message", "current_leader")

    def __init__(self, index: int, error_code: int, base_offset: int, log_append_time_ms: int, log_start_offset: int,
                 record_errors: list = (), error_message: str | None = None):
        self.index, self.error_code, self.base_offset = index, error_code, base_offset
        self.log_append_time_ms, self.log_start_offset = log_append_time_ms, log_start_offset
        self.record_errors, self.error_message, self.current_leader = record_errors, error_message, None

    @staticmethod
    def _kafka_class():
        return _kafka_response().TopicProduceResponse.PartitionProduceResponse

    def to_kafka(self):
        extra = {} if self.current_leader is None else {"current_leader": self.current_leader}
        return self._kafka_class()(index=self.index, error_code=self.error_code, base_offset=self.base_offset,
                                   log_append_time_ms=self.log_append_time_ms,
                                   log_start_offset=self.log_start_offset, record_errors=list(self.record_errors),
                                   error_message=self.error_message, **extra)


class TopicAnswer(metaclass=_KafkaNames):
    """One topic's answer: ProduceResponse's TopicProduceResponse, same attributes."""
    __slots__ = ("name", "partition_responses")

    def __init__(self, name: str, partition_responses: list):
        self.name, self.partition_responses = name, partition_responses

    @staticmethod
    def _kafka_class():
        return _kafka_response().TopicProduceResponse


class ProduceAnswer(metaclass=_KafkaNames):
    """A Produce's answer: kafka-python's ProduceResponse's attributes (responses, throttle_time_ms,
    node_endpoints), its topics TopicAnswers (or kafka-python's, put in by control/responses.py)."""
    __slots__ = ("responses", "throttle_time_ms", "node_endpoints")

    def __init__(self, responses: list, throttle_time_ms: int = 0):
        self.responses, self.throttle_time_ms, self.node_endpoints = responses, throttle_time_ms, ()

    _kafka_class = staticmethod(_kafka_response)

    def frame(self, version: int, correlation_id: int) -> bytes | None:
        """The whole response frame (size, response header, body) packed here, or None when something in it is
        left to kafka-python's encoder (see the module comment)."""
        if self.node_endpoints:
            return None
        flexible = version >= FLEXIBLE_SINCE
        pack = _PARTITION_V5 if version >= 5 else _PARTITION_V3
        tail = _FLEXIBLE_TAIL if flexible else _TAIL[version >= 8]
        topics = self.responses
        out = bytearray(b"\x00" if flexible else b"")  # the response header's tagged fields (v1)
        count = len(topics) + 1
        out += (_ONE_BYTE[count] if count < 0x80 else _uvarint(count)) if flexible else _INT32(count - 1)
        for t in topics:
            if type(t) is not TopicAnswer:
                return None
            name = t.name.encode()
            parts = t.partition_responses
            if flexible:  # (one-byte varints without the call)
                out += _ONE_BYTE[len(name) + 1] if len(name) < 0x7F else _uvarint(len(name) + 1)
                out += name
                out += _ONE_BYTE[len(parts) + 1] if len(parts) < 0x7F else _uvarint(len(parts) + 1)
            else:
                out += _INT16(len(name))
                out += name
                out += _INT32(len(parts))
            for p in parts:
                if type(p) is not PartitionAnswer or p.record_errors or p.error_message is not None or \
                        p.current_leader is not None:
                    return None
                out += pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms, p.log_start_offset) \
                    if version >= 5 else pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms)
                out += tail
            if flexible:
                out += b"\x00"  # the topic's tagged fields
        out += _INT32(self.throttle_time_ms)
        if flexible:
            out += b"\x00"  # the body's tagged fields (no node endpoints)
        return _PACK_SIZE_AND_ID(len(out) + 4, correlation_id) + out

    def to_kafka(self, version: int):
        """kafka-python's ProduceResponse of the same content."""
        cls = _kafka_response()
        T = cls.TopicProduceResponse
        topics = [T(name=t.name, partition_responses=[p.to_kafka() if type(p) is PartitionAnswer else p
                                                      for p in t.partition_responses])
                  if type(t) is TopicAnswer else t for t in self.responses]
        extra = {"node_endpoints": list(self.node_endpoints)} if self.node_endpoints else {}
        return cls(version=version, responses=topics, throttle_time_ms=self.throttle_time_ms, **extra)
