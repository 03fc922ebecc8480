"""The soak run's workloads (benchmarks/soak.py): the clients that run at once against one broker -- keyed idempotent
producers, a verifier reading everything back, two consumer groups that lose and gain members, a transactional
producer fenced now and then, and short-lived clients and topics -- and what each records for soak_checks.py."""
from __future__ import annotations

import collections
import contextlib
import logging
import random
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from soak_checks import TOPICS  # noqa: E402

PARTITIONS = 3
TXN_TOPIC, CHURN_TOPIC = "soak-txn", "soak-churn"
GROUPS = {"soak-classic": {"group.protocol": "classic", "partition.assignment.strategy": "range"},
          "soak-consumer": {"group.protocol": "consumer"}}
WORKLOADS = ("idempotent", "verifier", "groups", "txn", "churn", "admin")
WARMUP_S, SAMPLE_S, MEMBERS, CHURN_S = 60.0, 5.0, 3, 5.0
QUIET = {"log_level": 3}
_SILENT = logging.getLogger("soak.silent")  # librdkafka's lines about the fenced instance (expected) go nowhere
_SILENT.addHandler(logging.NullHandler())
_SILENT.propagate = False


class Soak:
    def __init__(self, bs: str, seed: int, rate: int, tick: float):
        self.bs, self.rate, self.tick, self.rng = bs, rate, tick, random.Random(seed)
        self.stop = threading.Event()        # every workload but the producers'
        self.stop_produce = threading.Event()
        self.produced = threading.Event()   # every producer has stopped: the verifier reads to the end
        self.lock = threading.Lock()
        self.acked: list[tuple] = []         # (producer, topic, partition, offset, payload)
        self.counts: collections.Counter = collections.Counter()
        self.errors: collections.Counter = collections.Counter()   # client-side error names, by workload
        self.failures: list[str] = []         # a workload that broke: a check failure
        self.txn_committed: list[bytes] = []
        self.txn_other: list[bytes] = []
        self.groups = {g: Group(self, g, conf) for g, conf in GROUPS.items()}
        self.threads: list[threading.Thread] = []

    def conf(self, **kw) -> dict:
        return {"bootstrap.servers": self.bs, **QUIET, **kw}

    def error(self, what: str, exc: BaseException) -> None:
        name = exc.args[0].name() if exc.args and hasattr(exc.args[0], "name") else type(exc).__name__
        with self.lock:
            self.errors[f"{what}: {name}"] += 1

    def spawn(self, target, *args) -> None:
        def run():
            try:
                target(*args)
            except BaseException as e:  # a workload that dies is a finding, not a silent gap
                with self.lock:
                    self.failures.append(f"{target.__name__}{args}: died: {e!r}")
        t = threading.Thread(target=run, daemon=True, name=target.__name__)  # (the verifier's: "run")
        t.start()
        self.threads.append(t)

    def idempotent(self, name: str) -> None:
        from confluent_kafka import Producer
        # many small Produce requests (a broker's cost is per request more than per record): one every tick
        p = Producer(self.conf(**{"enable.idempotence": True, "acks": "all", "linger.ms": self.tick * 100}))
        acks: list[tuple] = []

        def delivered(err, msg):
            if err:
                self.error("idempotent delivery", Exception(err))
            else:
                acks.append((name, msg.topic(), msg.partition(), msg.offset(), msg.value()))
        n, tick, t = 0, self.tick, time.monotonic()
        while not self.stop_produce.is_set():
            for _ in range(max(1, int(self.rate * tick))):
                p.produce(TOPICS[n % len(TOPICS)], key=b"%s-%d" % (name.encode(), n % 8),
                          value=b"%s:%d" % (name.encode(), n), on_delivery=delivered)
                n += 1
            p.poll(0)
            t += tick
            time.sleep(max(0.0, t - time.monotonic()))
        left = p.flush(60)
        with self.lock:
            self.acked += acks
            self.counts["idempotent sent"] += n
            if left:
                self.failures.append(f"{name}: {left} records still unacknowledged after 60 s")

    def transactional(self) -> None:
        from confluent_kafka import KafkaException, Producer
        conf = self.conf(**{"transactional.id": "soak-txn-1", "transaction.timeout.ms": 60000, "logger": _SILENT})
        p = Producer(conf)
        p.init_transactions(60)
        n = 0
        while not self.stop.is_set():
            if n and n % 30 == 0:  # a new instance fences the old one
                new = Producer(conf)
                new.init_transactions(60)
                values = [b"txn%d:fenced" % n]
                try:
                    p.begin_transaction()
                    p.produce(TXN_TOPIC, value=values[0])
                    p.commit_transaction(30)
                    with self.lock:
                        self.failures.append(f"txn {n}: the fenced instance committed")
                        self.txn_committed += values
                except KafkaException as e:
                    self.txn_other += values
                    self.counts["txn fenced as expected"] += 1
                    if not e.args[0].fatal():
                        self.error("txn fenced (not fatal)", e)
                with contextlib.suppress(KafkaException):
                    p.purge()
                p.flush(1)
                p = new
            values = [b"txn%d:%d" % (n, i) for i in range(self.rng.randint(2, 5))]
            commit = self.rng.random() < 0.5
            try:
                p.begin_transaction()
                for i, v in enumerate(values):
                    p.produce(TXN_TOPIC, key=b"%d" % i, value=v)
                if commit:
                    p.commit_transaction(30)
                    self.txn_committed += values
                    self.counts["txn committed"] += 1
                else:
                    p.abort_transaction(30)
                    self.txn_other += values
                    self.counts["txn aborted"] += 1
            except KafkaException as e:
                self.error("txn", e)
                with self.lock:
                    self.failures.append(f"txn {n} ({'commit' if commit else 'abort'}): {e!r}")
                return
            n += 1
            self.stop.wait(0.2)
        p.flush(10)

    def connection_churn(self) -> None:
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient
        n = 0
        while not self.stop.wait(1.0):
            kind = ("admin", "confluent", "kafka-python")[n % 3]
            n += 1
            value = b"churn:%d" % n
            try:
                if kind == "admin":
                    a = AdminClient(self.conf())
                    a.list_topics(timeout=30)
                    for f in a.describe_consumer_groups(list(GROUPS), request_timeout=30).values():
                        f.result(30)
                    del a
                elif kind == "confluent":
                    acks = []
                    p = Producer(self.conf(acks="all"))
                    p.produce(CHURN_TOPIC, value=value,
                              on_delivery=lambda err, m: acks.append(err or (m.partition(), m.offset())))
                    p.flush(30)
                    del p
                    if not acks or not isinstance(acks[0], tuple):
                        raise RuntimeError(f"confluent churn producer: {acks}")
                    self.acked.append(("churn", CHURN_TOPIC, acks[0][0], acks[0][1], value))
                else:
                    from kafka import KafkaProducer
                    p = KafkaProducer(bootstrap_servers=self.bs, acks="all")
                    md = p.send(CHURN_TOPIC, value=value).get(timeout=30)
                    p.close(10)
                    self.acked.append(("churn", CHURN_TOPIC, md.partition, md.offset, value))
                self.counts[f"churn {kind}"] += 1
            except Exception as e:
                self.error(f"churn {kind}", e)

    def admin_churn(self) -> None:
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient, NewTopic
        n = 0
        while not self.stop.wait(30.0 if n else 10.0):
            n += 1
            topic = f"soak-tmp-{n}"
            try:
                a = AdminClient(self.conf())
                a.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
                p = Producer(self.conf(acks="all"))
                ok = []
                for i in range(20):
                    p.produce(topic, value=b"%d" % i, on_delivery=lambda err, m: ok.append(err is None))
                p.flush(30)
                del p
                if sum(ok) != 20:
                    raise RuntimeError(f"{topic}: {sum(ok)} of 20 records acknowledged")
                a.delete_topics([topic])[topic].result(30)
                deadline = time.monotonic() + 30
                while topic in a.list_topics(timeout=30).topics:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{topic} still listed 30 s after its deletion")
                    time.sleep(0.2)
                del a
                self.counts["admin topics created+deleted"] += 1
            except Exception as e:
                self.error("admin churn", e)
                with self.lock:
                    self.failures.append(f"admin churn {topic}: {e!r}")


class Verifier:
    """An assigned consumer (no group) reading every partition of the topics from its start as they are written:
    the full read of the topics (retention deletes their oldest segments meanwhile), (topic, partition) ->
    {offset: payload}, and a note of every jump in the offsets it read."""

    def __init__(self, soak: Soak, topics):
        self.soak, self.topics = soak, topics
        self.log: dict[tuple[str, int], dict[int, bytes]] = {}
        self.gaps: list[str] = []
        self.done = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer(self.soak.conf(**{"group.id": "soak-verifier", "enable.auto.commit": False,
                                       "auto.offset.reset": "earliest"}))
        md = c.list_topics(timeout=30)
        tps = [TopicPartition(t, p, 0) for t in self.topics for p in md.topics[t].partitions]
        self.log = {(tp.topic, tp.partition): {} for tp in tps}
        nxt = dict.fromkeys(self.log, 0)
        c.assign(tps)
        targets, deadline = None, None
        while True:
            if self.soak.produced.is_set() and targets is None:  # read to the high watermarks from here
                targets = {tp: c.get_watermark_offsets(TopicPartition(*tp), timeout=30)[1] for tp in self.log}
                deadline = time.monotonic() + 120
            if targets is not None and (all(nxt[tp] >= end for tp, end in targets.items())
                                        or time.monotonic() > deadline):
                break
            for m in c.consume(1000, timeout=0.2):
                tp = (m.topic(), m.partition())
                if m.error():
                    continue
                if m.offset() != nxt[tp] and self.log[tp]:
                    self.gaps.append(f"{tp}: read offset {m.offset()} after {nxt[tp] - 1}")
                nxt[tp] = m.offset() + 1
                self.log[tp][m.offset()] = m.value()
        c.close()
        short = sorted(tp for tp, end in (targets or {}).items() if nxt[tp] < end)
        if short:
            self.soak.failures.append(f"verifier: {short} not read to their high watermark in 120 s")
        self.done.set()


class Group:
    """A consumer group whose members come and go; what they processed, and who processed each partition last."""

    def __init__(self, soak: Soak, name: str, conf: dict):
        self.soak, self.name = soak, name
        self.conf = soak.conf(**{"group.id": name, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                 **conf})
        self.consumed: set[tuple[str, int, int]] = set()
        self.last_owner: dict[tuple[str, int], tuple[float, int, int]] = {}  # tp -> (time, member, offset)
        self.lock = threading.Lock()
        self.members: list[threading.Event] = []
        self.threads: list[threading.Thread] = []
        self.joined = 0

    def add_member(self) -> None:
        leave = threading.Event()
        self.joined += 1
        t = threading.Thread(target=self.member, args=(self.joined, leave), daemon=True, name=f"{self.name}-m")
        self.members.append(leave)
        self.threads.append(t)
        t.start()

    def member(self, mid: int, leave: threading.Event) -> None:
        from confluent_kafka import Consumer, KafkaException, TopicPartition
        pos: dict[tuple[str, int], int] = {}   # processed, not yet committed: tp -> next offset

        def commit(tps) -> None:
            offsets = [TopicPartition(t, p, pos.pop((t, p))) for t, p in tps if (t, p) in pos]
            if offsets:
                try:
                    c.commit(offsets=offsets, asynchronous=False)
                    self.soak.counts[f"{self.name} commits"] += 1
                except KafkaException as e:
                    self.soak.error(f"{self.name} commit", e)

        def revoked(_, parts):
            self.soak.counts[f"{self.name} revocations"] += 1
            commit([(tp.topic, tp.partition) for tp in parts])

        def assigned(_, parts):
            self.soak.counts[f"{self.name} assignments"] += 1
        try:
            c = Consumer(self.conf)
            c.subscribe(list(TOPICS), on_assign=assigned, on_revoke=revoked, on_lost=revoked)
            last_commit = time.monotonic()
            while not leave.is_set():
                msgs = c.consume(500, timeout=0.1)
                now = time.monotonic()
                with self.lock:
                    for m in msgs:
                        if m.error():
                            self.soak.error(f"{self.name} consume", Exception(m.error()))
                            continue
                        tp = (m.topic(), m.partition())
                        self.consumed.add((*tp, m.offset()))
                        self.last_owner[tp] = (now, mid, m.offset())
                        pos[tp] = m.offset() + 1
                if now - last_commit > 1.0:
                    commit(list(pos))
                    last_commit = now
            commit(list(pos))
            c.close()
        except Exception as e:
            with self.soak.lock:
                self.soak.failures.append(f"{self.name} member {mid}: {e!r}")

    def churn(self) -> None:
        """A member leaves and a new one joins (the oldest goes)."""
        if self.members:
            self.members.pop(0).set()
        self.add_member()

    def close(self, timeout: float = 60) -> None:
        for leave in self.members:
            leave.set()
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
        self.members.clear()
