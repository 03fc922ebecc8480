"""The KIP-848 consumer group APIs, which kafka-python 3.0 lacks: ConsumerGroupHeartbeat (68, v0-1)
and ConsumerGroupDescribe (69, v0-1), requests and responses.

Their specs are Kafka 4.0's JSON message definitions under ``kafkite/wire/schemas``, loaded by
kafka-python's own machinery (as ``kafkite.wire.interbroker`` does), so the request pipeline
(header, strict decoding, framed encoding) is the one every other API goes through. The
encodings are checked byte for byte against kio (PyPI; generated from Kafka's message
definitions) in tests/unit/test_consumer_group_api_codec.py.
"""
from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from . import schemas


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=schemas):
    pass


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=schemas):
    pass


class ConsumerGroupDescribeRequest(ApiMessage, load_json=schemas):
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=schemas):
    pass


__all__ = [
    "ConsumerGroupHeartbeatRequest", "ConsumerGroupHeartbeatResponse",
    "ConsumerGroupDescribeRequest", "ConsumerGroupDescribeResponse",
]
