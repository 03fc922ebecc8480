"""Produce and consume throughput, Kafkite vs Tansu, same client (confluent-kafka), same run.

    python benchmarks/throughput.py [--records 400000] [--sizes 100,1024] [--repeat 3]
        [--producers 3 --partitions 6] [--modes kafkite,tansu]

Starts `kafkite serve --in-memory`, `kafkite serve --data-dir` (fsync before every
acknowledgement) and `tansu broker ... --storage-engine memory://` on free ports,
produces N records of each size with confluent-kafka (acks=all, no compression,
linger 5 ms), consumes them back with an assigned consumer, and prints records/s
for each broker and the ratio Kafkite/Tansu. This machine is noisy: read the ratio,
not the absolute numbers. `--producers P --partitions N` (issue 24's load: 3 and 6) produces
from P processes at once, each its share of the records, keyed over a topic of N partitions
(the rate: all records over the time from the common start to the last flush); the consumer
is assigned every partition. `--pin` puts each broker (every thread) on the last CPU and the
clients on the others: the same one core for a one-thread Kafkite as for a many-thread Tansu, and
the clients off it. Every broker runs in a session of its own, as Tansu always did: with the kernel's
autogroup scheduling a session is a scheduling group, and the cores are shared between the groups (the clients', each
broker's) before a group's threads share its part. `--shared-session` starts each Kafkite broker in the benchmark's
session instead (the default before 2026-11-27), where it shares the producers' group thread by thread while Tansu
keeps a group of its own (2026-11-26, 100 B with 3 producers: the one-thread broker then fell behind, 1-10 MB of
requests waiting in its sockets by `ss`, and the producers paid for the late answers, 1.15-1.28 against 1.01-1.12 us
a record; in its own session nothing waited, and it took 0.20-0.24 us a record against 0.17-0.18, answering smaller
reads). `--nice-clients N` runs each producer process at nice +N, in a group of its own at that nice
where the kernel has autogroups, whichever the broker: the producers take what the broker leaves, as producers on
other machines would. `--modes` runs only the named brokers (tansu always runs); kafkite-pure
(not run unless named) is the in-memory broker reading produced records in pure Python. `--baseline DIR`
adds the in-memory broker from another source tree (memory0): an A/B run of two versions. `--modes null` (not run
unless named) adds a broker that answers every Produce without validating or storing it (benchmarks/null_broker.py
--produce): the most any broker reaches with these producers here, so a target above its ratio to Tansu cannot be met
by broker work. A second table gives each
broker's CPU per record (user + system CPU of its process while producing, then while consuming, over the records):
steadier than the rates; and the producers' (see PRODUCER: a lean client, the same for every broker).
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from peer import tansu  # noqa: E402  (Tansu on a free port, memory engine, ready on an ApiVersions answer)
from proc_cpu import BrokerCpu  # noqa: E402  (a broker process's user + system CPU, by its port)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"port {port} never opened")


# Every broker started here runs in a session of its own, as peer.tansu always starts Tansu: the brokers are started
# alike. With the kernel's autogroup scheduling (on here, and in most distributions' kernels) a session is a scheduling
# group: the cores are shared between the groups first, then a group's part between its threads. --shared-session
# (OWN_SESSIONS False) keeps a Kafkite broker in the benchmark's session, sharing its part with the clients thread by
# thread (as a test suite's broker started as a subprocess would), while Tansu keeps a group of its own.
OWN_SESSIONS = True


@contextlib.contextmanager
def broker_on_free_port(command, env: dict | None = None):
    """`command(port, tmpdir)` (an argv) run for the block, on a free port with a temporary directory
    (in $KAFKITE_BENCH_DIR when set), with `env` added to the environment; yields "127.0.0.1:PORT" once the
    port takes connections."""
    port = free_port()
    with tempfile.TemporaryDirectory(dir=os.environ.get("KAFKITE_BENCH_DIR")) as d:
        proc = subprocess.Popen(command(port, d), stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})},
                                start_new_session=OWN_SESSIONS)
        try:
            wait_port(port)
            yield f"127.0.0.1:{port}"
        finally:
            proc.terminate()
            proc.wait(10)


@contextlib.contextmanager
def kafkite(disk: bool = False, extra: tuple[str, ...] = (), env: dict | None = None):
    def command(port: int, d: str) -> list[str]:
        store = ["--data-dir", d] if disk else ["--in-memory"]
        return [sys.executable, "-m", "kafkite.cli", "serve", "--port", str(port), *store, "--log-level", "WARNING",
                *extra]
    with broker_on_free_port(command, env) as bs:
        yield bs


@contextlib.contextmanager
def null_broker(fsync: bool = False, produce: bool = False):
    """benchmarks/null_broker.py on a free port: OffsetCommit answered from a cache (and, `fsync`, an fsync first;
    commits.py's ceiling); `produce`: every Produce answered without validating or storing its records, the most any
    broker could reach with these producers on this machine (nothing to consume from it)."""
    def command(port: int, d: str) -> list[str]:
        return [sys.executable, str(Path(__file__).with_name("null_broker.py")), "--port", str(port),
                *(["--fsync-dir", d] if fsync else []), *(["--produce"] if produce else [])]
    with broker_on_free_port(command) as bs:
        yield bs


@contextlib.contextmanager
def kafkite_pure():
    """In memory, produced records read by the pure-Python walk (KAFKITE_PURE_PYTHON=1), not the compiled one."""
    with kafkite(env={"KAFKITE_PURE_PYTHON": "1"}) as bs:
        yield bs


@contextlib.contextmanager
def kafkite_disk():
    """On disk with Kafkite's default flush.messages=1: every acknowledged record is fsynced first."""
    with kafkite(disk=True) as bs:
        yield bs


@contextlib.contextmanager
def kafkite_disk_pagecache():
    """On disk with Apache Kafka's default flush policy (log.flush.interval.messages = Long.MAX: the
    OS writes the page cache back; Kafka relies on replication, not fsync, for durability)."""
    with kafkite(disk=True, extra=("--override", "log.flush.interval.messages=9223372036854775807")) as bs:
        yield bs


def fsync_ceiling(mb: int = 64, chunk: int = 1 << 20) -> float:
    """MB/s this disk takes with an fsync after every 1 MB write: the bound on fsync-per-ack produce.
    Write as much as a run does: the first ~100 MB land in the page cache at memory speed, after
    that the kernel holds writers to the disk's pace."""
    with tempfile.TemporaryDirectory(dir=os.environ.get("KAFKITE_BENCH_DIR")) as d:
        fd = os.open(os.path.join(d, "probe"), os.O_WRONLY | os.O_CREAT)
        data = os.urandom(chunk)
        t0 = time.perf_counter()
        for _ in range(mb * (1 << 20) // chunk):
            os.write(fd, data)
            os.fsync(fd)
        dt = time.perf_counter() - t0
        os.close(fd)
    return mb / dt


ALL_CPUS = sorted(os.sched_getaffinity(0))
BROKER_CPUS = set(ALL_CPUS[-1:])
CLIENT_CPUS = set(ALL_CPUS[:-1]) or BROKER_CPUS


def pin_process(pid: int, cpus: set[int]) -> None:
    """Every thread of `pid` on `cpus` (threads it starts later inherit it)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(int(task.name), cpus)


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": bootstrap})
    for f in a.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)


def cpu_now() -> float:
    """User + system CPU seconds of this process, every thread (a producer's: its librdkafka threads too)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime + me.ru_stime


# The producer is a lean benchmark client: what it costs per record is spent by both brokers' runs alike, but the
# two cores are shared, so every microsecond the clients take is one the broker under test cannot have. The records
# and what the broker is asked to do stay as issue 24 set them (acks=all, no compression, linger 5 ms, keys
# 0..999, one random value); only the client's own work is cut:
# - the keys are made before the clock starts, and the loop calls produce() with positional arguments and nothing
#   else (confluent-kafka parses keyword arguments per call; a formatted key per record cost 0.4 us of the ~1.7);
# - on_delivery with delivery.report.only.error: confluent-kafka calls back only for the records that failed (it
#   takes the setting itself: librdkafka still hands every record's report to flush(), as with no callback at
#   all, and the broker still acknowledges each record); the run fails on any failure, which it did not check;
# - queue.buffering.max.messages holds every record a producer sends, so produce() never finds the queue full:
#   poll() runs only if it does. batch.size 1 MB and librdkafka's default batch.num.messages (10,000) stay above
#   what a partition's batch gathers here (about 1,400 records of 100 B or 800 of 1 KB, 150-850 KB, measured in
#   the broker: a producer's sending thread, short of CPU, takes what queued meanwhile), so neither closes a batch
#   and neither was changed. Socket buffers stay the system's (4 MB send buffers measured no change), and so does
#   message.copy.max.bytes (0, records sent from their own buffers, cost more at 100 B, the same at 1 KB);
# - the garbage collector is off during the loop (it ran for the argument tuples of the calls: 1-2% of the CPU).
PRODUCER = {"acks": "all", "linger.ms": 5, "batch.size": 1 << 20, "queue.buffering.max.messages": 1_000_000,
            "delivery.report.only.error": True}


def _producer(bootstrap: str, failed: list, warmup: str | None = None):
    """A producer connected before the clock starts: to the bootstrap address (metadata), and with `warmup` (a
    topic) to the partitions' leader too, by one record sent there and acknowledged (librdkafka opens that
    connection on its first produce; the broker serves its first Produce)."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, **PRODUCER, "on_delivery": lambda err, msg: failed.append(err)})
    p.list_topics(timeout=30)
    if warmup is not None:
        p.produce(warmup, b"warm-up", b"0")
        assert p.flush(30) == 0 and not failed, f"the warm-up record failed: {failed}"
    return p


def warmup_topic(topic: str) -> str:
    return topic + "-warmup"


def _keys(n: int, first_key: int) -> list[bytes]:
    """The keys of a producer's n records, made before the clock starts: b"0".."999" in turn, from first_key."""
    cycle = [b"%d" % ((first_key + i) % 1000) for i in range(1000)]
    return (cycle * (n // 1000 + 1))[:n]


def _produce_with(p, failed: list, topic: str, keys: list[bytes], value: bytes) -> None:
    produce = p.produce
    it = iter(keys)
    collecting = gc.isenabled()
    gc.disable()  # the loop makes no cycles: no collections run for the argument tuples each call makes
    try:
        while True:
            try:
                for key in it:
                    produce(topic, value, key)
                break
            except BufferError:  # the queue is full (never with PRODUCER's limit): serve it, send the record again
                while True:
                    p.poll(0.01)
                    try:
                        produce(topic, value, key)
                        break
                    except BufferError:
                        pass
        assert p.flush(120) == 0
    finally:
        if collecting:
            gc.enable()
    assert not failed, f"{len(failed)} records failed, the first: {failed[0]}"


def produce(bootstrap: str, topic: str, n: int, size: int, producers: int = 1, on_start=lambda: None,
            warmup: str | None = None) -> tuple[float, float]:
    """(records/s, the producers' CPU seconds from the start to their last acknowledgement). `on_start()` is called
    when the clock starts: the producers are connected (and the broker has served their start-up requests; with
    `warmup`, a topic, each has had a record acknowledged there)."""
    value = os.urandom(size)
    if producers <= 1:
        failed: list = []
        p, keys = _producer(bootstrap, failed, warmup), _keys(n, 0)
        on_start()
        c0, t0 = cpu_now(), time.perf_counter()
        _produce_with(p, failed, topic, keys, value)
        t1 = time.perf_counter()
        return n / (t1 - t0), cpu_now() - c0
    import multiprocessing as mp
    ctx = mp.get_context("fork")
    ready, go, done = ctx.Barrier(producers + 1), ctx.Event(), ctx.Queue()
    shares = [n // producers + (i < n % producers) for i in range(producers)]
    procs = [ctx.Process(target=_produce_process, args=(bootstrap, topic, share, value, i * 1000 // producers,
                                                        ready, go, done, warmup), daemon=True)
             for i, share in enumerate(shares)]
    for pr in procs:
        pr.start()
    ready.wait(60)
    on_start()
    t0 = time.perf_counter()
    go.set()
    ends = [done.get(timeout=300) for _ in procs]
    for pr in procs:
        pr.join(30)
    assert all(e is not None for e in ends), "a producer failed"
    return n / (max(end for end, _ in ends) - t0), sum(cpu for _, cpu in ends)


NICE_CLIENTS = 0  # --nice-clients: the producer processes' nice increment (0: the brokers' priority)


def _produce_process(bootstrap, topic, n, value, first_key, ready, go, done, warmup) -> None:
    """One producer process: connected and its keys made, then on `go` its records; puts (the time of its last
    acknowledgement, its CPU seconds since `go`), None if it failed."""
    try:
        if NICE_CLIENTS:
            os.nice(NICE_CLIENTS)
            if os.path.exists("/proc/self/autogroup"):  # a group's nice weighs it against the brokers' groups
                os.setsid()
                with open("/proc/self/autogroup", "w") as f:
                    f.write(str(NICE_CLIENTS))
        failed: list = []
        p, keys = _producer(bootstrap, failed, warmup), _keys(n, first_key)
        ready.wait(60)
        go.wait(60)
        c0 = cpu_now()
        _produce_with(p, failed, topic, keys, value)
        done.put((time.perf_counter(), cpu_now() - c0))
    except BaseException:
        done.put(None)
        raise


# librdkafka pauses a partition's fetching for fetch.queue.backoff.ms (1 s by default) whenever its
# local queue passes queued.min.messages or queued.max.messages.kbytes; how often that happens
# depends on how many records each fetch response carries, so with the defaults the figure says more
# about that timer than about the broker. Both brokers get this same client configuration.
CONSUMER = {"group.id": "bench", "enable.auto.commit": False, "fetch.max.bytes": 52428800,
            "max.partition.fetch.bytes": 10485760, "fetch.queue.backoff.ms": 1,
            "queued.min.messages": 1_000_000, "queued.max.messages.kbytes": 16384}
WARMUP = 0.25  # the steady rate is taken over the records after this share


def consume(bootstrap: str, topic: str, n: int, partitions: int = 1, strict: bool = True) -> tuple[float, float, float]:
    """(steady records/s, end-to-end records/s, ms to the first record).

    steady: over the last 75% of the records, so that neither the client's start nor its first
    prefetch (at most queued.max.messages.kbytes) is counted -- the broker's serving rate, as
    kafka-consumer-perf-test's fetch.nMsg.sec leaves the start out. end-to-end: from assign() to
    the last record, including librdkafka's start-up (about half a second of its own timers,
    whichever broker answers)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, **CONSUMER})
    t0 = time.perf_counter()
    c.assign([TopicPartition(topic, i, OFFSET_BEGINNING) for i in range(partitions)])
    got = 0
    first = mark = None
    mark_at = int(n * WARMUP)
    deadline = time.monotonic() + 300
    idle_until = deadline
    while got < n and time.monotonic() < min(deadline, idle_until):
        # never ask for more than will come: consume() returns when it has that many (or times out)
        msgs = c.consume(min(10_000, n - got), timeout=1.0)
        if msgs:
            idle_until = time.monotonic() + 15  # (records missing for good end the read 15 s on)
            last = time.perf_counter()
        if msgs and first is None:
            first = time.perf_counter()
        for m in msgs:
            if not m.error():
                got += 1
        if mark is None and got >= mark_at:
            mark, mark_got = time.perf_counter(), got
    t1 = time.perf_counter()
    c.close()
    if got != n:
        if strict:
            raise AssertionError(f"consumed {got} of {n}")
        # Tansu 0.6's memory engine was seen to serve 398,963-399,370 of 400,000 produced records: reported, and
        # the rate taken over what came (the peer's loss is not Kafkite's to fail the run on)
        print(f"throughput.py: {topic}: consumed {got} of {n} records", file=sys.stderr)
        if got == 0 or mark is None:
            return 0.0, 0.0, 0.0
        t1, n = last, got  # (the rates over what came, up to the last record)
    e2e = n / (t1 - t0)
    # tiny runs: the first answers may already hold every record; then there is no steady phase
    steady = (n - mark_got) / (t1 - mark) if n > mark_got and t1 > mark else e2e
    return steady, e2e, (first - t0) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=400_000, help="records of 100 B; half as many of 1 KB")
    ap.add_argument("--sizes", default="100,1024")
    ap.add_argument("--repeat", type=int, default=3, help="rounds, brokers interleaved; medians are reported")
    ap.add_argument("--producers", type=int, default=1, help="producer processes at once (issue 24: 3)")
    ap.add_argument("--partitions", type=int, default=1, help="the topic's partitions (issue 24: 6)")
    ap.add_argument("--modes", default=",".join(name for name, _ in MODES if name not in ("kafkite-pure", "null")),
                    help="brokers to run, of " + ",".join(name for name, _ in MODES) + " (tansu always)")
    ap.add_argument("--pin", action="store_true",
                    help="the broker on the last CPU, this script and its producers on the others")
    ap.add_argument("--shared-session", action="store_true",
                    help="each Kafkite broker in this script's session (scheduling group), shared with the producers, "
                         "while Tansu has one of its own (by default every broker has its own)")
    ap.add_argument("--nice-clients", type=int, default=0, metavar="N",
                    help="run the producer processes (with --producers 2 or more) at nice +N, below the broker's "
                         "priority, whichever broker: the load generator does not take the cores from the broker "
                         "under test, as producers on other machines would not")
    ap.add_argument("--baseline", metavar="DIR",
                    help="also Kafkite in memory from this source tree (a src directory, e.g. made with `git archive "
                         "<commit> src | tar -x -C /tmp/base`), as mode memory0, in the same rounds: an A/B run")
    args = ap.parse_args()
    global NICE_CLIENTS, OWN_SESSIONS
    NICE_CLIENTS, OWN_SESSIONS = args.nice_clients, not args.shared_session
    if args.pin:
        os.sched_setaffinity(0, CLIENT_CPUS)  # inherited by the producer processes
    wanted = set(args.modes.split(",")) | {"tansu"}
    modes = [(name, broker) for name, broker in MODES if name in wanted]
    if args.baseline:
        base = str(Path(args.baseline).resolve())
        modes.append(("kafkite0", lambda: kafkite(env={"PYTHONPATH": base})))
    import statistics
    rows = []
    for size in [int(s) for s in args.sizes.split(",")]:
        n = args.records if size <= 100 else max(1, args.records // 2)
        runs: dict[str, list[tuple[float, ...]]] = {}
        for rnd in range(args.repeat):
            for name, broker in modes:
                with broker() as bs:
                    topic = f"bench-{size}-{rnd}"
                    try:
                        create_topic(bs, topic, args.partitions)
                        create_topic(bs, warmup_topic(topic), 1)
                    except Exception:
                        print(f"throughput.py: creating {topic} on {name} ({bs}) failed", file=sys.stderr)
                        raise
                    cpu = BrokerCpu(bs)
                    if args.pin:
                        pin_process(cpu.pid, BROKER_CPUS)
                    started = []  # the broker's CPU when the clock starts (its producers' connections served)
                    produced, clients = produce(bs, topic, n, size, args.producers, warmup=warmup_topic(topic),
                                                on_start=lambda: started.append(cpu.seconds()))
                    s0, s1 = started[0], cpu.seconds()
                    # (the null broker keeps nothing: no consume)
                    consumed = (NAN,) * 3 if name == "null" else consume(bs, topic, n, args.partitions,
                                                                        strict=name != "tansu")
                    s2 = cpu.seconds()
                    runs.setdefault(name, []).append((produced, *consumed, (s1 - s0) / n * 1e6,
                                                      NAN if name == "null" else (s2 - s1) / n * 1e6,
                                                      clients / n * 1e6))
        res = {name: tuple(statistics.median(x[i] for x in r) for i in range(7)) for name, r in runs.items()}
        rows.append((size, n, res))
    print(f"Medians of {args.repeat} interleaved rounds, confluent-kafka {confluent_version()}, {args.producers} "
          f"producer(s), {args.partitions} partition(s)"
          f"{f', brokers pinned to CPU {sorted(BROKER_CPUS)}, clients to {sorted(CLIENT_CPUS)}' if args.pin else ''}"
          f"{f', producers at nice +{args.nice_clients}' if args.nice_clients and args.producers > 1 else ''}"
          ". Tansu runs with its "
          "memory:// engine (its only local one); Kafkite in memory, on disk with its default fsync before every "
          "acknowledgement (disk), and on disk with Kafka's default flush policy (page cache).")
    if "kafkite-disk" in wanted:
        volume = max(64, max(n * size for size, n, _ in rows) >> 20)  # as much as the largest run wrote
        print(f"This disk takes {fsync_ceiling(volume):,.0f} MB/s writing {volume} MB with an fsync per 1 MB: the "
              "ceiling of the 'disk' produce rate.")
    print("consume/s: steady rate over the last 75% of the records; e2e/s: from assign() to the last record, "
          "with the client's start-up (first ms: to the first record). Consumer config: " +
          ", ".join(f"{k}={v}" for k, v in CONSUMER.items() if k != "group.id"))
    print(f"{'size':>6} {'records':>8} {'mode':>9} | {'produce/s':>10} {'tansu':>10} {'ratio':>6} | "
          f"{'consume/s':>10} {'tansu':>10} {'ratio':>6} | {'e2e/s':>9} {'tansu':>9} {'ratio':>6} | "
          f"{'first ms':>8} {'tansu':>6}")
    for size, n, res in rows:
        tp, tc, te, tf = res["tansu"][:4]
        for mode, label in LABELS:
            if mode not in res:
                continue
            kp, kc, ke, kf = res[mode][:4]
            print(f"{size:>6} {n:>8} {label:>9} | {kp:>10,.0f} {tp:>10,.0f} {kp / tp:>6.2f} | {kc:>10,.0f} "
                  f"{tc:>10,.0f} {kc / tc:>6.2f} | {ke:>9,.0f} {te:>9,.0f} {ke / te:>6.2f} | {kf:>8.0f} {tf:>6.0f}")
    print("Broker CPU per record (user + system CPU of the broker process / records, from the start of the clock, "
          "the producers connected), medians; 'producers': the "
          "producing processes' own CPU per record over the same runs, from the start to their last acknowledgement (their "
          "start-up before the clock left out; 'producers (tansu)': the same against Tansu). When the machine's "
          "cores are all busy, a "
          "broker using no CPU at all would produce at most (producers + tansu) / producers times Tansu's rate:")
    print(f"{'size':>6} {'mode':>9} | {'produce us':>10} {'tansu':>6} {'producers':>9} {'bound':>6} | "
          f"{'consume us':>10} {'tansu':>6} | {'producers (tansu)':>17}")
    for size, n, res in rows:
        tp, tc, tclients = res["tansu"][4:7]
        for mode, label in LABELS:
            if mode not in res:
                continue
            kp, kc, clients = res[mode][4:]
            print(f"{size:>6} {label:>9} | {kp:>10.2f} {tp:>6.2f} {clients:>9.2f} {(clients + tp) / clients:>5.2f}x | "
                  f"{kc:>10.2f} {tc:>6.2f} | {tclients:>17.2f}")


NAN = float("nan")
LABELS = (("null", "null"), ("kafkite", "memory"), ("kafkite0", "memory0"), ("kafkite-pure", "pure-py"),
          ("kafkite-disk", "disk"), ("kafkite-pagecache", "pagecache"))
MODES = (("kafkite", kafkite), ("kafkite-pure", kafkite_pure), ("kafkite-disk", kafkite_disk), ("kafkite-pagecache", kafkite_disk_pagecache),
         ("null", lambda: null_broker(produce=True)), ("tansu", tansu))


def confluent_version() -> str:
    import confluent_kafka
    v, lib = confluent_kafka.version(), confluent_kafka.libversion()
    v, lib = (v[0] if isinstance(v, tuple) else v), (lib[0] if isinstance(lib, tuple) else lib)
    return f"{v}, librdkafka {lib}"


if __name__ == "__main__":
    main()
