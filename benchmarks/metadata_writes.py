"""Cluster metadata writes on disk: the control plane's reset to empty of 20 topics, CreateTopics latency, and
CreateTopics from many connections at once.

    PYTHONPATH=src python benchmarks/metadata_writes.py [--topics 20] [--repeat 5]

Starts `kafkite serve` (BrokerProcess) with a data dir and its control listener. Each round creates N topics of
2 partitions (one CreateTopics request each, one at a time, confluent-kafka's AdminClient: the median is the
CreateTopics latency, answered once the metadata snapshot holding the topic is written and fsynced) and then resets
it to empty over HTTP (POST /v1/reset {"data": true}); the broker's own figure (took_ms) is printed per round and as
a median; then the same number of topics is created in one CreateTopics (timed) and the broker reset again. Then 8
connections create 5 topics each at once while a ninth times ApiVersions round trips (the event
loop's longest stall shows there), and the broker is reset again. The snapshot (kafkite-metadata.json) is written
in a worker thread (server/metadata_writer.py), once for every change made while the previous write was in flight,
and once for all the topics a reset deletes. This machine is noisy: read medians, and run the commit before for
the comparison (PYTHONPATH=<its src>).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def reset(url: str) -> float:
    req = urllib.request.Request(url + "/v1/reset", data=json.dumps({"data": True}).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return float(json.loads(resp.read())["took_ms"])


def burst(bs: str, clients: int, each: int) -> tuple[float, float]:
    """`clients` connections create `each` topics one after another, all at once, while another connection sends
    ApiVersions in a loop -> (the burst's ms, the slowest ApiVersions round trip's ms: the event loop's stalls)."""
    from kafka.protocol.admin import CreateTopicsRequest
    from kafka.protocol.metadata import ApiVersionsRequest
    from kafkite.testing.wire_client import WireClient
    T = CreateTopicsRequest.CreatableTopic
    conns = [WireClient.connect(bs, timeout=30) for _ in range(clients)]
    probe = WireClient.connect(bs, timeout=30)
    done, slowest = threading.Event(), [0.0]

    def probing() -> None:
        while not done.is_set():
            t0 = time.perf_counter()
            probe.request(ApiVersionsRequest(), 0)
            slowest[0] = max(slowest[0], (time.perf_counter() - t0) * 1000)

    def creating(w) -> None:
        for _ in range(each):
            req = CreateTopicsRequest(topics=[T(name="burst-" + uuid.uuid4().hex[:12], num_partitions=2,
                                                replication_factor=1, assignments=[], configs=[])],
                                      timeout_ms=30000, validate_only=False)
            assert w.request(req, 5).topics[0].error_code == 0
    p = threading.Thread(target=probing)
    p.start()
    threads = [threading.Thread(target=creating, args=(w,)) for w in conns]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = (time.perf_counter() - t0) * 1000
    done.set()
    p.join()
    for w in conns + [probe]:
        w.close()
    return took, slowest[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--topics", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafkite.testing.process import BrokerProcess
    with tempfile.TemporaryDirectory(prefix="kafkite-bench-meta-") as d, \
            BrokerProcess(data_dir=Path(d) / "data", control=True) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers, "log_level": 0})
        creates, resets, bursts, stalls, together = [], [], [], [], []
        for r in range(args.repeat):
            for _ in range(args.topics):
                name = "bench-" + uuid.uuid4().hex[:12]
                t0 = time.perf_counter()
                for f in admin.create_topics([NewTopic(name, 2, 1)]).values():
                    f.result(30)
                creates.append((time.perf_counter() - t0) * 1000)
            took = reset(b.control_url)
            resets.append(took)
            print(f"round {r + 1}: reset to empty of {args.topics} topics on disk {took:.1f} ms", flush=True)
            t0 = time.perf_counter()  # the same topics in one request
            for f in admin.create_topics([NewTopic("bench-" + uuid.uuid4().hex[:12], 2, 1)
                                          for _ in range(args.topics)]).values():
                f.result(30)
            together.append((time.perf_counter() - t0) * 1000)
            reset(b.control_url)
            burst_ms, stall = burst(b.bootstrap_servers, 8, 5)
            bursts.append(burst_ms)
            stalls.append(stall)
            reset(b.control_url)
        print(f"CreateTopics (one topic, 2 partitions, on disk): median {statistics.median(creates):.2f} ms, "
              f"p90 {statistics.quantiles(creates, n=10)[-1]:.2f} ms over {len(creates)}")
        print(f"one CreateTopics of {args.topics} topics (2 partitions each) on disk: median "
              f"{statistics.median(together):.1f} ms")
        print(f"reset to empty of {args.topics} topics on disk: median {statistics.median(resets):.1f} ms "
              f"(min {min(resets):.1f}, max {max(resets):.1f})")
        print(f"40 CreateTopics from 8 connections at once: median {statistics.median(bursts):.0f} ms; slowest "
              f"ApiVersions meanwhile on another connection: median {statistics.median(stalls):.1f} ms "
              f"(max {max(stalls):.1f})")


if __name__ == "__main__":
    main()
