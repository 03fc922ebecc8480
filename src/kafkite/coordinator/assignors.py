"""Server-side partition assignors of KIP-848 consumer groups (Kafka 4's UniformAssignor and
RangeAssignor, by what they promise), sans-IO and deterministic.

An assignor gets the members' subscriptions (member id -> topic ids), the partition count of
every subscribed topic, and the current target (for stickiness); it returns member id -> topic
id -> partitions. Every partition of a subscribed topic goes to exactly one member subscribed
to it.

* ``uniform`` (the default): balanced -- the numbers of partitions of any two members that could
  swap one differ by at most one -- and sticky: a partition stays with its member unless balance
  needs it to move.
* ``range``: per topic, its members sorted by member id get consecutive ranges, the first
  (partitions % members) of them one more; members with the same subscriptions get the same
  partition numbers of every topic (co-partitioning, for joins).
"""
from __future__ import annotations

import uuid
from typing import Mapping

Assignment = dict[uuid.UUID, frozenset[int]]
KAFKA_CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def normalize(names: list[str]) -> list[str]:
    """group.consumer.assignors entries: our names or Kafka's class names -> names; unknown ones raise."""
    out = []
    for n in names:
        n = KAFKA_CLASS_NAMES.get(n, n)
        if n not in ASSIGNORS:
            raise ValueError(f"unknown consumer group assignor {n!r} (known: {', '.join(ASSIGNORS)})")
        out.append(n)
    return out


def _freeze(raw: dict[str, dict[uuid.UUID, set[int]]], members) -> dict[str, Assignment]:
    return {m: {t: frozenset(ps) for t, ps in raw.get(m, {}).items() if ps} for m in members}


def range_assign(subscriptions: Mapping[str, frozenset[uuid.UUID]], partitions: Mapping[uuid.UUID, int],
                 current: Mapping[str, Assignment] | None = None) -> dict[str, Assignment]:
    raw: dict[str, dict[uuid.UUID, set[int]]] = {}
    for t in sorted(partitions, key=str):
        members = sorted(m for m, subs in subscriptions.items() if t in subs)
        if not members:
            continue
        n = partitions[t]
        base, extra = divmod(n, len(members))
        start = 0
        for i, m in enumerate(members):
            count = base + (1 if i < extra else 0)
            if count:
                raw.setdefault(m, {})[t] = set(range(start, start + count))
            start += count
    return _freeze(raw, subscriptions)


def uniform_assign(subscriptions: Mapping[str, frozenset[uuid.UUID]], partitions: Mapping[uuid.UUID, int],
                   current: Mapping[str, Assignment] | None = None) -> dict[str, Assignment]:
    members = sorted(subscriptions)
    owner: dict[tuple[uuid.UUID, int], str] = {}
    count = {m: 0 for m in members}
    # 1. stickiness: each member keeps what it had that is still valid (subscribed, partition exists)
    for m in members:
        for t, ps in sorted((current or {}).get(m, {}).items(), key=lambda kv: str(kv[0])):
            if t not in subscriptions[m] or t not in partitions:
                continue
            for p in sorted(ps):
                if p < partitions[t] and (t, p) not in owner:
                    owner[(t, p)] = m
                    count[m] += 1
    # 2. every unowned partition to its least-loaded subscribed member (ties: member id)
    for t in sorted(partitions, key=str):
        eligible = [m for m in members if t in subscriptions[m]]
        if not eligible:
            continue
        for p in range(partitions[t]):
            if (t, p) not in owner:
                m = min(eligible, key=lambda x: (count[x], x))
                owner[(t, p)] = m
                count[m] += 1
    # 3. balance: move a partition from the most loaded member to an eligible one with at least two fewer
    #    (O(members) a move when everyone is subscribed to the same topics)
    held: dict[str, list[tuple[uuid.UUID, int]]] = {m: [] for m in members}
    for tp, m in sorted(owner.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        held[m].append(tp)
    while True:
        move = None
        for src in sorted(members, key=lambda x: (-count[x], x)):
            for i in range(len(held[src]) - 1, -1, -1):  # its highest partitions first
                t = held[src][i][0]
                targets = [x for x in members if count[x] < count[src] - 1 and t in subscriptions[x]]
                if targets:
                    move = (src, i, min(targets, key=lambda x: (count[x], x)))
                    break
            if move is not None or count[src] <= 1:
                break
        if move is None:
            break
        src, i, dst = move
        tp = held[src].pop(i)
        held[dst].append(tp)
        owner[tp] = dst
        count[src] -= 1
        count[dst] += 1
    raw: dict[str, dict[uuid.UUID, set[int]]] = {}
    for (t, p), m in owner.items():
        raw.setdefault(m, {}).setdefault(t, set()).add(p)
    return _freeze(raw, members)


ASSIGNORS = {"uniform": uniform_assign, "range": range_assign}
