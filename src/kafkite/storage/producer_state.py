"""Idempotent producers: per-partition sequence and epoch state (Kafka's ProducerStateManager
and ProducerAppendInfo). Everything that decides whether a producer's batch may be appended
lives here.

For each producer id the partition keeps its epoch and the metadata of its last five
batches (first/last sequence, base/last offset). The rules, checked in this order, as Kafka
(2.5+, KIP-360; 2.7+ for INVALID_PRODUCER_EPOCH) applies them to a client's batch:

- unknown producer (no state, e.g. never seen or expired): any sequence
  is accepted; Kafka no longer answers UNKNOWN_PRODUCER_ID to produce;
- epoch older than the producer's epoch: INVALID_PRODUCER_EPOCH (47);
- same epoch, same (first, last) sequence as one of the last five batches: DUPLICATE; the
  broker writes nothing and acknowledges with that batch's original base offset;
- newer epoch: the batch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER (45);
- same epoch: first sequence must follow the last one (Int32 max wraps to 0), else
  OUT_OF_ORDER_SEQUENCE_NUMBER.

`update` records an appended batch. A file log keeps the state in Kafka's producer snapshots
(producer_snapshot.py: each producer's epoch and last batch) and, when opened, loads the newest
one and replays the batch headers after it (a memory log, or a directory without snapshots,
rebuilds it from every batch header): a producer whose batches retention deleted is known until
producer.id.expiration.ms passes, across restarts too.

Transactions (Kafka's ProducerStateManager.ongoingTxns / unreplicatedTxns): a transactional
batch opens its producer's transaction at its base offset unless one is open; a marker (control
batch) closes it and returns the CompletedTxn, whose first offset is the transaction's first
(the marker's own offset for a transaction without data here). The first unstable offset is the
smallest first offset of an open transaction, or of a completed one whose marker is not yet
below the high watermark: the last stable offset is min(high watermark, that).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Iterable

import kafka.errors as kerr

from .batch import INT32_MAX, BatchHeader

MAX_BATCHES = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
NO_PRODUCER_EPOCH = -1
OUT_OF_ORDER_SEQUENCE_NUMBER = kerr.OutOfOrderSequenceNumberError.errno  # 45
INVALID_PRODUCER_EPOCH = kerr.InvalidProducerEpochError.errno  # 47

OK, DUPLICATE, ERROR = "ok", "duplicate", "error"


@dataclass(slots=True)
class BatchMeta:
    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int
    timestamp: int = -1


@dataclass
class ProducerEntry:
    epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=MAX_BATCHES))
    last_timestamp: int = -1
    current_txn_first_offset: int = -1  # the open transaction's first offset, -1 without one
    coordinator_epoch: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1


@dataclass
class CheckResult:
    """status OK, DUPLICATE (base_offset/last_offset: the original batch's) or ERROR (code,
    message). `error` is None / "duplicate" / "error" for callers that test truthiness."""
    status: str = OK
    code: int = 0
    message: str | None = None
    base_offset: int = -1
    last_offset: int = -1

    @property
    def error(self) -> str | None:
        return None if self.status == OK else self.status

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def duplicate(self) -> bool:
        return self.status == DUPLICATE


_OK = CheckResult()


@dataclass(frozen=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    aborted: bool


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        # completed, marker not yet known below the high watermark (a tuple while empty: one GC-tracked object fewer
        # for each of a broker's 1,000s of logs, log_segment.MadeOnce)
        self.unreplicated: list[CompletedTxn] | tuple = ()

    def __len__(self) -> int:
        return len(self.producers)

    def last_entry(self, producer_id: int) -> ProducerEntry | None:
        return self.producers.get(producer_id)

    def check(self, producer_id: int, producer_epoch: int, base_sequence: int, last_sequence: int,
              is_transactional: bool = False, *, now_ms: int = 0) -> CheckResult:
        """May this producer's batch be appended? (Read-only; `update` after the append.)"""
        if producer_id < 0:
            return _OK  # not an idempotent producer
        e = self.producers.get(producer_id)
        if e is None or e.epoch == NO_PRODUCER_EPOCH:
            return _OK  # unknown producer: any sequence (KIP-360)
        if producer_epoch < e.epoch:
            return CheckResult(ERROR, INVALID_PRODUCER_EPOCH,
                               f"Epoch of producer {producer_id} is {producer_epoch}, which is smaller than "
                               f"the last seen epoch {e.epoch}")
        if producer_epoch == e.epoch:
            for b in e.batches:
                if b.first_seq == base_sequence and b.last_seq == last_sequence:
                    return CheckResult(DUPLICATE, base_offset=b.base_offset, last_offset=b.last_offset)
            if e.batches and not in_sequence(e.last_seq, base_sequence):
                return CheckResult(ERROR, OUT_OF_ORDER_SEQUENCE_NUMBER,
                                   f"Out of order sequence number for producer {producer_id}: {base_sequence} "
                                   f"(incoming seq. number), {e.last_seq} (current end sequence number)")
            return _OK
        if base_sequence != 0:  # a newer epoch starts again at 0
            return CheckResult(ERROR, OUT_OF_ORDER_SEQUENCE_NUMBER,
                               f"Invalid sequence number for new epoch of producer {producer_id}: "
                               f"{producer_epoch} (request epoch), {base_sequence} (seq. number), "
                               f"{e.epoch} (current producer epoch)")
        return _OK

    def check_header(self, h: BatchHeader, *, now_ms: int = 0) -> CheckResult:
        return self.check(h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence,
                          h.is_transactional, now_ms=now_ms)

    def update(self, h: BatchHeader, base_offset: int | None = None, *, marker: tuple[int, int] | None = None
               ) -> CompletedTxn | None:
        """Record an appended batch (h as written; base_offset overrides h.base_offset). A control batch needs its
        `marker`, (type, coordinator epoch) as batch.read_marker gives it: it completes the producer's transaction,
        returned, and the entry keeps the coordinator epoch (Kafka's appendEndTxnMarker)."""
        if h.producer_id < 0:
            return None
        base = h.base_offset if base_offset is None else base_offset
        e = self.producers.get(h.producer_id)
        if h.is_control:
            if marker is None:
                return None
            if e is None:
                e = self.producers[h.producer_id] = ProducerEntry(h.producer_epoch)
            elif h.producer_epoch > e.epoch:  # a marker of a bumped epoch (a fenced or timed-out transaction)
                e.epoch = h.producer_epoch
                e.batches.clear()
            kind, coordinator_epoch = marker
            first = self.ongoing.pop(h.producer_id, base)
            e.current_txn_first_offset = -1
            e.last_timestamp = h.max_timestamp
            e.coordinator_epoch = max(e.coordinator_epoch, coordinator_epoch)
            done = CompletedTxn(h.producer_id, first, base, kind == 0)
            if not self.unreplicated:
                self.unreplicated = []
            self.unreplicated.append(done)
            return done
        if e is None or e.epoch != h.producer_epoch:
            e = ProducerEntry(h.producer_epoch)  # a new epoch forgets the old epoch's batches
            self.producers[h.producer_id] = e
        if h.base_sequence >= 0:
            e.batches.append(BatchMeta(h.base_sequence, h.last_sequence, base, base + h.last_offset_delta,
                                       h.max_timestamp))
        e.last_timestamp = h.max_timestamp
        if h.is_transactional and h.producer_id not in self.ongoing:
            self.ongoing[h.producer_id] = base
        if h.is_transactional:
            e.current_txn_first_offset = self.ongoing[h.producer_id]
        return None

    def remove_unreplicated(self, high_watermark: int) -> None:
        """Kafka's onHighWatermarkUpdated (removeUnreplicatedTransactions): completed transactions whose marker is
        below the high watermark are replicated, and forgotten."""
        if self.unreplicated:
            self.unreplicated = [t for t in self.unreplicated if t.last_offset >= high_watermark] or ()

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The smallest first offset of an open transaction or of a completed one whose marker is at or above the
        high watermark (those below it are forgotten here); None when every transaction is decided and replicated."""
        self.remove_unreplicated(high_watermark)
        firsts = [t.first_offset for t in self.unreplicated]
        if self.ongoing:
            firsts.append(min(self.ongoing.values()))
        return min(firsts) if firsts else None

    def last_stable_offset_after(self, done: CompletedTxn) -> int:
        """Kafka's lastStableOffset(completedTxn), kept in the aborted-transaction index: the first offset of the
        next open transaction, else the offset after the marker."""
        others = [f for pid, f in self.ongoing.items() if pid != done.producer_id]
        return min(others) if others else done.last_offset + 1

    update_from_header = update  # older name

    def truncate_head(self, log_start_offset: int) -> None:
        """The log start offset moved (retention, DeleteRecords): as Kafka's onLogStartOffsetIncremented (2.4+,
        KIP-360), the producers stay, with their epochs and last batches, until producer.id.expiration.ms
        (`remove_expired`): a producer whose records were all deleted still has its duplicates found and its
        older epochs fenced. Only completed transactions not yet replicated that lie wholly below it go."""
        if self.unreplicated:
            self.unreplicated = [t for t in self.unreplicated if t.last_offset >= log_start_offset] or ()

    def remove_expired(self, now_ms: int, expiration_ms: int = 86400000) -> int:
        """producer.id.expiration.ms: drop producers idle for longer. Returns how many."""
        gone = [pid for pid, e in self.producers.items() if e.last_timestamp >= 0
                and now_ms - e.last_timestamp >= expiration_ms]
        for pid in gone:
            del self.producers[pid]
        return len(gone)

    def clear(self) -> None:
        self.producers.clear()
        self.ongoing.clear()
        self.unreplicated = ()

    def rebuild(self, headers: Iterable[BatchHeader]) -> None:
        """State from a log's batch headers in offset order (a log passes `log.iter_headers()`,
        or the log itself). Control batches need their marker type: a log rebuilds with `update` itself."""
        self.clear()
        it = headers.iter_headers() if hasattr(headers, "iter_headers") else headers
        for h in it:
            if h.producer_id >= 0:
                self.update(h)
