"""What a coordinator operation returns, and the steps the runtime takes with it (Kafka 4's
CoordinatorResult and the write path of its CoordinatorRuntime), sans-IO.

An operation decides; it does not write. It returns the records to append to its
`__consumer_offsets` partition and the response. The runtime then

1. appends the records (`start_write`); a failed append answers the error Kafka gives for it
   (`write_error`) through the operation's `on_failure`, and nothing is applied;
2. applies them with the shard's `replay(key, value)` -- the same replay that loads the
   partition after a leadership change, so loaded and live state cannot differ;
3. waits until they are durable, runs `on_success` (a follow-up that needs the write to have
   happened, e.g. SyncGroup propagating the leader's assignment) and answers (`finish_write`).

`replay=False` is for the classic group's membership records (GroupMetadataValue), as in
Kafka 4: the membership state machine has already moved (members, generation, timers live
in memory) and the record only persists it; replaying it live would rebuild the group from
the record and lose its timers and parked requests. At load the same records are replayed.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, TypeVar

from ..wire.errors import E

T = TypeVar("T")
Record = tuple[bytes, "bytes | None"]  # (key, value); a None value is a tombstone


class Pending:
    """A token for an answer that comes later (a parked JoinGroup or SyncGroup)."""
    _ids = itertools.count(1)

    def __init__(self) -> None:
        self.id = next(self._ids)

    def __repr__(self) -> str:
        return f"Pending({self.id})"


@dataclass
class CoordinatorResult(Generic[T]):
    records: list[Record] = field(default_factory=list)
    response: T | None = None
    replay: bool = True
    on_success: Callable[[], None] | None = None
    on_failure: Callable[[int], T] | None = None  # error -> the response to give instead
    producer_id: int = -1  # >= 0: a transactional write (TxnOffsetCommit), one batch of this producer
    producer_epoch: int = -1


def write_error(code: int) -> int:
    """The error a coordinator answers when appending its records failed (Kafka's
    GroupCoordinatorService.normalizeException)."""
    if code in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                E.REQUEST_TIMED_OUT):
        return int(E.COORDINATOR_NOT_AVAILABLE)
    if code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return int(E.NOT_COORDINATOR)
    if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
        return int(E.UNKNOWN_SERVER_ERROR)
    return int(code)


def start_write(result: CoordinatorResult, replay: Callable[[bytes, bytes | None], None],
                append: Callable[[list[Record]], int]) -> int:
    """Append the result's records (`append` returns 0 or Kafka's error) and replay them.
    Returns 0, or the coordinator's error for a failed append (then nothing was applied)."""
    if not result.records:
        return 0
    code = append(result.records)
    if code:
        return write_error(code)
    if result.replay:
        for key, value in result.records:
            replay(key, value)
    return 0


def finish_write(result: CoordinatorResult[T], error: int) -> T | Any:
    """After start_write (and, when it succeeded, once the records are durable): the answer."""
    if error:
        if result.on_failure is not None:
            return result.on_failure(error)
        return result.response
    if result.on_success is not None:
        result.on_success()
    return result.response
