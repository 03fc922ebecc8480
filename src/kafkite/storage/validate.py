"""Older name of log_validator.py (Kafka's LogValidator), kept for importers."""
from .log_validator import (CORRUPT_MESSAGE, INVALID_RECORD, INVALID_TIMESTAMP, MESSAGE_TOO_LARGE,
                            UNSUPPORTED_COMPRESSION_TYPE, Validated, validate_produce)

__all__ = ["Validated", "validate_produce", "CORRUPT_MESSAGE", "MESSAGE_TOO_LARGE", "INVALID_TIMESTAMP",
           "INVALID_RECORD", "UNSUPPORTED_COMPRESSION_TYPE"]
