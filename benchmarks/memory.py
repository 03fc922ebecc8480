"""Memory of a broker: idle RSS, and RSS per 1,000 empty partitions, Kafkite vs Tansu.

    python benchmarks/memory.py [--partitions 1000,5000] [--per-topic 100]

Starts `kafkite serve --in-memory`, `kafkite serve --data-dir` and Tansu (memory:// engine) on free
ports, one at a time. For each: RSS (VmRSS of /proc/PID/status) once it answers a request (idle), then
after creating topics of --per-topic partitions (replication factor 1, with confluent-kafka's
AdminClient) up to each total in --partitions, and a Metadata request listing them all. Prints MB and
MB per 1,000 partitions over idle. Also the time from starting `kafkite serve` to the first answer.
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peer import tansu  # noqa: E402
from proc_cpu import listener_pid  # noqa: E402
from throughput import kafkite, kafkite_disk  # noqa: E402


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise LookupError("no VmRSS")


def create(bootstrap: str, start: int, end: int, per_topic: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": bootstrap, "log_level": 5})
    topics = [NewTopic(f"m-{i}", per_topic, 1) for i in range(start // per_topic, end // per_topic)]
    for i in range(0, len(topics), 10):  # a few topics per request: no request timeout on a slow machine
        for f in a.create_topics(topics[i:i + 10], operation_timeout=120, request_timeout=120).values():
            f.result(300)
    md = a.list_topics(timeout=120)
    got = sum(len(t.partitions) for name, t in md.topics.items() if name.startswith("m-"))
    if got != end:
        raise AssertionError(f"{got} partitions in metadata, expected {end}")


@contextlib.contextmanager
def timed_kafkite(disk: bool):
    t0 = time.monotonic()
    with (kafkite_disk() if disk else kafkite()) as bs:
        yield bs, time.monotonic() - t0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", default="1000,5000")
    ap.add_argument("--per-topic", type=int, default=100)
    ap.add_argument("--no-tansu", action="store_true")
    args = ap.parse_args(argv)
    totals = [int(x) for x in args.partitions.split(",")]
    modes = [("memory", lambda: timed_kafkite(False)), ("disk", lambda: timed_kafkite(True))]
    if not args.no_tansu:
        modes.append(("tansu", lambda: _untimed(tansu())))
    print(f"{'broker':>7} | {'ready s':>7} {'idle MB':>8} | " + " | ".join(f"{n:>6} parts MB  MB/1000" for n in totals))
    for name, start in modes:
        with start() as (bs, ready):
            pid = listener_pid(int(bs.rsplit(":", 1)[1]))
            time.sleep(1)  # settled: whatever start-up work runs after the listener opens
            idle = rss_mb(pid)
            cols, done = [], 0
            for n in totals:
                create(bs, done, n, args.per_topic)
                done = n
                mb = rss_mb(pid)
                cols.append(f"{mb:>15.1f} {(mb - idle) / n * 1000:>8.1f}")
            r = "" if ready is None else f"{ready:.2f}"
            print(f"{name:>7} | {r:>7} {idle:>8.1f} | " + " | ".join(cols), flush=True)


@contextlib.contextmanager
def _untimed(cm):
    with cm as bs:
        yield bs, None


if __name__ == "__main__":
    main()
