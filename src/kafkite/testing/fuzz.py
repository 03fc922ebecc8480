"""Fuzzing the request path: frames in, the broker's answer and state out.

Used by tests/reliability/test_fuzz.py (hypothesis, about a minute) and benchmarks/fuzz.py (a long
run, figures by kind). Two sources of frames, for every (api, version) the broker serves:

- `Mutator`: a real client's recorded request (../shared/golden-requests) with bytes flipped,
  overwritten with boundary integers (-1, 0, 0x7fff, ...), inserted, deleted or cut short;
- `RequestGenerator`: a structurally valid request built from kafka-python's schema for that
  version, with random field values -- names the broker knows (topics, groups, members, config
  keys) as often as random ones, boundary integers, and now and then a null where the field may
  not be null.

`FrameRunner` hands one frame to the broker's router inside the broker's Trio loop (as a
connection would), and classifies what happened: answered, connection closed (refused while
decoding), still waiting at the time limit -- only for a request that may wait by what it asks
(`may_wait`: a long-poll Fetch, a Produce with acks=all, a JoinGroup, a SyncGroup; cancelled, as a
closing connection would) --, or a bug, recorded by kind: an exception out of a handler, or any
other request not answered within `slow_limit` (named by api, version and the frame in hex). For a
request that was refused (closed, or answered with an error for everything) it compares the
broker's state before and after (`snapshot`): nothing may have changed.
"""
from __future__ import annotations

import random
import struct
import time
import traceback
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import structlog
import trio
from kafka.protocol.schemas.fields.array import ArrayField
from kafka.protocol.schemas.fields.struct import StructField

from ..server.router import CloseConnection, supported
from ..wire import registry

INTERNAL_OFFSETS = "__consumer_offsets"
CREATE_TOPICS, CREATE_PARTITIONS = 19, 37
# Partition counts above this are another change's business (a CreateTopics/CreatePartitions bound);
# the runner counts such frames as skipped instead of letting them allocate millions of partitions.
PARTITIONS_GUARD = 10_000

INTS = {
    "int8": (-128, 127), "int16": (-(1 << 15), (1 << 15) - 1), "uint16": (0, (1 << 16) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1), "int64": (-(1 << 63), (1 << 63) - 1),
}
CONFIG_VALUES = ["-1", "0", "1", "1000", "86400000", "1048576", "compact", "delete", "compact,delete", "gzip",
                 "lz4", "zstd", "snappy", "producer", "uncompressed", "CreateTime", "LogAppendTime", "true",
                 "false", "0.1", "9223372036854775807", "-2", "2.8", "3.0", ""]
EDGE_INTS = (-1, 0, 1, 2, 3, -2, 127, 128, 255, 0x7FFF, -0x8000, 0xFFFF, 0x7FFFFFFF, -0x80000000, 1 << 20)


# -- frames from real clients ---------------------------------------------------------------------------
def golden_frames(root: Path) -> list[tuple[int, int, bytes]]:
    """(api key, version, payload without the size) of every recorded frame the broker serves."""
    out = []
    sup = supported()
    for path in sorted(root.glob("*/*.bin")) if root.exists() else []:
        payload = path.read_bytes()[4:]
        api, ver = struct.unpack_from(">hh", payload, 0)
        if api in sup and sup[api][0] <= ver <= sup[api][1]:
            out.append((api, ver, payload))
    return out


class Mutator:
    """Random damage to a frame; the api key stays (to reach that API's handler), the version sometimes
    moves to another served one (a body read at the wrong version)."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def mutate(self, payload: bytes) -> bytes:
        rng = self.rng
        m = bytearray(payload)
        for _ in range(rng.choice((1, 1, 1, 2, 3, 5))):
            op = rng.random()
            if len(m) <= 8:
                m += bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 8)))
                continue
            i = rng.randrange(8, len(m))
            if op < 0.30:
                m[i] = rng.getrandbits(8)
            elif op < 0.45:
                m[i] ^= 1 << rng.randrange(8)
            elif op < 0.70:  # a boundary integer over whatever is there (lengths, counts, ids)
                width = rng.choice((1, 2, 4, 8))
                v = rng.choice(EDGE_INTS)
                chunk = (v & ((1 << (8 * width)) - 1)).to_bytes(width, "big")
                m[i:i + width] = chunk
            elif op < 0.80:
                m[i:i] = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 6)))
            elif op < 0.90:
                del m[i:i + rng.randint(1, 6)]
            else:
                m = m[:i]
        if rng.random() < 0.05:
            api = struct.unpack_from(">h", m, 0)[0]
            lo, hi = supported()[api]
            m[2:4] = struct.pack(">h", rng.randint(lo, hi))
        return bytes(m)


# -- structurally valid requests with random values -----------------------------------------------------
@dataclass
class Names:
    """What the broker knows, so random requests reach past "unknown topic" now and then."""
    topics: list[str] = field(default_factory=lambda: ["fuzz-a", "fuzz-b"])
    topic_ids: list[uuid.UUID] = field(default_factory=list)
    groups: list[str] = field(default_factory=lambda: ["fuzz-group"])
    members: list[str] = field(default_factory=list)
    configs: list[str] = field(default_factory=lambda: ["retention.ms", "cleanup.policy", "segment.bytes",
                                                        "max.message.bytes", "compression.type",
                                                        "message.timestamp.type", "num.partitions"])


class RequestGenerator:
    def __init__(self, rng: random.Random, names: Names | None = None, null_rate: float = 0.03):
        self.rng = rng
        self.names = names or Names()
        self.null_rate = null_rate

    def frame(self, api: int, version: int) -> bytes:
        req_cls, _ = registry.classes(api)
        flexible = req_cls.flexible_version_q(version)
        vals = self._fields(req_cls._struct, version, flexible)
        req = req_cls(version=version, **vals)
        req.with_header(correlation_id=self.rng.getrandbits(31),
                        client_id=self.rng.choice(("fuzz", "", None, "c" * 40)))
        return bytes(req.encode(header=True))

    def join_group(self) -> bytes:
        """A well-formed JoinGroup (v3, or v5 with a static member) into a known group: gives the fuzzed
        Heartbeat/SyncGroup/LeaveGroup/OffsetCommit requests members and generations to hit."""
        from kafka.protocol.consumer import JoinGroupRequest
        rng = self.rng
        v = rng.choice((3, 5))
        P = JoinGroupRequest.JoinGroupRequestProtocol
        req = JoinGroupRequest(version=v, group_id=rng.choice(self.names.groups + ["fuzz-group"] * 3),
                               session_timeout_ms=30000, rebalance_timeout_ms=rng.choice((0, 10, 1000)),
                               member_id=rng.choice(self.names.members + [""] * 3),
                               group_instance_id=rng.choice((None, "static-1")) if v >= 5 else None,
                               protocol_type="consumer", protocols=[P(name="range", metadata=b"")])
        req.with_header(correlation_id=1, client_id="fuzz")
        return bytes(req.encode(header=True))

    def _fields(self, struct_field: StructField, version: int, flexible: bool) -> dict[str, Any]:
        vals = {}
        for f in struct_field._fields:
            if not f.for_version_q(version):
                continue
            if f.tagged_field_q(version) and self.rng.random() < 0.7:
                continue  # a tagged field is usually absent
            vals[f.name] = self._value(f, version, flexible)
        return vals

    def _value(self, f, version: int, flexible: bool):
        rng = self.rng
        if isinstance(f, ArrayField):
            if rng.random() < self.null_rate or (f.nullable_for_version_q(version) and rng.random() < 0.15):
                return None
            n = rng.choice((0, 1, 1, 1, 2, 3))
            if f.is_struct_array():
                inner = f.array_of
                return [inner.data_class(version=version, **self._fields(inner, version, flexible))
                        for _ in range(n)]
            return [self._simple(f.array_of.type_str, f.name, version, flexible, element=True) for _ in range(n)]
        if isinstance(f, StructField):
            if f.nullable_for_version_q(version) and rng.random() < 0.3:
                return None
            return f.data_class(version=version, **self._fields(f, version, flexible))
        if f.type_str in ("string", "bytes", "records") and (
                rng.random() < self.null_rate or (f.nullable_for_version_q(version) and rng.random() < 0.15)):
            return None
        return self._simple(f.type_str, f.name, version, flexible)

    def _simple(self, type_str: str, name: str, version: int, flexible: bool, element: bool = False):
        rng = self.rng
        nm = self.names
        if type_str == "bool":
            return rng.random() < 0.5
        if type_str in INTS:
            lo, hi = INTS[type_str]
            r = rng.random()
            if "partition" in name and ("count" not in name) and r < 0.6:
                return rng.choice((0, 1, 0, -1, 2))
            if ("num_partitions" in name or name == "count") and r < 0.8:
                return rng.choice((-1, 0, 1, 2, 3, 5, -7, 100))
            if "replication" in name and r < 0.8:
                return rng.choice((-1, 0, 1, 2, 3))
            if "timeout" in name and r < 0.6:
                return rng.choice((-1, 0, 10, 6000, 10000, 30000, 300000, 1800001))
            if ("max_wait" in name or name == "min_bytes") and r < 0.8:
                return rng.choice((0, 0, 1, 100, -1))
            if ("offset" in name or "epoch" in name or "generation" in name) and r < 0.6:
                return rng.choice((-2, -1, 0, 1, 2, 5, 1000))
            if r < 0.5:
                return max(lo, min(hi, rng.choice(EDGE_INTS)))
            return rng.randint(lo, hi)
        if type_str == "float64":
            return rng.choice((0.0, -1.0, 1e300, float("inf"), float("nan")))
        if type_str == "uuid":
            r = rng.random()
            if r < 0.4 and nm.topic_ids:
                return rng.choice(nm.topic_ids)
            return None if r < 0.7 else uuid.UUID(int=rng.getrandbits(128))
        if type_str == "string":
            return self._string(name, flexible)
        if type_str in ("bytes", "records"):
            if type_str == "records" or rng.random() < 0.3:
                return self._records()
            return bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 40)))
        raise ValueError(type_str)

    def _string(self, name: str, flexible: bool) -> str:
        rng = self.rng
        nm = self.names
        r = rng.random()
        pools = []
        if "topic" in name or name in ("name", "resource_name", "topics"):
            pools.append(nm.topics)
        if "group" in name or name == "key" or name in ("coordinator_keys",):
            pools.append(nm.groups)
        if "member" in name or name in ("leader",):
            pools.append(nm.members or [""])
        if name in ("name", "config_names", "configuration_keys", "key_name"):
            pools.append(nm.configs)
        if name == "value":
            pools.append(CONFIG_VALUES)
        if "protocol" in name or name == "assignor":
            pools.append(["consumer", "range", "roundrobin", "cooperative-sticky", ""])
        if pools and r < 0.6:
            return rng.choice(rng.choice(pools))
        if r < 0.7:
            return rng.choice(("", ".", "..", "__consumer_offsets", "a" * 249, "a" * 250, "x/y", "é", "0",
                               "-1", "true", "1000", "consumer", "range", "producer", "compact,delete"))
        if r < 0.98:
            n = rng.randint(1, 24)
            return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789._-") for _ in range(n))
        if flexible and r < 0.99:
            return "L" * 40000  # longer than a Kafka string may be
        return "".join(chr(rng.randint(0x20, 0x2FFF)) for _ in range(rng.randint(1, 8)))

    def _records(self) -> bytes:
        from kafka.record.default_records import DefaultRecordBatchBuilder
        rng = self.rng
        b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                      producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
        for i in range(rng.randint(1, 3)):
            b.append(i, timestamp=rng.choice((None, 0, -5, 1_700_000_000_000)),
                     key=rng.choice((None, b"k", b"")), value=rng.choice((None, b"v" * rng.randint(0, 50))),
                     headers=[])
        data = bytes(b.build())
        if rng.random() < 0.3:  # a batch damaged after its CRC was computed
            m = bytearray(data)
            i = rng.randrange(len(m))
            m[i] = rng.getrandbits(8)
            data = bytes(m)
        return data


# -- broker state -------------------------------------------------------------------------------------------
def snapshot(broker, group_ids: Iterable[str] | None = None) -> dict:
    """What a refused request must not change: topics (ids, partitions, configs), the dynamic broker
    configs, log end offsets (not of __consumer_offsets, which the coordinator's timers write), and the
    groups. For a group request (`group_ids`: the groups it names) those groups whole: state, generation,
    protocol, members and committed offsets. For any other request (None) every group's committed offsets
    only: a group's membership, state and generation are its timers' too (a rebalance timeout ending a
    rebalance, a session expiring), and they run while such a request waits, e.g. an
    IncrementalAlterConfigs for its metadata write or a Produce for its append."""
    md = broker.metadata
    topics = {name: (str(t.topic_id), len(t.partitions), tuple(sorted(t.configs.items())))
              for name, t in md.topics.items()}
    logs = {f"{k[0]}-{k[1]}": lg.log_end_offset for k, lg in broker.state.replicas.logs.items()
            if k[0] != INTERNAL_OFFSETS}
    groups = {}
    wanted = None if group_ids is None else set(group_ids)
    for shard in list(broker.groups.coordinator.shards.values()):
        for gid, g in shard.groups.items():
            if wanted is not None and gid not in wanted:
                continue
            offsets = tuple(sorted((f"{k[0]}-{k[1]}", e.offset, e.leader_epoch, e.metadata)
                                   for k, e in g.offsets.items()))
            if wanted is None:
                if offsets:  # (a group without offsets may go with its last member: a timer's doing)
                    groups[gid] = offsets
                continue
            groups[gid] = (g.state.value, g.generation, g.protocol_type, g.protocol_name, g.leader_id,
                           tuple(sorted(g.members)), tuple(sorted(g.static_members.items())), offsets)
    return {"topics": topics, "dynamic": tuple(sorted(broker.config.dynamic.items())), "logs": logs,
            "groups": groups}


def diff(before: dict, after: dict) -> str:
    out = []
    for part in before:
        b, a = before[part], after[part]
        if b == a:
            continue
        if isinstance(b, dict):
            for k in sorted(set(b) | set(a)):
                if b.get(k) != a.get(k):
                    out.append(f"{part}[{k}]: {b.get(k)!r} -> {a.get(k)!r}")
        else:
            out.append(f"{part}: {b!r} -> {a!r}")
    return "; ".join(out)[:2000]


def _error_codes(obj, out: list) -> None:
    if isinstance(obj, list):
        for x in obj:
            _error_codes(x, out)
        return
    st = getattr(obj, "_struct", None)
    if st is None:
        return
    for f in st._fields:
        if obj.version is not None and not f.for_version_q(obj.version):
            continue
        v = getattr(obj, f.name, None)
        if f.name == "error_code" and isinstance(v, int):
            out.append(v)
        elif isinstance(v, list) or hasattr(v, "_struct"):
            _error_codes(v, out)


def response_error_codes(api: int, version: int, response: bytes) -> list[int]:
    """Every error_code in a response frame (decoded with the client's classes)."""
    resp = registry.response_class(api).decode(response[4:], version=version, header=True)
    codes: list[int] = []
    _error_codes(resp, codes)
    return codes


# Error answers after which Kafka has changed state on purpose: JoinGroup MEMBER_ID_REQUIRED (KIP-394)
# creates the group and a pending member.
STATEFUL_ERRORS = {11: {79}}
JOIN_GROUP = 11
NEW_EMPTY_GROUP = ("Empty", 0, None, None, None, (), (), ())


def _allowed(api: int, before: dict, after: dict) -> bool:
    """Kafka's own state changes behind an error answer. A JoinGroup from an unknown member creates the
    group before it checks the protocols (GroupMetadataManager.classicGroupJoinToClassicGroup: created by
    getOrMaybeCreateClassicGroup, then INCONSISTENT_GROUP_PROTOCOL / GROUP_MAX_SIZE_REACHED, and the new
    empty group is kept)."""
    if api != JOIN_GROUP:
        return False
    new = {k: v for k, v in after["groups"].items() if k not in before["groups"]}
    if not new or any(v != NEW_EMPTY_GROUP for v in new.values()):
        return False
    rest = dict(after, groups={k: v for k, v in after["groups"].items() if k in before["groups"]})
    return rest == before


# -- running frames -----------------------------------------------------------------------------------------
@dataclass
class Outcome:
    kind: str  # answered | refused | closed | pending | skipped | crash | changed | slow
    api: int
    version: int
    detail: str = ""


def _group_ids_of(api: int, frame: bytes) -> list[str] | None:
    """Groups a group request names (the state compared for it: other groups' timers run meanwhile)."""
    try:
        req_cls, _ = registry.classes(api)
        body = req_cls.decode(frame, version=struct.unpack_from(">h", frame, 2)[0], header=True)
    except Exception:
        return None
    ids = []
    for attr in ("group_id", "key"):
        v = getattr(body, attr, None)
        if isinstance(v, str):
            ids.append(v)
    for attr in ("groups", "groups_names", "coordinator_keys"):
        for g in getattr(body, attr, None) or []:
            ids.append(g if isinstance(g, str) else getattr(g, "group_id", None))
    return [i for i in ids if i is not None]


def _too_many_partitions(api: int, frame: bytes) -> bool:
    if api not in (CREATE_TOPICS, CREATE_PARTITIONS):
        return False
    try:
        req_cls, _ = registry.classes(api)
        body = req_cls.decode(frame, version=struct.unpack_from(">h", frame, 2)[0], header=True)
        if api == CREATE_TOPICS:
            return any(t.num_partitions > PARTITIONS_GUARD or len(t.assignments or ()) > PARTITIONS_GUARD
                       for t in body.topics or ())
        return any(t.count > PARTITIONS_GUARD for t in body.topics or ())
    except Exception:
        return False


GROUP_APIS = {11, 12, 13, 14, 8, 9, 15, 16, 42, 47, 10}
PRODUCE, FETCH, SYNC_GROUP = 0, 1, 14


def may_wait(api: int, frame: bytes) -> str | None:
    """Why this request may be parked past the runner's time limit, read from the request itself (what Kafka
    parks in a purgatory); None: it must be answered at once, and one that is not is a slow handler.

    - Fetch (DelayedFetch): max_wait_ms > 0, min_bytes > 0, at least one partition, a full fetch (session epoch
      0 or -1; an incremental one names a session the fuzz never learnt: answered at once with
      FETCH_SESSION_ID_NOT_FOUND, as Kafka does, a Fetch naming no partition too);
    - Produce (DelayedProduce): acks=-1 with timeout_ms > 0 and at least one partition;
    - JoinGroup (DelayedJoin): into a named group, with protocols;
    - SyncGroup: a follower waits for the leader's assignment."""
    if api not in (PRODUCE, FETCH, JOIN_GROUP, SYNC_GROUP):
        return None
    try:
        req_cls, _ = registry.classes(api)
        body = req_cls.decode(frame, version=struct.unpack_from(">h", frame, 2)[0], header=True)
    except Exception:
        return None  # refused while decoding: at once
    if api == FETCH:
        parts = sum(len(t.partitions or ()) for t in body.topics or ())
        full = getattr(body, "session_epoch", -1) in (0, -1)
        if body.max_wait_ms > 0 and body.min_bytes > 0 and full and parts:
            return f"a long-poll Fetch (max_wait_ms={body.max_wait_ms}, min_bytes={body.min_bytes})"
    elif api == PRODUCE:
        parts = sum(len(t.partition_data or ()) for t in body.topic_data or ())
        if body.acks == -1 and body.timeout_ms > 0 and parts:
            return f"a Produce with acks=-1 (timeout_ms={body.timeout_ms})"
    elif api == JOIN_GROUP:
        if body.group_id and body.protocols:
            return "a JoinGroup (waits for the rebalance)"
    elif api == SYNC_GROUP:
        if body.group_id and body.member_id:
            return "a SyncGroup (a follower waits for the leader's assignment)"
    return None


class FrameRunner:
    """Runs frames through a broker's router in its own Trio loop (call `run` from inside it)."""

    def __init__(self, broker, *, time_limit: float = 0.05, slow_limit: float = 2.0, check_state: bool = True):
        """time_limit: how long a request that may wait (`may_wait`) is given before it is cancelled and
        counted pending. slow_limit: how long any other request may take (waiting, or holding the loop)
        before it is a failure, "slow api N vV" -- a bound for a shared CI machine, not for a request that
        waits on purpose, which never gets that far."""
        self.broker = broker
        self.time_limit = time_limit
        self.slow_limit = slow_limit
        self.check_state = check_state
        self.log = structlog.get_logger("kafkite.fuzz").bind(peer="fuzz")
        self.counts: Counter = Counter()
        self.by_api: Counter = Counter()  # (api, outcome kind)
        self.crashes: Counter = Counter()
        self.examples: dict[str, str] = {}

    async def run(self, frame: bytes) -> Outcome:
        api, version = struct.unpack_from(">hh", frame, 0) if len(frame) >= 4 else (-1, -1)
        if _too_many_partitions(api, frame):
            return self._count(Outcome("skipped", api, version, "partitions guard"))
        groups = _group_ids_of(api, frame) if api in GROUP_APIS else None
        before = snapshot(self.broker, groups) if self.check_state else None
        waits_on_purpose = may_wait(api, frame)
        out: Any = None
        started = time.perf_counter()
        with trio.move_on_after(self.time_limit if waits_on_purpose else self.slow_limit) as scope:
            try:
                out, waits = await self.broker.router.dispatch(frame, "127.0.0.1:1", self.log)
                for wait in waits:
                    await wait()
                if callable(out):  # encoded once the waits are over
                    out = out()
            except CloseConnection as exc:
                return self._count(self._after(Outcome("closed", api, version, str(exc)), before, groups))
            except Exception as exc:  # what serve_connection would log as connection.error
                tb = traceback.extract_tb(exc.__traceback__)[-1]
                kind = f"{type(exc).__name__} in {Path(tb.filename).name}:{tb.lineno} ({tb.name})"
                self.crashes[kind] += 1
                self.examples.setdefault(kind, f"api {api} v{version}: {exc!r} frame={frame.hex()}")
                self._after(Outcome("crash", api, version, kind), before, groups)  # half applied?
                return self._count(Outcome("crash", api, version, kind))
        elapsed = time.perf_counter() - started
        if scope.cancelled_caught and waits_on_purpose:
            return self._count(Outcome("pending", api, version, waits_on_purpose))
        if scope.cancelled_caught or elapsed > self.slow_limit:
            return self._slow(api, version, frame, elapsed, still_waiting=scope.cancelled_caught)
        if out is None:
            return self._count(Outcome("answered", api, version))
        response = b"".join(bytes(p) for p in out) if isinstance(out, list) else bytes(out)
        if api == 18:  # ApiVersions: never changes state; a bad one is answered at v0 (KIP-511)
            return self._count(Outcome("answered", api, version))
        try:
            codes = response_error_codes(api, version, response)
        except Exception as exc:  # a client could not read this answer
            kind = f"undecodable response api {api}: {type(exc).__name__}"
            self.crashes[kind] += 1
            self.examples.setdefault(kind, f"v{version} {exc!r} frame={frame.hex()}")
            return self._count(Outcome("crash", api, version, kind))
        if codes and all(codes) and not set(codes) & STATEFUL_ERRORS.get(api, set()):
            return self._count(self._after(Outcome("refused", api, version), before, groups))
        return self._count(Outcome("answered", api, version))

    def _after(self, o: Outcome, before, groups) -> Outcome:
        if before is None:
            return o
        after = snapshot(self.broker, groups)
        if after != before and not _allowed(o.api, before, after):
            kind = f"state changed by a refused api {o.api}"
            self.crashes[kind] += 1
            self.examples.setdefault(kind, f"v{o.version} {o.kind}: {diff(before, after)}")
            return Outcome("changed", o.api, o.version, diff(before, after))
        return o

    def _slow(self, api: int, version: int, frame: bytes, elapsed: float, still_waiting: bool) -> Outcome:
        """A request that does not wait on purpose and was not answered within slow_limit: a bug."""
        try:
            name = registry.classes(api)[0].__name__
        except Exception:
            name = "?"
        kind = f"slow api {api} ({name}) v{version}"
        self.crashes[kind] += 1
        how = f"still waiting after {elapsed:.2f} s (cancelled)" if still_waiting else f"answered after {elapsed:.2f} s"
        self.examples.setdefault(kind, f"{how}, and it is not a request that may wait; frame={frame.hex()}")
        return self._count(Outcome("slow", api, version, how))

    def _count(self, o: Outcome) -> Outcome:
        self.counts[o.kind] += 1
        self.by_api[(o.api, o.kind)] += 1
        return o

    def refresh_names(self, names: Names) -> None:
        md = self.broker.metadata
        names.topics = [t for t in sorted(md.topics) if t != INTERNAL_OFFSETS][:50] or ["fuzz-a"]
        names.topic_ids = [t.topic_id for t in list(md.topics.values())[:50]]
        gids, members = [], []
        for shard in list(self.broker.groups.coordinator.shards.values()):
            for gid, g in list(shard.groups.items())[:20]:
                gids.append(gid)
                members.extend(list(g.members)[:3])
                members.extend(list(g.pending_members)[:2])
        names.groups = gids[:20] or ["fuzz-group"]
        names.members = members[:20]


def served() -> list[tuple[int, int]]:
    return [(api, v) for api, (lo, hi) in sorted(supported().items()) for v in range(lo, hi + 1)]


async def seed(broker, *, deadline_s: float = 20.0) -> None:
    """Topics fuzz-a (3 partitions) and fuzz-b with a few records, and a group fuzz-group with committed
    offsets: something for fuzzed requests to find."""
    from kafka.protocol.consumer import OffsetCommitRequest
    from kafka.protocol.metadata import FindCoordinatorRequest
    from kafka.protocol.producer import ProduceRequest

    def frame(req, version: int) -> bytes:
        req.API_VERSION = version
        req.with_header(correlation_id=1, client_id="fuzz-seed")
        return bytes(req.encode(header=True))

    async def call(req, version: int):
        out, waits = await broker.router.dispatch(frame(req, version), "127.0.0.1:1", structlog.get_logger("fuzz"))
        for w in waits:
            await w()
        resp = registry.response_class(req.API_KEY).decode(bytes(out)[4:], version=version, header=True)
        codes: list[int] = []
        _error_codes(resp, codes)
        return codes

    for name, n in (("fuzz-a", 3), ("fuzz-b", 1)):
        if broker.metadata.topic(name) is None:
            await broker.admin.create_topic(name, n, 1, None, {})
    gen = RequestGenerator(random.Random(0))
    T = ProduceRequest.TopicProduceData
    P = T.PartitionProduceData
    for _ in range(3):
        await call(ProduceRequest(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
            T(name="fuzz-a", partition_data=[P(index=i, records=gen._records()) for i in range(3)])]), 9)
    await call(FindCoordinatorRequest(key="fuzz-group", key_type=0), 1)
    OT = OffsetCommitRequest.OffsetCommitRequestTopic
    OP = OT.OffsetCommitRequestPartition
    commit = OffsetCommitRequest(group_id="fuzz-group", generation_id_or_member_epoch=-1, member_id="",
                                 retention_time_ms=-1, topics=[OT(name="fuzz-a", partitions=[
                                     OP(partition_index=0, committed_offset=1, committed_metadata="")])])
    with trio.move_on_after(deadline_s):
        while any(await call(commit, 2)):
            await trio.sleep(0.05)
