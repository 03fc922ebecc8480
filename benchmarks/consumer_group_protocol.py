"""Rebalances of a consumer group: the consumer protocol (KIP-848) against the classic one, same client.

    python benchmarks/consumer_group_protocol.py [--rounds 3] [--partitions 12] [--rate 2000] [--no-tansu]

Starts `kafkite serve --in-memory` (Kafka's default group settings: group.consumer.heartbeat.interval.ms
5000, the classic client's heartbeat.interval.ms 3000) on a free port for each round. A producer thread
writes --rate small records/s onto a --partitions topic for the whole round. Three confluent-kafka
consumers (one thread each, consume() in a loop, auto-commit) join one group; once they share the
partitions and have consumed for 2 s (the steady rate), a 4th member subscribes (the join), and once the
four share them, one of the first three closes (the leave); each a random 0-5 s later (seeded by the round,
the same for every protocol), so that they do not fall in step with the members' heartbeats. For each protocol:

  consumer            group.protocol=consumer (the broker's `uniform` assignor): no stop-the-world, the
                      members learn of the new target assignment at their next heartbeat
  cooperative-sticky  group.protocol=classic, partition.assignment.strategy=cooperative-sticky (KIP-429:
                      two rebalances, only the partitions that move are revoked)
  eager range         group.protocol=classic, partition.assignment.strategy=range (every member revokes
                      everything and waits for the whole group to re-join: stop-the-world)

it reports the time to rebalance (from the 4th member's subscribe(), or the leaving member's close(), to
the moment the members' assignments, seen by the clients, are disjoint, cover every partition and are
balanced), the records/s the group received in that window, and the longest time in it during which the
group received no record at all. Medians of --rounds rounds (protocols interleaved within a round).

Tansu 0.6 has no KIP-848 (no ConsumerGroupHeartbeat: a consumer with group.protocol=consumer cannot start
there), so only the two classic rows are run against it (Tansu's memory:// engine; skipped, with the
reason printed, when Tansu is not installed or with --no-tansu).

Measured on the 2-core build machine (2026-11-26, shared with other jobs; read the shape, not the digits),
3 rounds, 12 partitions, 2,000 records/s, confluent-kafka 2.16.1 / librdkafka 2.16.0:

     broker           protocol | steady rec/s | join s   rec/s gap s | leave s   rec/s gap s
    kafkite           consumer |        1,970 |   5.07   1,930  0.05 |    3.39   1,954  0.05
    kafkite cooperative-sticky |        1,900 |   5.21   1,989  0.08 |    1.73   1,655  0.05
    kafkite        eager range |        1,900 |   2.21   2,008  0.07 |    1.74   1,893  0.05
      tansu cooperative-sticky | failed: a 4th member joining: not balanced after 60 s
      tansu        eager range |        1,844 |  26.04   1,557 23.12 |   24.82   1,440 22.75

Rebalance times are set by heartbeats, not by the broker's work: with the consumer protocol the others
learn of the new target at their next heartbeat and the joiner is given its partitions at its own next one,
5 s (group.consumer.heartbeat.interval.ms) after it joined, in every round (5.06-5.08 s; Kafka 4 itself was
not measured here); a leave is seen at the members' next heartbeat (3.05-4.88 s). Classic members heartbeat every 3 s; an eager
join or leave is one JoinGroup/SyncGroup round, a cooperative join two. On this local, in-memory broker with
consumers that do no work at revocation, even eager range's stop-the-world (every member revokes everything
until the group has re-joined) lasts less than the producer's 50 ms tick: no rebalance shows a gap of more
than 0.08 s, and the group's rate stays near the production rate in all three. Tansu 0.6 rebalances
eagerly in about 25 s, with the group receiving nothing for 23 s of it; with cooperative-sticky, the joining
member got none or only some of the three it should have within 60 s while the others held on to three each
(partitions left unowned; the same in two runs), so its rows are skipped after the first failure.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import confluent_version, kafkite  # noqa: E402

PROTOCOLS = {
    "consumer": {"group.protocol": "consumer"},
    "cooperative-sticky": {"group.protocol": "classic", "partition.assignment.strategy": "cooperative-sticky"},
    "eager range": {"group.protocol": "classic", "partition.assignment.strategy": "range"},
}
CLASSIC = ("cooperative-sticky", "eager range")
STEADY_S = 2.0
TIMEOUT_S = 60.0
# The members learn of a join or a leave at their next heartbeat (every 5 s with the consumer protocol, every 3 s
# with the classic one by default): the join and the leave happen a random 0-5 s after the group settled (seeded
# by the round, the same for every protocol), not in step with the members' heartbeats.
PHASE_S = 5.0


class Member(threading.Thread):
    """One consumer in a thread of its own: when it received how many records, its assignment at every poll."""

    def __init__(self, bs: str, group: str, topic: str, conf: dict):
        super().__init__(daemon=True)
        self.conf = {"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "latest",
                     "log_level": 3, **conf}
        self.topic = topic
        self.assignment: frozenset[int] = frozenset()
        self.received: list[tuple[float, int]] = []
        self.leave = threading.Event()
        self.started_at = self.closing_at = 0.0
        self.error: BaseException | None = None

    def run(self) -> None:
        from confluent_kafka import Consumer
        try:
            c = Consumer(self.conf)
            self.started_at = time.monotonic()
            c.subscribe([self.topic])
            while not self.leave.is_set():
                n = sum(1 for m in c.consume(500, timeout=0.05) if not m.error())
                now = time.monotonic()
                if n:
                    self.received.append((now, n))
                self.assignment = frozenset(tp.partition for tp in c.assignment())
            self.closing_at = time.monotonic()
            c.close()
        except BaseException as e:  # reported by the main thread
            self.error = e


class Feed(threading.Thread):
    """A producer writing `rate` small records/s, in ticks of 50 ms, until stopped."""

    def __init__(self, bs: str, topic: str, rate: int):
        super().__init__(daemon=True)
        from confluent_kafka import Producer
        self.p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "log_level": 3})
        self.topic, self.rate, self.halt = topic, rate, threading.Event()

    def run(self) -> None:
        tick, n, t = 0.05, 0, time.monotonic()
        while not self.halt.is_set():
            for _ in range(max(1, int(self.rate * tick))):
                self.p.produce(self.topic, key=b"%d" % n, value=b"v")
                n += 1
            self.p.poll(0)
            t += tick
            time.sleep(max(0.0, t - time.monotonic()))
        self.p.flush(10)


def balanced(members: list[Member], partitions: int) -> bool:
    owned = [m.assignment for m in members]
    sizes = [len(a) for a in owned]
    return (sum(sizes) == partitions and frozenset().union(*owned) == frozenset(range(partitions))
            and max(sizes) - min(sizes) <= 1)


def wait_balanced(members: list[Member], partitions: int, what: str) -> float:
    deadline = time.monotonic() + TIMEOUT_S
    while not balanced(members, partitions):
        for m in members:
            if m.error:
                raise RuntimeError(f"{what}: a member failed: {m.error!r}")
        if time.monotonic() > deadline:
            owned = [sorted(m.assignment) for m in members]
            raise TimeoutError(f"{what}: not balanced after {TIMEOUT_S:.0f} s: {owned}")
        time.sleep(0.01)
    return time.monotonic()


def window(members: list[Member], t0: float, t1: float) -> tuple[float, float]:
    """Records/s the group received between t0 and t1, and the longest stretch in it with none received."""
    times = sorted(t for m in members for t, _ in m.received if t0 <= t <= t1)
    n = sum(k for m in members for t, k in m.received if t0 <= t <= t1)
    edges = [t0, *times, t1]
    return n / max(t1 - t0, 1e-9), max(b - a for a, b in zip(edges, edges[1:]))


def create_topic(bs: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": bs, "log_level": 3})
    for f in a.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)


def one_round(bs: str, protocol: str, tag: str, partitions: int, rate: int,
              phases: tuple[float, float]) -> dict[str, float]:
    topic, group = f"cgp-{tag}", f"cgp-{tag}"
    create_topic(bs, topic, partitions)
    feed = Feed(bs, topic, rate)
    feed.start()
    members = [Member(bs, group, topic, PROTOCOLS[protocol]) for _ in range(3)]
    try:
        for m in members:
            m.start()
        wait_balanced(members, partitions, "three members")
        t = time.monotonic()
        time.sleep(STEADY_S)  # the steady rate before anything moves (a measurement span, not a wait)
        steady, _ = window(members, t, time.monotonic())
        time.sleep(phases[0])  # a join at a random point of the members' heartbeat cycle
        joiner = Member(bs, group, topic, PROTOCOLS[protocol])
        joiner.start()
        members.append(joiner)
        while not joiner.started_at:
            time.sleep(0.001)
        t_join = joiner.started_at
        t_joined = wait_balanced(members, partitions, "a 4th member joining")
        join_rate, join_gap = window(members, t_join, t_joined)
        time.sleep(phases[1])
        leaver = members.pop(0)
        leaver.leave.set()
        while not leaver.closing_at:
            time.sleep(0.001)
        t_leave = leaver.closing_at
        t_left = wait_balanced(members, partitions, "a member leaving")
        leave_rate, leave_gap = window(members + [leaver], t_leave, t_left)
    finally:
        for m in members:
            m.leave.set()
        for m in members:
            m.join(30)
        feed.halt.set()
        feed.join(30)
    return {"steady": steady, "join_s": t_joined - t_join, "join_rate": join_rate, "join_gap": join_gap,
            "leave_s": t_left - t_leave, "leave_rate": leave_rate, "leave_gap": leave_gap}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="rounds; medians are reported")
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--rate", type=int, default=2000, help="records/s produced during a round")
    ap.add_argument("--no-tansu", action="store_true", help="skip the classic protocols against Tansu")
    args = ap.parse_args(argv)
    from peer import tansu, tansu_binary
    why_no_tansu = ("--no-tansu" if args.no_tansu else
                    None if tansu_binary() else "Tansu is not installed (.ci/install-clients.sh installs it)")
    brokers = [("kafkite", lambda: kafkite(), tuple(PROTOCOLS))]
    if why_no_tansu is None:
        brokers.append(("tansu", lambda: tansu(install=False), CLASSIC))
    runs: dict[tuple[str, str], list[dict[str, float]]] = {}
    failed: dict[tuple[str, str], str] = {}
    for rnd in range(args.rounds):
        rng = random.Random(rnd)  # the same phases for every protocol of a round
        phases = (rng.uniform(0, PHASE_S), rng.uniform(0, PHASE_S))
        for broker, start, protocols in brokers:
            with start() as bs:
                for i, protocol in enumerate(protocols):
                    if (broker, protocol) in failed:
                        continue
                    try:
                        r = one_round(bs, protocol, f"{rnd}-{i}", args.partitions, args.rate, phases)
                    except (RuntimeError, TimeoutError) as e:
                        failed[(broker, protocol)] = str(e)
                        print(f"round {rnd + 1} {broker} {protocol}: {e}", file=sys.stderr, flush=True)
                        continue
                    runs.setdefault((broker, protocol), []).append(r)
                    print(f"round {rnd + 1}/{args.rounds} {broker} {protocol}: join {r['join_s']:.2f} s, "
                          f"leave {r['leave_s']:.2f} s", file=sys.stderr, flush=True)
    print(f"Rebalance of a {args.partitions}-partition group, 3 -> 4 members (join) and 4 -> 3 (leave), "
          f"{args.rate:,} records/s produced throughout; medians of {args.rounds} rounds, confluent-kafka "
          f"{confluent_version()}, kafkite serve --in-memory with Kafka's default group settings. "
          "rec/s: received by the group during the rebalance; gap: the longest time in it with no record received.")
    if why_no_tansu:
        print(f"Tansu skipped: {why_no_tansu}.")
    print("Tansu 0.6 has no KIP-848 (no ConsumerGroupHeartbeat): the consumer protocol is not run there.")
    print(f"{'broker':>7} {'protocol':>18} | {'steady rec/s':>12} | {'join s':>6} {'rec/s':>7} {'gap s':>5} | "
          f"{'leave s':>7} {'rec/s':>7} {'gap s':>5}")
    for broker, _, protocols in brokers:
        for protocol in protocols:
            if (broker, protocol) in failed and (broker, protocol) not in runs:
                print(f"{broker:>7} {protocol:>18} | failed: {failed[(broker, protocol)][:80]}")
                continue
            med = {k: statistics.median(r[k] for r in runs[(broker, protocol)]) for k in runs[(broker, protocol)][0]}
            print(f"{broker:>7} {protocol:>18} | {med['steady']:>12,.0f} | {med['join_s']:>6.2f} "
                  f"{med['join_rate']:>7,.0f} {med['join_gap']:>5.2f} | {med['leave_s']:>7.2f} "
                  f"{med['leave_rate']:>7,.0f} {med['leave_gap']:>5.2f}")


if __name__ == "__main__":
    main()
