"""Size-prefixed Kafka frames: a sans-IO reader.

Every Kafka request is a 4-byte big-endian size followed by that many bytes.
`FrameReader` accumulates bytes from the socket and hands out whole frames;
a size above `socket.request.max.bytes` (or negative) is a protocol violation
after which the connection must be closed.

Memory: the reader holds the chunks as received (nothing is allocated for the
declared size up front, and a growing buffer is never copied over), and joins
them once when the frame is whole. `pending_size` tells the caller the size of
the frame being received, so it can bound what partly received frames hold
(network/quotas.py: queued.max.request.bytes) before reading more of it.
"""
from __future__ import annotations

import struct
from collections import deque

DEFAULT_MAX_REQUEST_BYTES = 104857600  # socket.request.max.bytes
_SIZE = struct.Struct(">i").unpack_from


class FrameTooLarge(Exception):
    def __init__(self, size: int, limit: int, limit_name: str = "socket.request.max.bytes"):
        super().__init__(f"frame of {size} bytes exceeds {limit_name}={limit}")
        self.size = size
        self.limit = limit


class FrameReader:
    def __init__(self, max_bytes: int = DEFAULT_MAX_REQUEST_BYTES):
        self.max_bytes = max_bytes
        self.limit_name = "socket.request.max.bytes"  # the setting max_bytes comes from (for the error)
        self._chunks: deque[bytes] = deque()
        self._off = 0  # bytes of the first chunk already handed out
        self._len = 0  # bytes held, not yet handed out
        self._size = -1  # the declared size of the frame being received; -1 until its 4 bytes are in

    def feed(self, data: bytes) -> None:
        if data:
            self._chunks.append(data)
            self._len += len(data)

    @property
    def buffered(self) -> int:
        return self._len

    @property
    def pending_size(self) -> int | None:
        """The declared size of the frame being received (its 4-byte size is in), else None."""
        if self._size < 0 and self._len >= 4:
            self._read_size()
        return self._size if self._size >= 0 else None

    def _take(self, n: int) -> list:
        """The next n held bytes, as pieces (memoryviews of the chunks)."""
        pieces = []
        while n:
            chunk = self._chunks[0]
            end = min(len(chunk), self._off + n)
            pieces.append(memoryview(chunk)[self._off:end])
            n -= end - self._off
            if end == len(chunk):
                self._chunks.popleft()
                self._off = 0
            else:
                self._off = end
        return pieces

    def _read_size(self) -> None:
        (size,) = struct.unpack(">i", b"".join(self._take(4)))
        self._len -= 4
        if size < 0 or size > self.max_bytes:
            raise FrameTooLarge(size, self.max_bytes, self.limit_name)
        self._size = size

    def next_frame(self) -> bytes | None:
        """The next whole frame's payload (without the size), or None if incomplete."""
        if self._size < 0 and self._len >= 4 and not self._off and len(self._chunks) == 1:
            # the usual small request: one receive holding exactly one whole frame
            chunk = self._chunks[0]
            size = _SIZE(chunk, 0)[0]
            if len(chunk) == size + 4 and 0 <= size <= self.max_bytes:
                self._chunks.clear()
                self._len = 0
                return chunk[4:] if type(chunk) is bytes else bytes(memoryview(chunk)[4:])
        if self._size < 0:
            if self._len < 4:
                return None
            self._read_size()
        size = self._size
        if self._len < size:
            return None
        pieces = self._take(size)
        self._len -= size
        self._size = -1
        return pieces[0].tobytes() if len(pieces) == 1 else b"".join(pieces)
