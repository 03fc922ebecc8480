"""Kafka message specs (Kafka's JSON form) for APIs kafka-python's protocol package lacks.

Each ``<Name>.json`` here is loaded by kafka-python's own machinery
(``class <Name>(ApiMessage, load_json=<this package>)``); see ``kafkite.wire.interbroker``.
The files are written from Apache Kafka's protocol (message specs of Kafka 3.9).
"""
