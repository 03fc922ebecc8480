"""A tiny synchronous Kafka wire client for tests: send a request object at an
explicit version, get the decoded response. Uses the same kafka-python classes
as the broker, so tests can exercise every version of every API."""
from __future__ import annotations

import itertools
import socket
import struct

from ..wire import registry


class WireClient:
    def __init__(self, host: str, port: int, client_id: str = "kafkite-test", timeout: float = 10.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.client_id = client_id
        self._corr = itertools.count(1)

    @classmethod
    def connect(cls, bootstrap: str, **kw) -> "WireClient":
        host, port = bootstrap.rsplit(":", 1)
        return cls(host, int(port), **kw)

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_frame(self) -> bytes:
        size = struct.unpack(">i", self._recv_exact(4))[0]
        return self._recv_exact(size)

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by broker")
            buf += chunk
        return bytes(buf)

    def encode(self, request, version: int, correlation_id: int | None = None) -> tuple[bytes, int]:
        corr = next(self._corr) if correlation_id is None else correlation_id
        request.API_VERSION = version
        request.with_header(correlation_id=corr, client_id=self.client_id)
        return bytes(request.encode(header=True, framed=True)), corr

    def request(self, request, version: int):
        data, corr = self.encode(request, version)
        self.send_raw(data)
        return self.read_response(request.API_KEY, version, corr)

    def read_response(self, api_key: int, version: int, corr: int):
        frame = self.recv_frame()
        resp_cls = registry.response_class(api_key)
        resp = resp_cls.decode(frame, version=version, header=True)
        if resp.header.correlation_id != corr:
            raise AssertionError(f"correlation id {resp.header.correlation_id} != {corr}")
        return resp

    def is_closed(self, timeout: float = 5.0) -> bool:
        """True when the broker closed the connection (EOF) within the timeout."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
