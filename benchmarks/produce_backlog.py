"""The broker's memory under a producer that sends without waiting for its answers.

librdkafka's non-idempotent producer allows 1,000,000 requests in flight per connection. Against a broker on disk
with an fsync before every acknowledgement (Kafkite's default flush.messages=1), such a client has requests waiting
for the disk; a broker that kept reading them would hold them all. This runs one `kafkite serve --data-dir` and one
confluent-kafka producer (linger 1 ms, batch.size 16 KiB, 1 KB records) sending bursts of 30 MB, and prints the
broker's anonymous RSS after each burst. The topic keeps little data (64 KiB segments, retention.bytes 256 KiB), so
the RSS is what the broker holds, not the log. The same with max.in.flight.requests.per.connection=5 (an idempotent
producer's window) is the reference.

    python benchmarks/produce_backlog.py [--bursts 5] [--burst-mb 30] [--src DIR]

`--src DIR`: run the broker from another source tree's `src` (e.g. `git archive <commit> src | tar -x -C /tmp/base`,
then `--src /tmp/base/src`), for a before/after comparison.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import throughput  # noqa: E402  (its broker_on_free_port / kafkite launchers)
from memory import rss_mb  # noqa: E402
from proc_cpu import listener_pid  # noqa: E402


def run(bursts: int, burst_mb: int, window: int | None, env: dict | None, settle: float = 2.0) -> list[float]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    extra = ("--override", "log.retention.check.interval.ms=500")
    with throughput.kafkite(disk=True, extra=extra, env=env) as bs:
        pid = listener_pid(int(bs.rsplit(":", 1)[1]))
        admin = AdminClient({"bootstrap.servers": bs})
        config = {"segment.bytes": "65536", "retention.bytes": "262144", "file.delete.delay.ms": "1000"}
        for f in admin.create_topics([NewTopic("backlog", 1, 1, config=config)]).values():
            f.result(30)
        conf = {"bootstrap.servers": bs, "linger.ms": 1, "batch.size": 16384}
        if window:
            conf["max.in.flight.requests.per.connection"] = window
        p = Producer(conf)
        value = b"x" * 1000
        rss = []
        for _ in range(bursts):
            for i in range(burst_mb * 1000):
                while True:
                    try:
                        p.produce("backlog", value)
                        break
                    except BufferError:
                        p.poll(0.01)
                if i % 200 == 0:
                    p.poll(0)
            assert p.flush(60) == 0, "records not delivered"
            time.sleep(settle)  # let retention and the flush worker settle before sampling
            rss.append(rss_mb(pid, "RssAnon"))
        return rss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bursts", type=int, default=5)
    ap.add_argument("--burst-mb", type=int, default=30, help="MB of 1 KB records per burst")
    ap.add_argument("--settle", type=float, default=2.0, help="seconds between a burst's end and the sample")
    ap.add_argument("--src", help="the broker's source tree (a src directory); default: this one")
    args = ap.parse_args()
    env = None
    if args.src:
        env = {"PYTHONPATH": os.path.abspath(args.src)}
    print(f"anonymous RSS of the broker (MB) after each {args.burst_mb} MB burst of 1 KB records, {args.bursts} bursts")
    for label, window in (("librdkafka default window", None), ("max.in.flight 5", 5)):
        rss = run(args.bursts, args.burst_mb, window, env, args.settle)
        print(f"{label:>26}: " + "  ".join(f"{r:6.1f}" for r in rss) + f"   (growth {rss[-1] - rss[0]:+.1f})",
              flush=True)


if __name__ == "__main__":
    main()
