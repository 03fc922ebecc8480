"""Memory and start-up of a broker: ready time, idle RSS, and RSS per 1,000 empty partitions, Kafkite vs Tansu.

    python benchmarks/memory.py [--partitions 1000,5000] [--per-topic 100] [--starts 5] [--no-tansu]

First, start-up (Kafkite's bytecode compiled first, as an installed Kafkite has it): `kafkite serve --in-memory` and
`kafkite serve --data-dir` (and Tansu, memory:// engine) are started --starts times each, one at a time on a free
port: the time from starting the process to its first answer (an ApiVersions v0 request, sent as soon as the port
takes connections), the CPU time it used by then (steadier than the wall time on a busy machine), and the idle RSS
(VmRSS of /proc/PID/status) a second after that answer; medians and the range. Also how many modules `kafkite
serve` has imported when it logs "ready" (`python -X importtime`).

Then, partitions: each broker once more: its idle RSS, then after creating topics of --per-topic partitions
(replication factor 1, with confluent-kafka's AdminClient) up to each total in --partitions, and a Metadata request
listing them all. Prints MB and MB per 1,000 partitions over idle.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peer import ensure_tansu, tansu  # noqa: E402
from proc_cpu import listener_pid  # noqa: E402
from throughput import free_port, kafkite, kafkite_disk  # noqa: E402

_API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 1, 1) + b"m"  # api key 18, v0, correlation id 1, client id "m"


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """A process's resident memory in MB: its whole RSS, or another line of /proc/<pid>/status (e.g. "RssAnon")."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise LookupError(f"no {field}")


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


def first_answer(port: int, deadline: float) -> None:
    """An ApiVersions v0 request sent to the port until one is answered."""
    frame = struct.pack(">i", len(_API_VERSIONS_V0)) + _API_VERSIONS_V0
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                s.sendall(frame)
                size = s.recv(4, socket.MSG_WAITALL)
                if len(size) == 4 and len(s.recv(struct.unpack(">i", size)[0], socket.MSG_WAITALL)) >= 4:
                    return
        except OSError:
            pass
        time.sleep(0.002)
    raise TimeoutError(f"no answer on port {port}")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds the process has used (all its threads)."""
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def one_start(argv_for_port, settle: float = 1.0) -> tuple[float, float, float]:
    """(seconds from starting the process to its first answer, the CPU seconds it used by then, idle RSS in MB a
    second later). The CPU time is the steadier figure on a busy machine."""
    port = free_port()
    with tempfile.TemporaryDirectory(dir=os.environ.get("KAFKITE_BENCH_DIR")) as d:
        t0 = time.monotonic()
        proc = subprocess.Popen(argv_for_port(port, d), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            first_answer(port, t0 + 60)
            ready = time.monotonic() - t0
            cpu = cpu_s(proc.pid)
            time.sleep(settle)
            return ready, cpu, rss_mb(proc.pid)
        finally:
            proc.terminate()
            proc.wait(30)


def kafkite_argv(disk: bool):
    return lambda port, d: [sys.executable, "-m", "kafkite.cli", "serve", "--port", str(port),
                            *(["--data-dir", d] if disk else ["--in-memory"]), "--log-level", "WARNING"]


def tansu_argv(port: int, d: str) -> list[str]:
    url = f"tcp://127.0.0.1:{port}"
    return [str(ensure_tansu()), "broker", "--listener-url", url, "--advertised-listener-url", url,
            "--storage-engine", "memory://tansu/"]


def serve_modules() -> int:
    """How many modules `kafkite serve --in-memory` has imported when it logs "ready"."""
    proc = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "kafkite.cli", "serve", "--port", "0",
                             "--in-memory"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    mods = set()
    try:
        for line in proc.stderr:
            m = re.match(r"import time:\s+\d+ \|\s+\d+ \| +(\S+)$", line.rstrip("\n"))
            if m:
                mods.add(m.group(1))
            elif re.search(r"\bready\b", line):
                return len(mods)
        raise RuntimeError("kafkite serve ended before ready")
    finally:
        proc.terminate()
        proc.wait(30)


def compile_kafkite() -> None:
    """Kafkite's bytecode written first (as `pip install` does): with PYTHONDONTWRITEBYTECODE set and no __pycache__
    (a source checkout), every start compiles its ~110 modules again, about 0.2 s more and 1 MB more RSS."""
    import compileall

    import kafkite
    compileall.compile_dir(str(Path(kafkite.__file__).parent), quiet=1)


def starts(n: int, with_tansu: bool, settle: float = 1.0) -> None:
    compile_kafkite()
    print(f"start-up, {n} starts each: ready = process start to first answer; idle RSS {settle:g} s later "
          "(median [min-max])")
    brokers = [("memory", kafkite_argv(False)), ("disk", kafkite_argv(True))]
    if with_tansu:
        brokers.append(("tansu", tansu_argv))
    for name, argv in brokers:
        got = [one_start(argv, settle) for _ in range(n)]
        r, c, m = ([g[i] for g in got] for i in range(3))
        print(f"{name:>7} | ready s {statistics.median(r):.3f} [{min(r):.3f}-{max(r):.3f}] | CPU s to ready "
              f"{statistics.median(c):.2f} [{min(c):.2f}-{max(c):.2f}] | idle MB "
              f"{statistics.median(m):.1f} [{min(m):.1f}-{max(m):.1f}]", flush=True)
    print(f"modules imported by kafkite serve at ready: {serve_modules()}", flush=True)


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
    ap.add_argument("--settle", type=float, default=1.0, help="seconds from the first answer to the idle RSS")
    ap.add_argument("--starts", type=int, default=5, help="starts of each broker for the start-up medians (0: none)")
    args = ap.parse_args(argv)
    if args.starts:
        starts(args.starts, not args.no_tansu, args.settle)
    if not args.partitions:
        return
    totals = [int(x) for x in args.partitions.split(",")]
    modes = [("memory", lambda: timed_kafkite(False)), ("disk", lambda: timed_kafkite(True))]
    if not args.no_tansu:
        modes.append(("tansu", lambda: _untimed(tansu())))
    print(f"partitions ({args.per_topic} a topic): RSS, and MB per 1,000 partitions over idle")
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
