"""Produce and consume 1 KB records over SASL_SSL (SCRAM-SHA-512) vs PLAINTEXT on Kafkite, same client
(confluent-kafka), same run.

    PYTHONPATH=src python benchmarks/security.py [--records 50000] [--size 1024] [--repeat 3]

Starts a plain `kafkite serve` (BrokerProcess) in memory and with a data dir, and the secured broker of
kafkite.testing.secured (SecuredBroker: trustme CA, SASL_SSL with SCRAM-SHA-512, an SSL listener with client
certificates, ACLs on; the user is the ordinary `alice`, so every request is authorized through ACLs). Its SCRAM
users live in a data dir, so its log is on disk like any `--data-dir` broker's: the ratios are against PLAINTEXT
with a data dir. Each round produces N records (acks=all, no compression, linger 5 ms) to a fresh one-partition
topic and consumes them back with an assigned consumer; rounds interleave the brokers; medians of the rounds are
printed. This machine is noisy: read the ratios.

Tansu (benchmarks/peer.py, 0.6.0) is not measured over TLS: its `broker --cert C --key K` is refused by its own
CLI ("the argument '--cert <CERT>' cannot be used with '--key <KEY>'"), and with `--cert` alone it still reads the
TLS hello as a Kafka frame ("early eof"); SASL users need `tansu user create` against a running, reachable broker.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def produce(conf: dict, topic: str, n: int, size: int) -> float:
    from confluent_kafka import Producer
    p = Producer({**conf, "acks": "all", "linger.ms": 5, "compression.type": "none", "log_level": 0})
    value = b"x" * size
    t0 = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value, partition=0)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    assert p.flush(120) == 0
    return n / (time.perf_counter() - t0)


def consume(conf: dict, topic: str, n: int) -> float:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({**conf, "group.id": "bench-" + uuid.uuid4().hex, "enable.auto.commit": False, "log_level": 0})
    c.assign([TopicPartition(topic, 0, 0)])
    got, t0 = 0, time.perf_counter()
    deadline = t0 + 120
    while got < n and time.perf_counter() < deadline:
        for m in c.consume(1000, 1.0):
            if m.error() is None:
                got += 1
    elapsed = time.perf_counter() - t0
    c.close()
    assert got >= n, f"consumed {got} of {n}"
    return n / elapsed


def create(conf: dict, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({**conf, "log_level": 0})  # kept alive until the result is in
    for fut in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        fut.result(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from kafkite.testing.process import BrokerProcess
    from kafkite.testing.secured import SecuredBroker
    runs: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as d, BrokerProcess() as mem, BrokerProcess(data_dir=d) as disk, \
            SecuredBroker() as sec:
        brokers = {"PLAINTEXT in memory": {"bootstrap.servers": mem.bootstrap_servers},
                   "PLAINTEXT data dir": {"bootstrap.servers": disk.bootstrap_servers},
                   "SASL_SSL data dir": sec.confluent(),
                   "SSL (client cert) data dir": sec.confluent(listener="SSL")}
        admin = {"SASL_SSL data dir": sec.confluent(user="admin"),
                 "SSL (client cert) data dir": sec.confluent(user="admin", listener="SSL")}
        for r in range(args.repeat):
            for name, conf in brokers.items():
                topic = f"bench-{r}-{uuid.uuid4().hex[:8]}"
                create(admin.get(name, conf), topic)
                p = produce(conf, topic, args.records, args.size)
                c = consume(conf, topic, args.records)
                runs.setdefault(name, []).append((p, c))
                print(f"round {r + 1} {name:28s} produce {p:9.0f} rec/s  consume {c:9.0f} rec/s", file=sys.stderr)
    med = {name: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for name, v in runs.items()}
    import confluent_kafka
    print(f"{args.records} records of {args.size} B, confluent-kafka {getattr(confluent_kafka, '__version__', '?')} "
          f"(librdkafka {confluent_kafka.libversion()[0]}), medians of {args.repeat} rounds")
    base = med["PLAINTEXT data dir"]
    for name, (p, c) in med.items():
        print(f"  {name:28s} produce {p:9.0f} rec/s ({p * args.size / 1e6:6.1f} MB/s)  consume {c:9.0f} rec/s "
              f"({c * args.size / 1e6:6.1f} MB/s)  vs PLAINTEXT data dir: produce {p / base[0]:.2f}, "
              f"consume {c / base[1]:.2f}")


if __name__ == "__main__":
    main()
