"""Idempotent producers: per-partition sequence and epoch state (Kafka's ProducerStateManager).

For each producer id the partition keeps its epoch and the last five batches'
(first sequence, last sequence, base offset, last offset). A retried batch
(same epoch, same sequences) is a DUPLICATE: the broker acknowledges it with the
original offsets and writes nothing. A sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER,
an older epoch INVALID_PRODUCER_EPOCH, a new epoch must start at sequence 0.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ..wire.errors import E

MAX_BATCHES = 5
INT_MAX = (1 << 31) - 1


@dataclass
class BatchMeta:
    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int


@dataclass
class ProducerEntry:
    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=MAX_BATCHES))
    last_timestamp: int = -1


@dataclass
class CheckResult:
    error: str | None = None  # None, "duplicate", or "error"
    code: int = 0
    message: str | None = None
    base_offset: int = -1
    last_offset: int = -1


def _next_seq(seq: int) -> int:
    return 0 if seq == INT_MAX else seq + 1


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int, *, now_ms: int = 0) -> CheckResult:
        e = self.producers.get(producer_id)
        if e is None:
            return CheckResult()  # unknown producer: any first sequence is accepted (KIP-360)
        if epoch < e.epoch:
            return CheckResult("error", int(E.INVALID_PRODUCER_EPOCH),
                               f"Epoch {epoch} of producer {producer_id} is older than the current epoch {e.epoch}")
        if epoch > e.epoch:
            if first_seq != 0:
                return CheckResult("error", int(E.OUT_OF_ORDER_SEQUENCE_NUMBER),
                                   f"Invalid sequence number for new epoch {epoch} of producer {producer_id}: "
                                   f"{first_seq} (request epoch), 0 (expected)")
            return CheckResult()
        for b in e.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return CheckResult("duplicate", base_offset=b.base_offset, last_offset=b.last_offset)
        if e.batches:
            expected = _next_seq(e.batches[-1].last_seq)
            if first_seq != expected:
                return CheckResult("error", int(E.OUT_OF_ORDER_SEQUENCE_NUMBER),
                                   f"Out of order sequence number for producer {producer_id} at offset: "
                                   f"{first_seq} (incoming seq. number), {e.batches[-1].last_seq} "
                                   "(current end sequence number)")
        return CheckResult()

    def update(self, producer_id: int, epoch: int, first_seq: int, last_seq: int, base_offset: int,
               last_offset: int, timestamp: int = -1) -> None:
        e = self.producers.get(producer_id)
        if e is None or epoch != e.epoch:
            e = ProducerEntry(epoch)
            self.producers[producer_id] = e
        e.batches.append(BatchMeta(first_seq, last_seq, base_offset, last_offset))
        e.last_timestamp = timestamp

    def update_from_header(self, h) -> None:
        if h.producer_id >= 0 and h.base_sequence >= 0:
            self.update(h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence, h.base_offset,
                        h.last_offset, h.max_timestamp)
