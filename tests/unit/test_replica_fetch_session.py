"""A replica fetcher's side of its leader's incremental fetch session (server/replication.py `_Session`, Kafka's
FetchSessionHandler): what each fetch names and forgets, and when it starts over with a full fetch."""
from __future__ import annotations

from kafkite.server.replication import _Session
from kafkite.wire.errors import E

A, B, C = ("t", 0), ("t", 1), ("u", 0)


def test_a_full_fetch_then_only_what_changed_and_what_left():
    s = _Session()
    wanted = {A: (5, 0, 1), B: (7, 0, 1)}
    assert s.request(wanted) == (wanted, []) and (s.id, s.epoch) == (0, 0)  # full, asking for a session
    s.answered(wanted, 0, 42)
    assert (s.id, s.epoch) == (42, 1)
    assert s.request(wanted) == ({}, [])  # nothing changed: nothing named
    s.answered(wanted, 0, 42)
    moved = {A: (9, 0, 1), C: (0, 0, 3)}  # A appended, B backing off (forgotten), C new
    assert s.request(moved) == ({A: (9, 0, 1), C: (0, 0, 3)}, [B])
    s.answered(moved, 0, 42)
    assert (s.id, s.epoch, s.sent) == (42, 3, moved)
    assert s.request({A: (9, 0, 2), C: (0, 0, 3)}) == ({A: (9, 0, 2)}, [])  # a new leader epoch is a change


def test_an_error_or_a_failed_request_closes_the_session_with_the_next_full_fetch():
    """As Kafka's FetchSessionHandler: after a top-level error (but FETCH_SESSION_ID_NOT_FOUND), a failed request or
    an answer not applied, the next fetch is a full one naming the session at epoch 0, so that the leader closes it
    (nextCloseExisting) rather than keep a stale session of every partition until its cache evicts it."""
    wanted = {A: (5, 0, 1)}
    for error, answered_id in ((E.INVALID_FETCH_SESSION_EPOCH, 0), (E.FETCH_SESSION_TOPIC_ID_ERROR, 0),
                               (E.UNKNOWN_SERVER_ERROR, 0), (0, 99)):
        s = _Session()
        s.answered(wanted, 0, 42)
        s.answered(wanted, error, answered_id)
        assert (s.id, s.epoch, s.sent) == (42, 0, {}) and s.request(wanted) == (wanted, []), error
        s.answered(wanted, 0, 43)  # the leader closed 42 and made 43
        assert (s.id, s.epoch, s.sent) == (43, 1, wanted) and s.request(wanted) == ({}, [])
    s = _Session()
    s.answered(wanted, 0, 42)
    s.reset()  # the request failed, or its answer was not applied (replication paused meanwhile)
    assert (s.id, s.epoch, s.sent) == (42, 0, {}) and s.request(wanted) == (wanted, [])


def test_a_lost_or_closed_session_starts_over_without_an_id_and_no_room_asks_again():
    wanted = {A: (5, 0, 1)}
    for error in (E.FETCH_SESSION_ID_NOT_FOUND, 0):  # (0: the leader answered without the session: it closed it)
        s = _Session()
        s.answered(wanted, 0, 42)
        s.answered(wanted, error, 0)
        assert (s.id, s.epoch, s.sent) == (0, 0, {}) and s.request(wanted) == (wanted, [])
    s = _Session()
    s.answered(wanted, 0, 0)  # the leader had no room: the next fetch is a full one asking again
    assert (s.id, s.epoch) == (0, 0) and s.request(wanted) == (wanted, [])
