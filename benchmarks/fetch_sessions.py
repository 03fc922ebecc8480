"""Incremental fetch sessions (KIP-227): a consumer of 1,000 partitions with and without them.

    python benchmarks/fetch_sessions.py [--partitions 1000] [--records 50] [--rounds 200] [--repeat 3]

One raw-request consumer (kafka-python's protocol classes over a socket, the session bookkeeping of a Java
client's FetchSessionHandler: after a full fetch with epoch 0, each fetch lists only the partitions whose fetch
offset moved) reads one topic of N partitions from `kafkite serve --in-memory`, with sessions (the default)
and without (max.incremental.fetch.session.cache.slots=0: every fetch is full), and from Tansu (in memory) if
it is installed. Two phases, each a fresh topic:

- catch-up: N x --records records of 100 B already there, read with fetch.max.bytes 256 KB until all are in;
- follow: --rounds times, 5 records are appended to each of 10 random partitions (one Produce), then fetched
  until they are in: the consumer tails the topic, most partitions have nothing new. (max_wait_ms is 100, not 0:
  Tansu 0.6 answers a Fetch with max_wait_ms 0 with no partitions at all.)

Per fetch: the request and response sizes (bytes on the wire); records/s (catch-up: records over the read's
wall time; follow: records over the time spent in fetches, produces excluded). Medians of --repeat rounds,
brokers interleaved. Client and broker share this machine: read the ratios, not the absolute numbers.
"""
from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import kafkite  # noqa: E402

from kafka.protocol.admin import CreateTopicsRequest  # noqa: E402
from kafka.protocol.metadata import ApiVersionsRequest  # noqa: E402
from kafka.protocol.consumer import FetchRequest  # noqa: E402
from kafka.protocol.producer import ProduceRequest  # noqa: E402
from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402

from kafkite.testing.wire_client import WireClient  # noqa: E402
from kafkite.wire import registry  # noqa: E402

FETCH_V = 12  # sessions with topic names: the newest version Tansu and Kafkite both take (checked below)
PRODUCE_V = 8
VALUE = b"x" * 100


def batch(n: int) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    now = int(time.time() * 1000)
    for i in range(n):
        b.append(i, timestamp=now, key=None, value=VALUE, headers=[])
    return bytes(b.build())


def max_versions(w: WireClient) -> dict[int, int]:
    r = w.request(ApiVersionsRequest(), 0)
    return {k.api_key: k.max_version for k in r.api_keys}


def create_topic(w: WireClient, topic: str, partitions: int) -> None:
    CT = CreateTopicsRequest.CreatableTopic
    req = CreateTopicsRequest(topics=[CT(name=topic, num_partitions=partitions, replication_factor=1,
                                         assignments=[], configs=[])], timeout_ms=30_000)
    code = w.request(req, 4).topics[0].error_code
    assert code == 0, f"CreateTopics: error {code}"
    # until every partition answers (a new topic's leaders may take a moment)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answered = [p.error_code for t in FetchClient(w, topic, partitions, False).fetch_once(100).responses
                    for p in t.partitions]
        if len(answered) == partitions and not any(answered):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{topic}: partitions not ready")


def produce(w: WireClient, topic: str, per_partition: dict[int, int]) -> None:
    T = ProduceRequest.TopicProduceData
    req = ProduceRequest(transactional_id=None, acks=1, timeout_ms=30_000, topic_data=[
        T(name=topic, partition_data=[T.PartitionProduceData(index=p, records=batch(n))
                                      for p, n in per_partition.items()])])
    r = w.request(req, PRODUCE_V)
    bad = [pr.error_code for t in r.responses for pr in t.partition_responses if pr.error_code]
    assert not bad, f"Produce errors {bad[:5]}"


def count_records(data: bytes) -> tuple[int, int]:
    """(records, next offset) of whole record batches; (0, -1) when there is none."""
    pos, n, nxt = 0, 0, -1
    while pos + 61 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if pos + 12 + length > len(data):
            break
        last_delta = struct.unpack_from(">i", data, pos + 23)[0]
        n += struct.unpack_from(">i", data, pos + 57)[0]
        nxt = base + last_delta + 1
        pos += 12 + length
    return n, nxt


class FetchClient:
    """One consumer's fetches of every partition of a topic, with a fetch session when `sessions`."""

    def __init__(self, w: WireClient, topic: str, partitions: int, sessions: bool, max_bytes: int = 256 << 10):
        self.w, self.topic, self.sessions, self.max_bytes = w, topic, sessions, max_bytes
        self.offsets = {p: 0 for p in range(partitions)}
        self.known: dict[int, int] = {}  # the fetch offsets the broker's session holds
        self.session_id, self.epoch = 0, (0 if sessions else -1)
        self.fetches = self.request_bytes = self.response_bytes = self.incremental = 0

    def fetch_once(self, max_wait: int = 0):
        T = FetchRequest.FetchTopic
        if self.epoch in (0, -1):
            send = list(self.offsets)
        else:
            send = [p for p, o in self.offsets.items() if self.known.get(p) != o]
        parts = [T.FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=self.offsets[p],
                                  last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)
                 for p in send]
        req = FetchRequest(replica_id=-1, max_wait_ms=max_wait, min_bytes=1, max_bytes=self.max_bytes,
                           isolation_level=0, session_id=self.session_id, session_epoch=self.epoch,
                           topics=[T(topic=self.topic, topic_id=None, partitions=parts)] if parts else [],
                           forgotten_topics_data=[], rack_id="")
        data, corr = self.w.encode(req, FETCH_V)
        self.w.send_raw(data)
        frame = self.w.recv_frame()
        resp = registry.response_class(1).decode(frame, version=FETCH_V, header=True)
        self.fetches += 1
        self.incremental += self.epoch > 0
        self.request_bytes += len(data)
        self.response_bytes += len(frame) + 4
        if resp.error_code:  # the session is gone or out of step: start over with a full fetch
            self.session_id, self.epoch, self.known = (0, 0, {}) if self.sessions else (0, -1, {})
            return resp
        if self.sessions:
            if self.epoch == 0:
                self.session_id, self.epoch = resp.session_id, (1 if resp.session_id else 0)
                self.known = dict(self.offsets)
            else:
                self.epoch += 1
                self.known.update({p: self.offsets[p] for p in send})
        return resp

    def read(self, max_wait: int = 0) -> int:
        resp = self.fetch_once(max_wait)
        got = 0
        for t in resp.responses:
            for p in t.partitions:
                n, nxt = count_records(p.records or b"")
                if n:
                    got += n
                    self.offsets[p.partition_index] = nxt
        return got


def catch_up(bs: str, sessions: bool, partitions: int, records: int, tag: str) -> dict:
    topic = f"catchup-{tag}"
    with WireClient.connect(bs, timeout=60) as w:
        create_topic(w, topic, partitions)
        ps = list(range(partitions))
        for i in range(0, partitions, 100):
            produce(w, topic, {p: records for p in ps[i:i + 100]})
    with WireClient.connect(bs, timeout=60) as w:
        c = FetchClient(w, topic, partitions, sessions)
        want, got = partitions * records, 0
        t0 = time.perf_counter()
        while got < want:
            got += c.read(max_wait=500)
        dt = time.perf_counter() - t0
    return {"rps": got / dt, "req": c.request_bytes / c.fetches, "resp": c.response_bytes / c.fetches,
            "fetches": c.fetches, "incremental": c.incremental}


def follow(bs: str, sessions: bool, partitions: int, rounds: int, tag: str) -> dict:
    topic = f"follow-{tag}"
    rng = random.Random(7)
    with WireClient.connect(bs, timeout=60) as wp, WireClient.connect(bs, timeout=60) as wc:
        create_topic(wp, topic, partitions)
        c = FetchClient(wc, topic, partitions, sessions)
        c.read(max_wait=100)  # the first (full) fetch opens the session: not counted
        c.fetches = c.request_bytes = c.response_bytes = c.incremental = 0
        spent, got = 0.0, 0
        for _ in range(rounds):
            chosen = rng.sample(range(partitions), 10)
            produce(wp, topic, {p: 5 for p in chosen})
            want = got + 50
            while got < want:
                t0 = time.perf_counter()
                got += c.read(max_wait=100)
                spent += time.perf_counter() - t0
    return {"rps": got / spent, "req": c.request_bytes / c.fetches, "resp": c.response_bytes / c.fetches,
            "fetches": c.fetches, "incremental": c.incremental, "ms": spent / c.fetches * 1000}


@contextlib.contextmanager
def kafkite_no_sessions():
    with kafkite(extra=("--override", "max.incremental.fetch.session.cache.slots=0")) as bs:
        yield bs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--records", type=int, default=50, help="records a partition for the catch-up phase")
    ap.add_argument("--rounds", type=int, default=200, help="produce-then-fetch rounds of the follow phase")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-tansu", action="store_true")
    args = ap.parse_args()
    brokers = [("kafkite", "sessions", kafkite, True), ("kafkite", "off (slots=0)", kafkite_no_sessions, False)]
    tansu_note = ""
    if not args.no_tansu:
        from peer import tansu, tansu_binary
        if tansu_binary() is not None:
            brokers += [("tansu", "asked for", lambda: tansu(install=False), True),
                        ("tansu", "not asked", lambda: tansu(install=False), False)]
        else:
            tansu_note = " Tansu is not installed: its rows are missing."
    runs: dict[tuple[str, str], dict[str, list[dict]]] = {}
    sessions_granted: dict[str, bool] = {}
    for rnd in range(args.repeat):
        for name, mode, start, sessions in brokers:
            with start() as bs:
                with WireClient.connect(bs) as w:
                    v = max_versions(w)
                    assert v[1] >= FETCH_V and v[0] >= PRODUCE_V, f"{name}: Fetch v{v[1]}, Produce v{v[0]}"
                tag = f"{rnd}-{mode.split()[0]}"
                r = runs.setdefault((name, mode), {"catch-up": [], "follow": []})
                r["catch-up"].append(catch_up(bs, sessions, args.partitions, args.records, tag))
                r["follow"].append(follow(bs, sessions, args.partitions, args.rounds, tag))
                if sessions:
                    sessions_granted[name] = r["follow"][-1]["incremental"] > 0
    print(f"Fetch sessions: one consumer of {args.partitions} partitions, Fetch v{FETCH_V}, medians of {args.repeat} "
          f"rounds.{tansu_note}")
    for name, granted in sessions_granted.items():
        if not granted:
            print(f"{name} created no session when asked (session id 0): every fetch was full.")
    print(f"{'broker':>8} {'sessions':>14} {'phase':>9} | {'fetches':>7} {'req B/fetch':>11} {'resp B/fetch':>12} "
          f"{'records/s':>10} {'vs off':>7}")
    for (name, mode), r in runs.items():
        for phase in ("catch-up", "follow"):
            med = {k: statistics.median(x[k] for x in r[phase]) for k in ("rps", "req", "resp", "fetches")}
            off = [v for (n, m), v in runs.items() if n == name and m != mode and not m.startswith(("sessions",
                                                                                                   "asked"))]
            base = statistics.median(x["rps"] for x in off[0][phase]) if off and mode.startswith(
                ("sessions", "asked")) else None
            ratio = f"{med['rps'] / base:>7.2f}" if base else f"{'':>7}"
            print(f"{name:>8} {mode:>14} {phase:>9} | {med['fetches']:>7.0f} {med['req']:>11,.0f} "
                  f"{med['resp']:>12,.0f} {med['rps']:>10,.0f} {ratio}")
    k_on = statistics.median(x["rps"] for x in runs[("kafkite", "sessions")]["follow"])
    if ("tansu", "not asked") in runs:
        t = statistics.median(x["rps"] for x in runs[("tansu", "not asked")]["follow"])
        print(f"follow records/s, Kafkite with sessions / Tansu: {k_on / t:.2f}")


if __name__ == "__main__":
    main()
