"""The event loop under heavy storage work, with traffic running (issue 24, item 2's acceptance).

    PYTHONPATH=src python benchmarks/loop_stalls.py [--compact-mb 200] [--recover-mb 200] [--partitions 1000]
                                                    [--retention-segments 100] [--bound-ms 200] [--watchdog-ms 100]
                                                    [--gc-freeze on|off]

An in-process cluster of 3 brokers on disk (KafkiteCluster: one Trio loop for the three, so whatever one broker
holds the loop with, every client of every broker waits for). A client -- a process of its own, as a real client
is -- sends Metadata and Produce (acks=1, one small batch) in turn, one request at a time, to a broker that stays
up, and times each; meanwhile, phase by phase:

- leader_and_isr: CreateTopics of N partitions, replication factor 3 (each broker makes N logs on disk and
  becomes their leader or follower), until every copy is open;
- retention: a topic of R+1 small segments (1 replica) whose retention.ms passes: retention deletes R segments;
- compaction: a compacted topic of C MB (1 replica, the same keys over and over) made cleanable: the cleaner
  rewrites it, until it is swapped in;
- failover: the controller broker stops (the others elect a controller, which moves the leadership of the
  partitions it led), then starts again and catches up;
- recovery: a log of M MB (1 replica) is closed and opened again (its partition stopped, then given its leader
  and ISR again) as after a crash: the cluster's data dirs started without a clean-shutdown marker and the log has
  no recovery point, so it is recovered whole (every batch read and checked, its indexes rebuilt).

Per phase it prints the longest step the loop ran (and its task), the watchdog's WARN lines
(`event_loop.blocked`, over --watchdog-ms), the slowest client request and the requests over --bound-ms, and
Python's full garbage collections and the longest collection (each stops every thread, the loop's too); then the
loop's busiest tasks, and for each request over half the bound where its time went (Breakdown). The
figures depend on the machine (a shared one is noisy: a step's wall time counts the time the process was not
scheduled too). `--gc-freeze on` (the default, as `kafkite serve`) freezes what survives a full collection for the
run (kafkite.gc_freeze). tests/reliability/test_event_loop_free.py runs it scaled down.
"""
from __future__ import annotations

import argparse
import contextlib
import math
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import trio  # noqa: E402
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic  # noqa: E402
from kafka.protocol.metadata import MetadataRequest  # noqa: E402
from kafka.protocol.producer import ProduceRequest  # noqa: E402
from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402

import kafkite.gc_freeze as gc_freeze_mod  # noqa: E402
import kafkite.loop_watchdog as loop_watchdog  # noqa: E402
from kafkite.testing.cluster import KafkiteCluster  # noqa: E402
from kafkite.testing.wire_client import WireClient  # noqa: E402
from kafkite.wire import registry  # noqa: E402

PHASES = ("leader_and_isr", "retention", "compaction", "failover", "recovery")


@dataclass
class Phase:
    longest_ms: float = 0.0
    longest_task: str = ""
    longest_cpu_ms: float = 0.0  # the loop thread's CPU time in that step (the rest: waiting for the GIL or a core)
    tasks: dict = field(default_factory=dict)  # task name -> [steps, wall ms, CPU ms] of its steps
    warns: int = 0
    warn_tasks: dict = field(default_factory=dict)
    requests: int = 0
    errors: int = 0
    slowest_ms: float = 0.0
    over_bound: int = 0
    seconds: float = 0.0
    full_gcs: int = 0          # Python's full (generation 2) garbage collections: each stops every thread
    longest_gc_ms: float = 0.0
    slow: list = field(default_factory=list)  # the Breakdown of each request over half the bound


@dataclass
class Breakdown:
    """Where a slow request's time went (ms): the client's encode and send, the way to the broker's dispatch (the
    socket and the loop's turn to read it), the broker (dispatch, then the waits: a Produce's fsync), the way back to
    the client (the socket and its process), its decode; and what else happened meanwhile in the broker's process:
    the loop's busy time (its steps of 1 ms or more) and longest step, garbage collection, the longest fsync, and how
    late the GIL probe (a thread sleeping 2 ms over and over) woke at worst (5 ms or more)."""
    api: str
    total: float
    at_s: float = 0.0            # since the phase began
    encode: float = 0.0
    to_broker: float = -1.0      # -1: the broker's side was not seen
    dispatch: float = -1.0
    waits: float = -1.0
    to_client: float = -1.0
    decode: float = 0.0
    loop_busy: float = 0.0
    longest_step: float = 0.0
    longest_step_task: str = ""
    gc: float = 0.0
    longest_fsync: float = 0.0
    probe_late: float = 0.0

    def __str__(self) -> str:
        return (f"{self.api} {self.total:.1f} ms at {self.at_s:.1f} s: encode {self.encode:.1f}, to broker "
                f"{self.to_broker:.1f}, dispatch {self.dispatch:.1f}, waits {self.waits:.1f}, to client "
                f"{self.to_client:.1f}, decode {self.decode:.1f} | loop busy {self.loop_busy:.1f}, longest step "
                f"{self.longest_step:.1f} ({self.longest_step_task[-40:]}), gc {self.gc:.1f}, longest fsync "
                f"{self.longest_fsync:.1f}, GIL probe late {self.probe_late:.1f}")


class Probe:
    """What happened in the broker's process, as (start, end) times (time.perf_counter: CLOCK_MONOTONIC, the client
    process's clock too), for each slow request's Breakdown once the run is over."""
    steps: list = []       # (start, end, task name) of each loop step of 1 ms or more
    gcs: list = []         # (start, end) of each garbage collection
    fsyncs: list = []      # (start, end) of each os.fsync of 5 ms or more (any thread)
    late: list = []        # (time, ms) of each GIL probe wake-up 5 ms or more late
    broker: dict = {}      # correlation id -> [dispatch entered, dispatch returned, answer's write begun]
    marks: list = []       # (time, phase name) of each phase's start
    traffic_port = -1      # the traffic connection's client port
    served = -1            # and its broker's node id, and that broker's port
    served_port = -1

    @classmethod
    def clear(cls) -> None:
        cls.steps, cls.gcs, cls.fsyncs, cls.late, cls.broker, cls.marks = [], [], [], [], {}, []


def set_phase(name: str) -> None:
    Recorder.phase = name
    Probe.marks.append((time.perf_counter(), name))


class Recorder(loop_watchdog.LoopWatchdog):
    """The watchdog (its WARN lines as always), plus the longest step and the WARNs of the current phase."""
    phase = "setup"
    phases: dict[str, Phase] = {}

    def before_task_step(self, task) -> None:
        self.cpu_started = time.thread_time()
        super().before_task_step(task)

    def after_task_step(self, task) -> None:
        start = self.step_started
        super().after_task_step(task)
        if start == math.inf:  # (the step that installed it)
            return
        held = (time.perf_counter() - start) * 1000
        cpu = (time.thread_time() - self.cpu_started) * 1000
        if held >= 1:
            Probe.steps.append((start, start + held / 1000, task.name))
        p = self.phases.setdefault(self.phase, Phase())
        if held > p.longest_ms:
            p.longest_ms, p.longest_task, p.longest_cpu_ms = held, task.name, cpu
        t = p.tasks.get(task.name)
        if t is None:
            t = p.tasks[task.name] = [0, 0.0, 0.0]
        t[0] += 1
        t[1] += held
        t[2] += cpu
        if held > self.threshold_s * 1000:
            p.warns += 1
            p.warn_tasks[task.name] = max(p.warn_tasks.get(task.name, 0.0), round(held, 1))


@contextlib.contextmanager
def gc_timed():
    """Each phase's full garbage collections and the longest collection (any generation)."""
    import gc
    started = []

    def callback(stage: str, info: dict) -> None:
        if stage == "start":
            started[:] = [time.perf_counter()]
        elif started:
            end = time.perf_counter()
            ms = (end - started[0]) * 1000
            Probe.gcs.append((started[0], end))
            p = Recorder.phases.setdefault(Recorder.phase, Phase())
            p.full_gcs += info["generation"] == 2
            p.longest_gc_ms = max(p.longest_gc_ms, ms)
    gc.callbacks.append(callback)
    try:
        yield
    finally:
        gc.callbacks.remove(callback)


@contextlib.contextmanager
def recorder_installed(threshold_ms: float):
    """Every loop started meanwhile (KafkiteCluster's) gets a Recorder as its watchdog."""
    def install(ms=None):
        dog = Recorder(threshold_ms)
        trio.lowlevel.add_instrument(dog)
        return dog
    real, loop_watchdog.install = loop_watchdog.install, install
    try:
        yield
    finally:
        loop_watchdog.install = real


@contextlib.contextmanager
def probes_installed():
    """os.fsync timed (any thread), the GIL probe thread, and the broker's side of the traffic's requests: when the
    router's dispatch is entered and returns, and when the connection's answer is sent."""
    from kafkite.network import connection
    from kafkite.server import router
    real_fsync, real_dispatch, real_send = os.fsync, router.Router.dispatch, connection._Outbox.send
    stop = threading.Event()

    def fsync(fd):
        t = time.perf_counter()
        try:
            return real_fsync(fd)
        finally:
            end = time.perf_counter()
            if end - t >= 0.005:
                Probe.fsyncs.append((t, end))

    async def dispatch(self, frame, peer, log, **kw):
        # (the traffic's: another connection may have the same client port, to another broker's port)
        mine = peer.endswith(f":{Probe.traffic_port}") and self.broker.node_id == Probe.served
        if mine:
            times = Probe.broker[int.from_bytes(frame[4:8], "big")] = [time.perf_counter()]
        out = await real_dispatch(self, frame, peer, log, **kw)
        if mine:
            times.append(time.perf_counter())
            Probe.last = times
        return out

    async def send(self, out):
        t = time.perf_counter()  # (the answer's write begins: after it, the loop may wait for the GIL again)
        await real_send(self, out)
        mine = getattr(self, "_traffic", None)
        if mine is None:
            try:
                sock = self.stream.socket
                mine = self._traffic = (sock.getpeername()[1], sock.getsockname()[1]) == (Probe.traffic_port,
                                                                                          Probe.served_port)
            except (OSError, AttributeError):
                mine = self._traffic = False
        if mine and getattr(Probe, "last", None) is not None:
            Probe.last.append(t)
            Probe.last = None

    def probe():
        while not stop.is_set():
            t = time.perf_counter()
            time.sleep(0.002)
            end = time.perf_counter()
            if end - t >= 0.007:
                Probe.late.append((end, (end - t) * 1000 - 2))
    os.fsync, router.Router.dispatch, connection._Outbox.send = fsync, dispatch, send
    thread = threading.Thread(target=probe, daemon=True, name="gil-probe")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)
        os.fsync, router.Router.dispatch, connection._Outbox.send = real_fsync, real_dispatch, real_send


def batch(n: int, value_size: int, key_space: int | None = None) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    now = int(time.time() * 1000)
    value = os.urandom(value_size)
    for i in range(n):
        b.append(i, timestamp=now, key=b"k%d" % (i % (key_space or n)), value=value, headers=[])
    return bytes(b.build())


def produce_request(topic: str, data: bytes, acks: int = 1, partition: int = 0):
    T = ProduceRequest.TopicProduceData
    return ProduceRequest(transactional_id=None, acks=acks, timeout_ms=30000, topic_data=[
        T(name=topic, topic_id=None, partition_data=[T.PartitionProduceData(index=partition, records=data)])])


def fill(bootstrap: str, topic: str, megabytes: float, data: bytes) -> None:
    """About `megabytes` of `data` batches into topic-0 (acks=1)."""
    n = max(1, int(megabytes * (1 << 20) / len(data)))
    with WireClient.connect(bootstrap, timeout=120) as w:
        for _ in range(n):
            r = w.request(produce_request(topic, data), 9).responses[0].partition_responses[0]
            assert r.error_code == 0, r


class Traffic:
    """The client: a process of its own (as a real client is: in the broker's process it would wait for the GIL
    with the brokers' threads), one request at a time, Metadata and a small acks=1 Produce in turn, each timed
    (`client_main`). Its times, sent back at the end, are given to the phases they began in (`analyse`)."""

    def __init__(self, bootstrap: str, bound_ms: float) -> None:
        self.bootstrap, self.bound_ms = bootstrap, bound_ms
        self.failures: list[str] = []
        self.records: list = []

    def __enter__(self):
        import subprocess
        self.proc = subprocess.Popen([sys.executable, __file__, "--traffic-client", self.bootstrap],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            raise RuntimeError(f"the traffic client did not start: {line!r}")
        Probe.traffic_port = int(line)
        return self

    def __exit__(self, *exc) -> None:
        import json
        self.proc.stdin.close()  # (its end of input: it stops)
        out = json.loads(self.proc.stdout.read() or "{}")
        self.proc.wait(30)
        self.records = out.get("records", [])
        if out.get("failure") or self.proc.returncode:
            self.failures.append(out.get("failure") or f"exit code {self.proc.returncode}")


def client_main(bootstrap: str) -> None:
    """The traffic client's process (see Traffic): its port on the first line, then requests until its input ends,
    then its records as JSON: (sent, written, answer read, decoded, correlation id, Produce?, error code)."""
    import json
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    T = MetadataRequest.MetadataRequestTopic
    meta = MetadataRequest(topics=[T(name="traffic")], allow_auto_topic_creation=False)
    data, records, failure = batch(1, 100), [], None
    try:
        with WireClient.connect(bootstrap, timeout=60) as w:
            print(w.sock.getsockname()[1], flush=True)
            while not stop.is_set():
                for req, v in ((meta, 4), (produce_request("traffic", data), 9)):
                    t0 = time.perf_counter()
                    frame, corr = w.encode(req, v)
                    t1 = time.perf_counter()
                    w.send_raw(frame)
                    answer = w.recv_frame()
                    t2 = time.perf_counter()
                    resp = registry.response_class(req.API_KEY).decode(answer, version=v, header=True)
                    t3 = time.perf_counter()
                    err = resp.responses[0].partition_responses[0].error_code if v == 9 else 0
                    records.append((t0, t1, t2, t3, corr, v == 9, err))
                time.sleep(0.002)
    except Exception as exc:  # reported, not raised
        failure = repr(exc)
    print(json.dumps({"records": records, "failure": failure}), flush=True)


def _overlap(spans, a: float, b: float) -> float:
    return sum(max(0.0, min(e, b) - max(s, a)) for s, e, *_ in spans if s < b and e > a)


def analyse(records: list, bound_ms: float) -> None:
    """Each request to the phase it began in (Probe.marks): the phases' counts and slowest, and the Breakdown of
    those over half the bound."""
    marks = sorted(Probe.marks)
    for t0, t1, t2, t3, corr, is_produce, err in records:
        name = next((n for t, n in reversed(marks) if t <= t0), "setup")
        start = next((t for t, n in reversed(marks) if t <= t0), t0)
        p = Recorder.phases.setdefault(name, Phase())
        ms = (t3 - t0) * 1000
        p.requests += 1
        p.errors += bool(err)
        p.slowest_ms = max(p.slowest_ms, ms)
        p.over_bound += ms > bound_ms
        if ms <= bound_ms / 2:
            continue
        steps = [st for st in Probe.steps if st[0] < t3 and st[1] > t0]
        longest = max(steps, key=lambda st: st[1] - st[0], default=(0.0, 0.0, ""))
        b = Breakdown("Produce" if is_produce else "Metadata", ms, t0 - start, encode=(t1 - t0) * 1000,
                      decode=(t3 - t2) * 1000, loop_busy=_overlap(steps, t0, t3) * 1000,
                      longest_step=(longest[1] - longest[0]) * 1000, longest_step_task=longest[2],
                      gc=_overlap(Probe.gcs, t0, t3) * 1000,
                      longest_fsync=max(((e - s) * 1000 for s, e in Probe.fsyncs if s < t3 and e > t0), default=0.0),
                      probe_late=max((ms_ for t, ms_ in Probe.late if t0 <= t <= t3 + 0.002), default=0.0))
        broker = Probe.broker.get(corr)
        if broker is not None and len(broker) == 3:
            b.to_broker = (broker[0] - t1) * 1000
            b.dispatch = (broker[1] - broker[0]) * 1000
            b.waits = (broker[2] - broker[1]) * 1000
            b.to_client = (t2 - broker[2]) * 1000
        p.slow.append(b)


def wait_until(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.05)


def run(*, compact_mb: float = 200, recover_mb: float = 200, partitions: int = 1000, retention_segments: int = 100,
        bound_ms: float = 200, watchdog_ms: float = 100, data_dir: Path | None = None,
        timeout: float = 600, gc_freeze: bool = False) -> dict[str, Phase]:
    """The scenario of the module comment -> each phase's figures. `gc_freeze`: as `kafkite serve` does
    (kafkite.gc_freeze: what survives a full collection is frozen), for this process while it runs."""
    Recorder.phases = {}
    Recorder.phase = "setup"
    Probe.clear()
    own_dir = data_dir is None
    data = Path(tempfile.mkdtemp(prefix="loop-stalls-")) if own_dir else Path(data_dir)
    if gc_freeze:
        gc_freeze_mod.install()
    try:
        with recorder_installed(watchdog_ms), gc_timed(), probes_installed():
            _run(data, own_dir, compact_mb=compact_mb, recover_mb=recover_mb, partitions=partitions,
                 retention_segments=retention_segments, bound_ms=bound_ms, timeout=timeout)
    finally:
        if gc_freeze:
            gc_freeze_mod.uninstall()
    return {name: Recorder.phases.get(name, Phase()) for name in PHASES}


def _run(data: Path, own_dir: bool, *, compact_mb: float, recover_mb: float, partitions: int,
         retention_segments: int, bound_ms: float, timeout: float) -> None:
    overrides = {"log.retention.check.interval.ms": "100", "log.cleaner.backoff.ms": "100",
                 "auto.leader.rebalance.enable": "false"}
    try:
        with KafkiteCluster(brokers=3, data_dir=data, overrides=overrides) as c:
            admin = KafkaAdminClient(bootstrap_servers=c.bootstrap_servers, request_timeout_ms=120000)
            ctrl = c.controller_id
            served = next(i for i in c.node_ids if i != ctrl)  # the traffic's broker: it stays up
            others = [i for i in c.node_ids if i != served]
            seg = 16 << 10
            cmp_seg = max(1 << 20, min(32 << 20, int(compact_mb * (1 << 20) / 8)))
            held = {"cleanup.policy": "compact", "segment.bytes": str(cmp_seg), "min.compaction.lag.ms": "86400000",
                    "min.cleanable.dirty.ratio": "0.01"}
            admin.create_topics([
                NewTopic("traffic", -1, -1, replica_assignments={0: [served]}),
                NewTopic("ret", -1, -1, replica_assignments={0: [others[0]]}, topic_configs={"segment.bytes": str(seg)}),
                NewTopic("cmp", -1, -1, replica_assignments={0: [others[1]]}, topic_configs=held),
                NewTopic("rec", -1, -1, replica_assignments={0: [others[0]]}, topic_configs={"segment.bytes": str(64 << 20)})])
            boot = c.bootstrap_of(served)
            Probe.served, Probe.served_port = served, int(boot.rsplit(":", 1)[1])
            wait_until(lambda: all(c.replica_log(b, t, 0) is not None for t, b in
                                   (("traffic", served), ("ret", others[0]), ("cmp", others[1]), ("rec", others[0]))),
                       60, "the topics' logs")
            big = batch(900, 1000, key_space=900)  # ~0.9 MB, the same 900 keys each time
            fill(c.bootstrap_of(others[1]), "cmp", compact_mb, big)
            fill(c.bootstrap_of(others[0]), "rec", recover_mb, big)
            small = batch(10, 1000)
            fill(c.bootstrap_of(others[0]), "ret", (retention_segments + 1) * seg / (1 << 20) * 1.02, small)
            ret = c.replica_log(others[0], "ret", 0)
            wait_until(lambda: len(ret.segments) > retention_segments, 30, "the segments to delete")
            gc_freeze_mod.settle()  # (when on: as `kafkite serve` once ready, the first full collection before the phases)
            with Traffic(boot, bound_ms) as traffic:
                time.sleep(0.5)

                set_phase("leader_and_isr")
                t0 = time.monotonic()
                admin.create_topics([NewTopic("many", partitions, 3)])
                wait_until(lambda: c.call(lambda: all(c.brokers[b].replicas.get("many", i) is not None
                                                      for b in c.live_brokers for i in range(partitions))),
                           timeout, "every copy of the new partitions")
                Recorder.phases[Recorder.phase].seconds = time.monotonic() - t0

                set_phase("retention")
                t0 = time.monotonic()
                n = len(ret.segments)
                admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "ret", configs={
                    "segment.bytes": str(seg), "retention.ms": "1"})])
                wait_until(lambda: len(ret.segments) == 1, timeout, "retention")
                Recorder.phases[Recorder.phase].seconds = time.monotonic() - t0
                assert n - 1 >= retention_segments, n

                set_phase("compaction")
                t0 = time.monotonic()
                cmp = c.replica_log(others[1], "cmp", 0)
                size = cmp.size_bytes
                admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "cmp", configs={
                    **held, "min.compaction.lag.ms": "0"})])
                wait_until(lambda: cmp.size_bytes < size / 2, timeout, "the compaction")
                Recorder.phases[Recorder.phase].seconds = time.monotonic() - t0

                set_phase("failover")
                t0 = time.monotonic()
                ctrl = c.controller_id
                assert ctrl != served
                c.stop_broker(ctrl)
                wait_until(lambda: c.controller_id not in (-1, ctrl) and all(
                    c.leader("many", i) not in (-1, ctrl) for i in range(partitions)), timeout, "a new controller")
                c.start_broker(ctrl)
                wait_until(lambda: all(ctrl in c.isr("many", i) for i in range(partitions)), timeout,
                           "the restarted broker back in every ISR")
                Recorder.phases[Recorder.phase].seconds = time.monotonic() - t0

                # the log closed (StopReplica: its flush is not the recovery's, and not timed) and opened again with
                # its next leader and ISR, as after a crash: this data dir had no clean-shutdown marker and the log
                # no recovery point, so the whole log is recovered
                set_phase("stop_replica")
                rm = c.brokers[others[0]].replicas
                rec_end = c.replica_log(others[0], "rec", 0).log_end_offset
                assert not rm.log_dir.had_clean_shutdown and ("rec", 0) not in rm.log_dir.recovery_points
                c.call(lambda: rm.stop_replica("rec", 0, delete=False))
                set_phase("recovery")
                t0 = time.monotonic()

                def reopen() -> None:
                    c.state.publish()
                from kafkite.storage import log_loader
                checked, real_recover = [], log_loader.LogLoader._recover

                def recover(loader, seg, *, check_crc):  # (counts the segments of rec-0 recovered whole)
                    if loader.dir.name == "rec-0" and check_crc:
                        checked.append(seg.base)
                    return real_recover(loader, seg, check_crc=check_crc)
                log_loader.LogLoader._recover = recover
                try:
                    c.call(reopen)
                    wait_until(lambda: c.call(lambda: (lambda lg: lg is not None and lg.log_end_offset == rec_end)(
                        rm.get("rec", 0))), timeout, "the recovered log")
                finally:
                    log_loader.LogLoader._recover = real_recover
                recovered = len(checked) == len(rm.get("rec", 0).segments)
                assert recovered, "the log was not recovered"
                Recorder.phases[Recorder.phase].seconds = time.monotonic() - t0
                set_phase("stopping")
            admin.close()
        analyse(traffic.records, bound_ms)
        assert not traffic.failures, traffic.failures
    finally:
        if own_dir:
            shutil.rmtree(data, ignore_errors=True)


def main() -> None:
    if sys.argv[1:2] == ["--traffic-client"]:
        client_main(sys.argv[2])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--compact-mb", type=float, default=200)
    ap.add_argument("--recover-mb", type=float, default=200)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--retention-segments", type=int, default=100)
    ap.add_argument("--bound-ms", type=float, default=200)
    ap.add_argument("--watchdog-ms", type=float, default=100)
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--switch-interval-ms", type=float, default=None,
                    help="sys.setswitchinterval (Python's default 5 ms: how long a busy worker thread may keep the "
                         "GIL from the event loop)")
    ap.add_argument("--gc-freeze", choices=["on", "off"], default="on",
                    help="freeze what survives a full garbage collection, as `kafkite serve` does (default on)")
    args = ap.parse_args()
    if args.switch_interval_ms is not None:
        sys.setswitchinterval(args.switch_interval_ms / 1000)
    import structlog

    def warnings_only(_logger, method: str, event: dict) -> dict:
        if method in ("debug", "info"):
            raise structlog.DropEvent
        return event
    structlog.configure(processors=[warnings_only, structlog.processors.TimeStamper("%H:%M:%S"),
                                    structlog.dev.ConsoleRenderer()])
    phases = run(compact_mb=args.compact_mb, recover_mb=args.recover_mb, partitions=args.partitions,
                 retention_segments=args.retention_segments, bound_ms=args.bound_ms, watchdog_ms=args.watchdog_ms,
                 data_dir=args.data_dir, gc_freeze=args.gc_freeze == "on")
    print(f"\ngc freeze {args.gc_freeze}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'phase':<16}{'secs':>7}{'longest hold ms':>17}  {'task':<52}{'WARNs':>6}{'requests':>10}"
          f"{'slowest ms':>12}{'>' + str(int(args.bound_ms)) + ' ms':>9}{'errors':>8}{'full GCs':>10}{'longest GC ms':>15}")
    for name, p in phases.items():
        print(f"{name:<16}{p.seconds:>7.1f}{p.longest_ms:>17.1f}  {p.longest_task[-52:]:<52}{p.warns:>6}"
              f"{p.requests:>10}{p.slowest_ms:>12.1f}{p.over_bound:>9}{p.errors:>8}{p.full_gcs:>10}"
              f"{p.longest_gc_ms:>15.1f}")
    for name, p in phases.items():
        if p.warn_tasks:
            print(f"  {name}: WARN tasks (longest ms): {p.warn_tasks}")
    print("\nthe loop's busiest tasks of each phase (steps, wall ms, CPU ms of the loop thread), and the longest step's "
          "CPU ms:")
    for name, p in phases.items():
        top = sorted(p.tasks.items(), key=lambda kv: -kv[1][1])[:4]
        print(f"  {name}: longest step {p.longest_ms:.1f} ms, CPU {p.longest_cpu_ms:.1f}; "
              + "; ".join(f"{k.rsplit('.', 1)[-1][:28]} {n} {w:.0f} {c:.0f}" for k, (n, w, c) in top))
    print(f"\nrequests over {args.bound_ms / 2:.0f} ms, the slowest 3 of each phase (ms; see Breakdown):")
    for name, p in phases.items():
        for b in sorted(p.slow, key=lambda b: -b.total)[:3]:
            print(f"  {name}: {b}")


if __name__ == "__main__":
    main()
