"""benchmarks/throughput.py still runs end to end (tiny sizes): every mode against Tansu, ratios printed.
The figures themselves are not asserted here: speed targets live in benchmarks/, not in timed tests."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_benchmark(tmp_path, script: str, *args: str) -> str:
    """Run benchmarks/<script> next to Tansu (skipped where Tansu is not installed); its stdout."""
    tools = Path(os.environ.get("KAFKITE_TOOLS", ROOT / ".tools"))
    if not (tools / "bin" / "tansu").exists():
        pytest.skip("Tansu is not installed (.ci/install-clients.sh installs it)")
    env = {**os.environ, "KAFKITE_TOOLS": str(tools), "KAFKITE_BENCH_DIR": str(tmp_path)}
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], capture_output=True, text=True,
                       timeout=300, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


def test_throughput_benchmark_runs(tmp_path):
    out = run_benchmark(tmp_path, "throughput.py", "--records", "4000", "--sizes", "100,1024", "--repeat", "1")
    rows = [line.split() for line in out.splitlines() if re.match(r"\s+(100|1024)\s+\d+\s+\w+\s+\|", line)]
    assert sorted((r[0], r[2]) for r in rows) == sorted(
        (size, mode) for size in ("100", "1024") for mode in ("memory", "disk", "pagecache"))
    for r in rows:
        ratios = [float(x) for x in (r[6], r[10], r[14])]
        assert all(x > 0 for x in ratios), r
    assert "with an fsync per 1 MB" in out


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
