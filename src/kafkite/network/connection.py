"""One Trio task per client connection (and one that sends its responses).

Requests are read as size-prefixed frames and answered strictly in request order.
Kafka handles one request at a time per connection (it mutes the channel while a
request is in flight); so does Kafkite, with one exception that clients cannot tell
apart: while a Produce's response waits for its fsync (see ReplicaManager.wait_durable),
the next request is read and handled if it is a Produce too. Appends still happen
in request order, each response is sent only after its own records are durable, and
responses leave in request order; any other request waits until every earlier
response has been sent, exactly as before. This lets one fsync cover several
pipelined produce requests (group commit). At most PIPELINED_PRODUCE_MAX (16) of them, holding at most
PIPELINED_PRODUCE_BYTES (16 MiB), wait at once; past that the connection reads nothing more until a response has
left, so a deep client window cannot have the broker hold its requests without bound.

A frame over `socket.request.max.bytes`, a truncated frame at EOF, an undecodable
request, or an unknown api (other than ApiVersions, which gets KIP-511's fallback
answer) closes this connection with a log line; every other connection carries on.

Limits (network/quotas.py): the body of a large request is read only once the broker's
memory pool (`queued.max.request.bytes`) holds its size, and the reservation is released
when the request has been handled; a connection with nothing received or sent for
`connections.max.idle.ms` is closed (Kafka's default, 10 minutes; -1: never); a client that
closes its connection while its Fetch long-polls ends that wait at once (network/peer.py).
"""
from __future__ import annotations

import itertools
import math
import os
import time
from typing import TYPE_CHECKING

import structlog
import trio

from ..wire import codec
from ..wire.frame import FrameReader, FrameTooLarge
from .peer import PeerClosed, connection_socket
from .listeners import Connection
from .quotas import SMALL_REQUEST_BYTES
from ..server.router import CloseConnection

if TYPE_CHECKING:
    from ..server.broker import Broker

log = structlog.get_logger("kafkite.connection")
_conn_ids = itertools.count(1)

PRODUCE_KEY = b"\x00\x00"  # a request's first two bytes: its api key (Produce: 0)
SASL_HANDSHAKE = 17
_WRITEV = hasattr(os, "writev")  # POSIX
_IOV_MAX = min(os.sysconf("SC_IOV_MAX"), 1024) if _WRITEV else 1
# Produce requests of one connection handled while earlier ones wait for their writes (group commit): at most this
# many, and no more once their requests add up to this many bytes; the connection then reads on only as responses
# leave. Kafka handles one request per connection at a time; without a bound, a client with a deep in-flight window
# (librdkafka's non-idempotent default is 1,000,000 requests) has the broker read and hold its requests for as long
# as the disk falls behind, and the memory they held stays with the process (benchmarks/produce_backlog.py).
PIPELINED_PRODUCE_MAX = 16
PIPELINED_PRODUCE_BYTES = 16 << 20
_CLOSED = (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError)


class _Outbox:
    """Responses in request order; each is sent once its waits are over. Only Produce responses are
    ever queued: any other request waits until the queue is empty, and its answer goes straight out."""

    def __init__(self, stream: trio.SocketStream, clog) -> None:
        self.stream, self.clog = stream, clog
        # a plain TCP connection's descriptor: a response is first written to it directly, in one system call
        # (writev for a Fetch's buffers); what the socket does not take at once goes through the stream's send_all,
        # which waits until it can. A TLS stream (-1) always goes through send_all.
        self.fd = stream.socket.fileno() if isinstance(stream, trio.SocketStream) and _WRITEV else -1
        self.last_active = trio.current_time()  # the last bytes received or sent (connections.max.idle.ms)
        # connections.max.idle.ms (_watch_idle): waiting for the client's bytes, and the watcher's wake-up once it
        # finds the connection busy with a request
        self.receiving = False
        self.idle_wake: trio.Event | None = None
        # receive(): whether the last read of the socket found bytes waiting (a pipelining client: read first) or
        # not (a client waiting for its answer: wait until the socket is readable first, no failed read)
        self.read_first = True
        self.send_ch, self.recv_ch = trio.open_memory_channel(math.inf)
        self.pending = 0  # queued, not yet sent
        self.pending_bytes = 0  # the request bytes of those
        self.drained = trio.Event()
        self.drained.set()
        self.freed: trio.Event | None = None  # a pipelined Produce waiting for room (wait_turn)

    def put(self, out: bytes | list | None, waits: list, size: int = 0) -> None:
        if not self.pending:
            self.drained = trio.Event()
        self.pending += 1
        self.pending_bytes += size
        self.send_ch.send_nowait((out, waits, size))

    async def wait_turn(self, produce: bool) -> None:
        """Before handling a request: a Produce may be handled while earlier Produce responses wait
        for their writes, up to PIPELINED_PRODUCE_MAX of them and PIPELINED_PRODUCE_BYTES of their requests;
        anything else waits until every earlier response has been sent."""
        if produce:
            while self.pending >= PIPELINED_PRODUCE_MAX or self.pending_bytes >= PIPELINED_PRODUCE_BYTES:
                self.freed = trio.Event()
                await self.freed.wait()
            return
        while self.pending:
            await self.drained.wait()

    async def receive(self, want: int, into: memoryview | None = None) -> bytes | int:
        """The next bytes from the client (b"" at its end), at most `want`. A plain TCP socket is read directly, as
        Trio's SocketStream.receive_some reads it (a cancelled wait raises before reading; bytes read without
        waiting are followed by a yield to the other tasks), without its layers of calls; a TLS stream through
        the stream. `into` (a large frame on a plain TCP socket: its own buffer, wire/frame.py
        FrameReader.frame_buffer, `want` its length): the bytes are read into it, and how many is returned (0 at
        the client's end)."""
        fd = self.fd
        if fd < 0:
            return await self.stream.receive_some(want)
        if self.read_first:
            await trio.lowlevel.checkpoint_if_cancelled()
            try:
                got = os.read(fd, want) if into is None else os.readv(fd, (into,))
            except BlockingIOError:
                self.read_first = False
            except OSError as exc:
                raise trio.BrokenResourceError(f"socket receive failed: {exc}") from exc
            else:
                await trio.lowlevel.cancel_shielded_checkpoint()
                return got
        while True:
            await trio.lowlevel.wait_readable(fd)
            try:
                got = os.read(fd, want) if into is None else os.readv(fd, (into,))
            except BlockingIOError:
                continue
            except OSError as exc:
                raise trio.BrokenResourceError(f"socket receive failed: {exc}") from exc
            # one read per wake-up: a client that sent more than `want` (pipelined requests, a large one) is read
            # first next time
            self.read_first = (len(got) if into is None else got) == want
            return got

    async def send(self, out) -> None:
        """One response: bytes, or for a Fetch a list of buffers written in order, not joined."""
        if type(out) is bytes and self.fd >= 0 and out:  # the usual answer: one write, all taken
            try:
                n = os.write(self.fd, out)
            except BlockingIOError:
                n = 0
            except OSError as exc:  # reset, broken pipe: as the stream's send_all would say
                raise trio.BrokenResourceError(f"socket send failed: {exc}") from exc
            if n < len(out):
                await self.stream.send_all(memoryview(out)[n:])
            self.last_active = trio.current_time()
            return
        parts = [p for p in out if len(p)] if isinstance(out, list) else [out] if out else []
        if parts and self.fd >= 0:
            parts = self._write_now(parts)
        for part in parts:
            await self.stream.send_all(part)
        self.last_active = trio.current_time()

    def _write_now(self, parts: list) -> list:
        """Write what the socket takes now, without waiting (no task switch: the next receive is the connection's
        checkpoint); -> the rest, still to send."""
        try:
            n = os.write(self.fd, parts[0]) if len(parts) == 1 else os.writev(self.fd, parts[:_IOV_MAX])
        except BlockingIOError:
            return parts
        except OSError as exc:  # reset, broken pipe: as the stream's send_all would say
            raise trio.BrokenResourceError(f"socket send failed: {exc}") from exc
        rest = []
        for part in parts:
            size = len(part)
            if n >= size:
                n -= size
            else:
                rest.append(memoryview(part)[n:] if n else part)
                n = 0
        return rest

    async def run(self, cancel_scope: trio.CancelScope) -> None:
        try:
            async for out, waits, size in self.recv_ch:
                for wait in waits:
                    await wait()
                await self.send(out() if callable(out) else out)
                self.pending -= 1
                self.pending_bytes -= size
                if self.freed is not None:
                    self.freed.set()
                    self.freed = None
                if not self.pending:
                    self.drained.set()
        except _CLOSED:
            pass
        except Exception:  # a bug must never take the broker down
            self.clog.exception("connection.error")
        cancel_scope.cancel()


async def _watch_idle(outbox: _Outbox, idle_s: float, read_scope: trio.CancelScope, clog, idle_ms: int) -> None:
    """connections.max.idle.ms: ends the reading of a connection that waited for the client's bytes with nothing
    received or sent for that long (a connection busy with a request -- a long poll -- is not idle). One task per
    connection that sleeps until the moment it could be idle, so the reading itself runs with no cancel scope."""
    while True:
        due = outbox.last_active + idle_s
        if trio.current_time() < due:
            await trio.sleep_until(due)
            continue
        if outbox.receiving:
            clog.info("connection.closed", reason="idle", idle_ms=idle_ms)
            read_scope.cancel()
            return
        wake = outbox.idle_wake = trio.Event()  # set when the reader waits for bytes again
        await wake.wait()


def raw_socket(stream) -> trio.socket.SocketType:
    """The TCP socket under a connection's stream (a trio.SSLStream's transport for an SSL listener)."""
    return stream.socket if isinstance(stream, trio.SocketStream) else stream.transport_stream.socket


async def serve_connection(broker: "Broker", stream: trio.SocketStream, *, inter_broker: bool = False,
                           listener=None) -> None:
    """One connection; `inter_broker`: accepted on the inter-broker listener (controller requests are served);
    `listener`: the client listener it came in on (network/listeners.ServedListener)."""
    sock = raw_socket(stream)
    try:
        peer = "%s:%s" % sock.getpeername()[:2]
    except OSError:
        peer = "?"
    conn = Connection(peer=peer, inter_broker=inter_broker)
    if listener is not None:
        conn.listener, conn.protocol = listener.name, listener.endpoint.protocol
    clog = log.bind(peer=peer, conn=next(_conn_ids), broker=broker.node_id, listener=conn.listener)
    broker.connections.add(stream)
    broker.client_connections.add(conn)
    try:
        auth = None
        if conn.protocol == "SSL":  # the principal of a client certificate (SASL_SSL: SASL's)
            conn.principal = ssl_principal(stream, listener.principal_mapper, clog)
            if conn.principal is None:
                return
        if listener is not None and listener.sasl_config is not None:  # a SASL listener: authenticate first
            from ..security.sasl import SaslServerAuthenticator
            auth = SaslServerAuthenticator(listener.sasl_config, peer.rsplit(":", 1)[0])
        async with trio.open_nursery() as nursery:
            outbox = _Outbox(stream, clog)
            nursery.start_soon(outbox.run, nursery.cancel_scope)
            idle_ms = broker.config.get("connections.max.idle.ms")
            with trio.CancelScope() as read_scope:
                if idle_ms >= 0:
                    nursery.start_soon(_watch_idle, outbox, idle_ms / 1000.0, read_scope, clog, idle_ms)
                await _read_requests(broker, stream, peer, clog, outbox, inter_broker, auth, conn)
            # responses to requests handled before the end are sent first, as one-at-a-time would
            with trio.move_on_after(30):
                await outbox.wait_turn(False)
            nursery.cancel_scope.cancel()
    finally:
        broker.connections.discard(stream)
        broker.client_connections.discard(conn)
        with trio.move_on_after(1):
            await stream.aclose()


def cluster_action_allowed(broker: "Broker", conn: Connection) -> bool:
    """On a secured inter-broker listener the brokers' principal needs CLUSTER_ACTION on the cluster (Kafka's rule
    for its inter-broker requests; super users have it). A PLAINTEXT inter-broker listener is trusted as before."""
    auth = broker.state.authorizer
    if auth is None:
        return True
    from ..security.authorizer import CLUSTER_NAME, Op, ResourceType
    return auth.authorize(conn.principal, conn.peer.rsplit(":", 1)[0].strip("[]"), Op.CLUSTER_ACTION,
                          ResourceType.CLUSTER, CLUSTER_NAME)


def ssl_principal(stream, mapper, clog) -> str | None:
    """The principal of an SSL connection: its client certificate's subject in RFC 2253 form through
    ssl.principal.mapping.rules ("User:ANONYMOUS" without a certificate); None (logged) when no rule applies, as
    Kafka's SslPrincipalMapper.NoMatchingRule fails the connection."""
    der = stream.getpeercert(binary_form=True) if isinstance(stream, trio.SSLStream) else None
    if not der:
        return "User:ANONYMOUS"
    from ..security.principal import NoMatchingRule, subject_dn
    dn = subject_dn(der)
    try:
        name = mapper.name(dn) if mapper is not None else dn
    except NoMatchingRule as exc:
        clog.warning("connection.closed", reason=str(exc), message=f"Failed to map the principal of {dn}")
        return None
    clog.info("ssl.principal", dn=dn, principal=f"User:{name}")
    return f"User:{name}"


async def _read_requests(broker: "Broker", stream: trio.SocketStream, peer: str, clog, outbox: _Outbox,
                         inter_broker: bool = False, auth=None, conn=None) -> None:
    request_max = broker.config.get("socket.request.max.bytes")
    sasl_max = min(request_max, broker.config.get("sasl.server.max.receive.size"))
    reader = FrameReader(request_max)
    pool = broker.memory_pool
    idle_ms = broker.config.get("connections.max.idle.ms")
    idle_s = idle_ms / 1000.0 if idle_ms >= 0 else math.inf
    connection_socket.set(raw_socket(stream))  # for handlers that long-poll (peer.wait_unless_peer_closed)
    held = 0  # bytes of the memory pool reserved for the frame being received
    # the listener a request's context names (Metadata's endpoints): the client listener's, None on the inter-broker one
    listener = None if conn is None or conn.inter_broker else conn.listener
    try:
        while True:
            try:
                # Kafka's SaslServerAuthenticator: before and during (re-)authentication a frame may be at most
                # sasl.server.max.receive.size (InvalidReceiveException closes the connection)
                if auth is not None:
                    if not auth.done:
                        reader.max_bytes, reader.limit_name = sasl_max, "sasl.server.max.receive.size"
                    else:
                        reader.max_bytes, reader.limit_name = request_max, "socket.request.max.bytes"
                frame = reader.next_frame()
            except FrameTooLarge as exc:
                clog.warning("connection.closed", reason=str(exc))
                return
            if frame is None:
                size = reader.pending_size
                want = 65536
                into = False
                if size is not None and size > SMALL_REQUEST_BYTES:
                    if not held:  # muted until the pool holds the whole request
                        with trio.move_on_at(outbox.last_active + idle_s):
                            held = await pool.reserve(size) or -1
                        if not held:
                            if trio.current_time() >= outbox.last_active + idle_s:
                                clog.info("connection.closed", reason="idle while waiting for request memory",
                                          idle_ms=idle_ms, pending_request_bytes=size)
                                return
                            continue
                    want = max(1, min(1 << 20, size - reader.buffered))  # the rest of this request only
                    into = outbox.fd >= 0
                # idle for connections.max.idle.ms while waiting here: _watch_idle cancels the reading
                outbox.receiving = True
                if outbox.idle_wake is not None:
                    outbox.idle_wake.set()
                    outbox.idle_wake = None
                try:
                    if into:  # a large request on a plain socket: read into its own buffer (no chunks to join)
                        view = reader.frame_buffer()
                        n = await outbox.receive(len(view), view)
                        del view
                    else:
                        data = await outbox.receive(want)
                        n = len(data)
                finally:
                    outbox.receiving = False
                outbox.last_active = trio.current_time()
                if not n:
                    if reader.buffered or reader.pending_size is not None:
                        clog.warning("connection.closed", reason="truncated frame at end of stream",
                                     buffered=reader.buffered)
                    return
                if into:
                    reader.filled(n)
                else:
                    reader.feed(data)
                continue
            try:
                now_ms = int(time.time() * 1000) if auth is not None else 0
                if auth is not None and auth.done:
                    # KIP-368, as Kafka's SocketServer: a SaslHandshake on a session with an end re-authenticates;
                    # any other request after the session's end closes the connection
                    api_key = int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1
                    if not (api_key == SASL_HANDSHAKE and auth.begin_reauthentication(now_ms)) and \
                            auth.expired(now_ms):
                        clog.info("connection.closed", reason="the SASL session expired (connections.max.reauth.ms "
                                                              "or the token's lifetime) without re-authentication",
                                  principal=auth.principal, api_key=api_key)
                        return
                if auth is not None and not auth.done:  # before SASL authentication completed (or re-authenticating)
                    what, close = auth.handle(frame, clog, now_ms)
                    if auth.done and conn is not None:
                        conn.principal = auth.principal
                    if what != "dispatch":
                        if isinstance(what, tuple):
                            req, resp = what
                            what = codec.encode_response(resp, req.api_version, req.correlation_id)
                        if what:
                            await outbox.send(what)
                        if close:
                            clog.warning("connection.closed", reason="SASL authentication failed or a request "
                                                                     "came before it completed")
                            if what:  # KIP-306: the close is delayed, so the client reads the answer first
                                await trio.sleep(broker.config.get("connection.failed.authentication.delay.ms") / 1000)
                            return
                        continue
                if inter_broker and conn is not None and conn.protocol != "PLAINTEXT" and \
                        (auth is None or auth.done) and not cluster_action_allowed(broker, conn):
                    clog.warning("connection.closed", principal=conn.principal,
                                 reason=f"Principal = {conn.principal} is not authorized to perform CLUSTER_ACTION on "
                                        "the cluster: the inter-broker listener takes only the brokers' requests "
                                        "(grant CLUSTER_ACTION or add the principal to super.users)")
                    return
                if conn is not None:
                    conn.requests += 1
                size = len(frame)
                if outbox.pending:  # a Produce may go on while earlier ones wait for their writes; nothing else
                    await outbox.wait_turn(frame[:2] == PRODUCE_KEY)
                try:
                    # the connection's principal (security/authorizer.py): its certificate's through the mapping
                    # rules, or the SASL user once authenticated (again, after a re-authentication)
                    out, waits = await broker.router.dispatch(
                        frame, peer, clog, inter_broker=inter_broker,
                        principal=conn.principal if conn is not None else "User:ANONYMOUS", listener=listener)
                except CloseConnection as exc:
                    clog.warning("connection.closed", reason=str(exc))
                    return
            finally:
                del frame
                reader.done()  # a large frame's buffer serves another once nothing holds a view of it
                if held:
                    pool.release(max(held, 0))
                    held = 0
            if not waits and not outbox.pending:
                await outbox.send(out)  # nothing queued before it: straight out, no task switch
            elif out or waits:
                outbox.put(out, waits, size)
    except PeerClosed as exc:
        clog.info("connection.closed", reason=str(exc))
    except _CLOSED:
        pass
    except Exception:  # a bug in a handler must never take the broker down
        clog.exception("connection.error")
    finally:
        pool.release(max(held, 0))
