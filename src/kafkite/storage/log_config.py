"""Kafka's LogConfig: a partition log's settings, built from the one topic-config table.

Every topic config of `kafkite.config.TOPIC_CONFIGS` is an attribute here, its name in snake
case (`segment.bytes` -> `segment_bytes`, `min.cleanable.dirty.ratio` ->
`min_cleanable_dirty_ratio`), its default and type the table's. Lists (cleanup.policy) are
tuples. `flush_interval_messages` is kept as a second name of `flush_messages` (Kafka's
LogConfig.flushInterval).
"""
from __future__ import annotations

from typing import Any

from ..config import TOPIC_CONFIGS, ConfigType, parse_topic_value

_ATTRS: dict[str, str] = {name.replace(".", "_"): name for name in TOPIC_CONFIGS}  # attribute -> config name
_ALIASES = {"flush_interval_messages": "flush_messages"}


def _value(name: str, v: Any) -> Any:
    d = TOPIC_CONFIGS[name]
    if isinstance(v, str) and d.type != ConfigType.STRING:
        v = parse_topic_value(name, v)
    if d.type == ConfigType.LIST:  # cleanup.policy: a tuple, never empty
        v = tuple(x.strip() for x in v if x.strip()) or ("delete",)
    return v


_DEFAULTS = {attr: _value(name, TOPIC_CONFIGS[name].default) for attr, name in _ATTRS.items()}


class LogConfig:
    """Per-topic log settings (see the module comment): `LogConfig(segment_bytes=600, ...)`, or
    `LogConfig.from_topic_configs({"segment.bytes": "600", ...})`."""

    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(_DEFAULTS)
        for key, v in kw.items():
            attr = _ALIASES.get(key, key)
            if attr not in _ATTRS:
                raise TypeError(f"LogConfig has no setting {key!r}")
            self.__dict__[attr] = _value(_ATTRS[attr], v)

    @classmethod
    def from_topic_configs(cls, c: dict[str, str | None]) -> "LogConfig":
        """From Kafka topic config names; missing or empty values keep the defaults, unknown names
        are ignored."""
        return cls(**{attr: c[name] for attr, name in _ATTRS.items() if c.get(name) not in (None, "")})

    @property
    def flush_interval_messages(self) -> int:
        return self.flush_messages

    @property
    def compacted(self) -> bool:
        return "compact" in self.cleanup_policy

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LogConfig) and self.__dict__ == other.__dict__

    def __repr__(self) -> str:
        changed = {k: v for k, v in self.__dict__.items() if _DEFAULTS.get(k) != v}
        return f"LogConfig({', '.join(f'{k}={v!r}' for k, v in changed.items())})"
