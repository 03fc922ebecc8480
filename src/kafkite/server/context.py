"""What a handler gets: the broker it runs on, the decoded request, the time."""
from __future__ import annotations

import contextvars
import socket
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable

import trio

from ..wire.codec import Request

if TYPE_CHECKING:
    from .broker import Broker


def now_ms() -> int:
    return int(time.time() * 1000)


# The socket of the connection whose request this task handles (set by server/connection.py).
connection_socket: contextvars.ContextVar[Any] = contextvars.ContextVar("kafkite_connection_socket", default=None)


class PeerClosed(Exception):
    """The client closed its connection while its request waited: the connection is closed, no answer sent."""


async def wait_unless_peer_closed(wait: Callable[[], Awaitable[object]]) -> None:
    """Await `wait()` (a long poll); raise PeerClosed if the client closes the connection first. Nothing is
    read meanwhile: when the client sends more (a pipelined request) the wait simply runs to its end."""
    sock = connection_socket.get()
    if sock is None:
        await wait()
        return
    gone = False
    async with trio.open_nursery() as nursery:
        async def watch() -> None:
            nonlocal gone
            try:
                data = await sock.recv(1, socket.MSG_PEEK)
            except (OSError, trio.ClosedResourceError):  # reset
                data = b""
            if data:
                await trio.sleep_forever()
            gone = True
            nursery.cancel_scope.cancel()

        nursery.start_soon(watch)
        await wait()
        nursery.cancel_scope.cancel()
    if gone:
        raise PeerClosed("the client closed the connection while its request waited")


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
    fault_log_entry: Any = None  # this request's entry in the fault injector's request log, when one is on

    @property
    def version(self) -> int:
        return self.request.api_version

    @property
    def body(self) -> Any:
        return self.request.body

    @property
    def client_id(self) -> str | None:
        return self.request.client_id
