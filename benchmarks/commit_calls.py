"""One OffsetCommit's handling in-process: time, bytecodes and Python calls per commit.

    python benchmarks/commit_calls.py [--disk] [--commits 3000] [--top 60] [--by-caller NAME] [--ops-top 25]

Starts a broker in this process (BrokerThread: in memory, or --disk on a temporary data dir), creates a topic and
__consumer_offsets, and hands the real router OffsetCommit v9 frames (one partition, generation -1, an empty member
id: what confluent-kafka's commit() of an assign()ed consumer sends) one after another, each awaited with its waits,
as a connection would. Prints:

- hot: the best and every block's time per commit (5 blocks of back-to-back commits, the CPU's caches warm);
- cold: the median time of a commit made after a 10 us sleep (`--cold-sleep-us`), each timed alone: the thread
  sleeps between two commits as the live broker's does between two requests (the CPU idles, the caches and branch
  predictors go cold), and a commit takes about what it takes there (2026-11-26: hot 22-24 us, cold 40-65 us, the
  live broker 50-75 us per OffsetCommit; the more the machine is loaded, the colder);
- bytecodes: the bytecodes executed per commit (sys.settrace's opcode events over 200 commits), by function: a count
  that does not move with the machine's load, for A/B of a change on this shared machine;
- calls: the Python calls a commit makes (cProfile over 1,000 more: calls of Python functions and of built-ins, per
  commit) and the functions called most.

The control plane is off, as in `kafkite serve` without a control listener. No socket, client nor other process: it
counts and times the handling alone (decode, handler, coordinator, log append, answer). Give PYTHONPATH another
tree's `src` for an A/B. For instructions rather than bytecodes (every C call counted too), run a copy of the loop
under `valgrind --tool=cachegrind --cache-sim=no` with N and with 0 commits: (Ir(N) - Ir(0)) / N is steady to 1%.
"""
from __future__ import annotations

import argparse
import collections
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import time

import structlog
import trio
from kafka.protocol.consumer import OffsetCommitRequest

from kafkite.server.handlers.groups import ensure_offsets_topic
from kafkite.testing.runner import BrokerThread


def frame(offset: int, version: int = 9) -> bytes:
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    req = OffsetCommitRequest(group_id="bench-group", generation_id_or_member_epoch=-1, member_id="",
                              group_instance_id=None, retention_time_ms=-1,
                              topics=[T(name="bench", partitions=[T.OffsetCommitRequestPartition(
                                  partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                                  committed_metadata="")])])
    req.API_VERSION = version
    req.with_header(correlation_id=1, client_id="rdkafka")
    return bytes(req.encode(header=True))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--disk", action="store_true", help="a data dir (an fsync per commit) instead of memory")
    ap.add_argument("--commits", type=int, default=3000, help="commits per timed block")
    ap.add_argument("--top", type=int, default=60, help="functions shown, most called first")
    ap.add_argument("--by-caller", metavar="NAME", help="also show who calls the functions whose name has NAME")
    ap.add_argument("--cold-sleep-us", type=float, default=10.0, help="the sleep before each cold commit")
    ap.add_argument("--ops-top", type=int, default=25, help="functions shown, most bytecodes first")
    args = ap.parse_args(argv)
    frames = [frame(i) for i in range(args.commits)]
    # a timed block is one long loop step of thousands of commits: no watchdog line for it
    os.environ.setdefault("KAFKITE_LOOP_WATCHDOG_MS", "0")
    with BrokerThread(data_dir=tempfile.mkdtemp() if args.disk else None) as bt:
        broker = bt.broker
        broker.apis.faults = None  # as `kafkite serve` without a control listener

        async def seed() -> None:
            await broker.admin.create_topic("bench", 1, 1, None, {})
            await ensure_offsets_topic(broker.apis)
            while len(broker.apis.group_coordinator.coordinator.shards) < 50:
                await trio.sleep(0.01)

        bt.call(seed)
        log = structlog.get_logger("bench")

        async def commits(n: int) -> float:
            dispatch = broker.router.dispatch
            t0 = time.perf_counter()
            for i in range(n):
                _, waits = await dispatch(frames[i], "127.0.0.1:1", log)
                for w in waits:
                    await w()
            return (time.perf_counter() - t0) / n * 1e6

        async def cold(n: int) -> float:
            dispatch, pause, times = broker.router.dispatch, args.cold_sleep_us / 1e6, []
            for i in range(n):
                time.sleep(pause)
                t0 = time.perf_counter()
                _, waits = await dispatch(frames[i], "127.0.0.1:1", log)
                for w in waits:
                    await w()
                times.append(time.perf_counter() - t0)
            return statistics.median(times) * 1e6

        ops: collections.Counter = collections.Counter()
        traced = min(200, args.commits)

        def tracer(f, event, _arg):
            if event == "call":
                f.f_trace_opcodes = True
                f.f_trace_lines = False
            elif event == "opcode":
                code = f.f_code
                ops[(code.co_filename, code.co_name)] += 1
            return tracer

        async def counted(n: int) -> None:
            dispatch = broker.router.dispatch
            for i in range(n):
                sys.settrace(tracer)
                try:
                    _, waits = await dispatch(frames[i], "127.0.0.1:1", log)
                    for w in waits:
                        await w()
                finally:
                    sys.settrace(None)

        bt.call(commits, min(300, args.commits))
        blocks = [bt.call(commits, args.commits) for _ in range(5)]
        what = "disk" if args.disk else "memory"
        print(f"{what}: hot {min(blocks):.1f} us per commit at best (blocks: {' '.join(f'{b:.1f}' for b in blocks)})")
        print(f"{what}: cold {bt.call(cold, min(2000, args.commits)):.1f} us per commit (median; a "
              f"{args.cold_sleep_us:g} us sleep before each)")
        bt.call(counted, traced)
        print(f"{sum(ops.values()) / traced:.0f} bytecodes per commit (sys.settrace opcode events), by function:")
        for (path, name), count in ops.most_common(args.ops_top):
            where = path.split("site-packages/")[-1].split("src/")[-1]
            print(f"{count / traced:7.1f}  {where} {name}")
        profile, n = cProfile.Profile(), min(1000, args.commits)

        async def profiled() -> None:
            profile.enable()
            await commits(n)
            profile.disable()

        bt.call(profiled)
    stats = pstats.Stats(profile)
    calls = sum(v[1] for v in stats.stats.values())
    print(f"{calls / n:.1f} calls per commit (cProfile: Python functions and built-ins)")
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][1])[:args.top]
    for (path, line, name), (_, nc, tt, _ct, _) in rows:
        where = path.split("site-packages/")[-1].split("src/")[-1]
        print(f"{nc / n:7.2f}  {tt / n * 1e6:6.2f} us  {where}:{line} {name}")
    if args.by_caller:
        for (path, line, name), (*_, callers) in stats.stats.items():
            if args.by_caller in name:
                print(f"-- {name} ({path.split('src/')[-1]}:{line}) called by:")
                for (cpath, cline, cname), v in callers.items():
                    print(f"{v[1] / n:7.2f}  {cpath.split('src/')[-1]}:{cline} {cname}")


if __name__ == "__main__":
    main()
