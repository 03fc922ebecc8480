"""A long-polling request's watch on its client (Kafka's selector sees a closed channel while a DelayedFetch waits):
the socket of the connection a task serves, and a wait that ends when the client closes that connection.

network/connection.py sets `connection_socket` in each connection's reading task; a handler that long-polls (Fetch)
awaits through `wait_unless_peer_closed`, and the connection closes on the PeerClosed it raises.
"""
from __future__ import annotations

import contextvars
import socket
from typing import Any, Awaitable, Callable

import trio

# The socket of the connection whose request this task handles (set by network/connection.py).
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
