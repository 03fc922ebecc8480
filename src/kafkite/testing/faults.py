"""Fault injection for the in-process cluster: error answers and latency, per API and broker; and
disk faults for a broker running in this process (`DiskFaults`)."""
from __future__ import annotations

import builtins
import errno
import io
import os
import threading
import time
import collections

import trio
from kafka.protocol.api_key import ApiKey

from ..wire import registry
from ..wire.errors import kafka_name


class Faults:
    REQUEST_LOG_SIZE = 10_000  # the newest requests kept in `requests` (a client's, not replication's)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._errors: list[list] = []  # [api_key, error, remaining, broker_id]
        self._latency_ms: dict[int, int] = {}
        self._drops: list[list] = []  # [api_key, remaining, broker_id, skip]
        self.requests: collections.deque[dict] = collections.deque(maxlen=self.REQUEST_LOG_SIZE)
        self._seq = 0

    def clear(self) -> None:
        """Every error, drop and latency removed (the request log stays: `clear_requests`)."""
        with self._lock:
            self._errors, self._drops, self._latency_ms = [], [], {}

    def clear_requests(self) -> None:
        with self._lock:
            self.requests.clear()

    def state(self) -> dict:
        """The faults in force, as JSON-able data."""
        with self._lock:
            return {"errors": [{"api": ApiKey(a).name, "error": e, "remaining": n, "broker": b}
                               for a, e, n, b in self._errors if n > 0],
                    "drops": [{"api": ApiKey(a).name, "remaining": n, "broker": b, "skip": k}
                              for a, n, b, k in self._drops if n > 0],
                    "latency_ms": {str(b): ms for b, ms in self._latency_ms.items() if ms}}

    def _record(self, ctx) -> dict:
        req = ctx.request
        with self._lock:
            self._seq += 1
            entry = {"seq": self._seq, "time_ms": int(time.time() * 1000), "broker": ctx.broker.node_id,
                     "api": req.api_name, "api_key": req.api_key, "version": req.api_version,
                     "correlation_id": req.correlation_id, "client_id": req.client_id, "error": None}
            self.requests.append(entry)
        return entry

    def inject_error(self, api, error: int, *, count: int = 1, broker_id: int | None = None) -> None:
        key = ApiKey[api] if isinstance(api, str) else int(api)
        with self._lock:
            self._errors.append([int(key), int(error), count, broker_id])

    def drop_response(self, api, *, count: int = 1, broker_id: int | None = None, skip: int = 0) -> None:
        """Process the next `count` requests of `api` (after `skip` more), then cut the connection instead of
        answering: the client cannot know the request took effect and retries it."""
        key = ApiKey[api] if isinstance(api, str) else int(api)
        with self._lock:
            self._drops.append([int(key), count, broker_id, skip])

    def should_drop(self, ctx) -> bool:
        with self._lock:
            for entry in self._drops:
                api, remaining, broker_id, skip = entry
                if api == ctx.request.api_key and remaining > 0 and broker_id in (None, ctx.broker.node_id):
                    if skip > 0:
                        entry[3] -= 1
                        return False
                    entry[1] -= 1
                    return True
        return False

    def set_latency(self, broker_id: int, ms: int) -> None:
        with self._lock:
            self._latency_ms[broker_id] = ms

    async def before(self, ctx) -> None:
        ctx.fault_log_entry = self._record(ctx)
        ms = self._latency_ms.get(ctx.broker.node_id, 0)
        if ms > 0:
            await trio.sleep(ms / 1000)

    def injected_error(self, ctx):
        """A response carrying the injected error code, or None."""
        req = ctx.request
        with self._lock:
            for entry in self._errors:
                api, err, remaining, broker_id = entry
                if api == req.api_key and remaining > 0 and broker_id in (None, ctx.broker.node_id):
                    entry[2] -= 1
                    break
            else:
                return None
            self._errors = [e for e in self._errors if e[2] > 0]
        entry = getattr(ctx, "fault_log_entry", None)
        if entry is not None:
            entry["error"] = kafka_name(err)
            entry["injected"] = True
        return error_response(req, err)


def error_response(req, error: int):
    """Kafka's "every partition / the whole request failed with this error" response for a request."""
    cls = registry.response_class(req.api_key)
    body = req.body
    v = req.api_version
    k = req.api_key
    if k == ApiKey.Produce:
        T = cls.TopicProduceResponse
        return cls(version=v, responses=[T(name=t.name, partition_responses=[
            T.PartitionProduceResponse(index=p.index, error_code=error, base_offset=-1, log_append_time_ms=-1,
                                       log_start_offset=-1, record_errors=[]) for p in t.partition_data])
            for t in body.topic_data], throttle_time_ms=0)
    if k == ApiKey.Fetch:
        T = cls.FetchableTopicResponse
        return cls(version=v, throttle_time_ms=0, error_code=0, session_id=0, responses=[T(
            topic=t.topic, topic_id=t.topic_id, partitions=[T.PartitionData(
                partition_index=p.partition, error_code=error, high_watermark=-1, last_stable_offset=-1,
                log_start_offset=-1, records=b"") for p in t.partitions]) for t in body.topics])
    if k == ApiKey.Metadata:
        T = cls.MetadataResponseTopic
        return cls(version=v, throttle_time_ms=0, brokers=[], controller_id=-1,
                   topics=[T(error_code=error, name=t.name, partitions=[]) for t in (body.topics or [])])
    # APIs with a top-level error code
    fields = cls.fields
    kwargs = {"version": v}
    if "error_code" in fields:
        kwargs["error_code"] = error
    if "throttle_time_ms" in fields:
        kwargs["throttle_time_ms"] = 0
    if "coordinators" in fields and getattr(body, "coordinator_keys", None):
        C = cls.Coordinator
        kwargs["coordinators"] = [C(key=key, node_id=-1, host="", port=-1, error_code=error)
                                  for key in body.coordinator_keys]
    return cls(**kwargs)


class DiskFaults:
    """Make this process's writes under `directory` fail as a full disk (ENOSPC, the default) or a
    failing one (EIO) makes them fail, while active: `os.pwrite`, `os.write`, `os.fsync`,
    `os.fdatasync` on files there, `os.mkdir` there and `open()` there for writing raise OSError.
    Reads, renames and truncation still work (they need no space). For brokers in this process
    (BrokerThread, KafkiteCluster): every thread sees the faults.

        with DiskFaults(data_dir) as disk:   # the disk is full from here
            ...
            disk.heal()                      # space returns
    """

    OPS = ("write", "fsync", "open", "mkdir")

    def __init__(self, directory, error: int = errno.ENOSPC, *, ops=OPS, active: bool = True) -> None:
        """`ops`: which calls fail -- "write" (os.pwrite, os.write), "fsync" (os.fsync, os.fdatasync),
        "open" (open() for writing), "mkdir"; e.g. ops=("fsync",) with EIO: data reaches the page cache,
        the fsync fails."""
        unknown = set(ops) - set(self.OPS)
        if unknown:
            raise ValueError(f"unknown disk operations {sorted(unknown)}; known: {self.OPS}")
        self.directory = os.path.realpath(directory)
        self.error = error
        self.ops = frozenset(ops)
        self.active = active
        self.failed_calls = 0
        self._saved: list[tuple[object, str, object]] = []

    def fail(self, error: int | None = None) -> None:
        if error is not None:
            self.error = error
        self.active = True

    def heal(self) -> None:
        self.active = False

    def _mine(self, path) -> str | None:
        """The resolved path of `path` (a path or a file descriptor) when it is under the directory."""
        try:
            p = os.readlink(f"/proc/self/fd/{path}") if isinstance(path, int) else os.path.realpath(os.fspath(path))
        except (OSError, TypeError):
            return None
        return p if p == self.directory or p.startswith(self.directory + os.sep) else None

    def _raise(self, what: str, path: str) -> None:
        self.failed_calls += 1
        raise OSError(self.error, f"{os.strerror(self.error)} (injected: {what})", path)

    def _by_fd(self, name: str, op: str):
        real = getattr(os, name)

        def fake(fd, *a, **kw):
            path = self.active and op in self.ops and self._mine(fd)
            if path:
                self._raise(name, path)
            return real(fd, *a, **kw)
        return fake

    def __enter__(self) -> "DiskFaults":
        real_open, real_mkdir = builtins.open, os.mkdir

        def fake_open(file, mode="r", *a, **kw):
            path = self.active and "open" in self.ops and any(c in mode for c in "wax+") and self._mine(file)
            if path:
                self._raise("open", path)
            return real_open(file, mode, *a, **kw)

        def fake_mkdir(path, *a, **kw):
            mine = self.active and "mkdir" in self.ops and self._mine(path)
            if mine and not os.path.isdir(mine):
                self._raise("mkdir", mine)
            return real_mkdir(path, *a, **kw)
        patches = [(builtins, "open", fake_open), (io, "open", fake_open), (os, "mkdir", fake_mkdir)]
        patches += [(os, name, self._by_fd(name, op)) for name, op in
                    (("pwrite", "write"), ("write", "write"), ("fsync", "fsync"), ("fdatasync", "fsync"))]
        for mod, name, fake in patches:
            self._saved.append((mod, name, getattr(mod, name)))
            setattr(mod, name, fake)
        return self

    def __exit__(self, *exc) -> None:
        while self._saved:
            mod, name, real = self._saved.pop()
            setattr(mod, name, real)
