"""Cluster metadata writes on disk: the control plane's reset to empty of 20 topics, and CreateTopics latency.

    PYTHONPATH=src python benchmarks/metadata_writes.py [--topics 20] [--repeat 5]

Starts `kafkite serve` (BrokerProcess) with a data dir and its control listener. Each round creates N topics of
2 partitions (one CreateTopics request each, one at a time, confluent-kafka's AdminClient: the median is the
CreateTopics latency, the snapshot written and fsynced before the answer) and then resets it to empty over HTTP
(POST /v1/reset {"data": true}); the broker's own figure (took_ms) is printed per round and as a median. The
metadata snapshot (kafkite-metadata.json) is written with fsync in a worker thread, once for all the topics a
reset deletes. This machine is noisy: read medians.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
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
        creates, resets = [], []
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
        print(f"CreateTopics (one topic, 2 partitions, on disk): median {statistics.median(creates):.2f} ms, "
              f"p90 {statistics.quantiles(creates, n=10)[-1]:.2f} ms over {len(creates)}")
        print(f"reset to empty of {args.topics} topics on disk: median {statistics.median(resets):.1f} ms "
              f"(min {min(resets):.1f}, max {max(resets):.1f})")


if __name__ == "__main__":
    main()
