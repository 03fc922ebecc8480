"""Request decoding and response encoding over kafka-python's generated classes.

kafka-python's ``kafka.protocol`` classes are generated from Kafka's JSON message
specs and encode/decode every version (flexible versions and tagged fields
included). This module is the only place that pairs raw frames with them.

Request header versions: v1 (api key, version, correlation id, client id) for
non-flexible request versions and v2 (v1 + tagged fields) for flexible ones.
Response header: v0 (correlation id) or v1 (+ tagged fields) for flexible
versions -- except ApiVersions, whose response header is always v0 (KIP-511).

Both directions run kafka-python's compiled (code-generated) decoders and encoders, for the header as
for the body: its generic field-by-field walk of the request header over a BytesIO took as long as
the whole compiled body decode. The codec was chosen by measurement (2026-11-26, golden frames of
real clients, best of 3, microseconds per message on the 2-core build machine):

    request decode      kafka-python  kio      response encode   kafka-python  kio
    Produce v9..v11     7.8-8.5       1.1-3.7  Produce           4.9-5.1       5.8-5.9
    Fetch v17           8.6           3.8      Fetch             5.2           6.5
    Metadata v12        2.7           0.5      Metadata          5.3           7.8
    OffsetCommit v9     7.9           1.3      OffsetCommit      4.9           6.4

kafka-python encodes faster, so it encodes; it decodes too. kio decodes 2-7x faster, but its objects
are not kafka-python's (tuples, timedelta fields, other names in old versions), which every handler
and the strict checks (strict.py) read; and its native reader (kio 0.6.5) sizes an array by the
length the frame declares before reading it: a mutated OffsetCommit v9 declaring 2^31 topics aborted
the process ("memory allocation of 214748364784 bytes failed", found by tests/reliability/
test_fuzz.py). Measured in the broker (2026-11-26): kio's OffsetCommit v9 decode plus strict.py's
null checks saved about 10 us of the broker's 80-100 us of CPU per commit; not worth a request
that kills the broker.
"""
from __future__ import annotations

import io
import re
import struct
from dataclasses import dataclass
from typing import Any, Callable

from kafka.protocol.api_header import RequestHeader, ResponseHeader
from kafka.protocol.api_key import ApiKey
from kafka.protocol.schemas.fields.codegen import CodegenContext
from kafka.protocol.schemas.fields.simple import SimpleField
from kafka.protocol.schemas.fields.struct import StructField
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.schemas.fields.codecs import EncodeBufferPool

from . import registry, strict
from .produce_response import ProduceAnswer


class RequestError(Exception):
    """A request we cannot serve; carries what could be read of its header."""

    def __init__(self, msg: str, api_key: int | None = None, api_version: int | None = None,
                 correlation_id: int | None = None):
        super().__init__(msg)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class MalformedRequest(RequestError):
    pass


class UnknownApi(RequestError):
    pass


class UnsupportedVersion(RequestError):
    pass


@dataclass(slots=True)
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any  # the kafka-python request object

    @property
    def api_name(self) -> str:
        try:
            return ApiKey(self.api_key).name
        except ValueError:
            return str(self.api_key)


_UNPACK_HEADER = struct.Struct(">hhi").unpack_from
_PRODUCE = int(ApiKey.Produce)  # (a plain int: no enum attribute read per request)


def peek_header(payload: bytes) -> tuple[int, int, int]:
    """api key, api version and correlation id: the fixed 8 bytes every request starts with."""
    if len(payload) < 8:
        raise MalformedRequest(f"request of {len(payload)} bytes is shorter than a request header")
    return _UNPACK_HEADER(payload, 0)


def decode_request(payload: bytes, supported: dict[int, tuple[int, int]]) -> Request:
    """Decode one frame payload (without the 4-byte size).

    `supported` maps api key -> (min, max) version this broker serves.
    """
    if len(payload) < 8:  # (peek_header, inline)
        raise MalformedRequest(f"request of {len(payload)} bytes is shorter than a request header")
    api_key, api_version, correlation_id = _UNPACK_HEADER(payload, 0)
    bounds = supported.get(api_key)
    if bounds is None:
        raise UnknownApi(f"unknown or unsupported api key {api_key}", api_key, api_version, correlation_id)
    lo, hi = bounds
    if not lo <= api_version <= hi:
        raise UnsupportedVersion(
            f"api {ApiKey(api_key).name} version {api_version} not in {lo}..{hi}",
            api_key, api_version, correlation_id)
    got = _READERS.get((api_key, api_version))
    if got is None:
        got = _reader(api_key, api_version, correlation_id)
    req_cls, decode, check = got
    try:
        if decode is None:  # a class with its own header rule (ApiVersions)
            body = _decode_body(req_cls, payload, api_version)
        else:  # (_decode_body's steps in one generated function: every request comes here)
            # a Produce's decoder reads a memoryview (its records are views of the frame: _RecordsView), every other
            # one the frame's bytes (_compiled_decoder's on_bytes)
            body, end = decode(memoryview(payload) if api_key == _PRODUCE else
                               payload if type(payload) is bytes else bytes(payload), 0)
            if end > len(payload):
                raise ValueError(f"request needs {end} bytes, the frame holds {len(payload)}")
        if check is not None:  # (strict.check; else its checks run in the decoder: strict.fuse)
            check(body)
    except Exception as exc:  # the codec raises assorted errors on garbage
        raise MalformedRequest(f"cannot decode {req_cls.__name__} v{api_version}: {exc!r}",
                               api_key, api_version, correlation_id) from exc
    return Request(api_key, api_version, correlation_id, body._header.client_id, body)


# (api key, version) -> (request class, the compiled decoder of the header and the body, None for a class with its
# own header rule, the body's strict check -- strict.checker's --, None when the decoder makes its checks)
_READERS: dict[tuple[int, int], tuple[type, Callable | None, Callable]] = {}


def _reader(api_key: int, api_version: int, correlation_id: int) -> tuple[type, Callable | None, Callable]:
    req_cls, _ = registry.classes(api_key)
    try:
        if _own_header(req_cls):
            _decoders(req_cls, api_version)  # (compiled now: _decode_body's)
            decode = None
        else:
            if not 0 <= api_version <= req_cls.max_version:
                raise ValueError(f"Invalid version {api_version} (max version is {req_cls.max_version}).")
            produce = req_cls.API_KEY == ApiKey.Produce
            if produce:
                _records_as_views(req_cls._struct)
            decode, fused = _compiled_decoder(req_cls._struct, api_version, req_cls.flexible_version_q(api_version),
                                              req_cls[None], header=True, plan=strict.plan_for(req_cls, api_version),
                                              on_bytes=not produce)
        check = None if decode is not None and fused else strict.checker(req_cls, api_version)
        got = _READERS[(api_key, api_version)] = (req_cls, decode, check)
    except Exception as exc:
        raise MalformedRequest(f"cannot decode {req_cls.__name__} v{api_version}: {exc!r}",
                               api_key, api_version, correlation_id) from exc
    return got


def _header_decoder(flexible: bool) -> Callable:
    """kafka-python's compiled decoder of the request header (ApiHeader.decode's version and flags, without its
    generic field-by-field walk over a BytesIO)."""
    return RequestHeader._struct.compiled_decode_from(_HEADER_VERSIONS[flexible], compact=False, tagged=flexible,
                                                      data_class=RequestHeader)


_HEADER_VERSIONS = {False: RequestHeader._valid_versions[0], True: RequestHeader._flexible_versions[0]}


_HEADER_DECODERS = {False: _header_decoder(False), True: _header_decoder(True)}
# (request class, version) -> (the header's compiled decoder, or None when the class parses its own header, the
# body's compiled decoder)
_DECODERS: dict[tuple[type, int], tuple[Callable | None, Callable]] = {}


class _RecordsView(SimpleField):
    """A request's `records` field decoded as a memoryview of the request frame, not copied out of it: a Produce's
    records are validated in place and copied once, into the buffer the log keeps (storage/log_validator.py
    prepare_append). The frame lives as long as the request does, as the copy did. kafka-python's compiled decoder
    of a bytes field ends in `v = bytes(data[pos:pos+n])`; this field's ends in `v = data[pos:pos+n]`."""

    def emit_decode_from(self, ctx, var_name, indent, version=None, compact=False, tagged=False):
        start = len(ctx.lines)
        super().emit_decode_from(ctx, var_name, indent, version=version, compact=compact, tagged=tagged)
        copies = [i for i in range(start, len(ctx.lines)) if f"{var_name} = bytes(data[pos:pos+" in ctx.lines[i]]
        if len(copies) != 1:  # kafka-python changed how it decodes bytes: keep its decoder (the copy)
            return
        line = ctx.lines[copies[0]]
        ctx.lines[copies[0]] = line.replace(f"{var_name} = bytes(data[", f"{var_name} = (data[")


def _records_as_views(struct) -> None:
    """Every `records` field of a request struct (a Produce's partition data) decoded as a memoryview."""
    for field in struct._fields or ():
        inner = getattr(field, "array_of", None)
        if isinstance(field, StructField):
            _records_as_views(field)
        elif isinstance(inner, StructField):
            _records_as_views(inner)
        elif type(field) is SimpleField and field.type_str == "records":
            field.__class__ = _RecordsView


def _decoders(req_cls: type[ApiMessage], version: int) -> tuple[Callable | None, Callable]:
    key = (req_cls, version)
    got = _DECODERS.get(key)
    if got is None:
        if req_cls.API_KEY == ApiKey.Produce:
            _records_as_views(req_cls._struct)
        flexible = req_cls.flexible_version_q(version)
        if not 0 <= version <= req_cls.max_version:
            raise ValueError(f"Invalid version {version} (max version is {req_cls.max_version}).")
        got = _DECODERS[key] = (None if _own_header(req_cls) else _HEADER_DECODERS[flexible],
                                _compiled_decoder(req_cls._struct, version, flexible, req_cls[None])[0])
    return got


def _own_header(req_cls: type[ApiMessage]) -> bool:
    """Whether the class parses its request header by a rule of its own (ApiVersions)."""
    return getattr(req_cls.parse_header, "__func__", None) is not ApiMessage.parse_header.__func__


_VARINT_LOOP = re.compile(
    r"(?P<i> *)(?P<v>_\w+) = 0\n(?P=i)(?P<sh>_sh\d+) = 0\n(?P=i)while True:\n"
    r"(?P=i)    (?P<b>_b\d+) = data\[pos\]\n(?P=i)    pos \+= 1\n"
    r"(?P=i)    (?P=v) \|= \((?P=b) & 0x7f\) << (?P=sh)\n"
    r"(?P=i)    if not \((?P=b) & 0x80\): break\n(?P=i)    (?P=sh) \+= 7\n")


def _one_byte_varint(m: re.Match) -> str:
    """kafka-python's unsigned varint loop with a first step for the one-byte varint (every length and count below
    128: a compact string's, an array's): the byte read, and the loop entered only when its high bit is set."""
    i, v, sh, b = m["i"], m["v"], m["sh"], m["b"]
    return (f"{i}{v} = data[pos]\n{i}pos += 1\n{i}if {v} & 0x80:\n{i}    {v} &= 0x7f\n{i}    {sh} = 7\n"
            f"{i}    while True:\n{i}        {b} = data[pos]\n{i}        pos += 1\n"
            f"{i}        {v} |= ({b} & 0x7f) << {sh}\n{i}        if not ({b} & 0x80): break\n"
            f"{i}        {sh} += 7\n")


def _compiled_decoder(struct: StructField, version: int, flexible: bool, data_class: type, header: bool = False,
                      plan: tuple | None = None, on_bytes: bool = False) -> tuple[Callable, bool]:
    """kafka-python's compiled decoder of a request body (StructField.compiled_decode_from's code: the same
    generated source, emitted by the same fields), its varints read with a one-byte fast path (_one_byte_varint):
    an OffsetCommit v9 has seven, each 30 bytecodes in the loop and 16 in the fast path. `header`: the request
    header's decoder (_header_decoder's code) comes first in the same function, and the body gets the header.
    `plan`: the body's strict checks (strict.plan_for), put in the decoder when strict.fuse can -> (the decoder,
    whether they were). `on_bytes`: it reads a bytes object, not a memoryview, and decodes a string with the bytes'
    own decode() (kafka-python's `str(data[a:b], "utf-8")` of a view costs a view and a codec lookup by name: on an
    OffsetCommit v9, 4.6K of its decoder's 37.6K instructions, valgrind)."""
    ctx = CodegenContext()
    ctx.lines.append("def _decode(data, pos):")
    if header:
        hstruct = RequestHeader._struct
        saved = hstruct._data_class
        hstruct._data_class = RequestHeader
        try:
            hstruct.emit_decode_from(ctx, "header", "    ", version=_HEADER_VERSIONS[flexible], compact=False,
                                     tagged=flexible)
        finally:
            hstruct._data_class = saved
        ctx.emit("    ", "if pos > len(data):")
        ctx.emit("    ", '    raise ValueError(f"request header needs {pos} bytes, the frame holds {len(data)}")')
    saved = struct._data_class
    struct._data_class = data_class
    try:
        struct.emit_decode_from(ctx, "obj", "    ", version=version, compact=flexible, tagged=flexible)
    finally:
        struct._data_class = saved
    if header:
        ctx.emit("    ", "obj._header = header")
    ctx.emit("    ", "return obj, pos")
    lines = _VARINT_LOOP.sub(_one_byte_varint, ctx.source() + "\n").split("\n")
    fused = None if plan is None else strict.fuse(lines, plan, ctx.globs)
    source = "\n".join(lines) if fused is None else _checked_strings("\n".join(fused), ctx.globs)
    if on_bytes:
        source = _STR_OF_VIEW.sub(r"data[pos:\1].decode()", source)
    source = _bound_unpacks(source, ctx.globs).replace("= object.__new__(", "= _object_new(")
    ctx.globs["_object_new"] = object.__new__
    exec(compile(source, f"<codegen_decode:{struct.name}_v{version}>", "exec"), ctx.globs)  # noqa: S102
    return ctx.globs["_decode"], fused is not None


_UNPACK_FORMAT = re.compile(r'unpack_from\("([^"]+)", data, pos')


def _bound_unpacks(source: str, globs: dict) -> str:
    """kafka-python's `unpack_from(">iqi", data, pos)` calls made with the format's compiled Struct (its unpack_from,
    bound, in the decoder's globals): no lookup of the format in struct's cache at every call."""
    names: dict[str, str] = {}

    def bound(m: re.Match) -> str:
        name = names.get(m[1])
        if name is None:
            name = names[m[1]] = f"_unpack{len(names)}"
            globs[name] = struct.Struct(m[1]).unpack_from
        return f"{name}(data, pos"
    return _UNPACK_FORMAT.sub(bound, source)


_STR_OF_VIEW = re.compile(r'str\(data\[pos:([^\]]+)\], "utf-8"\)')
_COMPACT_STRING = re.compile(
    r"(?P<i> *)(?P<ln>_ln\d+) = data\[pos\]\n(?P=i)pos \+= 1\n(?P=i)if (?P=ln) & 0x80:\n"
    r"(?P<slow>(?:(?P=i)    .*\n)+?)"
    r"(?P=i)(?P=ln) -= 1\n(?P=i)if (?P=ln) < 0:\n(?P=i)    (?P<v>_val\d+) = None\n(?P=i)else:\n"
    r"(?P=i)    (?P=v) = str\(data\[pos:pos\+(?P=ln)\], \"utf-8\"\)\n(?P=i)    pos \+= (?P=ln)\n"
    r"(?P<set>(?P=i)\w+\.\w+ = (?P=v)\n)"
    r"(?:(?P=i)if (?P=v) is None: raise _E\((?P<null>.*)\)\n)?"
    r"(?P=i)if (?:(?P=v) is not None and )?len\((?P=v)\) > _T: _ok\((?P<name>.*), (?P=v)\)\n")
_INT16_STRING = re.compile(
    r"(?P<i> *)(?P<ln>_ln\d+) = unpack_from\(\">h\", data, pos\)\[0\]\n(?P=i)pos \+= 2\n"
    r"(?P<read>(?P=i)if (?P=ln) < 0:\n(?P=i)    (?P<v>_val\d+) = None\n(?P=i)else:\n"
    r"(?P=i)    (?P=v) = str\(data\[pos:pos\+(?P=ln)\], \"utf-8\"\)\n(?P=i)    pos \+= (?P=ln)\n"
    r"(?P=i)\w+\.\w+ = (?P=v)\n(?:(?P=i)if (?P=v) is None: raise _E\(.*\)\n)?)"
    r"(?P=i)if (?:(?P=v) is not None and )?len\((?P=v)\) > _T: _ok\(.*\)\n")


def _compact_string(m: re.Match) -> str:
    """A compact string's read with its strict checks (strict.fuse's) where they can fail: the null one where the length
    says null, the length one where the length took more than one byte (a string of more than 32767 bytes; what
    strict._string_ok checks of the decoded string, its UTF-8 bytes being the frame's) -- not after every string."""
    i, ln, v = m["i"], m["ln"], m["v"]
    null = f"{i}    raise _E({m['null']})\n" if m["null"] is not None else f"{i}    {v} = None\n"
    return (f"{i}{ln} = data[pos]\n{i}pos += 1\n{i}if {ln} & 0x80:\n{m['slow']}"
            f"{i}    if {ln} > {strict.MAX_STRING_BYTES + 1}: _long({m['name']}, {ln} - 1)\n"
            f"{i}if {ln}:\n{i}    {v} = str(data[pos:pos+{ln}-1], \"utf-8\")\n{i}    pos += {ln} - 1\n"
            f"{i}else:\n{null}{m['set']}")


def _checked_strings(source: str, globs: dict) -> str:
    """A fused decoder (strict.fuse) whose string checks run only where they can fail (_compact_string); a string
    of an int16 length (at most 32767 bytes) has no length check."""
    globs["_long"] = strict.too_long
    source = _COMPACT_STRING.sub(_compact_string, source)
    return _INT16_STRING.sub(lambda m: f"{m['i']}{m['ln']} = unpack_from(\">h\", data, pos)[0]\n{m['i']}pos += 2\n"
                                       f"{m['read']}", source)


def _decode_body(req_cls: type[ApiMessage], payload: bytes, version: int) -> ApiMessage:
    """kafka-python's ApiMessage.decode(header=True) through its compiled decoders, plus the check it leaves out:
    a string or bytes field whose length runs past the end of the frame (its decoder slices short and carries on;
    Kafka's readers fail on the missing bytes)."""
    decode_header, decode = _decoders(req_cls, version)
    mv = memoryview(payload)
    if decode_header is None:  # a class with its own header rule (ApiVersions): its parse_header
        head = io.BytesIO(payload)
        header = req_cls.parse_header(head, version=version)
        pos = head.tell()
    else:
        header, pos = decode_header(mv, 0)
    if pos > len(payload):
        raise ValueError(f"request header needs {pos} bytes, the frame holds {len(payload)}")
    body, end = decode(mv, pos)
    if end > len(payload):
        raise ValueError(f"request needs {end} bytes, the frame holds {len(payload)}")
    body._header = header
    return body


_HEADER_ENCODERS = {
    flexible: ResponseHeader._struct.compiled_encode_into(
        ResponseHeader._flexible_versions[0] if flexible else ResponseHeader._valid_versions[0],
        compact=False, tagged=flexible)
    for flexible in (False, True)}
_PACK_SIZE = struct.Struct(">i").pack_into
_PACK_SIZE_AND_ID = struct.Struct(">ii").pack
# response class -> None when it encodes as ApiMessage.encode does (else its own encode() is called), and per version
# (flexible, the body's compiled encoder)
_ENCODERS: dict[type, dict[int, tuple[bool, Callable]] | None] = {}


def _encoder(cls: type, api_version: int) -> tuple[bool, Callable] | None:
    if cls not in _ENCODERS:
        plain = (cls.encode is ApiMessage.encode and cls.encode_header is ApiMessage.encode_header
                 and cls.encode_header_into is ApiMessage.encode_header_into)
        _ENCODERS[cls] = {} if plain else None
    versions = _ENCODERS[cls]
    if versions is None:
        return None
    got = versions.get(api_version)
    if got is None:
        if not 0 <= api_version <= cls.max_version:
            raise ValueError(f"Invalid version {api_version} (max version is {cls.max_version}).")
        flexible = cls.flexible_version_q(api_version)
        got = versions[api_version] = (flexible, cls._struct.compiled_encode_into(api_version, compact=flexible,
                                                                                  tagged=flexible))
    return got


class EncodedBody:
    """A response body encoded once (`encode_body`) and sent many times: `encode_response` puts the frame's size and
    response header before it. For answers that repeat byte for byte (an OffsetCommit's, for the same partitions and
    errors), so the response objects are neither built nor encoded again."""
    __slots__ = ("data", "header_tail", "after_id", "size")

    def __init__(self, data: bytes, flexible: bool):
        self.data = data
        # the response header after its correlation id: the empty tagged fields of header v1, nothing in v0
        header = ResponseHeader(correlation_id=0)
        with EncodeBufferPool.acquire() as out:
            _HEADER_ENCODERS[flexible](header, out)
            self.header_tail = bytes(out.result()[4:])
        self.after_id = self.header_tail + data  # the frame after its size and correlation id
        self.size = 4 + len(self.after_id)  # the frame's size field


def encode_body(response: ApiMessage, api_version: int) -> EncodedBody:
    """The response's body encoded by kafka-python's compiled encoder (a class that encodes as ApiMessage.encode
    does), to be sent with any correlation id."""
    flexible, encode = _encoder(type(response), api_version)
    response._header = None
    response._version = api_version
    with EncodeBufferPool.acquire() as out:
        encode(response, out)
        return EncodedBody(bytes(out.result()), flexible)


def encode_response(response: ApiMessage | EncodedBody, api_version: int, correlation_id: int) -> bytes | bytearray:
    """The whole response frame: size, header, body (a bytearray: no extra copy of large fetches). kafka-python's
    ApiMessage.encode(header=True, framed=True) through the compiled encoders of the header and the body; a class
    with its own header rule (ApiVersions' response header is always v0) goes through encode() itself."""
    cls = type(response)
    if cls is EncodedBody:
        return _PACK_SIZE_AND_ID(response.size, correlation_id) + response.after_id
    if cls is ProduceAnswer:  # light objects with kafka-python's attributes: its ProduceResponse encoder reads them
        flexible, encode = _encoder(cls._kafka_class(), api_version)
        header = ResponseHeader(correlation_id=correlation_id)
    else:
        got = _encoder(cls, api_version)
        response._header = None  # (kafka-python's version setter would write a request's field into a header it holds)
        if got is None:
            response.API_VERSION = api_version
            response._header = ResponseHeader(correlation_id=correlation_id)
            return response.encode(header=True, framed=True)
        flexible, encode = got
        response._version = api_version  # (the API_VERSION setter's range check: _encoder's)
        header = response._header = ResponseHeader(correlation_id=correlation_id)
    with EncodeBufferPool.acquire() as out:
        out.ensure(4)
        out.pos += 4  # the frame's size, written last
        _HEADER_ENCODERS[flexible](header, out)
        encode(response, out)
        _PACK_SIZE(out.buf, 0, out.pos - 4)
        return out.result()
