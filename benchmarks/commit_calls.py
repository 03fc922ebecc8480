"""One request's handling in-process: time, bytecodes and Python calls per OffsetCommit (or, --produce, per Produce).

    python benchmarks/commit_calls.py [--disk] [--commits 3000] [--top 60] [--by-caller NAME] [--ops-top 25]
    python benchmarks/commit_calls.py --produce [--records-per-partition 230] [--partitions 6] [--requests 400]

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

--produce hands it Produce v9 requests instead, as confluent-kafka sends them with 3 producers on 6 partitions of 100 B
records: acks=-1, one topic, one uncompressed batch per partition (no producer id) of `--records-per-partition`
records of a 100-byte value and a short key; `--requests` frames (400 by default, ~155 KB each) are built and handed
over in turn, a timed block going round them.

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
from kafka.protocol.producer.produce import ProduceRequest

from kafkite.server.handlers.groups import ensure_offsets_topic
from kafkite.storage.batch import build_batch
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


def produce_frame(i: int, records: int, partitions: int, version: int = 9) -> bytes:
    """A Produce as confluent-kafka sends it here: acks=-1, one topic, one uncompressed batch of `records` 100 B
    values per partition, no producer id."""
    cls = ProduceRequest[version]
    D = cls.TopicProduceData
    value, now = os.urandom(100), int(time.time() * 1000)
    data = [D.PartitionProduceData(index=p, records=bytes(build_batch(
        [(b"%d" % ((i * records + k) % 1000), value, []) for k in range(records)], base_offset=0, timestamp_ms=now)))
        for p in range(partitions)]
    req = cls(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[D(name="bench", partition_data=data)])
    req.with_header(correlation_id=i, client_id="rdkafka")
    return bytes(req.encode(header=True))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--disk", action="store_true", help="a data dir (an fsync per commit) instead of memory")
    ap.add_argument("--commits", "--requests", dest="count", type=int,
                    help="requests per timed block (default: 3000 commits, 400 produce requests)")
    ap.add_argument("--produce", action="store_true", help="Produce requests instead of OffsetCommits")
    ap.add_argument("--records-per-partition", type=int, default=230, help="--produce: records in each batch")
    ap.add_argument("--partitions", type=int, default=6, help="--produce: partitions in each request")
    ap.add_argument("--top", type=int, default=60, help="functions shown, most called first")
    ap.add_argument("--by-caller", metavar="NAME", help="also show who calls the functions whose name has NAME")
    ap.add_argument("--cold-sleep-us", type=float, default=10.0, help="the sleep before each cold commit")
    ap.add_argument("--ops-top", type=int, default=25, help="functions shown, most bytecodes first")
    args = ap.parse_args(argv)
    unit = "request" if args.produce else "commit"
    count = args.count or (400 if args.produce else 3000)
    frames = [produce_frame(i, args.records_per_partition, args.partitions) if args.produce else frame(i)
              for i in range(count)]
    # a timed block is one long loop step of thousands of commits: no watchdog line for it
    os.environ.setdefault("KAFKITE_LOOP_WATCHDOG_MS", "0")
    with BrokerThread(data_dir=tempfile.mkdtemp() if args.disk else None) as bt:
        broker = bt.broker
        broker.apis.faults = None  # as `kafkite serve` without a control listener

        async def seed() -> None:
            await broker.admin.create_topic("bench", args.partitions if args.produce else 1, 1, None, {})
            if args.produce:
                return
            await ensure_offsets_topic(broker.apis)
            while len(broker.apis.group_coordinator.coordinator.shards) < 50:
                await trio.sleep(0.01)

        bt.call(seed)
        log = structlog.get_logger("bench")

        async def commits(n: int) -> float:
            dispatch = broker.router.dispatch
            t0 = time.perf_counter()
            for i in range(n):
                _, waits = await dispatch(frames[i % count], "127.0.0.1:1", log)
                for w in waits:
                    await w()
            return (time.perf_counter() - t0) / n * 1e6

        async def cold(n: int) -> float:
            dispatch, pause, times = broker.router.dispatch, args.cold_sleep_us / 1e6, []
            for i in range(n):
                time.sleep(pause)
                t0 = time.perf_counter()
                _, waits = await dispatch(frames[i % count], "127.0.0.1:1", log)
                for w in waits:
                    await w()
                times.append(time.perf_counter() - t0)
            return statistics.median(times) * 1e6

        ops: collections.Counter = collections.Counter()
        traced = min(50 if args.produce else 200, count)

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
                    _, waits = await dispatch(frames[i % count], "127.0.0.1:1", log)
                    for w in waits:
                        await w()
                finally:
                    sys.settrace(None)

        bt.call(commits, min(300, count))
        blocks = [bt.call(commits, count) for _ in range(5)]
        what = "disk" if args.disk else "memory"
        print(f"{what}: hot {min(blocks):.1f} us per {unit} at best (blocks: {' '.join(f'{b:.1f}' for b in blocks)})"
              + (f", {min(blocks) / (args.records_per_partition * args.partitions):.3f} us per record"
                 if args.produce else ""))
        print(f"{what}: cold {bt.call(cold, min(2000, count)):.1f} us per {unit} (median; a "
              f"{args.cold_sleep_us:g} us sleep before each)")
        bt.call(counted, traced)
        print(f"{sum(ops.values()) / traced:.0f} bytecodes per {unit} (sys.settrace opcode events), by function:")
        for (path, name), ran in ops.most_common(args.ops_top):
            where = path.split("site-packages/")[-1].split("src/")[-1]
            print(f"{ran / traced:7.1f}  {where} {name}")
        profile, n = cProfile.Profile(), min(200 if args.produce else 1000, count)

        async def profiled() -> None:
            profile.enable()
            await commits(n)
            profile.disable()

        bt.call(profiled)
    stats = pstats.Stats(profile)
    calls = sum(v[1] for v in stats.stats.values())
    print(f"{calls / n:.1f} calls per {unit} (cProfile: Python functions and built-ins)")
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
