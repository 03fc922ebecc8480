"""A batch's compressed records as a bounded stream (Kafka's Compression.wrapForInput).

Kafka never inflates a produced batch whole: LogValidator reads its records through a
decompressing InputStream, one record at a time, and stops after the header's record count
(then reads one more byte to check that nothing is left). `Inflater` is that stream, for the
four codecs of the v2 format, with one addition: it refuses to hand out more than `bound`
bytes in total (`DecompressedTooLarge`), so a small batch that expands to gigabytes (a zip
bomb) costs at most `bound` bytes of decompression, never the memory of its expansion.
Each codec is fed its input in small slices and asked for small outputs, so the memory a
read takes stays within a few megabytes whatever the compression ratio.

Codec failures (bad magic, corrupt or truncated data) raise `CorruptStream`: where Kafka's
stream throws an IOException, which the broker answers with UNKNOWN_SERVER_ERROR.
"""
from __future__ import annotations

import struct
import zlib
from typing import Iterator

# The codec libraries (lz4, python-snappy over cramjam, zstandard: 1 MB of a broker's idle memory together) are
# imported by the codec's reader the first time a batch of theirs is read (`kafkite serve` imports none at start).

COMPRESSION_NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

CHUNK = 64 * 1024          # the most one step of a codec hands out (gzip, lz4)
_ZSTD_SLICE = 128          # compressed bytes fed per zstd step: at most ~4 MB out (128 KB blocks)
_GZIP_SLICE = 16 * 1024    # compressed bytes fed per zlib step (zlib copies its unconsumed tail)
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = 16        # magic, version, compatible version


class CorruptStream(Exception):
    """The codec cannot decode the payload (Kafka: IOException in the record stream)."""


class DecompressedTooLarge(Exception):
    """More than `bound` bytes of records came out of the payload."""


class Inflater:
    """The decompressed bytes of `payload` (codec 1-4), read in order with `read(n)`, at most
    `bound` bytes in all."""

    def __init__(self, codec: int, payload, bound: int) -> None:
        if codec not in CODEC_NAMES:
            raise CorruptStream(f"Unknown compression type id: {codec}")
        self.bound = bound
        self.consumed = 0
        self._chunks = _CODECS[codec](memoryview(payload), bound)
        self._left = b""

    def read(self, n: int) -> bytes:
        """The next n bytes, fewer only at the end of the stream."""
        if self.consumed + n > self.bound:
            self._drain()
        if n <= len(self._left):
            out, self._left = self._left[:n], self._left[n:]
        else:
            parts, have = [self._left], len(self._left)
            while have < n:
                chunk = next(self._chunks, None)
                if chunk is None:
                    break
                parts.append(chunk)
                have += len(chunk)
                if self.consumed + have - len(chunk) > self.bound:
                    break  # reported below; no need to inflate further
            data = b"".join(parts)
            out, self._left = data[:n], data[n:]
        self.consumed += len(out)
        if self.consumed > self.bound:
            raise DecompressedTooLarge(f"the records expand to more than {self.bound} bytes")
        return out


    def _drain(self) -> None:
        """A read that would pass the bound: inflate and drop (memory stays at one chunk) until
        the bound is passed (DecompressedTooLarge) or the stream ends (nothing is returned:
        the reader then finds its records cut short)."""
        total = self.consumed + len(self._left)
        self._left = b""
        for chunk in self._chunks:
            total += len(chunk)
            if total > self.bound:
                raise DecompressedTooLarge(f"the records expand to more than {self.bound} bytes")
        self.consumed = total


def _gzip(payload: memoryview, bound: int) -> Iterator[bytes]:
    # GZIPInputStream reads concatenated members; anything else after a member ends the stream
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    pos, buf = 0, b""
    if not len(payload):
        raise CorruptStream("Unexpected end of ZLIB input stream")
    try:
        while True:
            if not buf:
                if pos >= len(payload):
                    if not d.eof:
                        raise CorruptStream("Unexpected end of ZLIB input stream")
                    return
                buf = bytes(payload[pos:pos + _GZIP_SLICE])
                pos += len(buf)
            out = d.decompress(buf, CHUNK)
            buf = d.unconsumed_tail
            if out:
                yield out
            if d.eof:
                buf = d.unused_data
                if len(buf) < 2:
                    buf += bytes(payload[pos:pos + _GZIP_SLICE])
                    pos += _GZIP_SLICE
                if buf[:2] != b"\x1f\x8b":
                    return
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    except zlib.error as exc:
        raise CorruptStream(f"gzip: {exc}") from None


def _uvarint32(buf, pos: int) -> tuple[int, int]:
    """Snappy's length prefix: an unsigned varint of at most 5 bytes."""
    value = shift = 0
    for i in range(5):
        if pos + i >= len(buf):
            break
        b = buf[pos + i]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos + i + 1
        shift += 7
    raise CorruptStream("snappy: bad uncompressed length")


def _snappy_block(block: memoryview, room: int) -> Iterator[bytes]:
    length, _ = _uvarint32(block, 0)
    if length > room:  # say so before inflating it
        raise DecompressedTooLarge(f"a snappy block of {length} bytes")
    import snappy
    try:
        out = snappy.decompress(bytes(block))
    except Exception as exc:  # cramjam's DecompressionError, UncompressError
        raise CorruptStream(f"snappy: {exc}") from None
    for i in range(0, len(out), CHUNK):
        yield out[i:i + CHUNK]


def _snappy(payload: memoryview, bound: int) -> Iterator[bytes]:
    # snappy-java's SnappyInputStream: xerial blocks after a 16-byte header, else one raw block
    if len(payload) == 0:
        raise CorruptStream("Cannot decompress empty stream")
    if len(payload) < _XERIAL_HEADER or payload[:8] != _XERIAL_MAGIC:
        yield from _snappy_block(payload, bound + 1)
        return
    pos, produced = _XERIAL_HEADER, 0
    while pos < len(payload):
        if len(payload) - pos < 4:
            raise CorruptStream("snappy: failed to read chunk size")
        (size,) = struct.unpack_from(">i", payload, pos)
        pos += 4
        if size < 0 or pos + size > len(payload):
            raise CorruptStream(f"snappy: chunk of {size} bytes past the end of the stream")
        for out in _snappy_block(payload[pos:pos + size], bound + 1 - produced):
            produced += len(out)
            yield out
        pos += size


def _lz4(payload: memoryview, bound: int) -> Iterator[bytes]:
    import lz4.frame
    d = lz4.frame.LZ4FrameDecompressor()
    data = bytes(payload)
    try:
        while not d.eof:
            out = d.decompress(data, max_length=CHUNK)
            data = b""
            if out:
                yield out
            elif d.needs_input:
                raise CorruptStream("Stream ended prematurely")
    except RuntimeError as exc:  # lz4's LZ4FError
        raise CorruptStream(f"lz4: {exc}") from None


def _zstd(payload: memoryview, bound: int) -> Iterator[bytes]:
    # ZstdInputStream reads frame after frame; a frame cut short is "truncated source"
    import zstandard
    dctx = zstandard.ZstdDecompressor()
    d, fed = dctx.decompressobj(), False
    pos, buf = 0, b""
    try:
        while True:
            if not buf:
                if pos >= len(payload):
                    break
                buf = payload[pos:pos + _ZSTD_SLICE]
                pos += len(buf)
            out = d.decompress(buf)
            fed, buf = True, b""
            if out:
                yield out
            if d.eof:
                buf = d.unused_data
                d, fed = dctx.decompressobj(), False
    except zstandard.ZstdError as exc:
        raise CorruptStream(f"zstd: {exc}") from None
    if fed and not d.eof:
        raise CorruptStream("Read error or truncated source")


_CODECS = {GZIP: _gzip, SNAPPY: _snappy, LZ4: _lz4, ZSTD: _zstd}
