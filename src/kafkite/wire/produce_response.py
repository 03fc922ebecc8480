"""A Produce's answer (ProduceResponse v3-v11) made of light objects, encoded by kafka-python's compiled encoder.

kafka-python's generated classes cost a Python __init__ with keyword arguments per object (about 175 bytecodes each,
nine of them for a 6-partition Produce). The handler builds these slotted objects instead, with the same attribute
names and defaults (leader_hints.fill_produce, control/responses.py and the handler's own failure path read and change
them as they would kafka-python's, and may put kafka-python's own objects among them), and codec.encode_response
hands them to kafka-python's compiled ProduceResponse encoder, which reads only their attributes: the bytes are
kafka-python's (tests/unit/test_produce_response.py checks them against its classes for every version served).
"""
from __future__ import annotations


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
    """One partition's answer: ProduceResponse's PartitionProduceResponse, same attributes and defaults."""
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
        # node_endpoints: kafka-python's default, [] (a tagged field written only when it differs from it)
        self.responses, self.throttle_time_ms, self.node_endpoints = responses, throttle_time_ms, []

    _kafka_class = staticmethod(_kafka_response)
