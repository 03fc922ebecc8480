"""Kafka's record schemas (Kafka's JSON form) for the `__consumer_offsets` records of KIP-848 consumer
groups, loaded by kafka-python's ApiData machinery in ``kafkite.coordinator.consumer_group_records``."""
