"""One Trio task per client connection.

Requests are read as size-prefixed frames and answered strictly in request
order, one at a time, as Kafka does (it mutes a channel while a request is in
flight): a client may pipeline many requests, and the responses come back in
the order the requests were sent. A frame over `socket.request.max.bytes`, a
truncated frame at EOF, an undecodable request, or an unknown api (other than
ApiVersions, which gets KIP-511's fallback answer) closes this connection with a
log line; every other connection carries on.
"""
from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import structlog
import trio

from ..wire.frame import FrameReader, FrameTooLarge
from .router import CloseConnection

if TYPE_CHECKING:
    from .broker import Broker

log = structlog.get_logger("kafkite.connection")
_conn_ids = itertools.count(1)


async def serve_connection(broker: "Broker", stream: trio.SocketStream) -> None:
    try:
        peer = "%s:%s" % stream.socket.getpeername()[:2]
    except OSError:
        peer = "?"
    clog = log.bind(peer=peer, conn=next(_conn_ids), broker=broker.node_id)
    reader = FrameReader(broker.config.get("socket.request.max.bytes"))
    broker.connections.add(stream)
    try:
        while True:
            try:
                frame = reader.next_frame()
            except FrameTooLarge as exc:
                clog.warning("connection.closed", reason=str(exc))
                return
            if frame is None:
                data = await stream.receive_some(65536)
                if not data:
                    if reader.buffered:
                        clog.warning("connection.closed", reason="truncated frame at end of stream",
                                     buffered=reader.buffered)
                    return
                reader.feed(data)
                continue
            try:
                out = await broker.router.dispatch(frame, peer, clog)
            except CloseConnection as exc:
                clog.warning("connection.closed", reason=str(exc))
                return
            if out:
                await stream.send_all(out)
    except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
        pass
    except Exception:  # a bug in a handler must never take the broker down
        clog.exception("connection.error")
    finally:
        broker.connections.discard(stream)
        with trio.move_on_after(1):
            await stream.aclose()
