"""The benchmarks still run end to end (tiny sizes): throughput.py and commits.py (every mode against Tansu,
ratios printed), replication.py (RF3 against RF1 on three broker processes), memory.py (start-up and partitions),
produce_backlog.py (a producer with a deep window against a disk broker).
The figures themselves are not asserted here: speed targets live in benchmarks/, not in timed tests."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_benchmark(tmp_path, script: str, *args: str, tansu: bool = True) -> str:
    """Run benchmarks/<script> (next to Tansu unless tansu=False: skipped where Tansu is not installed);
    its stdout."""
    tools = Path(os.environ.get("KAFKITE_TOOLS", ROOT / ".tools"))
    if tansu and not (tools / "bin" / "tansu").exists():
        pytest.skip("Tansu is not installed (.ci/install-clients.sh installs it)")
    env = {**os.environ, "KAFKITE_TOOLS": str(tools), "KAFKITE_BENCH_DIR": str(tmp_path)}
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], capture_output=True, text=True,
                       timeout=300, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


def test_throughput_benchmark_runs(tmp_path):
    out = run_benchmark(tmp_path, "throughput.py", "--records", "4000", "--sizes", "100,1024", "--repeat", "1",
                        "--producers", "2", "--partitions", "2", "--nice-clients", "5")  # (one producer: replication)
    rows = [line.split() for line in out.splitlines() if re.match(r"\s+(100|1024)\s+\d+\s+\w+\s+\|", line)]
    assert sorted((r[0], r[2]) for r in rows) == sorted(
        (size, mode) for size in ("100", "1024") for mode in ("memory", "disk", "pagecache"))
    for r in rows:
        ratios = [float(x) for x in (r[6], r[10], r[14])]
        assert all(x > 0 for x in ratios), r
    assert "with an fsync per 1 MB" in out and "2 producer(s), 2 partition(s), producers at nice +5" in out


def test_throughput_null_broker_runs(tmp_path):
    """--modes null: the broker that stores nothing (null_broker.py --produce) acknowledges every record (the
    benchmark's producers fail the run on any failed delivery), and its row has a produce ratio and no consume."""
    out = run_benchmark(tmp_path, "throughput.py", "--records", "4000", "--sizes", "100", "--repeat", "1",
                        "--producers", "2", "--partitions", "2", "--modes", "null")
    rows = [line.split() for line in out.splitlines() if re.match(r"\s+100\s+\d+\s+\w+\s+\|", line)]
    assert [r[2] for r in rows] == ["null"], out
    assert float(rows[0][6]) > 0 and rows[0][10] == "nan", rows


def test_produce_backlog_benchmark_runs(tmp_path):
    out = run_benchmark(tmp_path, "produce_backlog.py", "--bursts", "2", "--burst-mb", "1", "--settle", "0",
                        tansu=False)
    rows = re.findall(r"^\s*(librdkafka default window|max.in.flight 5):((?:\s+[\d.]+){2})\s+\(growth [+-][\d.]+\)$",
                      out, re.M)
    assert [r[0] for r in rows] == ["librdkafka default window", "max.in.flight 5"], out
    assert all(float(x) > 0 for r in rows for x in r[1].split()), out


def test_commits_benchmark_runs(tmp_path):
    """benchmarks/commits.py end to end with tiny sizes: one consumer and two concurrent ones, every mode
    against Tansu (committed() is checked against the last commit inside the benchmark itself), and the
    ceiling's null brokers (benchmarks/null_broker.py) beside them."""
    out = run_benchmark(tmp_path, "commits.py", "--commits", "50", "--consumers", "2", "--repeat", "1", "--ceiling")
    row = re.compile(r"\s+\d+\s+(memory|disk|null|null\+fsync)\s+\|")
    rows = [line.split() for line in out.splitlines() if row.match(line)]
    assert sorted((r[0], r[1]) for r in rows) == sorted(
        (consumers, mode) for consumers in ("1", "2") for mode in ("memory", "disk", "null", "null+fsync"))
    for r in rows:
        assert float(r[3].replace(",", "")) > 0 and float(r[4].replace(",", "")) > 0, r
        assert float(r[5]) > 0, r
    assert "committed() returned the last offset on every broker but the null ones" in out
    assert "per 200-byte append + fsync" in out


def test_replication_benchmark_runs(tmp_path):
    """benchmarks/replication.py end to end with tiny sizes: three `kafkite serve` processes on a ZooKeeper of
    their own, RF1 and RF3 figures and their ratio, and the replica check's line for the RF3 round (its
    outcome is the brokers' business, not the benchmark's: not asserted)."""
    from kafkite.testing.zookeeper import missing
    why = missing()
    if why:
        pytest.skip(why)
    out = run_benchmark(tmp_path, "replication.py", "--records", "2000", "--size", "100", "--repeat", "1",
                        tansu=False)
    rows = {r[0]: r for r in (line.split() for line in out.splitlines() if re.match(r"\s+[13]\s+2000\s+100\s+\|", line))}
    assert sorted(rows) == ["1", "3"], out
    for r in rows.values():
        assert float(r[4].replace(",", "")) > 0 and float(r[5]) > 0, r
    ratio = re.search(r"^RF3/RF1: (\d+\.\d+)$", out, re.M)
    assert ratio and float(ratio.group(1)) > 0, out
    assert re.search(r"^round 1 RF3: (the 3 replicas agree|replicas differ) below the high watermark 2001\b", out, re.M), out
    assert re.search(r"^replicas agreed in [01] of 1 RF3 rounds", out, re.M), out


def test_memory_benchmark_runs(tmp_path):
    """The start-up part only (the partitions part creates topics as the other benchmarks do)."""
    out = run_benchmark(tmp_path, "memory.py", "--starts", "1", "--settle", "0.1", "--partitions", "", "--no-tansu",
                        tansu=False)
    starts = re.findall(r"^\s*(memory|disk) \| ready s ([\d.]+) .* \| idle MB ([\d.]+)", out, re.M)
    assert [s[0] for s in starts] == ["memory", "disk"], out
    assert all(float(s[1]) > 0 and float(s[2]) > 5 for s in starts), out
    assert int(re.search(r"modules imported by kafkite serve at ready: (\d+)", out).group(1)) > 100, out
