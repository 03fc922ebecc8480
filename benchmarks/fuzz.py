"""The long fuzzing run: a million fuzzed frames through a broker's request path.

    python benchmarks/fuzz.py [--frames 1000000] [--minutes 20] [--seed 1] [--json out.json]

An in-memory broker (BrokerThread, auto.create.topics.enable=false) gets frames straight into its
router, inside its own Trio loop, as a connection hands them over -- no sockets, so the run measures
the decoder and the handlers, not the TCP stack. The frames (kafkite.testing.fuzz), for every served
(api, version):

  40%  a real client's recorded request (../shared/golden-requests) with random damage
  45%  a structurally valid request built from the schema, with random field values
  13%  the same, then damaged
   2%  a well-formed JoinGroup into a known group (members and generations for the rest to hit)

Every frame's outcome: answered, refused (error codes only), closed (undecodable: the connection would
be closed), pending (a Fetch/JoinGroup still waiting after 50 ms: cancelled, as a closing connection
would), skipped (CreateTopics/CreatePartitions over 10000 partitions: another change bounds those).
Findings, counted by kind: an exception out of a handler (what a connection logs as connection.error),
a response a client could not decode, and a state change (topics, configs, log end offsets, groups)
behind a refused request. Every --reset frames the broker is replaced by a fresh one; before that, a
Metadata request over a real socket checks that another connection is still served.

Prints frames/s and the findings by kind (with one example each); exits 1 if there are any.
"""
from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import time
from collections import Counter
from pathlib import Path

import structlog

from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import MetadataRequest

from kafkite.testing import fuzz
from kafkite.testing.runner import BrokerThread
from kafkite.testing.wire_client import WireClient

GOLDEN = Path(__file__).resolve().parents[1].parent / "shared" / "golden-requests"


def next_frame(rng: random.Random, golden, gen: fuzz.RequestGenerator, mut: fuzz.Mutator, served) -> bytes:
    r = rng.random()
    if r < 0.40 and golden:
        return mut.mutate(rng.choice(golden)[2])
    if r < 0.42:
        return gen.join_group()
    api, v = rng.choice(served)
    frame = gen.frame(api, v)
    return mut.mutate(frame) if r > 0.87 else frame


def run_chunk(n: int, rng: random.Random, golden, served, totals: dict, deadline: float) -> int:
    """n frames against a fresh broker; returns how many ran (fewer if the deadline passed)."""
    with BrokerThread(overrides={"auto.create.topics.enable": "false"}) as bt:
        broker = bt.broker

        async def main() -> int:
            await fuzz.seed(broker)
            runner = fuzz.FrameRunner(broker)
            names = fuzz.Names()
            runner.refresh_names(names)
            gen = fuzz.RequestGenerator(rng, names)
            mut = fuzz.Mutator(rng)
            done = 0
            for i in range(n):
                if i % 1000 == 0:
                    runner.refresh_names(names)
                    if time.monotonic() > deadline:
                        break
                try:
                    frame = next_frame(rng, golden, gen, mut, served)
                except Exception as exc:  # the generator's own limits (e.g. a value kafka-python won't encode)
                    totals["generator"][f"{type(exc).__name__}: {str(exc)[:80]}"] += 1
                    continue
                await runner.run(frame)
                done += 1
            totals["outcomes"].update(runner.counts)
            totals["by_api"].update(runner.by_api)
            totals["findings"].update(runner.crashes)
            for k, v in runner.examples.items():
                totals["examples"].setdefault(k, v)
            return done

        done = bt.call(main)
        with WireClient.connect(bt.bootstrap_servers) as w:  # another connection is still served
            if not w.request(MetadataRequest(topics=None), 9).brokers:
                totals["findings"]["another connection not served"] += 1
        return done


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=1_000_000)
    ap.add_argument("--minutes", type=float, default=0, help="stop after this long (0: no limit)")
    ap.add_argument("--reset", type=int, default=50_000, help="frames per broker")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the figures here too")
    args = ap.parse_args(argv)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))

    rng = random.Random(args.seed)
    golden = fuzz.golden_frames(GOLDEN)
    served = fuzz.served()
    totals = {"outcomes": Counter(), "by_api": Counter(), "findings": Counter(), "generator": Counter(),
              "examples": {}}
    t0 = time.monotonic()
    deadline = t0 + args.minutes * 60 if args.minutes else float("inf")
    done = 0
    while done < args.frames and time.monotonic() < deadline:
        done += run_chunk(min(args.reset, args.frames - done), rng, golden, served, totals, deadline)
        rate = done / (time.monotonic() - t0)
        print(f"{done} frames, {rate:.0f} frames/s, findings {sum(totals['findings'].values())}", flush=True)
    elapsed = time.monotonic() - t0

    print(f"\n{done} frames in {elapsed:.0f} s: {done / elapsed:.0f} frames/s "
          f"({len(golden)} golden frames, {len(served)} served api versions, seed {args.seed})")
    print("outcomes:", dict(totals["outcomes"].most_common()))
    per_api: dict[int, dict[str, int]] = {}
    for (api, kind), n in totals["by_api"].items():
        per_api.setdefault(api, {})[kind] = n
    for api in sorted(per_api):
        name = ApiKey(api).name if api in {k.value for k in ApiKey} else str(api)
        print(f"  {api:3d} {name:26s} {dict(sorted(per_api[api].items()))}")
    if totals["generator"]:
        print("generator skips:", dict(totals["generator"]))
    print(f"findings: {sum(totals['findings'].values())} in {len(totals['findings'])} kinds")
    for kind, n in totals["findings"].most_common():
        print(f"  {n:6d}  {kind}\n          {totals['examples'].get(kind, '')[:600]}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "frames": done, "seconds": round(elapsed, 1), "frames_per_s": round(done / elapsed),
            "outcomes": dict(totals["outcomes"]), "findings": dict(totals["findings"]),
            "examples": totals["examples"]}, indent=2))
    return 1 if totals["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
