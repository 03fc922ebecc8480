"""Kafka error codes, by Kafka's own names.

The table is kafka-python's `kafka.errors` (one class per broker error code);
this module only gives it Kafka's upper-case names, e.g. ``E.TOPIC_ALREADY_EXISTS``,
so handlers read like Kafka's own code.
"""
from __future__ import annotations

import enum

import kafka.errors as _kerr

_aliases = {
    # kafka-python keeps pre-2.x names for a few codes; Kafka's current names first.
    "NOT_LEADER_OR_FOLLOWER": 6,
    "MESSAGE_TOO_LARGE": 10,
    "INVALID_TOPIC_EXCEPTION": 17,
    "UNKNOWN_SERVER_ERROR": -1,
}

E = enum.IntEnum(
    "E",
    {
        **{
            cls.message: code
            for code, cls in _kerr.kafka_errors.items()
            if code is not None and getattr(cls, "message", None)
        },
        **_aliases,
    },
)
E.__doc__ = "Kafka error codes by name (NONE is NO_ERROR)."

NONE = 0


def name_of(code: int) -> str:
    """Kafka's name for an error code (for logs and tests)."""
    cls = _kerr.kafka_errors.get(code)
    return cls.message if cls is not None else f"UNKNOWN_CODE_{code}"


_CURRENT_NAME = {code: name for name, code in _aliases.items()}


def kafka_name(code: int) -> str:
    """Kafka's current name of an error code (NOT_LEADER_OR_FOLLOWER, not kafka-python's older alias), or the
    number when unknown."""
    try:
        return _CURRENT_NAME.get(int(code)) or E(int(code)).name
    except ValueError:
        return str(code)
