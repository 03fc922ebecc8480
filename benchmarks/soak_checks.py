"""benchmarks/soak.py's correctness checks: pure functions, lists and dicts in, a list of failures out
(tests/unit/test_soak_checks.py)."""
from __future__ import annotations

import collections

TOPICS = ("soak-a", "soak-b", "soak-c")  # the idempotent producers' topics, which the groups consume


def check_acked(acked: list[tuple[str, str, int, int, bytes]]) -> list[str]:
    """acked: (producer, topic, partition, offset, payload) in the order each producer's acks came. Offsets must rise
    strictly per producer and partition, and no two acknowledged records may share an offset."""
    bad, last, seen = [], {}, {}
    for who, t, p, o, v in acked:
        if o <= last.get((who, t, p), -1):
            bad.append(f"{who}: {t}-{p} acknowledged offset {o} after {last[(who, t, p)]}")
        last[(who, t, p)] = o
        if (t, p, o) in seen:
            bad.append(f"{t}-{p} offset {o} acknowledged twice: {seen[(t, p, o)]!r} and {v!r}")
        seen[(t, p, o)] = v
    return bad


def check_log(acked, log: dict[tuple[str, int], dict[int, bytes]], unique: set[str]) -> list[str]:
    """log: a full read, (topic, partition) -> {offset: payload}, from each partition's first offset then. Every
    acknowledged record at its offset with its payload; in the topics of `unique` (idempotent producers) no payload
    twice in a partition."""
    bad, first = [], {tp: min(records, default=0) for tp, records in log.items()}
    for who, t, p, o, v in acked:
        if o < first.get((t, p), 0):
            continue  # (deleted by retention before the read began)
        got = log.get((t, p), {}).get(o)
        if got != v:
            bad.append(f"{t}-{p} offset {o}: acknowledged {v!r}, read {got!r}")
    for (t, p), records in log.items():
        if t in unique:
            n = collections.Counter(records.values())
            bad += [f"{t}-{p}: {v!r} {k} times" for v, k in n.items() if k > 1]
    return bad


def check_group(name, acked, consumed: set, last_owner: dict, committed: dict, ends: dict) -> list[str]:
    """consumed: every (topic, partition, offset) a member of the group processed; last_owner: (topic, partition)
    -> the highest offset processed by the last member that processed one there; committed and ends: (topic,
    partition) -> the group's committed offset and the log end."""
    bad = []
    missing = [(t, p, o) for _, t, p, o, _ in acked if t in TOPICS and (t, p, o) not in consumed]
    if missing:
        bad.append(f"{name}: {len(missing)} acknowledged records never consumed, e.g. {missing[:3]}")
    for tp, end in sorted(ends.items()):
        c = committed.get(tp)
        if c is None or c < 0:
            if tp in last_owner:
                bad.append(f"{name}: {tp} has no committed offset, last owner processed up to {last_owner[tp]}")
            continue
        if c > end:
            bad.append(f"{name}: {tp} committed {c} beyond the log end {end}")
        if tp in last_owner and c < last_owner[tp] + 1:
            bad.append(f"{name}: {tp} committed {c}, its last owner processed offset {last_owner[tp]}")
    return bad


def check_committed_read(seen: list[bytes], committed: list[bytes], not_committed: list[bytes]) -> list[str]:
    bad = []
    n = collections.Counter(seen)
    if sorted(n) != sorted(committed):
        lost, extra = set(committed) - set(n), set(n) - set(committed)
        bad.append(f"read_committed: {len(lost)} committed records missing {sorted(lost)[:3]}, {len(extra)} "
                   f"others seen {sorted(extra)[:3]} ({len(extra & set(not_committed))} of aborted transactions)")
    bad += [f"read_committed: {v!r} seen {k} times" for v, k in n.items() if k > 1]
    return bad


def slope_per_min(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value), per minute."""
    if len(points) < 2:
        return 0.0
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return 60 * sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
