"""Size-prefixed Kafka frames: a sans-IO reader.

Every Kafka request is a 4-byte big-endian size followed by that many bytes.
`FrameReader` accumulates bytes from the socket and hands out whole frames;
a size above `socket.request.max.bytes` (or negative) is a protocol violation
after which the connection must be closed.
"""
from __future__ import annotations

import struct

DEFAULT_MAX_REQUEST_BYTES = 104857600  # socket.request.max.bytes


class FrameTooLarge(Exception):
    def __init__(self, size: int, limit: int):
        super().__init__(f"frame of {size} bytes exceeds socket.request.max.bytes={limit}")
        self.size = size
        self.limit = limit


class FrameReader:
    def __init__(self, max_bytes: int = DEFAULT_MAX_REQUEST_BYTES):
        self.max_bytes = max_bytes
        self._buf = bytearray()

    def feed(self, data: bytes) -> None:
        self._buf += data

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def next_frame(self) -> bytes | None:
        """The next whole frame's payload (without the size), or None if incomplete."""
        if len(self._buf) < 4:
            return None
        (size,) = struct.unpack_from(">i", self._buf, 0)
        if size < 0 or size > self.max_bytes:
            raise FrameTooLarge(size, self.max_bytes)
        if len(self._buf) < 4 + size:
            return None
        payload = bytes(self._buf[4 : 4 + size])
        del self._buf[: 4 + size]
        return payload
