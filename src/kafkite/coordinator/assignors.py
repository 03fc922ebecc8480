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

Racks (KIP-881's rack-aware assignment, as Kafka's server assignors did until 3.7 and its client assignors
do): a member's rack is the RackId of its heartbeat (the client's ``client.rack``); a partition's racks are
the ``broker.rack`` of the brokers holding its replicas. When some members and partitions give racks that
meet, and not every partition is on the same racks, a partition goes to a member of one of its racks where
balance allows: the order of priority is balance, then racks, then stickiness. Otherwise (no racks, or
nothing to gain from them) the racks change nothing. (Kafka 3.8 took this out of its server assignors
(KAFKA-16694); 4.1 gives the racks to assignors again and rebalances when they change (KIP-1101);
KAFKA-19909, open in late 2025, proposes it again for the uniform assignor.)
"""
from __future__ import annotations

import heapq
import uuid
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

Assignment = dict[uuid.UUID, frozenset[int]]
RackMatch = Callable[[str, uuid.UUID, int], bool]
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


@dataclass(frozen=True)
class Racks:
    """The rack inputs of an assignment: member id -> its rack (members without one absent), and topic id ->
    per partition the racks of its replicas (empty when none is known)."""
    members: Mapping[str, str] = field(default_factory=dict)
    partitions: Mapping[uuid.UUID, Sequence[frozenset[str]]] = field(default_factory=dict)

    def of(self, t: uuid.UUID, p: int) -> frozenset[str]:
        rs = self.partitions.get(t)
        return rs[p] if rs is not None and p < len(rs) else frozenset()

    def matcher(self, members: Iterable[str], tps: Iterable[tuple[uuid.UUID, int]]) -> RackMatch | None:
        """Kafka's useRackAwareAssignment for these members and partitions: a `(member, topic, partition) ->
        the member is on a rack of the partition's replicas` function, or None when racks cannot help (no
        member rack, no partition rack among them, or every partition on the same racks)."""
        member_racks = {self.members[m] for m in members if self.members.get(m)}
        if not member_racks:
            return None
        sets = {self.of(t, p) for t, p in tps}
        every = frozenset().union(*sets) if sets else frozenset()
        if not (every & member_racks) or sets == {every}:
            return None
        racks = self.members
        return lambda m, t, p: (r := racks.get(m)) is not None and r in self.of(t, p)


def range_assign(subscriptions: Mapping[str, frozenset[uuid.UUID]], partitions: Mapping[uuid.UUID, int],
                 current: Mapping[str, Assignment] | None = None, racks: Racks | None = None
                 ) -> dict[str, Assignment]:
    """Per topic, its subscribers sorted by member id; each takes its quota (partitions // members, one more for
    the first partitions % members of them) of the lowest partitions left. Topics with the same subscribers and
    partition count are assigned together (co-partitioned). With racks (Kafka's rack-aware RangeAssignor of
    KIP-881): a first pass gives each member, in order and within its quota, the lowest partitions left with a
    replica on its rack (on its rack for every topic of a co-partitioned set); the second pass as without."""
    raw: dict[str, dict[uuid.UUID, set[int]]] = {}
    sets: dict[tuple[tuple[str, ...], int], list[uuid.UUID]] = {}
    for t in sorted(partitions, key=str):
        members = tuple(sorted(m for m, subs in subscriptions.items() if t in subs))
        if members:
            sets.setdefault((members, partitions[t]), []).append(t)
    for (members, n), topics in sets.items():
        base, extra = divmod(n, len(members))
        taken = {m: 0 for m in members}
        left = list(range(n))
        match = racks.matcher(members, [(t, p) for t in topics for p in range(n)]) if racks is not None else None

        def give(m: str, ok) -> None:
            nonlocal extra, left
            room = max(0, base + (1 if extra > 0 else 0) - taken[m])
            mine = [p for p in left if ok(m, p)][:room]
            if not mine:
                return
            for t in topics:
                raw.setdefault(m, {}).setdefault(t, set()).update(mine)
            taken[m] += len(mine)
            if taken[m] > base:
                extra -= 1
            chosen = set(mine)
            left = [p for p in left if p not in chosen]
        if match is not None:
            for m in members:
                give(m, lambda m, p: all(match(m, t, p) for t in topics))
        for m in members:
            give(m, lambda m, p: True)
    return _freeze(raw, subscriptions)


def uniform_assign(subscriptions: Mapping[str, frozenset[uuid.UUID]], partitions: Mapping[uuid.UUID, int],
                   current: Mapping[str, Assignment] | None = None, racks: Racks | None = None
                   ) -> dict[str, Assignment]:
    members = sorted(subscriptions)
    eligible = {t: [m for m in members if t in subscriptions[m]] for t in sorted(partitions, key=str)}
    match = racks.matcher(members, [(t, p) for t, ms in eligible.items() if ms for p in range(partitions[t])]) \
        if racks is not None else None
    owner: dict[tuple[uuid.UUID, int], str] = {}
    count = {m: 0 for m in members}
    previous: dict[tuple[uuid.UUID, int], str] = {}  # rack-aware: a partition its owner is not on a rack of
    share = 0  # rack-aware: an even share of the partitions
    # 1. stickiness: each member keeps what it had that is still valid (subscribed, partition exists; with racks:
    #    on its rack)
    for m in members:
        for t, ps in sorted((current or {}).get(m, {}).items(), key=lambda kv: str(kv[0])):
            if t not in subscriptions[m] or t not in partitions:
                continue
            for p in sorted(ps):
                if p < partitions[t] and (t, p) not in owner:
                    if match is not None and not match(m, t, p):
                        previous.setdefault((t, p), m)
                        continue
                    owner[(t, p)] = m
                    count[m] += 1
    # 2. with racks: the unowned partitions to members of their racks, those with the fewest such members first,
    #    each to the least loaded of them while it is under an even share
    if match is not None:
        total = sum(partitions[t] for t, ms in eligible.items() if ms)
        share = -(-total // max(1, sum(1 for m in members if subscriptions[m])))
        todo = []
        for t, ms in eligible.items():
            by_rack: dict[str, list[str]] = {}  # the topic's subscribers by rack
            for m in ms:
                if racks.members.get(m):
                    by_rack.setdefault(racks.members[m], []).append(m)
            for p in range(partitions[t]):
                if by_rack and (t, p) not in owner:
                    near = [m for r in racks.of(t, p) for m in by_rack.get(r, ())]
                    if near:
                        todo.append((len(near), str(t), p, t, near))
        for _, _, p, t, near in sorted(todo, key=lambda x: x[:3]):
            free = [m for m in near if count[m] < share]
            if free:
                m = min(free, key=lambda x: (count[x], x))
                owner[(t, p)] = m
                count[m] += 1
    # 3. every unowned partition to its least-loaded subscribed member (ties: member id); with racks its previous
    #    owner first while under an even share
    for t, ms in eligible.items():
        if not ms:
            continue
        heap: list[tuple[int, str]] | None = None  # (count, member): counts only grow, a stale entry is re-pushed
        for p in range(partitions[t]):
            if (t, p) not in owner:
                m = previous.get((t, p))
                if m is None or count[m] >= share:
                    if heap is None:
                        heap = [(count[x], x) for x in ms]
                        heapq.heapify(heap)
                    while heap[0][0] != count[heap[0][1]]:
                        heapq.heapreplace(heap, (count[heap[0][1]], heap[0][1]))
                    m = heap[0][1]
                owner[(t, p)] = m
                count[m] += 1
    # 4. balance: move a partition from the most loaded member to an eligible one with at least two fewer
    #    (O(members) a move when everyone is subscribed to the same topics); with racks the move that puts a
    #    partition on its new owner's rack, else takes one off a rack its owner is not on
    held: dict[str, list[tuple[uuid.UUID, int]]] = {m: [] for m in members}
    for tp, m in sorted(owner.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        held[m].append(tp)
    while True:
        move = None
        for src in sorted(members, key=lambda x: (-count[x], x)):
            if match is not None:
                move = _rack_move(src, held[src], members, count, subscriptions, match)
            else:
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


def _rack_move(src: str, held: list[tuple[uuid.UUID, int]], members: list[str], count: dict[str, int],
               subscriptions: Mapping[str, frozenset[uuid.UUID]], match: RackMatch) -> tuple[str, int, str] | None:
    """The best move of one of `src`'s partitions to a member with at least two fewer: onto the new owner's rack
    first, then off a rack `src` is not on, then to the least loaded (ties: member id, then src's highest)."""
    lighter = [x for x in members if count[x] < count[src] - 1]
    if not lighter:
        return None
    best, best_key = None, None
    for i in range(len(held) - 1, -1, -1):
        t, p = held[i]
        stays = match(src, t, p)
        for dst in lighter:
            if t in subscriptions[dst]:
                key = (not match(dst, t, p), stays, count[dst], dst)
                if best_key is None or key < best_key:
                    best, best_key = (src, i, dst), key
    return best


ASSIGNORS = {"uniform": uniform_assign, "range": range_assign}
