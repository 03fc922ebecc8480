"""Produce throughput with replication factor 3 against replication factor 1, acks=all, same cluster, same run.

    python benchmarks/replication.py [--records 500000] [--size 100] [--repeat 3] [--fsync]

Starts three `kafkite serve` processes on one ZooKeeper (kafkite.testing.ProcessCluster: its own
ZooKeeper, data dirs in a temporary directory, in $KAFKITE_BENCH_DIR when set). Each round creates
two one-partition topics led by the same broker (the leader rotates over the rounds): one with
replicas [L] and one with replicas [L, the other two]; then produces N records of SIZE bytes to each
with confluent-kafka exactly as benchmarks/throughput.py does (acks=all, no compression, linger 5 ms;
one warm-up record first, untimed, so that metadata and the leader's election are not counted).
Rounds interleave RF1 and RF3; the medians and the ratio RF3/RF1 are printed.

The brokers use Apache Kafka's default flush policy (the OS writes the page cache back: Kafka relies on
replication, not fsync, for durability); `--fsync` keeps Kafkite's own default instead, an fsync before
every acknowledgement.

After each RF3 round the three replicas' segment files are compared below the partition's high
watermark (kafkite.testing.replicas): with acks=all every acknowledged record must be on every in-sync
replica, byte for byte. The outcome is printed, not asserted: this is a benchmark.

This machine is noisy and all four processes (three brokers and the client) share its cores: read the
ratio, not the absolute numbers.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import confluent_version, produce  # noqa: E402  (the same client and producer settings)

BROKERS = 3
PAGE_CACHE = {"log.flush.interval.messages": "9223372036854775807"}


def create_topic(cluster, topic: str, replicas: list[int]) -> None:
    """One partition on exactly these replicas (the first is the preferred leader); returns once the
    controller's broker names that leader."""
    # kafka-python here: confluent-kafka 2.16's NewTopic refuses any replica_assignment ("a default partition
    # count and a replica assignment are mutually exclusive", even with num_partitions=-1)
    from kafka.admin import KafkaAdminClient, NewTopic
    a = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        a.create_topics([NewTopic(topic, replica_assignments={0: replicas})], timeout_ms=30_000)
    finally:
        a.close()
    cluster.wait_until(lambda: cluster.leader(topic, 0) == replicas[0], 30, f"{topic}: broker {replicas[0]} leads")


def warm_up(bootstrap: str, topic: str) -> None:
    """One record, acknowledged: the producer that follows finds metadata and a leader ready."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    p.produce(topic, value=b"warm-up")
    assert p.flush(60) == 0, f"{topic}: the warm-up record was not acknowledged"


def high_watermark(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-replication", "enable.auto.commit": False})
    try:
        _low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30, cached=False)
        return high
    finally:
        c.close()


def check_replicas(cluster, topic: str, leader: int) -> tuple[bool, str]:
    """(agree, one line): the three replicas' batches below the high watermark, byte for byte."""
    from kafkite.testing.replicas import compare_replicas, partition_dirs
    hw = high_watermark(cluster.bootstrap_of(leader), topic)
    diff = compare_replicas(partition_dirs(cluster, topic, 0), below=hw, reference=leader)
    if diff.same:
        return True, f"the 3 replicas agree below the high watermark {hw} ({diff.batches[leader]} batches)"
    return False, (f"replicas differ below the high watermark {hw}: first at offset {diff.offset} ({diff.kind}) on "
                   f"broker(s) {list(diff.brokers)} vs the leader {leader}; log end offsets "
                   + ", ".join(f"{b}: {e}" for b, e in sorted(diff.log_end_offsets.items())))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=500_000, help="records per run")
    ap.add_argument("--size", type=int, default=100, help="value bytes per record")
    ap.add_argument("--repeat", type=int, default=3, help="rounds, RF1 and RF3 interleaved; medians are reported")
    ap.add_argument("--fsync", action="store_true", help="Kafkite's default flush.messages=1 instead of the page cache")
    args = ap.parse_args(argv)
    from kafkite.testing import ProcessCluster

    overrides = {} if args.fsync else dict(PAGE_CACHE)
    rates: dict[int, list[float]] = {1: [], 3: []}
    checks: list[tuple[int, bool, str]] = []
    t_start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kafkite-bench-repl-", dir=os.environ.get("KAFKITE_BENCH_DIR")) as d, \
            ProcessCluster(brokers=BROKERS, data_dir=d, overrides=overrides) as cluster:
        cluster.wait_until(lambda: len(cluster.live_brokers) == BROKERS and cluster.controller_id != -1, 60,
                           "three brokers registered and a controller")
        for rnd in range(args.repeat):
            leader = 1 + rnd % BROKERS
            others = [b for b in cluster.node_ids if b != leader]
            # alternate which factor goes first, so neither always runs on a fresher page cache
            order = (1, 3) if rnd % 2 == 0 else (3, 1)
            for rf in order:
                topic = f"bench-rf{rf}-{args.size}-{rnd}"
                create_topic(cluster, topic, [leader] + others[:rf - 1])
                bs = cluster.bootstrap_of(leader)
                warm_up(bs, topic)
                rates[rf].append(produce(bs, topic, args.records, args.size)[0])
                if rf == 3:
                    ok, line = check_replicas(cluster, topic, leader)
                    checks.append((rnd + 1, ok, line))
    elapsed = time.monotonic() - t_start

    med = {rf: statistics.median(r) for rf, r in rates.items()}
    print(f"Replication: {BROKERS} kafkite serve processes on one ZooKeeper, confluent-kafka {confluent_version()}, "
          f"acks=all, 1 partition, no compression, linger 5 ms; medians of {args.repeat} rounds, RF1 and RF3 "
          f"interleaved, the leader rotating. Flush policy: "
          + ("Kafkite's default (fsync before every acknowledgement)." if args.fsync
             else "Kafka's default (page cache, log.flush.interval.messages=Long.MAX)."))
    print(f"{'rf':>4} {'records':>8} {'size':>6} | {'produce/s':>10} {'MB/s':>7} | rounds")
    for rf in (1, 3):
        mbs = med[rf] * args.size / 1e6
        print(f"{rf:>4} {args.records:>8} {args.size:>6} | {med[rf]:>10,.0f} {mbs:>7.1f} | "
              + ", ".join(f"{x:,.0f}" for x in rates[rf]))
    print(f"RF3/RF1: {med[3] / med[1]:.2f}")
    for rnd, ok, line in checks:
        print(f"round {rnd} RF3: {line}")
    agreed = sum(ok for _, ok, _ in checks)
    print(f"replicas agreed in {agreed} of {len(checks)} RF3 rounds; total {elapsed:.1f}s")


if __name__ == "__main__":
    main()
