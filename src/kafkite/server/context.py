"""What a handler gets: the broker it runs on, the decoded request, the time."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..wire.codec import Request

if TYPE_CHECKING:
    from .broker import Broker


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class RequestContext:
    broker: "Broker"
    request: Request
    peer: str = ""
    log: Any = None
    now_ms: int = field(default_factory=now_ms)
    # Awaited before the response is sent; the connection may read and handle the next Produce
    # meanwhile (see server/connection.py). Produce puts its wait for the fsync here.
    before_send: list = field(default_factory=list)

    @property
    def version(self) -> int:
        return self.request.api_version

    @property
    def body(self) -> Any:
        return self.request.body

    @property
    def client_id(self) -> str | None:
        return self.request.client_id
