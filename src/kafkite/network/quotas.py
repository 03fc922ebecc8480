"""The socket server's limits: connection counts (Kafka's ConnectionQuotas) and the memory that
requests being received may hold (Kafka's MemoryPool behind `queued.max.request.bytes`).

Connections, as Kafka's SocketServer counts them:
- `max.connections` (broker-wide): at the limit the listener stops accepting; new connections
  wait in the listen backlog until a slot frees, then they are served.
- `max.connections.per.ip` (and `max.connections.per.ip.overrides`, "host:count,..."): a new
  connection from an address already at its limit is accepted and closed at once, logged as
  "Rejected connection from <ip>, address already has the configured maximum of <n> connections.".
Both are read at each accept, so AlterConfigs on the broker changes them live, as in Kafka.

Memory: a request's size comes first on the wire. Before a connection reads the body of a request
larger than SMALL_REQUEST_BYTES it reserves that size from the pool; while the pool is used up the
connection is muted (nothing more is read from it) until memory is released, which happens when a
request has been handled or its connection closes. Like Kafka's SimpleMemoryPool (non-strict), a
reservation succeeds whenever any memory is left, so the pool holds at most its size plus one
request. Kafka's default is -1 (no pool); Kafkite's is 100 MiB, and a pool is never smaller than
`socket.request.max.bytes` (Kafka refuses such a setting). Requests up to SMALL_REQUEST_BYTES are
always read (Kafkite's addition): a pool held by slow senders of large requests does not stop the
broker from answering ApiVersions, Metadata or heartbeats.
"""
from __future__ import annotations

import errno
import ipaddress
import socket
from typing import Callable

import structlog
import trio

from ..config import BrokerConfig, parse_ip_overrides

log = structlog.get_logger("kafkite.quotas")

SMALL_REQUEST_BYTES = 65536  # read without a reservation (at most this much per connection)
# accept() failing for lack of resources: wait a moment and accept again (what trio.serve_listeners does)
_ACCEPT_CAPACITY_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}


class MemoryPool:
    """Bytes that partly received requests may hold: Kafka's SimpleMemoryPool (non-strict)."""

    def __init__(self, size: int) -> None:
        self.size = size  # <= 0: unbounded (Kafka's MemoryPool.NONE)
        self.available = size
        self.waiting = 0  # connections muted until memory is released
        self._released = trio.Event()

    @classmethod
    def from_config(cls, config: BrokerConfig) -> "MemoryPool":
        size = config.get("queued.max.request.bytes")
        if size > 0:
            size = max(size, config.get("socket.request.max.bytes"))
        return cls(size)

    @property
    def used(self) -> int:
        return 0 if self.size <= 0 else self.size - self.available

    def try_reserve(self, n: int) -> bool:
        if self.size <= 0:
            return True
        if self.available < 1:
            return False
        self.available -= n
        return True

    async def reserve(self, n: int) -> int:
        """Reserve `n` bytes, waiting (muted) while none are left; returns what to `release`."""
        while not self.try_reserve(n):
            self.waiting += 1
            try:
                await self._released.wait()
            finally:
                self.waiting -= 1
        return n if self.size > 0 else 0

    def release(self, n: int) -> None:
        if n and self.size > 0:
            self.available += n
            self._released.set()
            self._released = trio.Event()


class ConnectionQuotas:
    """Connection counts per address and in total, against the broker's limits (Kafka's ConnectionQuotas)."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.total = 0  # connections open
        self.counts: dict[str, int] = {}  # ... by client address
        self._accepting = 0  # slots held by accept loops waiting for their next connection
        self._freed = trio.Event()
        self._overrides: tuple[str, dict[str, int]] = ("", {})

    def _max_for(self, ip: str) -> int:
        raw = self.config.get("max.connections.per.ip.overrides") or ""
        if raw != self._overrides[0]:
            self._overrides = (raw, _resolve(parse_ip_overrides(raw)))
        return self._overrides[1].get(ip, self.config.get("max.connections.per.ip"))

    async def wait_for_slot(self) -> None:
        """Return once the broker is below `max.connections`, holding a slot for the next connection accepted
        (`inc` fills it, `unreserve` gives it back)."""
        while self.total + self._accepting >= self.config.get("max.connections"):
            await self._freed.wait()
        self._accepting += 1

    def unreserve(self) -> None:
        self._accepting -= 1
        self._wake()

    def inc(self, ip: str) -> int | None:
        """Count a connection accepted into a held slot; the per-address limit it broke, or None."""
        self._accepting -= 1
        count = self.counts.get(ip, 0)
        limit = self._max_for(ip)
        if count >= limit:
            self._wake()
            return limit
        self.counts[ip] = count + 1
        self.total += 1
        return None

    def dec(self, ip: str) -> None:
        count = self.counts.get(ip, 0)
        if count <= 1:
            self.counts.pop(ip, None)
        else:
            self.counts[ip] = count - 1
        self.total -= 1
        self._wake()

    def _wake(self) -> None:
        self._freed.set()
        self._freed = trio.Event()


def _resolve(overrides: dict[str, int]) -> dict[str, int]:
    """Override hosts as the addresses accepted sockets report (Kafka: InetAddress.getByName); a name that does
    not resolve is logged and left out."""
    out: dict[str, int] = {}
    for host, count in overrides.items():
        try:
            out[str(ipaddress.ip_address(host))] = count
            continue
        except ValueError:
            pass
        try:
            for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP):
                out[str(info[4][0])] = count
        except OSError as exc:
            log.warning("config.override_unresolved", key="max.connections.per.ip.overrides", host=host,
                        error=str(exc))
    return out


async def accept_loop(listener: trio.SocketListener, quotas: ConnectionQuotas,
                      serve: Callable[[trio.SocketStream, str], object], nursery: trio.Nursery) -> None:
    """Accept connections within the quotas and start `serve(stream, ip)` for each (it must `quotas.dec(ip)`
    when its connection ends)."""
    while True:
        await quotas.wait_for_slot()
        try:
            stream = await listener.accept()
        except OSError as exc:
            quotas.unreserve()
            if exc.errno not in _ACCEPT_CAPACITY_ERRNOS:
                raise
            log.error("connection.accept_failed", error=str(exc), message="waiting 100 ms before accepting again")
            await trio.sleep(0.1)
            continue
        except BaseException:
            quotas.unreserve()
            raise
        try:
            ip = str(stream.socket.getpeername()[0])
        except OSError:  # already gone
            ip = "?"
        limit = quotas.inc(ip)
        if limit is not None:
            log.info("connection.rejected", peer=ip,
                     message=f"Rejected connection from {ip}, address already has the configured maximum of "
                             f"{limit} connections.")
            stream.socket.close()
            continue
        nursery.start_soon(serve, stream, ip)
