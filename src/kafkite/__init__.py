"""Kafkite: a broker that speaks the Apache Kafka wire protocol, on Trio."""

__version__ = "0.1.0"
