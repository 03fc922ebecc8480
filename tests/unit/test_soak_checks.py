"""benchmarks/soak_checks.py (soak.py's correctness checks) catch what they are there to catch: a lost, moved,
duplicated or out-of-order acknowledged record, a group's commit behind its last owner or past the log end, and a
read_committed read that saw an aborted record or missed a committed one."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import soak_checks as soak  # noqa: E402

T = soak.TOPICS[0]
ACKED = [("p1", T, 0, 0, b"p1:0"), ("p1", T, 0, 1, b"p1:1"), ("p2", T, 0, 2, b"p2:0"), ("p1", T, 1, 0, b"p1:2")]


def test_acked_offsets_rise_per_producer_and_are_unique():
    assert soak.check_acked(ACKED) == []
    assert soak.check_acked([*ACKED, ("p1", T, 0, 1, b"p1:3")])  # back in p1's order, and a second ack of offset 1
    assert soak.check_acked([("p1", T, 0, 5, b"a"), ("p2", T, 0, 5, b"b")])


def test_full_read_holds_every_acknowledged_record_once():
    log = {(T, 0): {0: b"p1:0", 1: b"p1:1", 2: b"p2:0"}, (T, 1): {0: b"p1:2"}}
    assert soak.check_log(ACKED, log, {T}) == []
    assert soak.check_log(ACKED, {**log, (T, 1): {}}, {T})  # lost
    assert soak.check_log(ACKED, {**log, (T, 1): {0: b"p1:9"}}, {T})  # another payload at the offset
    assert soak.check_log(ACKED, {**log, (T, 1): {0: b"p1:2", 1: b"p1:2"}}, {T})  # an idempotent duplicate
    assert soak.check_log(ACKED, {**log, (T, 0): {1: b"p1:1", 2: b"p2:0"}}, {T}) == []  # offset 0 gone by retention


def test_group_consumed_all_and_committed_between_last_owner_and_log_end():
    consumed = {(t, p, o) for _, t, p, o, _ in ACKED}
    ends = {(T, 0): 3, (T, 1): 1}
    owner = {(T, 0): 2, (T, 1): 0}
    assert soak.check_group("g", ACKED, consumed, owner, {(T, 0): 3, (T, 1): 1}, ends) == []
    assert soak.check_group("g", ACKED, consumed - {(T, 0, 1)}, owner, {(T, 0): 3, (T, 1): 1}, ends)
    assert soak.check_group("g", ACKED, consumed, owner, {(T, 0): 2, (T, 1): 1}, ends)  # behind the last owner
    assert soak.check_group("g", ACKED, consumed, owner, {(T, 0): 4, (T, 1): 1}, ends)  # past the log end
    assert soak.check_group("g", ACKED, consumed, owner, {(T, 0): 3, (T, 1): -1001}, ends)  # none committed


def test_read_committed_sees_exactly_the_committed_records():
    assert soak.check_committed_read([b"t0:0", b"t0:1"], [b"t0:0", b"t0:1"], [b"t1:0"]) == []
    assert soak.check_committed_read([b"t0:0", b"t0:1", b"t1:0"], [b"t0:0", b"t0:1"], [b"t1:0"])  # an aborted one
    assert soak.check_committed_read([b"t0:0"], [b"t0:0", b"t0:1"], [])  # a committed one missing
    assert soak.check_committed_read([b"t0:0", b"t0:0"], [b"t0:0"], [])  # twice


def test_slope_per_minute():
    assert soak.slope_per_min([(0, 10.0), (60, 11.0), (120, 12.0)]) == 1.0
    assert soak.slope_per_min([(0, 10.0)]) == 0.0
