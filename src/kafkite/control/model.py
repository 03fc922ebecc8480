"""The control model: every test control of a broker process is a value here, and the request path consults it
(server/router.py's dispatch calls `before` and `after`). The in-process API (KafkiteCluster.faults,
BrokerThread.faults), HTTP (control/routes.py) and the CLI (control/cli.py) are three doors onto one `Faults`.

  errors    answer an API's requests with errors, a sequence answered in turn (librdkafka's
            push_request_errors), filtered by broker, API version, client id, and for Produce, Fetch,
            ListOffsets and OffsetForLeaderEpoch by topic/partition (only that partition answers the
            error, the others are served); NONE in a sequence lets that request through; count -1 keeps
            the rule until cleared
  drops     cut the connection after a request was handled (the client cannot know it took effect), or
            before it is handled
  latency   delay requests, per broker, per API, or both (the delays that match add up)
  holds     hold an API's requests until released (kfake's SleepControl): the held request waits on its
            own connection's task; the event loop and the other connections go on
  versions  cap the versions advertised (ApiVersions) and served per API, or remove an API: a request
            above the cap closes the connection as Kafka does for an unsupported version, except
            ApiVersions, answered per KIP-511
  requests  the log of the newest client requests (what was asked, what was injected, what was held)

Thread safety: the test thread (in-process API) and the brokers' Trio loop both use it, under one lock; a
held request's task is woken through its own loop's token, from whichever thread releases it.
"""
from __future__ import annotations

import collections
import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import trio
from kafka.protocol.api_key import ApiKey

from ..wire.errors import E, kafka_name
from . import responses

# the APIs per-partition errors apply to (kfake's Fault: also ShareFetch, ShareAcknowledge, not served here), and
# Metadata, whose topic (or partition) entries carry the error, and AddPartitionsToTxn, whose topic's partitions do
# (the others answer OPERATION_NOT_ATTEMPTED) (librdkafka's rd_kafka_mock_topic_set_error)
PARTITION_APIS = (ApiKey.Produce, ApiKey.Fetch, ApiKey.ListOffsets, ApiKey.OffsetForLeaderEpoch, ApiKey.Metadata,
                  ApiKey.AddPartitionsToTxn)


def api_key(api) -> int:
    return int(ApiKey[api]) if isinstance(api, str) else int(ApiKey(int(api)))


def _name(key: int) -> str:
    return ApiKey(key).name


def error_code(error) -> int:
    """An error name (Kafka's: NOT_LEADER_OR_FOLLOWER, NONE, ...) or code -> the code."""
    if isinstance(error, str):
        return 0 if error in ("NONE", "NO_ERROR") else int(E[error])
    return int(E(int(error)))


def error_name(code: int) -> str:
    return "NONE" if code == 0 else kafka_name(code)


@dataclass
class ErrorRule:
    id: int
    api: int
    errors: list[int]          # answered in turn
    remaining: int             # answers left; -1: until cleared
    broker: int | None = None
    version: int | None = None
    client_id: str | None = None
    topic: str | None = None
    partition: int | None = None
    fired: int = 0             # the requests it answered (NONE included)
    rtts: list[int] = field(default_factory=list)  # ms each answer waits, in turn with errors (push_request_error_rtts)
    _next: int = 0

    def matches(self, req, broker_id: int) -> bool:
        return (self.remaining != 0 and self.api == req.api_key and self.broker in (None, broker_id)
                and self.version in (None, req.api_version) and self.client_id in (None, req.client_id))

    def take(self) -> tuple[int, int]:
        """-> (the error, the ms its answer waits)."""
        i = self._next % len(self.errors)
        self._next += 1
        self.fired += 1
        if self.remaining > 0:
            self.remaining -= 1
        return self.errors[i], self.rtts[i] if self.rtts else 0

    def as_json(self) -> dict:
        n = len(self.errors)  # the errors still to answer, in order (one round of them when until cleared)
        upcoming = [(self._next + i) % n for i in range(n if self.remaining == -1 else self.remaining)]
        return {"id": self.id, "api": _name(self.api), "errors": [error_name(self.errors[i]) for i in upcoming],
                "rtts": [self.rtts[i] for i in upcoming] if self.rtts else None,
                "remaining": self.remaining, "broker": self.broker, "version": self.version,
                "client_id": self.client_id, "topic": self.topic, "partition": self.partition, "fired": self.fired}


@dataclass
class DropRule:
    id: int
    api: int
    remaining: int             # -1: until cleared
    broker: int | None = None
    skip: int = 0
    handled: bool = True       # cut after the request took effect (True) or before it is handled (False)

    def as_json(self) -> dict:
        return {"id": self.id, "api": _name(self.api), "remaining": self.remaining, "broker": self.broker,
                "skip": self.skip, "handled": self.handled}


@dataclass
class _Held:
    token: trio.lowlevel.TrioToken
    event: trio.Event
    entry: dict


@dataclass
class Hold:
    id: int
    api: int
    broker: int | None = None
    client_id: str | None = None
    waiting: list[_Held] = field(default_factory=list)

    def matches(self, req, broker_id: int) -> bool:
        return self.api == req.api_key and self.broker in (None, broker_id) and self.client_id in (None,
                                                                                                  req.client_id)

    def as_json(self) -> dict:
        return {"id": self.id, "api": _name(self.api), "broker": self.broker, "client_id": self.client_id,
                "held": [w.entry["seq"] for w in self.waiting]}


def _wake(waiters: list[_Held]) -> None:
    for w in waiters:
        try:
            w.token.run_sync_soon(w.event.set)
        except trio.RunFinishedError:  # that loop is gone, and the request with it
            pass


class Faults:
    REQUEST_LOG_SIZE = 10_000  # the newest requests kept in `requests` (a client's, not replication's)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._errors: list[ErrorRule] = []
        self._drops: list[DropRule] = []
        self._latency: dict[tuple[int | None, int | None], int] = {}  # (broker, api key) -> ms
        self._holds: list[Hold] = []
        self._versions: dict[tuple[int | None, int], tuple[int, int] | None] = {}  # None: removed
        self._followers: dict[tuple[str, int], int] = {}  # (topic, partition) -> the preferred read replica
        self._leader_pushes: dict[tuple[str, int], list[tuple[int, int]]] = {}  # -> (leader, epoch) in turn
        self.requests: collections.deque[dict] = collections.deque(maxlen=self.REQUEST_LOG_SIZE)
        self._seq = 0

    # -- the whole model ------------------------------------------------------------------------
    def clear(self) -> None:
        """Every error, drop, latency, hold (its held requests released) and version cap removed; the
        request log stays (`clear_requests`, or `reset` for both)."""
        with self._lock:
            held = [w for h in self._holds for w in h.waiting]
            self._errors, self._drops, self._latency, self._holds, self._versions = [], [], {}, [], {}
            self._followers, self._leader_pushes = {}, {}
        _wake(held)

    def reset(self) -> None:
        self.clear()
        self.clear_requests()

    def clear_requests(self) -> None:
        with self._lock:
            self.requests.clear()

    def state(self) -> dict:
        """The controls in force, as JSON-able data."""
        with self._lock:
            return {"errors": [r.as_json() for r in self._errors if r.remaining],
                    "drops": [d.as_json() for d in self._drops if d.remaining],
                    "latency": [{"broker": b, "api": None if a is None else _name(a), "ms": ms}
                                for (b, a), ms in self._latency.items()],
                    "holds": [h.as_json() for h in self._holds],
                    "versions": [{"broker": b, "api": _name(a), "removed": r is None,
                                  "min_version": None if r is None else r[0],
                                  "max_version": None if r is None else r[1]}
                                 for (b, a), r in self._versions.items()],
                    "followers": [{"topic": t, "partition": p, "broker": b}
                                  for (t, p), b in sorted(self._followers.items())],
                    "metadata_leaders": [{"topic": t, "partition": p, "leader": lead, "leader_epoch": e}
                                         for (t, p), q in sorted(self._leader_pushes.items()) for lead, e in q]}

    # -- the follower consumers are sent to (librdkafka's mock partition_set_follower) -----------------
    def set_follower(self, topic: str, partition: int, broker_id: int | None) -> None:
        """The partition's leader answers every consumer Fetch (v11+) with `broker_id` as its preferred read
        replica (KIP-392) and no records, whatever the client's rack, so the consumer fetches from that replica,
        which serves its own copy up to its high watermark; None: no longer (the replica selector chooses)."""
        with self._lock:
            if broker_id is None:
                self._followers.pop((topic, partition), None)
            else:
                self._followers[(topic, partition)] = broker_id

    def preferred_follower(self, topic: str, partition: int) -> int | None:
        return self._followers.get((topic, partition)) if self._followers else None

    # -- a leader Metadata answers, in turn (librdkafka's mock partition_push_leader_response) ---------------
    def push_metadata_leader(self, topic: str, partition: int, leader_id: int, leader_epoch: int,
                             count: int = 1) -> None:
        """The next `count` Metadata answers that list the partition name `leader_id` at `leader_epoch` as its
        leader (stale or made-up metadata, one answer each, in the order pushed); the partition itself is unchanged."""
        with self._lock:
            self._leader_pushes.setdefault((topic, partition), []).extend([(leader_id, leader_epoch)] * count)

    def clear_metadata_leaders(self) -> None:
        with self._lock:
            self._leader_pushes = {}

    def _pushed_leaders(self, response) -> None:
        with self._lock:
            for t in response.topics:
                for p in t.partitions or ():
                    q = self._leader_pushes.get((t.name, p.partition_index))
                    if q:
                        p.leader_id, leader_epoch = q.pop(0)
                        if hasattr(p, "leader_epoch"):
                            p.leader_epoch = leader_epoch
                        if not q:
                            del self._leader_pushes[(t.name, p.partition_index)]

    # -- errors ---------------------------------------------------------------------------------
    def inject_error(self, api, error, *, count: int = 1, broker_id: int | None = None, version: int | None = None,
                     client_id: str | None = None, topic: str | None = None, partition: int | None = None,
                     rtt_ms=None) -> int:
        """`error`: one code, or a sequence answered in turn (0, NONE, lets that request through). `rtt_ms`: the ms
        each answer waits first, one for all or one per error of the sequence (librdkafka's
        push_request_error_rtts: the request waits that long, then is answered its error, or handled). `count`: how
        many times (a sequence: how many times over); -1 until cleared. With `topic` (and `partition`, else
        every partition of it), Produce, Fetch, ListOffsets, OffsetForLeaderEpoch: those partitions answer the error,
        the others are served; Metadata: the topic's entry (with `partition`, that partition's) answers it, in the
        answers that list the topic (those naming it, and those for every topic); AddPartitionsToTxn: the requests
        adding the topic's partitions (or that one) answer it for them and OPERATION_NOT_ATTEMPTED for the others,
        none added, as Kafka answers when one partition fails. Returns the rule's id."""
        key = api_key(api)
        errors = [error_code(e) for e in error] if isinstance(error, (list, tuple)) else [error_code(error)]
        if not errors:
            raise ValueError("at least one error")
        rtts = [] if rtt_ms is None else list(rtt_ms) if isinstance(rtt_ms, (list, tuple)) else [rtt_ms] * len(errors)
        if rtts and len(rtts) != len(errors):
            raise ValueError(f"one rtt per error: {len(errors)} errors, {len(rtts)} rtts")
        if any(not isinstance(r, int) or isinstance(r, bool) or not 0 <= r <= 600_000 for r in rtts):
            raise ValueError("an rtt is 0..600000 ms")
        if count == 0 or count < -1:
            raise ValueError(f"count must be >= 1 or -1 (until cleared), got {count}")
        if (topic is not None or partition is not None) and key not in PARTITION_APIS:
            raise ValueError(f"per-partition errors are for {', '.join(_name(k) for k in PARTITION_APIS)}")
        if partition is not None and topic is None:
            raise ValueError("a partition needs its topic")
        with self._lock:
            rule = ErrorRule(next(self._ids), key, errors, -1 if count == -1 else count * len(errors), broker_id,
                             version, client_id, topic, partition, rtts=rtts)
            self._errors.append(rule)
        return rule.id

    def clear_errors(self, rule_id: int | None = None) -> None:
        """Every error rule removed, or the one with that id."""
        with self._lock:
            self._errors = [r for r in self._errors if rule_id not in (None, r.id)]

    def _take_error(self, ctx) -> tuple[int, ErrorRule, int] | None:
        req = ctx.request
        with self._lock:
            for rule in self._errors:
                if rule.matches(req, ctx.broker.node_id) and (
                        rule.topic is None or responses.names_partition(ctx, rule.topic, rule.partition)):
                    err, rtt = rule.take()
                    self._errors = [r for r in self._errors if r.remaining]
                    return err, rule, rtt
        return None

    # -- drops ----------------------------------------------------------------------------------
    def drop_response(self, api, *, count: int = 1, broker_id: int | None = None, skip: int = 0,
                      handled: bool = True) -> int:
        """Cut the connection of the next `count` requests of `api` (after `skip` more; -1: every one until
        cleared): after handling them (`handled`, the client cannot know the request took effect and retries
        it) or before."""
        key = api_key(api)
        if count == 0 or count < -1 or skip < 0:
            raise ValueError("count must be >= 1 or -1, skip >= 0")
        with self._lock:
            rule = DropRule(next(self._ids), key, count, broker_id, skip, handled)
            self._drops.append(rule)
        return rule.id

    def should_drop(self, ctx, *, handled: bool = True) -> bool:
        if handled and getattr(ctx, "close_after", False):  # an acks=0 Produce with a partition's error
            return True
        with self._lock:
            for d in self._drops:
                if (d.api == ctx.request.api_key and d.remaining and d.handled == handled
                        and d.broker in (None, ctx.broker.node_id)):
                    if d.skip > 0:
                        d.skip -= 1
                        return False
                    if d.remaining > 0:
                        d.remaining -= 1
                    self._drops = [x for x in self._drops if x.remaining]
                    if ctx.fault_log_entry is not None:
                        ctx.fault_log_entry["dropped"] = True
                    return True
        return False

    def clear_drops(self, rule_id: int | None = None) -> None:
        with self._lock:
            self._drops = [d for d in self._drops if rule_id not in (None, d.id)]

    # -- latency --------------------------------------------------------------------------------
    def set_latency(self, broker_id: int | None, ms: int, *, api=None) -> None:
        """Requests to `broker_id` (None: any), of `api` (None: any) wait `ms` first; 0 removes it. The
        delays matching a request add up."""
        if ms < 0:
            raise ValueError("ms must be >= 0")
        k = (broker_id, None if api is None else api_key(api))
        with self._lock:
            if ms:
                self._latency[k] = ms
            else:
                self._latency.pop(k, None)

    def clear_latency(self) -> None:
        with self._lock:
            self._latency = {}

    def _delay_ms(self, ctx) -> int:
        b, a = ctx.broker.node_id, ctx.request.api_key
        with self._lock:
            return sum(ms for (kb, ka), ms in self._latency.items() if kb in (None, b) and ka in (None, a))

    # -- holds ----------------------------------------------------------------------------------
    def hold(self, api, *, broker_id: int | None = None, client_id: str | None = None) -> int:
        """Requests of `api` wait, each on its own connection (that connection's later requests queue behind
        it, as on Kafka, whose connection takes one request at a time), until `release` or `unhold`."""
        with self._lock:
            h = Hold(next(self._ids), api_key(api), broker_id, client_id)
            self._holds.append(h)
        return h.id

    def holding(self, api=None) -> list[dict]:
        """The requests held now (their request-log entries), oldest first."""
        key = None if api is None else api_key(api)
        with self._lock:
            rows = [w.entry for h in self._holds if key in (None, h.api) for w in h.waiting]
        return sorted(rows, key=lambda e: e["seq"])

    def release(self, api=None, *, count: int | None = None, hold_id: int | None = None) -> int:
        """Let held requests go on (the oldest `count`, or all); the hold stays for later requests.
        Returns how many were released."""
        key = None if api is None else api_key(api)
        with self._lock:
            waiting = sorted(((w.entry["seq"], h, w) for h in self._holds if key in (None, h.api)
                              and hold_id in (None, h.id) for w in h.waiting), key=lambda x: x[0])
            chosen = waiting if count is None else waiting[:count]
            for _, h, w in chosen:
                h.waiting.remove(w)
        _wake([w for _, _, w in chosen])
        return len(chosen)

    def unhold(self, api=None, *, hold_id: int | None = None) -> int:
        """Remove the holds (of `api`, or that one, or all) and release what they held. Returns how many
        holds were removed."""
        key = None if api is None else api_key(api)
        with self._lock:
            gone = [h for h in self._holds if key in (None, h.api) and hold_id in (None, h.id)]
            self._holds = [h for h in self._holds if h not in gone]
        _wake([w for h in gone for w in h.waiting])
        return len(gone)

    async def _wait_if_held(self, ctx) -> None:
        with self._lock:
            h = next((h for h in self._holds if h.matches(ctx.request, ctx.broker.node_id)), None)
            if h is None:
                return
            w = _Held(trio.lowlevel.current_trio_token(), trio.Event(), ctx.fault_log_entry)
            h.waiting.append(w)
            w.entry["held"] = True
        try:
            await w.event.wait()
        finally:
            with self._lock:
                if w in h.waiting:  # cancelled while held (the connection or the broker went away)
                    h.waiting.remove(w)

    # -- versions -------------------------------------------------------------------------------
    def set_api_versions(self, api, *, max_version: int | None = None, min_version: int | None = None,
                         broker_id: int | None = None) -> None:
        """Serve and advertise only `min_version`..`max_version` of `api` (within what Kafkite implements)."""
        from ..server.router import supported
        key = api_key(api)
        if key not in supported():
            raise ValueError(f"{_name(key)} is not served to clients")
        lo, hi = supported()[key]
        lo = lo if min_version is None else max(lo, min_version)
        hi = hi if max_version is None else min(hi, max_version)
        if lo > hi:
            raise ValueError(f"{_name(key)} versions {min_version}..{max_version} leave none of {supported()[key]}"
                             " (remove the API instead)")
        with self._lock:
            self._versions[(broker_id, key)] = (lo, hi)

    def remove_api(self, api, *, broker_id: int | None = None) -> None:
        """The API is neither advertised nor served: its requests close the connection."""
        with self._lock:
            self._versions[(broker_id, api_key(api))] = None

    def clear_versions(self) -> None:
        with self._lock:
            self._versions = {}

    def advertised(self, broker_id: int, supported: dict[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
        """`supported` (api key -> (min, max)) with this broker's caps applied: what ApiVersions lists."""
        with self._lock:
            if not self._versions:
                return supported
            caps = dict(self._versions)
        out = {}
        for k, (lo, hi) in supported.items():
            for b in (None, broker_id):
                if (b, k) in caps:
                    cap = caps[(b, k)]
                    if cap is None:
                        lo, hi = 1, 0
                    else:
                        lo, hi = max(lo, cap[0]), min(hi, cap[1])
            if lo <= hi:
                out[k] = (lo, hi)
        return out

    # -- the request path -----------------------------------------------------------------------
    def _record(self, ctx) -> dict:
        req = ctx.request
        with self._lock:
            self._seq += 1
            entry = {"seq": self._seq, "time_ms": int(time.time() * 1000), "broker": ctx.broker.node_id,
                     "api": req.api_name, "api_key": req.api_key, "version": req.api_version,
                     "correlation_id": req.correlation_id, "client_id": req.client_id, "error": None}
            self.requests.append(entry)
        return entry

    async def before(self, ctx) -> Any:
        """Before the handler: the request logged; refused when its version is capped ("close", or for
        ApiVersions KIP-511's v0 answer as (response, 0)); held; delayed; cut ("close"); or answered with an
        injected error ((response, version)). None: handle it (after which `after` patches the response)."""
        req = ctx.request
        entry = ctx.fault_log_entry = self._record(ctx)
        if self._versions:
            lo_hi = self.advertised(ctx.broker.node_id, ctx.broker.router.supported()).get(req.api_key)
            if lo_hi is None or not lo_hi[0] <= req.api_version <= lo_hi[1]:
                entry["error"] = "UNSUPPORTED_VERSION"
                if req.api_key == ApiKey.ApiVersions:
                    return responses.unsupported_api_versions(self.advertised(
                        ctx.broker.node_id, ctx.broker.router.supported())), 0
                return "close"
        if self._holds:
            await self._wait_if_held(ctx)
        ms = self._delay_ms(ctx) if self._latency else 0
        if ms > 0:
            await trio.sleep(ms / 1000)
        if self._drops and self.should_drop(ctx, handled=False):
            return "close"
        taken = self._take_error(ctx) if self._errors else None
        if taken is not None and taken[2] > 0:
            entry["rtt_ms"] = taken[2]
            await trio.sleep(taken[2] / 1000)
        if taken is None or taken[0] == 0:
            return None
        err, rule, _ = taken
        entry["error"], entry["injected"] = kafka_name(err), True
        # Kafka closes an acks=0 producer's connection on an error (there is no answer to carry it): at once
        # when the whole request fails, after appending the other partitions when one does
        no_answer = req.api_key == ApiKey.Produce and req.body.acks == 0
        if rule.topic is None:
            return "close" if no_answer else (responses.error_response(req, err), req.api_version)
        if req.api_key == ApiKey.AddPartitionsToTxn:  # answered whole: nothing is added when a partition fails
            return responses.add_partitions_to_txn_error(req, rule.topic, rule.partition, err), req.api_version
        ctx.partition_errors = responses.strip_partition(ctx, rule.topic, rule.partition, err)
        ctx.close_after = no_answer
        return None

    def after(self, ctx, response):
        """After the handler: a per-partition error patched into its response."""
        errs = getattr(ctx, "partition_errors", None)
        if errs and response is not None:
            responses.add_partition_errors(ctx, response, errs)
        if self._leader_pushes and response is not None and ctx.request.api_key == ApiKey.Metadata:
            self._pushed_leaders(response)
        return response
