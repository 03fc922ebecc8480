"""One OffsetCommit's handling in-process: time and Python calls per commit.

    python benchmarks/commit_calls.py [--disk] [--commits 3000] [--top 60] [--by-caller NAME]

Starts a broker in this process (BrokerThread: in memory, or --disk on a temporary data dir), creates a topic and
__consumer_offsets, and hands the real router OffsetCommit v9 frames (one partition, generation -1, an empty member
id: what confluent-kafka's commit() of an assign()ed consumer sends) one after another, each awaited with its waits,
as a connection would. Prints the best and every block's time per commit (5 blocks), then the Python calls a commit
makes (cProfile over 1,000 more: calls of Python functions and of built-ins, per commit) and the functions called
most. The control plane is off, as in `kafkite serve` without a control listener. No socket, client nor other
process: it counts and times the handling alone (decode, handler, coordinator, log append, answer), with warm caches
-- the live broker's figure is higher (README, Benchmarks). Give PYTHONPATH another tree's `src` for an A/B.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
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
    args = ap.parse_args(argv)
    frames = [frame(i) for i in range(args.commits)]
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

        bt.call(commits, min(300, args.commits))
        blocks = [bt.call(commits, args.commits) for _ in range(5)]
        print(f"{'disk' if args.disk else 'memory'}: {min(blocks):.1f} us per commit at best "
              f"(blocks: {' '.join(f'{b:.1f}' for b in blocks)})")
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
