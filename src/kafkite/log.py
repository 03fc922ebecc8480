"""structlog set-up: one event per line, key=value in a terminal, JSON with --log-json."""
from __future__ import annotations

import logging
import sys

import structlog


def configure(json: bool = False, level: str = "INFO", stream=None) -> None:
    processors = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,  # exc_info=True: the traceback, as `exception`
    ]
    if json:
        processors.append(structlog.processors.JSONRenderer())
    else:
        processors.append(structlog.processors.KeyValueRenderer(
            key_order=["timestamp", "level", "event"], drop_missing=True))
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper(), logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(stream or sys.stderr),
        cache_logger_on_first_use=False,
    )


def get(name: str = "kafkite"):
    return structlog.get_logger(name)
