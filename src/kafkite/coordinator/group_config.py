"""Per-group configs (KIP-848's GROUP config resource, ConfigResource type 32), as Kafka 4.0's GroupConfig,
GroupConfigManager and ControllerConfigurationValidator take them. Sans-IO.

Kafka 4.0 defines `consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms`, plus share groups'
`share.*` keys (and 4.1 streams groups' `streams.*`). Kafkite has consumer groups only, so only the two
`consumer.*` keys are group configs here: any other name is answered as Kafka answers an unknown one.

A group's configs are kept as strings (the cluster metadata's, Kafka's ConfigRecords); a group with none, or
without one of them, takes the broker's `group.consumer.session.timeout.ms` / `group.consumer.heartbeat.interval.ms`.
The group need not exist: Kafka takes configs for any group id but the empty one.
"""
from __future__ import annotations

import re
from typing import Mapping

CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"
NAMES = (CONSUMER_SESSION_TIMEOUT_MS, CONSUMER_HEARTBEAT_INTERVAL_MS)  # GroupConfig's order
DOCS = {  # GroupCoordinatorConfig's docs, which GroupConfig reuses
    CONSUMER_SESSION_TIMEOUT_MS: "The timeout to detect client failures when using the consumer group protocol.",
    CONSUMER_HEARTBEAT_INTERVAL_MS: "The heartbeat interval given to the members of a consumer group.",
}
_INT = re.compile(r"[+-]?[0-9]+\Z")  # Java's Integer.parseInt (ASCII digits, one optional sign)
INT_MAX = 2**31 - 1


class GroupConfigError(Exception):
    """Kafka's answer: INVALID_CONFIG (InvalidConfigurationException, ConfigException) or INVALID_REQUEST."""

    def __init__(self, invalid_request: bool, message: str):
        super().__init__(message)
        self.invalid_request = invalid_request
        self.message = message


def _parse_int(name: str, raw) -> int:
    """ConfigDef.parseType for INT, then GroupConfig's atLeast(1), with ConfigException's messages."""
    if isinstance(raw, int):
        v = raw
    else:
        s = str(raw).strip()
        if not _INT.match(s) or not -INT_MAX - 1 <= int(s) <= INT_MAX:
            raise GroupConfigError(False, f"Invalid value {raw} for configuration {name}: Not a number of type INT")
        v = int(s)
    if v < 1:
        raise GroupConfigError(False, f"Invalid value {v} for configuration {name}: Value must be at least 1")
    return v


def defaults(cfg) -> dict[str, int]:
    """GroupCoordinatorConfig.extractConsumerGroupConfigMap: the broker's values, a group's defaults."""
    return {CONSUMER_SESSION_TIMEOUT_MS: cfg.consumer_session_timeout_ms,
            CONSUMER_HEARTBEAT_INTERVAL_MS: cfg.consumer_heartbeat_interval_ms}


def validate(group_id: str, configs: Mapping[str, str | None], cfg) -> None:
    """ControllerConfigurationValidator's GROUP case on a group's whole new config (what it would hold after the
    change), then GroupConfigManager.validate: the broker's values under it, names, types, the broker's
    group.consumer.{min,max}.* bounds, session > heartbeat. Raises GroupConfigError as Kafka answers."""
    if not group_id:
        raise GroupConfigError(True, "Default group resources are not allowed.")
    nulls = [k for k, v in configs.items() if v is None]
    if nulls:
        raise GroupConfigError(False, "Null value not supported for group configs: " + ",".join(nulls))
    for name in configs:
        if name not in NAMES:
            raise GroupConfigError(False, f"Unknown group config name: {name}")
    combined: dict = {**defaults(cfg), **configs}
    values = {n: _parse_int(n, combined[n]) for n in NAMES}
    hb, st = values[CONSUMER_HEARTBEAT_INTERVAL_MS], values[CONSUMER_SESSION_TIMEOUT_MS]
    for ok, message in (
            (hb >= cfg.consumer_min_heartbeat_interval_ms, f"{CONSUMER_HEARTBEAT_INTERVAL_MS} must be greater than "
             "or equal to group.consumer.min.heartbeat.interval.ms"),
            (hb <= cfg.consumer_max_heartbeat_interval_ms, f"{CONSUMER_HEARTBEAT_INTERVAL_MS} must be less than or "
             "equal to group.consumer.max.heartbeat.interval.ms"),
            (st >= cfg.consumer_min_session_timeout_ms, f"{CONSUMER_SESSION_TIMEOUT_MS} must be greater than or "
             "equal to group.consumer.min.session.timeout.ms"),
            (st <= cfg.consumer_max_session_timeout_ms, f"{CONSUMER_SESSION_TIMEOUT_MS} must be less than or "
             "equal to group.consumer.max.session.timeout.ms"),
            (st > hb, f"{CONSUMER_SESSION_TIMEOUT_MS} must be greater than {CONSUMER_HEARTBEAT_INTERVAL_MS}")):
        if not ok:
            raise GroupConfigError(False, message)


def effective(overrides: Mapping[str, str] | None, cfg) -> dict[str, int]:
    """A group's values: its own where it has them (kept valid by `validate`), else the broker's."""
    out = defaults(cfg)
    for name, raw in (overrides or {}).items():
        if name in out:
            try:
                out[name] = _parse_int(name, raw)
            except GroupConfigError:
                pass  # (never stored: validated first) the broker's value
    return out
