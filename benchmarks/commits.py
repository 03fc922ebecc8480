"""Offset commits, Kafkite vs Tansu, same client (confluent-kafka), same run.

    python benchmarks/commits.py [--commits 2000] [--consumers 8] [--repeat 3] [--separate-groups] [--ceiling]

Starts `kafkite serve --in-memory`, `kafkite serve --data-dir` (default config: flush.messages=1,
an fsync before every acknowledgement) and `tansu broker ... --storage-engine memory://` on free
ports, one at a time, rounds interleaved. Against each it measures synchronous offset commits:

  1 consumer   one consumer with a group.id and an assigned partition (assign(): no group
               membership, so every OffsetCommit carries generation -1 and an empty member id)
               calling commit(offsets=[TopicPartition(topic, p, n)], asynchronous=False) N times.
  K consumers  K such consumers at once, each in its own process (multiprocessing, spawn), all
               started together behind a barrier; commits/s = K*N over the wall time from the
               barrier's release to the slowest consumer's last answer.

By default the K consumers share one group.id and each commits its own partition of a K-partition
topic: what the members of one consumer group do, and the case a broker cannot spread out (one
group = one __consumer_offsets partition = one coordinator shard and one log to append to and
fsync). --separate-groups gives each consumer its own group.id instead (spread over the
coordinator's partitions, as many unrelated applications would be).

Before the timed loop every consumer makes a few untimed commits (the coordinator lookup and
connection set-up are not counted). After it, every consumer checks that committed() returns the
last offset it committed, on every broker. The table shows medians of --repeat rounds and the
ratio Kafkite/Tansu. This machine is noisy: read the ratio, not the absolute numbers.

Beside each rate: the broker's CPU per commit (user + system CPU of its process over the run,
/proc/PID/stat, divided by every commit of the run, the untimed warm-up ones included), a figure
that holds still on a noisy machine where the rates swing.

--baseline DIR adds Kafkite from another source tree (DIR: a `src` directory, e.g. one made with
`git archive <commit> src | tar -x -C /tmp/base`) in memory and on disk, as "memory0" and "disk0", in the same
interleaved rounds: an A/B comparison of two versions on one noisy machine (the table adds new/baseline
ratios). --modes keeps only the named modes (e.g. `--modes memory,memory0` for a quick A/B).

--valgrind N counts instead of timing: each Python broker of the chosen modes (memory, memory0, null) runs under
valgrind (cachegrind, no cache simulation) once with N commits from one consumer and once with none, and the
difference over N is the user-space instructions the broker executes per commit -- its Trio loop, connection,
decoding, handling and answer, not the kernel's share of its system calls. The count is the same in every run (to
about 1%), however loaded the machine: an A/B of a change on a shared machine where CPU per commit swings by 1.5x.
2026-11-26: the null broker 95-97K, Kafkite in memory 299-302K (323-326K before that day's sixth pass), 278-282K
after the seventh, 225-231K after the eighth (then a run now and then counts a one-off ~40M instructions more --
247K at N=2000, 235K at 5000 --, a background turn in the measured window, it seems: compare runs of the same N).

--pin puts each broker (every thread) on the last CPU and the consumers on the others (as throughput.py --pin).
Unpinned, Linux often wakes the broker on the CPU its client just ran on (a loopback socket's wake-up), and the
broker's code meets caches the client has just filled: with one consumer, a commit's handling costs the broker
2-3x its in-process time (commit_calls.py's hot against cold), more for a broker that runs more code. Pinned, each
keeps its own core's caches: on 2026-11-26, one consumer, Kafkite in memory 5,486 / 5,472 commits/s against the
null broker's 7,479 / 7,119 (0.73 / 0.77x) where unpinned it was 4,392 / 4,134 against 6,870 / 6,517 (0.64 /
0.63x). Compiling the commit path's 18 modules with Cython (no annotations, an experiment not kept) made a
commit slower, hot 22 us against 20 and cold 45-49 us against 30-33: a bigger code footprint for the same work.

--ceiling adds two brokers that do no work (benchmarks/null_broker.py: every OffsetCommit answered
with a cached answer; "null+fsync" with an fsync per answer in a worker thread): the most any broker
could reach with this client on this machine, in memory and with an fsync per acknowledgement.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import queue
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

# the same broker starters as throughput.py: kafkite serve --in-memory / --data-dir (default flush
# policy) on a free port, and Tansu (memory engine, ready on an ApiVersions answer) from peer.py
import throughput  # noqa: E402
from throughput import (BROKER_CPUS, CLIENT_CPUS, broker_on_free_port, confluent_version, free_port, kafkite,  # noqa: E402
                        kafkite_disk, null_broker, pin_process, wait_port)
from peer import tansu  # noqa: E402
from proc_cpu import BrokerCpu  # noqa: E402

TOPIC = "commits"
WARMUP = 5  # untimed commits per consumer before the barrier
MODES = (("memory", kafkite), ("disk", kafkite_disk), ("tansu", tansu))


CEILING = (("null", null_broker), ("null+fsync", lambda: null_broker(fsync=True)))


def kafkite_from(src: str, disk: bool = False):
    """`kafkite serve` as throughput.kafkite starts it, but from the source tree `src` (PYTHONPATH)."""
    def command(port: int, d: str) -> list[str]:
        store = ["--data-dir", d] if disk else ["--in-memory"]
        return ["env", f"PYTHONPATH={src}", sys.executable, "-m", "kafkite.cli", "serve", "--port", str(port),
                *store, "--log-level", "WARNING"]
    return broker_on_free_port(command)


def fsync_latency_us(writes: int = 500, size: int = 200) -> float:
    """Microseconds per small append + fsync on this disk (where the disk mode's data directory goes):
    with an fsync per acknowledgement and one commit at a time, 1e6 / this bounds one consumer's rate."""
    import tempfile
    with tempfile.TemporaryDirectory(dir=os.environ.get("KAFKITE_BENCH_DIR")) as d:
        fd = os.open(os.path.join(d, "probe"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        data = os.urandom(size)
        t0 = time.perf_counter()
        for _ in range(writes):
            os.write(fd, data)
            os.fsync(fd)
        dt = time.perf_counter() - t0
        os.close(fd)
    return dt / writes * 1e6


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": bootstrap, "log_level": 5})  # not its "purging events" notice
    for f in a.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)


def committer(bootstrap: str, group: str, partition: int, n: int, barrier, results) -> None:
    """One consumer (a process of its own): WARMUP untimed commits, the barrier, N timed commits,
    then committed() must return the last offset. Puts (partition, start, end, committed, error)."""
    try:
        from confluent_kafka import OFFSET_END, Consumer, TopicPartition
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                      "enable.auto.offset.store": False})
        # fetching starts at the (empty) log's end: a long poll in the background, and no "offset out
        # of range" reset as there would be from the committed offset, which lies past the end
        c.assign([TopicPartition(TOPIC, partition, OFFSET_END)])
        offset = 0

        def commit_one() -> None:
            nonlocal offset
            offset += 1
            out = c.commit(offsets=[TopicPartition(TOPIC, partition, offset)], asynchronous=False)
            # commit() raises KafkaException on a request-level error; a partition error comes back here
            if out is None or out[0].error is not None:
                raise RuntimeError(f"commit of offset {offset} failed: {out}")

        for _ in range(WARMUP):
            commit_one()
        barrier.wait(120)
        t0 = time.monotonic()  # CLOCK_MONOTONIC: one clock for every process on this machine
        for _ in range(n):
            commit_one()
        t1 = time.monotonic()
        got = c.committed([TopicPartition(TOPIC, partition)], timeout=30)[0]
        c.close()
        results.put((partition, t0, t1, got.offset, None if got.error is None else str(got.error)))
    except BaseException as e:  # noqa: BLE001  (reported to the parent, which fails the run)
        barrier.abort()
        results.put((partition, 0.0, 0.0, -1, f"{type(e).__name__}: {e}"))


def run_commits(bootstrap: str, consumers: int, n: int, group: str, separate_groups: bool,
                check: bool = True) -> float:
    """Total commits/s of `consumers` processes committing n offsets each (partitions 0..consumers-1);
    with `check`, committed() must have returned the last offset committed."""
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(consumers), ctx.Queue()
    procs = [ctx.Process(target=committer, args=(bootstrap, f"{group}-{i}" if separate_groups else group, i, n,
                                                 barrier, results), daemon=True)
             for i in range(consumers)]
    for p in procs:
        p.start()
    rows: list[tuple] = []
    deadline = time.monotonic() + 300
    try:
        while len(rows) < consumers:
            try:
                rows.append(results.get(timeout=1))
            except queue.Empty:
                dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
                if dead or time.monotonic() > deadline:  # a consumer died without a word, or hangs
                    raise RuntimeError(f"consumer processes: exit codes {[p.exitcode for p in procs]}, "
                                       f"{len(rows)} of {consumers} reported") from None
    finally:
        for p in procs:  # they have all reported (or the run failed: then they go at once)
            p.join(30 if len(rows) == consumers else 0)
            if p.is_alive():
                p.kill()
                p.join(5)
    errors = [f"partition {p}: {err}" for p, *_, err in rows if err]
    if errors:
        raise RuntimeError("; ".join(errors))
    for p, _, _, got, _ in rows:  # WARMUP + n commits of offsets 1, 2, ...: the last one is WARMUP + n
        if check and got != WARMUP + n:
            raise AssertionError(f"committed() on partition {p} returned {got}, expected {WARMUP + n}")
    start, end = min(r[1] for r in rows), max(r[2] for r in rows)
    return consumers * n / (end - start)


def broker_argv(mode: str, port: int) -> list[str]:
    """The command line of a Python broker mode (memory, memory0: the same from the baseline's PYTHONPATH, null)."""
    if mode == "null":
        return [sys.executable, str(Path(__file__).with_name("null_broker.py")), "--port", str(port)]
    return [sys.executable, "-m", "kafkite.cli", "serve", "--port", str(port), "--in-memory", "--log-level", "WARNING"]


def instructions(mode: str, commits: int, src: str | None) -> int:
    """Instructions (valgrind's I refs) the broker of `mode` executes from its start to its end, with `commits`
    commits from one consumer (after its WARMUP ones) in between; memory0 runs the source tree `src`."""
    port = free_port()
    env = {**os.environ, **({"PYTHONPATH": src} if mode == "memory0" else {})}
    with tempfile.TemporaryDirectory(dir=os.environ.get("KAFKITE_BENCH_DIR")) as d:
        out = os.path.join(d, "valgrind.log")
        proc = subprocess.Popen(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                                 f"--log-file={out}", *broker_argv(mode, port)], stderr=subprocess.DEVNULL, env=env)
        try:
            wait_port(port, 600)  # (a start under valgrind takes 10-30 s)
            bootstrap = f"127.0.0.1:{port}"
            create_topic(bootstrap, TOPIC, 1)
            run_commits(bootstrap, 1, commits, f"valgrind-{commits}", False, check=mode != "null")
        except BaseException:
            print(f"{mode} under valgrind (exit code {proc.poll()}):\n" + Path(out).read_text()[-3000:], file=sys.stderr)
            raise
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(600)
        found = re.search(r"I\s+refs:\s+([\d,]+)", Path(out).read_text())
        if found is None:
            raise RuntimeError(f"no instruction count from valgrind for {mode}")
        return int(found.group(1).replace(",", ""))


def count_instructions(modes: list[str], commits: int, src: str | None) -> None:
    for mode in modes:
        per_commit = (instructions(mode, commits, src) - instructions(mode, 0, src)) / commits
        print(f"{mode:>8}: {per_commit:,.0f} instructions per commit (valgrind, one consumer, {commits} commits)")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=2000, help="timed commits per consumer")
    ap.add_argument("--consumers", type=int, default=8, help="consumers (processes) of the concurrent case")
    ap.add_argument("--repeat", type=int, default=3, help="rounds, brokers interleaved; medians are reported")
    ap.add_argument("--separate-groups", action="store_true",
                    help="one group.id per consumer (default: one group, a partition per consumer)")
    ap.add_argument("--ceiling", action="store_true",
                    help="also brokers that do no work (null_broker.py): the most this client reaches here")
    ap.add_argument("--baseline", metavar="DIR",
                    help="also Kafkite from this source tree (a src directory): modes memory0 and disk0")
    ap.add_argument("--modes", help="only these modes, comma-separated (memory, disk, tansu, null, null+fsync, "
                                    "memory0, disk0)")
    ap.add_argument("--pin", action="store_true",
                    help="each broker (every thread) on the last CPU, this script and its consumers on the others")
    ap.add_argument("--shared-session", action="store_true",
                    help="each Kafkite and null broker in this script's session (scheduling group), shared with the "
                         "consumers, while Tansu has one of its own (by default every broker has its own: "
                         "throughput.py's docstring)")
    ap.add_argument("--valgrind", type=int, metavar="N",
                    help="count each Python broker's instructions per commit under valgrind over N commits instead")
    args = ap.parse_args(argv)
    if args.valgrind:
        src = str(Path(args.baseline).resolve()) if args.baseline else None
        wanted = args.modes.split(",") if args.modes else ["memory", "null"] + (["memory0"] if src else [])
        count_instructions([m for m in wanted if m in ("memory", "memory0", "null")], args.valgrind, src)
        return
    cases = [1] + ([args.consumers] if args.consumers != 1 else [])
    modes = MODES + (CEILING if args.ceiling else ())
    if args.baseline:
        src = str(Path(args.baseline).resolve())
        modes += (("memory0", lambda: kafkite_from(src)), ("disk0", lambda: kafkite_from(src, disk=True)))
    if args.modes:
        wanted = args.modes.split(",")
        modes = tuple(m for m in modes if m[0] in wanted)
    names = [name for name, _ in modes]
    throughput.OWN_SESSIONS = not args.shared_session
    if args.pin:
        os.sched_setaffinity(0, CLIENT_CPUS)  # inherited by the consumer processes
    runs: dict[tuple[str, int], list[float]] = {}
    cpus: dict[tuple[str, int], list[float]] = {}
    for rnd in range(args.repeat):
        for name, broker in modes:
            with broker() as bs:
                create_topic(bs, TOPIC, max(cases))
                cpu = BrokerCpu(bs)
                if args.pin:
                    pin_process(cpu.pid, BROKER_CPUS)
                for k in cases:
                    s0 = cpu.seconds()
                    rate = run_commits(bs, k, args.commits, f"bench-{rnd}-{k}", args.separate_groups,
                                       check=not name.startswith("null"))
                    us = (cpu.seconds() - s0) / (k * (args.commits + WARMUP)) * 1e6
                    runs.setdefault((name, k), []).append(rate)
                    cpus.setdefault((name, k), []).append(us)
                    print(f"round {rnd + 1}/{args.repeat} {name:>6} consumers={k}: {rate:,.0f} commits/s, "
                          f"{us:,.0f} us CPU/commit", file=sys.stderr, flush=True)
    med = {key: statistics.median(v) for key, v in runs.items()}
    cpu_med = {key: statistics.median(v) for key, v in cpus.items()}
    how = "one group.id each" if args.separate_groups else "one group.id, a partition each"
    print(f"Synchronous offset commits (assign(), generation -1), {args.commits} per consumer; medians of "
          f"{args.repeat} interleaved rounds, confluent-kafka {confluent_version()}"
          f"{f', brokers pinned to CPU {sorted(BROKER_CPUS)}, consumers to {sorted(CLIENT_CPUS)}' if args.pin else ''}"
          ". Concurrent consumers: "
          f"separate processes started behind a barrier, {how}; commits/s = all commits over the wall time "
          "of the slowest. Tansu with its memory:// engine; Kafkite in memory and on disk with its default "
          "fsync before every acknowledgement (disk). committed() returned the last offset on every broker"
          + (" but the null ones (their answers are cached, nothing is stored)." if args.ceiling else "."))
    us = fsync_latency_us()
    print(f"This disk takes {us:,.0f} us per 200-byte append + fsync: at most {1e6 / us:,.0f} fsyncs/s one after "
          "another, the ceiling of one consumer's 'disk' rate when every commit waits for its own fsync.")
    print("CPU us/commit: the broker process's user + system CPU over the run / commits (warm-up included).")
    ceiling = args.ceiling and "null" in names and "null+fsync" in names
    tansu_on = "tansu" in names
    ab = args.baseline and "memory0" in names
    print(f"{'consumers':>9} {'mode':>10} | {'commits/s':>10} {'tansu':>10} {'ratio':>6}"
          + (f" {'/null':>6}" if ceiling else "") + (f" {'/base':>6}" if ab else "")
          + f" | {'CPU us/commit':>13} {'tansu':>6}" + (f" {'/base':>6}" if ab else ""))
    for k in cases:
        t, tc = (med[("tansu", k)], cpu_med[("tansu", k)]) if tansu_on else (float("nan"), float("nan"))
        for mode in (m for m in names if m != "tansu"):
            v = med[(mode, k)]
            # memory against the null broker, disk against the null broker with an fsync per answer
            ref = {"memory": "null", "disk": "null+fsync", "memory0": "null", "disk0": "null+fsync"}.get(mode, mode)
            vs_null = f" {v / med[(ref, k)]:>6.2f}" if ceiling else ""
            base = {"memory": "memory0", "disk": "disk0"}.get(mode)
            vs_base = f" {v / med[(base, k)]:>6.2f}" if ab and base in names else (f" {'':>6}" if ab else "")
            cpu_base = (f" {cpu_med[(mode, k)] / cpu_med[(base, k)]:>6.2f}" if ab and base in names
                        else (f" {'':>6}" if ab else ""))
            print(f"{k:>9} {mode:>10} | {v:>10,.0f} {t:>10,.0f} {v / t:>6.2f}{vs_null}{vs_base} | "
                  f"{cpu_med[(mode, k)]:>13,.0f} {tc:>6,.0f}{cpu_base}")


if __name__ == "__main__":
    main()
