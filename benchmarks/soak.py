"""A soak run: one `kafkite serve` under mixed, churning traffic for some minutes; leaks measured, records checked.

    python benchmarks/soak.py [--minutes 10] [--mode memory|disk] [--seed N] [--rate 1000|500] [--retention-s 30]
                              [--only W,W | --without W,W]   (W: a workload below; the checks of those left out skip)

Starts `kafkite serve --in-memory` (or `--data-dir <tmp>`) on a free port (throughput.broker_on_free_port), its
JSON log (INFO) kept in a file, and runs these workloads at once, in threads of this process (confluent-kafka, and
kafka-python for some of the short-lived producers):

  idempotent   2 keyed idempotent producers (acks=all), --rate records/s each over 3 topics of 3 partitions, the
               payload "producer:counter"; every acknowledged (topic, partition, offset, payload) kept. The
               topics keep --retention-s of records (segments of a third of it, retention checked 6 times as
               often): the data a broker holds levels off within the warm-up, and RSS growth after it is not data.
  verifier     an assigned consumer (no group) reading every partition of those topics (and the churn topic) from
               its start as it is written, to the high watermarks at the end: the full read of the topics.
  groups       two consumer groups over those topics, 3 members each, a member leaving (commit, close) and a new
               one joining every 5 s, one group after the other: `soak-classic` (group.protocol=classic, eager
               range) and `soak-consumer` (group.protocol=consumer, KIP-848). Members commit what they processed
               every second, at revocation and before closing.
  txn          a transactional producer: begin, 2-5 records, commit or abort (random, --seed); every 30
               transactions a new instance with the same transactional.id fences it (the old one's next
               transaction must fail).
  churn        every second a short-lived client: an AdminClient (list_topics, describe the groups), a confluent
               producer or a kafka-python producer sending one record and closing.
  admin        every 30 s: create a topic, produce 20 records to it, delete it, wait until it is gone.

Every 5 s it samples the broker process: RSS, open fds, threads, CPU (proc_cpu), its established connections (from
/proc/net/tcp: the broker exposes no counts of its own -- connections, Trio tasks, fetch sessions), and the groups'
member counts (DescribeGroups). At the end: the producers stop, the groups drain and close, then the checks (exit
status 1 when one fails): per partition the acknowledged offsets are strictly increasing per producer and unique,
the full read holds every acknowledged record at its offset (those at or above its first offset), without a jump in
offsets, no idempotent payload twice in a partition, each group consumed every acknowledged record and its committed
offsets lie between what each partition's last owner processed and the log end, a read_committed consumer sees
exactly the committed transactions' records, and the broker's open fds once every client is closed are at most 50
over the count before the workloads began (waiting up to 30 s, on disk 150 s: retention deletes the segments rolled
before the producers stopped, and a deleted segment's files stay open file.delete.delay.ms, 60 s, after). Then a
summary: RSS after the 1-minute warm-up and at the end, its slope over the samples after the warm-up (least squares,
MB/min), what the broker holds beyond retention's reach (the internal topics' and the transactional topic's records,
the data directory), fds, threads, CPU %, counts, and the broker's WARNING-or-above log lines by event name (leak
figures are reported, not judged). Ctrl-C stops it all.

KAFKITE_SOAK_SERVE=script.py runs `python script.py serve ...` in place of `python -m kafkite.cli serve ...`: a
wrapper that, say, starts tracemalloc and writes the growth of the broker's allocations to a file, then calls
kafkite.cli.main().
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import gc
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from proc_cpu import cpu_seconds, listener_pid  # noqa: E402
from soak_checks import TOPICS, check_acked, check_committed_read, check_group, check_log, slope_per_min  # noqa: E402
from soak_workloads import (CHURN_S, CHURN_TOPIC, GROUPS, MEMBERS, PARTITIONS, QUIET, SAMPLE_S, TXN_TOPIC,  # noqa: E402
                            WARMUP_S, WORKLOADS, Soak, Verifier)
from throughput import broker_on_free_port, confluent_version  # noqa: E402


# ---- the broker ----

def sample(pid: int, port: int) -> dict:
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    conns = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                f = line.split()
                conns += f[3] == "01" and int(f[1].rsplit(":", 1)[1], 16) == port  # 01: ESTABLISHED, broker side
    return {"t": time.monotonic(), "rss_mb": int(status["VmRSS"].split()[0]) / 1024,
            "anon_mb": int(status["RssAnon"].split()[0]) / 1024, "file_mb": int(status["RssFile"].split()[0]) / 1024,
            "fds": len(os.listdir(f"/proc/{pid}/fd")), "threads": int(status["Threads"]),
            "cpu_s": cpu_seconds(pid), "conns": conns}


DATA_DIR: list[str] = []  # the disk broker's data directory (broker_on_free_port's temporary one)


def broker(mode: str, log_path: Path, retention_s: float):
    def command(port: int, d: str) -> list[str]:
        DATA_DIR[:] = [d] if mode == "disk" else []
        store = ["--data-dir", d] if mode == "disk" else ["--in-memory"]
        # the broker's stderr (its log) to log_path: exec keeps the pid the broker's own
        serve = [os.environ["KAFKITE_SOAK_SERVE"]] if os.environ.get("KAFKITE_SOAK_SERVE") else ["-m", "kafkite.cli"]
        return ["sh", "-c", 'exec "$@" 2>"$0"', str(log_path), sys.executable, *serve, "serve",
                "--port", str(port), *store, "--log-level", "INFO", "--log-json", "--override",
                f"log.retention.check.interval.ms={int(min(retention_s or 300, 300) * 1000 / 6)}"]
    return broker_on_free_port(command)


def fd_kinds(pid: int) -> str:
    """The broker's open fds by kind: sockets, pipes, files by suffix (a disk log's segment files)."""
    kinds = collections.Counter()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            kinds[target.split(":")[0] if ":[" in target else
                  (Path(target).suffix or Path(target).name) if target.startswith("/") else target] += 1
    return ", ".join(f"{k} {v}" for k, v in kinds.most_common())


def stored(bs: str) -> dict:
    """What the broker holds beyond retention's reach: the records in the internal topics (compacted, and only
    their closed segments are cleaned) and the transactional topic, and the data directory's bytes (disk mode)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bs, "group.id": "soak-sizes", **QUIET})
    md = c.list_topics(timeout=30)
    out = {}
    for t in ("__consumer_offsets", "__transaction_state", TXN_TOPIC):
        if t in md.topics:
            out[t] = sum(c.get_watermark_offsets(TopicPartition(t, p), timeout=30)[1] for p in md.topics[t].partitions)
    c.close()
    if DATA_DIR and Path(DATA_DIR[0]).is_dir():
        files = (f for f in Path(DATA_DIR[0]).rglob("*") if f.is_file())
        out["data dir MB"] = round(sum(f.stat().st_size for f in files) / 2**20, 1)
    return out


def read_all(bs: str, topics, isolation: str = "read_uncommitted") -> dict[tuple[str, int], dict[int, bytes]]:
    """Every record of the topics, (topic, partition) -> {offset: value}, read to the end (the high watermark, or
    the last stable offset with read_committed)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bs, "group.id": "soak-reader", "enable.auto.commit": False,
                  "isolation.level": isolation, "enable.partition.eof": True, **QUIET})
    md = c.list_topics(timeout=30)
    tps = [TopicPartition(t, p, 0) for t in topics for p in md.topics[t].partitions]
    c.assign(tps)
    out: dict = {(tp.topic, tp.partition): {} for tp in tps}
    pending, deadline = set(out), time.monotonic() + 120
    while pending and time.monotonic() < deadline:
        for m in c.consume(1000, timeout=0.5):
            tp = (m.topic(), m.partition())
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    pending.discard(tp)
                continue
            out[tp][m.offset()] = m.value()
    c.close()
    if pending:
        raise TimeoutError(f"read_all: {sorted(pending)} not read to their end in 120 s")
    return out


def committed_and_ends(bs: str, group: str) -> tuple[dict, dict]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False, **QUIET})
    tps = [TopicPartition(t, p) for t in TOPICS for p in range(PARTITIONS)]
    committed = {(tp.topic, tp.partition): tp.offset for tp in c.committed(tps, timeout=30)}
    ends = {(tp.topic, tp.partition): c.get_watermark_offsets(tp, timeout=30)[1] for tp in tps}
    c.close()
    return committed, ends


def log_summary(log_path: Path) -> tuple[collections.Counter, dict, collections.Counter]:
    """WARNING-or-above lines by event name (and the first of each), and every event's count."""
    bad, first, events = collections.Counter(), {}, collections.Counter()
    for line in log_path.read_text(errors="replace").splitlines():
        try:
            d = json.loads(line)
            event, level = d.get("event"), d.get("level", "")
        except (ValueError, AttributeError):
            event, level, d = "(not a log line)", "error", line
        events[event] += 1
        if level in ("warning", "error", "critical", "exception"):
            bad[event] += 1
            first.setdefault(event, d)
    return bad, first, events


def setup(bs: str, retention_s: float) -> None:
    """The topics, and the internal ones (a group's commit, a transaction) made before the fd baseline. The
    idempotent producers' topics keep retention_s of records (0: all), in segments of a third of it."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": bs, **QUIET})
    keep = {"retention.ms": str(int(retention_s * 1000)), "segment.ms": str(int(retention_s * 1000 / 3))}
    new = [NewTopic(t, PARTITIONS, 1, config=keep if retention_s else {}) for t in TOPICS]
    new += [NewTopic(TXN_TOPIC, 2, 1), NewTopic(CHURN_TOPIC, 2, 1)]
    for f in a.create_topics(new).values():
        f.result(30)
    p = Producer({"bootstrap.servers": bs, "transactional.id": "soak-setup", **QUIET})
    p.init_transactions(60)
    p.begin_transaction()
    p.produce(TXN_TOPIC, value=b"setup")
    p.commit_transaction(30)
    c = Consumer({"bootstrap.servers": bs, "group.id": "soak-setup", **QUIET})
    c.commit(offsets=[TopicPartition(TOPICS[0], 0, 0)], asynchronous=False)
    c.close()
    del p, a


def run(minutes: float, mode: str, seed: int, rate: int, retention_s: float, log_path: Path,
        on: frozenset = frozenset(WORKLOADS)) -> int:
    failures: list[str] = []
    samples: list[dict] = []
    with broker(mode, log_path, retention_s) as bs:
        port = int(bs.rsplit(":", 1)[1])
        pid = listener_pid(port)
        first = sample(pid, port)
        setup(bs, retention_s)
        gc.collect()
        base = sample(pid, port)
        base["kinds"] = fd_kinds(pid)
        soak = Soak(bs, seed, rate, 0.01 if mode == "memory" else 0.05)
        verifier = Verifier(soak, TOPICS + (CHURN_TOPIC,))
        t0, interrupted = time.monotonic(), False
        try:
            if "verifier" in on:
                soak.spawn(verifier.run)
            for name in ("p1", "p2") if "idempotent" in on else ():
                soak.spawn(soak.idempotent, name)
            for workload, target in (("txn", soak.transactional), ("churn", soak.connection_churn),
                                     ("admin", soak.admin_churn)):
                if workload in on:
                    soak.spawn(target)
            for g in soak.groups.values() if "groups" in on else ():
                for _ in range(MEMBERS):
                    g.add_member()
            from confluent_kafka.admin import AdminClient
            admin = AdminClient({"bootstrap.servers": bs, **QUIET})
            next_sample, next_churn, turn, held = t0, t0 + CHURN_S, 0, {}
            end = t0 + minutes * 60
            while time.monotonic() < end:
                now = time.monotonic()
                if now >= next_churn and "groups" in on:
                    list(soak.groups.values())[turn % len(soak.groups)].churn()
                    turn += 1
                    next_churn += CHURN_S
                if now >= next_sample:
                    s = sample(pid, port)
                    with contextlib.suppress(Exception):
                        for g, f in admin.describe_consumer_groups(list(GROUPS), request_timeout=10).items():
                            s[g] = len(f.result(10).members)
                    samples.append(s)
                    if not held and s["t"] - t0 >= WARMUP_S:
                        with contextlib.suppress(Exception):
                            held.update(stored(bs))
                    print(f"  {s['t'] - t0:6.0f} s  rss {s['rss_mb']:6.1f} MB  fds {s['fds']:4d}  threads "
                          f"{s['threads']:3d}  conns {s['conns']:3d}  members "
                          f"{'/'.join(str(s.get(g, '?')) for g in GROUPS)}  cpu {s['cpu_s']:7.1f} s", flush=True)
                    next_sample += SAMPLE_S
                time.sleep(max(0.0, min(next_sample, next_churn, end) - time.monotonic()))
            del admin
            held_end = stored(bs)
            print("stopping the producers; the groups drain", flush=True)
            soak.stop.set()
            soak.stop_produce.set()
            for t in soak.threads:
                if t.name != "run":
                    t.join(120)
            soak.produced.set()
            for t in soak.threads:
                t.join(150)
            want = {(t, p, o) for _, t, p, o, _ in soak.acked if t in TOPICS}
            deadline = time.monotonic() + 120
            while "groups" in on and time.monotonic() < deadline and any(want - g.consumed for g in soak.groups.values()):
                time.sleep(0.5)
        except KeyboardInterrupt:  # (Ctrl-C reaches the broker too: no goodbyes, the threads are daemons)
            interrupted = True
            raise
        finally:
            soak.stop.set()
            soak.stop_produce.set()
            soak.produced.set()
            for g in soak.groups.values():
                g.close(2 if interrupted else 60)
        failures += soak.failures
        failures += check_acked(soak.acked)
        if "verifier" in on:
            failures += verifier.gaps
            failures += check_log(soak.acked, verifier.log, set(TOPICS))
        for g in soak.groups.values() if "groups" in on else ():
            committed, ends = committed_and_ends(bs, g.name)
            failures += check_group(g.name, soak.acked, g.consumed, {tp: o for tp, (_, _, o) in g.last_owner.items()},
                                    committed, ends)
        if "txn" in on:
            txn = read_all(bs, (TXN_TOPIC,), "read_committed")
            seen = [v for recs in txn.values() for v in recs.values() if v != b"setup"]
            failures += check_committed_read(seen, soak.txn_committed, soak.txn_other)
        gc.collect()
        # the broker sees the clients' connections close; on disk, retention deletes the segments rolled before the
        # producers stopped and closes their `.deleted` files file.delete.delay.ms (60 s) later
        t_end = time.monotonic()
        deadline = t_end + 30 + (retention_s + 90 if mode == "disk" else 0)
        last = sample(pid, port)
        while (last["conns"] or last["fds"] > base["fds"] + 50) and time.monotonic() < deadline:
            time.sleep(0.5)
            last = sample(pid, port)
        last["settled_s"] = time.monotonic() - t_end
        last["kinds"] = fd_kinds(pid)
        if last["fds"] > base["fds"] + 50:
            failures.append(f"fds: {last['fds']} open with every client closed, {base['fds']} before the workloads")
    print("workloads:", ", ".join(w for w in WORKLOADS if w in on))
    report(minutes, mode, seed, first, base, samples, last, t0, soak, log_path, held, held_end)
    for f in failures:
        print("FAIL", f)
    print("correctness:", "FAILED" if failures else "ok")
    return 1 if failures else 0


def report(minutes, mode, seed, first, base, samples, last, t0, soak, log_path, held, held_end) -> None:
    warm = [s for s in samples if s["t"] - t0 >= WARMUP_S] or samples[-1:]
    w = warm[0]
    span = max(samples[-1]["t"] - w["t"], 1e-9)
    rows = [
        ("mode / minutes / seed / rate / client", f"{mode} / {minutes:g} / {seed} / {soak.rate} x 2 records/s / "
                                                  f"confluent-kafka {confluent_version()}"),
        ("RSS at 1 min -> end (MB)", f"{w['rss_mb']:.1f} -> {samples[-1]['rss_mb']:.1f} (start {first['rss_mb']:.1f}, "
                                     f"after the workloads {last['rss_mb']:.1f})"),
        ("RSS slope after warm-up", f"{slope_per_min([(s['t'], s['rss_mb']) for s in warm]):+.2f} MB/min (anonymous "
                                    f"{slope_per_min([(s['t'], s['anon_mb']) for s in warm]):+.2f}, file-backed "
                                    f"{slope_per_min([(s['t'], s['file_mb']) for s in warm]):+.2f})"),
        ("held at 1 min -> end (records; MB)",
         ", ".join(f"{k} {held.get(k, '?')} -> {v}" for k, v in held_end.items())),
        ("fds start / before workloads / max / end", f"{first['fds']} / {base['fds']} / "
                                                     f"{max(s['fds'] for s in samples)} / {last['fds']}"),
        ("fds before workloads / at the end, by kind", f"{base['kinds']} / {last['kinds']} "
                                                       f"({last['settled_s']:.0f} s after the clients closed)"),
        ("fds slope after warm-up", f"{slope_per_min([(s['t'], s['fds']) for s in warm]):+.2f} /min"),
        ("threads start / max / end", f"{first['threads']} / {max(s['threads'] for s in samples)} / {last['threads']}"),
        ("connections max / end", f"{max(s['conns'] for s in samples)} / {last['conns']}"),
        ("broker CPU after warm-up", f"{100 * (samples[-1]['cpu_s'] - w['cpu_s']) / span:.0f}% of a core "
                                     f"({samples[-1]['cpu_s'] - first['cpu_s']:.0f} s in all)"),
        ("records acknowledged",
         ", ".join(f"{k} {v}" for k, v in collections.Counter(a[0] for a in soak.acked).items())),
        ("records consumed (distinct)", ", ".join(f"{g.name} {len(g.consumed)}" for g in soak.groups.values())),
        ("members joined", ", ".join(f"{g.name} {g.joined}" for g in soak.groups.values())),
    ]
    bad, firsts, events = log_summary(log_path)
    rows.append(("broker group events", ", ".join(f"{k} {v}" for k, v in sorted(events.items())
                                                   if k and k.startswith(("group.", "consumer_group.")))))
    rows += [(k, str(v)) for k, v in sorted(soak.counts.items())]
    rows += [(f"client error: {k}", str(v)) for k, v in sorted(soak.errors.items())]
    print()
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    print(f"\nbroker log {log_path}: {sum(events.values())} lines, {sum(bad.values())} at WARNING or above")
    for event, n in bad.most_common():
        print(f"  {n:6d}  {event}  first: {json.dumps(firsts[event])[:300]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--mode", choices=("memory", "disk"), default="memory")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rate", type=int, default=None,
                    help="records/s of each idempotent producer (default 1000 in memory, 500 on disk, in a Produce "
                         "request every 10 ms in memory, 50 ms on disk: an fsync before every acknowledgement makes "
                         "each request dearer)")
    ap.add_argument("--retention-s", type=float, default=30,
                    help="retention.ms of the idempotent producers' topics, in seconds (default 30; 0 = keep all)")
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--only", help=f"run only these workloads, comma-separated (of {', '.join(WORKLOADS)})")
    which.add_argument("--without", help="run every workload but these, comma-separated")
    ap.add_argument("--log", help="the broker's log file (default: in a new temporary directory, kept)")
    a = ap.parse_args(argv)
    named = {w.strip() for w in (a.only or a.without or "").split(",") if w.strip()}
    if named - set(WORKLOADS):
        ap.error(f"unknown workloads {sorted(named - set(WORKLOADS))}: they are {', '.join(WORKLOADS)}")
    on = frozenset(named if a.only else set(WORKLOADS) - named)
    log_path = Path(a.log) if a.log else Path(tempfile.mkdtemp(prefix="kafkite-soak-")) / "broker.log"
    print(f"soak: {a.minutes:g} min, {a.mode}, seed {a.seed}; broker log {log_path}", flush=True)
    rate = a.rate or (1000 if a.mode == "memory" else 500)
    return run(a.minutes, a.mode, a.seed, rate, a.retention_s, log_path, on)


if __name__ == "__main__":
    sys.exit(main())
