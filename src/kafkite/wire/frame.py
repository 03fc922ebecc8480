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
A large frame is better received straight into a buffer of its size
(`frame_buffer`/`filled`: network/connection.py does so past 64 KiB): nothing
joined, and the buffer is used again for later frames (`FrameBuffers`), so no
fresh memory is touched per request.
"""
from __future__ import annotations

import struct
import threading
from collections import deque

DEFAULT_MAX_REQUEST_BYTES = 104857600  # socket.request.max.bytes
_SIZE = struct.Struct(">i").unpack_from


class FrameBuffers:
    """Large frames' buffers, used again: a buffer handed back (`put`) serves a later frame once nothing holds a view
    of it any more. A new buffer's memory is new pages to the process (the allocator maps large blocks afresh), each
    zeroed by the kernel on its first touch: ~1 us a 4 KiB page, as much as the rest of a produced 1 KB record's
    handling. At most `max_bytes` are kept (the oldest dropped first); one pool serves a process's connections,
    a lock keeping brokers on other threads (BrokerThread, in-process clusters) from taking the same buffer."""

    QUANTUM = 256 << 10  # buffers' sizes are multiples of it: frames of nearby sizes share them

    def __init__(self, max_bytes: int = 16 << 20):
        self.max_bytes = max_bytes
        self._bufs: list[bytearray] = []
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, size: int) -> bytearray:
        """A buffer of at least `size` bytes, the caller's alone (its contents: whatever it held)."""
        with self._lock:
            for i, buf in enumerate(self._bufs):
                if len(buf) >= size and _unexported(buf):
                    del self._bufs[i]
                    self._bytes -= len(buf)
                    return buf
        q = self.QUANTUM
        return bytearray(-(-size // q) * q if size <= self.max_bytes else size)

    def put(self, buf: bytearray) -> None:
        if len(buf) > self.max_bytes:
            return
        with self._lock:
            self._bufs.append(buf)
            self._bytes += len(buf)
            while self._bytes > self.max_bytes:
                self._bytes -= len(self._bufs.pop(0))


def _unexported(buf: bytearray) -> bool:
    """Whether no view of `buf` is alive (a bytearray with views refuses to shrink; its size is kept)."""
    try:
        del buf[-1:]
    except BufferError:
        return False
    buf.append(0)
    return True


FRAME_BUFFERS = FrameBuffers()


class FrameTooLarge(Exception):
    def __init__(self, size: int, limit: int, limit_name: str = "socket.request.max.bytes"):
        super().__init__(f"frame of {size} bytes exceeds {limit_name}={limit}")
        self.size = size
        self.limit = limit


class FrameReader:
    def __init__(self, max_bytes: int = DEFAULT_MAX_REQUEST_BYTES, buffers: FrameBuffers = FRAME_BUFFERS):
        self.max_bytes = max_bytes
        self.buffers = buffers
        self.limit_name = "socket.request.max.bytes"  # the setting max_bytes comes from (for the error)
        self._chunks: deque[bytes] = deque()
        self._off = 0  # bytes of the first chunk already handed out
        self._len = 0  # bytes held, not yet handed out
        self._size = -1  # the declared size of the frame being received; -1 until its 4 bytes are in
        self._buf: bytearray | None = None  # a large frame's own buffer, received into (frame_buffer)
        self._fill = 0  # bytes of _buf received
        self._out: bytearray | None = None  # the buffer of the frame handed out last (done() hands it back)

    def feed(self, data: bytes) -> None:
        if data:
            if self._buf is not None:  # a frame being received into its buffer: what came is first the rest of it
                view = self.frame_buffer()
                n = min(len(data), len(view))
                view[:n] = memoryview(data)[:n]
                self._fill += n
                data = data[n:]
                if not data:
                    return
            self._chunks.append(data)
            self._len += len(data)

    @property
    def buffered(self) -> int:
        return self._len + self._fill

    @property
    def pending_size(self) -> int | None:
        """The declared size of the frame being received (its 4-byte size is in), else None."""
        if self._size < 0 and self._len >= 4:
            self._read_size()
        return self._size if self._size >= 0 else None

    def frame_buffer(self) -> memoryview:
        """For a frame whose size is known (pending_size): the part of the frame's own buffer still to receive, to
        read the socket into (then `filled(n)`). The frame is then handed out as a memoryview of that buffer (a
        bytearray from `buffers`, used again once `done()` gave it back and nothing holds a view of it): no chunks
        received and joined, one copy less of a large request, and no new memory. What is held already goes into
        it first."""
        buf = self._buf
        if buf is None:
            if self._size < 0 and self._len >= 4:
                self._read_size()
            size = self._size
            if size < 0 or self._len >= size:
                raise ValueError("no frame of known size is being received")
            buf = self._buf = self.buffers.get(size)
            p = 0
            for piece in self._take(self._len):
                buf[p:p + len(piece)] = piece
                p += len(piece)
            self._fill, self._len = p, 0
        return memoryview(buf)[self._fill:self._size]

    def filled(self, n: int) -> None:
        """n more bytes of the frame were received into frame_buffer()."""
        self._fill += n

    def done(self) -> None:
        """The frame handed out last has been handled: its buffer (if it had one of its own) may serve another frame
        once no view of it is left."""
        if self._out is not None:
            self.buffers.put(self._out)
            self._out = None

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

    def next_frame(self) -> bytes | memoryview | None:
        """The next whole frame's payload (without the size), or None if incomplete: bytes, or a memoryview of its
        own buffer when received into it (frame_buffer)."""
        buf = self._buf
        if buf is not None:
            if self._fill < self._size:
                return None
            self._buf, self._out = None, buf
            frame = memoryview(buf)[:self._size]
            self._fill, self._size = 0, -1
            return frame
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
