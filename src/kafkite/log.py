"""structlog set-up: one event per line, key=value in a terminal, JSON with --log-json."""
from __future__ import annotations

import contextvars
import logging
import sys

import structlog

# The request the current task is handling (server/router.py sets it for the handler's run): its api and correlation
# id go into every line logged meanwhile. One context variable set per request; the fields are made only when a
# line is actually logged.
current_request: contextvars.ContextVar = contextvars.ContextVar("kafkite_request", default=None)


def add_request(logger, method_name: str, event_dict: dict) -> dict:
    """structlog processor: the current request's api and correlation_id (a line's own values win)."""
    req = current_request.get()
    if req is None:
        return event_dict
    return {"api": req.api_name, "correlation_id": req.correlation_id, **event_dict}


def configure(json: bool = False, level: str = "INFO", stream=None) -> None:
    processors = [
        structlog.contextvars.merge_contextvars,
        add_request,
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
