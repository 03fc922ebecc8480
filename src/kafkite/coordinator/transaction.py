"""The transaction coordinator, sans-IO (Kafka's TransactionCoordinator and TransactionStateManager).

A shard per `__transaction_state` partition holds the transactional ids that hash to it, each with
its producer id and epoch, timeout, state and partitions. Every change is a record of Kafka's
format (txn_records.py) that the coordinator runtime appends and replays, the same replay that
loads the partition after a leadership change. Operations return CoordinatorResults; the states
and their allowed predecessors are the table below (Kafka's TransactionState):

    Empty             <- Empty, CompleteCommit, CompleteAbort (InitProducerId)
    Ongoing           <- Ongoing, Empty, CompleteCommit, CompleteAbort (AddPartitionsToTxn/AddOffsetsToTxn)
    PrepareCommit     <- Ongoing (EndTxn commit)
    PrepareAbort      <- Ongoing, PrepareEpochFence (EndTxn abort, a timeout, a fencing InitProducerId)
    CompleteCommit    <- PrepareCommit (every marker written)
    CompleteAbort     <- PrepareAbort
    PrepareEpochFence <- Ongoing (memory only: the epoch bump before a fencing abort)
    Dead              <- Empty, CompleteCommit, CompleteAbort (transactional.id.expiration.ms: a tombstone)

Once a Prepare* state is durable the runtime's `on_success` hands a MarkerJob to `send_markers`
(the service writes WriteTxnMarkers to each partition's leader and then calls `complete`).
A partition loaded with a transaction in a Prepare* state sends its markers again.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable

import structlog

from ..wire.errors import E
from .hashing import partition_for
from .records import RecordDecodeError
from .result import CoordinatorResult
from .timeline import SnapshotRegistry
from .txn_records import TxnValue, decode_txn_key, decode_txn_value, txn_key, txn_value

log = structlog.get_logger("kafkite.transactions")
MAX_EPOCH = 32767  # Short.MAX_VALUE: an epoch at MAX_EPOCH - 1 is exhausted (a new producer id follows)


class TxnState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return "".join(w.capitalize() for w in self.name.split("_"))


S = TxnState
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


def can_transit(old: TxnState | None, new: TxnState) -> bool:
    return old is None and new == S.EMPTY or old is not None and old in VALID_PREVIOUS[new]


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    update_ms: int = -1
    last_producer_epoch: int = -1  # memory only: the epoch before the last bump (a retried InitProducerId)
    previous_producer_id: int = -1  # memory only: the id before an exhausted epoch gave a new one


@dataclass(frozen=True)
class MarkerJob:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: tuple[tuple[str, int], ...]
    shard: int  # the __transaction_state partition


@dataclass
class InitResult:
    error: int
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass
class Config:
    num_partitions: int = 50
    max_timeout_ms: int = 900000
    abort_check_interval_ms: int = 10000
    id_expiration_ms: int = 604800000
    expiration_check_interval_ms: int = 3600000

    @classmethod
    def from_kafka(cls, c: dict[str, Any]) -> "Config":
        return cls(c["transaction.state.log.num.partitions"], c["transaction.max.timeout.ms"],
                   c["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
                   c["transactional.id.expiration.ms"],
                   c["transaction.remove.expired.transaction.cleanup.interval.ms"])


NEED_PRODUCER_ID = object()  # an InitProducerId that needs a fresh producer id first


class TransactionShard:
    """One __transaction_state partition: its transactional ids."""

    def __init__(self, partition: int, cfg: Config, now_ms: int):
        self.partition = partition
        self.cfg = cfg
        self.txns: dict[str, TxnMetadata] = {}
        self.timeline = SnapshotRegistry()  # the replay changes `txns` through it: a failed write is undone
        self.ignored: dict[int, int] = {}
        self.next_abort_check = now_ms + cfg.abort_check_interval_ms
        self.next_expiry_check = now_ms + cfg.expiration_check_interval_ms

    # -- replay --------------------------------------------------------------------------------------
    def replay(self, key: bytes | None, value: bytes | None, offset: int = -1, producer_id: int = -1) -> None:
        if key is None:
            return
        try:
            tid = decode_txn_key(key)
            v = None if value is None else decode_txn_value(value)
        except (RecordDecodeError, ValueError) as exc:
            log.warning("transactions.undecodable_record", partition=self.partition, offset=offset, error=str(exc))
            return
        if v is None:
            self.timeline.pop_item(self.txns, tid)
            return
        old = self.txns.get(tid)
        try:
            state = TxnState(v.state)
        except ValueError:
            log.warning("transactions.unknown_state", partition=self.partition, offset=offset, state=v.state)
            return
        m = TxnMetadata(tid, v.producer_id, v.producer_epoch, v.timeout_ms, state, set(v.partitions),
                        v.start_ms, v.last_update_ms)
        if old is not None:
            # the epoch before a bump counts as a retry's only when the producer asked for that bump (KIP-360:
            # set by init_producer_id once written); a fencing bump or a timeout's forgets it, as Kafka does
            if old.producer_id == v.producer_id and old.producer_epoch == v.producer_epoch:
                m.last_producer_epoch = old.last_producer_epoch
            if old.producer_id == v.producer_id:
                m.previous_producer_id = old.previous_producer_id
            else:
                m.previous_producer_id = old.producer_id
        self.timeline.set_item(self.txns, tid, m)

    def replay_marker(self, producer_id: int, commit: bool) -> None:  # markers are not written here
        pass

    def loaded(self, now_ms: int) -> list[MarkerJob]:
        """Replayed to the end: the transactions caught between Prepare* and Complete* send their markers again."""
        return [self._job(m) for m in self.txns.values() if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)]

    def _job(self, m: TxnMetadata) -> MarkerJob:
        return MarkerJob(m.transactional_id, m.producer_id, m.producer_epoch, m.state == S.PREPARE_COMMIT,
                         tuple(sorted(m.partitions)), self.partition)

    # -- writes ----------------------------------------------------------------------------------------
    def _record(self, m: TxnMetadata, state: TxnState, **changes) -> tuple[bytes, bytes]:
        if not can_transit(m.state if m.transactional_id in self.txns else None, state):
            raise AssertionError(f"{m.transactional_id}: {m.state.kafka_name} -> {state.kafka_name} is not allowed")
        v = TxnValue(changes.get("producer_id", m.producer_id), changes.get("producer_epoch", m.producer_epoch),
                     changes.get("timeout_ms", m.timeout_ms), int(state),
                     sorted(changes.get("partitions", m.partitions)), changes.get("update_ms", m.update_ms),
                     changes.get("start_ms", m.start_ms))
        return txn_key(m.transactional_id), txn_value(v)

    def _check(self, m: TxnMetadata | None, producer_id: int, producer_epoch: int) -> int:
        if m is None or m.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if m.producer_epoch != producer_epoch:
            return E.PRODUCER_FENCED
        return 0

    def init_producer_id(self, tid: str, timeout_ms: int, producer_id: int, producer_epoch: int,
                         new_producer_id: int | None, now_ms: int, send_markers: Callable[[MarkerJob], None]
                         ) -> CoordinatorResult[InitResult] | object:
        m = self.txns.get(tid)
        if m is None:
            if new_producer_id is None:
                return NEED_PRODUCER_ID
            fresh = TxnMetadata(tid, new_producer_id, 0, timeout_ms, S.EMPTY)
            rec = self._record(fresh, S.EMPTY, update_ms=now_ms)
            return CoordinatorResult([rec], InitResult(0, new_producer_id, 0),
                                     on_failure=lambda err: InitResult(err))
        if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE):
            return CoordinatorResult(response=InitResult(E.CONCURRENT_TRANSACTIONS))
        if producer_id >= 0:  # KIP-360: the producer says which id and epoch it had
            known = producer_id in (m.producer_id, m.previous_producer_id)
            if not known:
                return CoordinatorResult(response=InitResult(E.PRODUCER_FENCED))
            if producer_id == m.producer_id and producer_epoch == m.last_producer_epoch \
                    and m.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
                return CoordinatorResult(response=InitResult(0, m.producer_id, m.producer_epoch))  # a retry
            if producer_id == m.previous_producer_id and m.producer_epoch == 0 and m.state == S.EMPTY:
                return CoordinatorResult(response=InitResult(0, m.producer_id, m.producer_epoch))  # a retry
            if producer_id == m.producer_id and producer_epoch != m.producer_epoch:
                return CoordinatorResult(response=InitResult(E.PRODUCER_FENCED))
        if m.state == S.ONGOING:
            # the old producer's transaction is aborted first, at a bumped epoch that fences it; the new one retries
            result = self._abort_fenced(m, now_ms, send_markers)
            result.response = InitResult(E.CONCURRENT_TRANSACTIONS)
            result.on_failure = lambda err: InitResult(err)
            return result
        if m.producer_epoch + 1 >= MAX_EPOCH - 1 or m.state == S.DEAD:
            if new_producer_id is None:
                return NEED_PRODUCER_ID
            pid, epoch = new_producer_id, 0
        else:
            pid, epoch = m.producer_id, m.producer_epoch + 1
        rec = self._record(m, S.EMPTY, producer_id=pid, producer_epoch=epoch, timeout_ms=timeout_ms,
                           partitions=set(), update_ms=now_ms, start_ms=-1)
        requested = producer_id >= 0 and producer_id == m.producer_id and producer_epoch == m.producer_epoch

        def remember() -> None:  # its retry answers the same (a producer that did not name its epoch has none)
            cur = self.txns.get(tid)
            if requested and cur is not None and (cur.producer_id, cur.producer_epoch) == (pid, epoch):
                cur.last_producer_epoch = producer_epoch
        return CoordinatorResult([rec], InitResult(0, pid, epoch), on_success=remember,
                                 on_failure=lambda err: InitResult(err))

    def _abort_fenced(self, m: TxnMetadata, now_ms: int, send_markers: Callable[[MarkerJob], None]
                      ) -> CoordinatorResult:
        """Ongoing -> PrepareEpochFence (memory) -> PrepareAbort at epoch + 1: Kafka's fencing abort (a new
        producer with the same id, or the transaction timed out)."""
        epoch = m.producer_epoch + 1 if m.producer_epoch + 1 < MAX_EPOCH else m.producer_epoch
        rec = self._record(m, S.PREPARE_ABORT, producer_epoch=epoch, update_ms=now_ms)
        job = MarkerJob(m.transactional_id, m.producer_id, epoch, False, tuple(sorted(m.partitions)), self.partition)
        return CoordinatorResult([rec], 0, on_success=lambda: send_markers(job))

    def add_partitions(self, tid: str, producer_id: int, producer_epoch: int, partitions: list[tuple[str, int]],
                       now_ms: int) -> CoordinatorResult[int]:
        m = self.txns.get(tid)
        err = self._check(m, producer_id, producer_epoch)
        if err:
            return CoordinatorResult(response=err)
        if m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE):
            return CoordinatorResult(response=E.CONCURRENT_TRANSACTIONS)
        if m.state == S.DEAD:
            return CoordinatorResult(response=E.INVALID_PRODUCER_ID_MAPPING)
        if m.state == S.ONGOING and set(partitions) <= m.partitions:
            return CoordinatorResult(response=0)  # nothing new: no write
        start = m.start_ms if m.state == S.ONGOING else now_ms
        rec = self._record(m, S.ONGOING, partitions=m.partitions | set(partitions), update_ms=now_ms, start_ms=start)
        return CoordinatorResult([rec], 0, on_failure=lambda err: err)

    def verify(self, tid: str, producer_id: int, producer_epoch: int, partitions: list[tuple[str, int]]
               ) -> dict[tuple[str, int], int]:
        """KIP-890 part 1 (Kafka's handleVerifyPartitionsInTransaction): is each partition in the producer's ongoing
        transaction? A partition not added answers TRANSACTION_ABORTABLE; the producer's id or epoch not the
        transaction's, or a transaction being ended, answer for all of them. Nothing is written."""
        m = self.txns.get(tid)
        if m is None or m.producer_id != producer_id:
            err = E.INVALID_PRODUCER_ID_MAPPING
        elif m.producer_epoch != producer_epoch:
            err = E.PRODUCER_FENCED
        elif m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE):
            err = E.CONCURRENT_TRANSACTIONS
        else:
            return {tp: 0 if m.state == S.ONGOING and tp in m.partitions else int(E.TRANSACTION_ABORTABLE)
                    for tp in partitions}
        return {tp: int(err) for tp in partitions}

    def end_txn(self, tid: str, producer_id: int, producer_epoch: int, commit: bool, now_ms: int,
                send_markers: Callable[[MarkerJob], None]) -> CoordinatorResult[int]:
        m = self.txns.get(tid)
        err = self._check(m, producer_id, producer_epoch)
        if err:
            return CoordinatorResult(response=err)
        if m.state == S.ONGOING:
            target = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            rec = self._record(m, target, update_ms=now_ms)
            job = MarkerJob(tid, m.producer_id, m.producer_epoch, commit, tuple(sorted(m.partitions)), self.partition)
            return CoordinatorResult([rec], 0, on_success=lambda: send_markers(job), on_failure=lambda err: err)
        done, prepared = (S.COMPLETE_COMMIT, S.PREPARE_COMMIT) if commit else (S.COMPLETE_ABORT, S.PREPARE_ABORT)
        if m.state == done:
            return CoordinatorResult(response=0)  # a retry of what happened
        if m.state == prepared:
            return CoordinatorResult(response=E.CONCURRENT_TRANSACTIONS)
        return CoordinatorResult(response=E.INVALID_TXN_STATE)

    def complete(self, job: MarkerJob, now_ms: int) -> CoordinatorResult[int]:
        """Every marker of the job is written: PrepareCommit/PrepareAbort -> CompleteCommit/CompleteAbort."""
        m = self.txns.get(job.transactional_id)
        prepared = S.PREPARE_COMMIT if job.commit else S.PREPARE_ABORT
        if m is None or m.state != prepared or m.producer_id != job.producer_id \
                or m.producer_epoch != job.producer_epoch:
            return CoordinatorResult(response=E.INVALID_TXN_STATE)
        rec = self._record(m, S.COMPLETE_COMMIT if job.commit else S.COMPLETE_ABORT, partitions=set(),
                           update_ms=now_ms)
        return CoordinatorResult([rec], 0, on_failure=lambda err: err)

    # -- timers ------------------------------------------------------------------------------------------
    def next_deadline_ms(self) -> int:
        return min(self.next_abort_check, self.next_expiry_check)

    def poll(self, now_ms: int, send_markers: Callable[[MarkerJob], None]) -> list[CoordinatorResult]:
        out = []
        if now_ms >= self.next_abort_check:
            self.next_abort_check = now_ms + self.cfg.abort_check_interval_ms
            for m in list(self.txns.values()):
                if m.state == S.ONGOING and m.start_ms >= 0 and now_ms > m.start_ms + m.timeout_ms:
                    log.info("transactions.timed_out", transactional_id=m.transactional_id,
                             producer_id=m.producer_id, producer_epoch=m.producer_epoch)
                    out.append(self._abort_fenced(m, now_ms, send_markers))
        if now_ms >= self.next_expiry_check:
            self.next_expiry_check = now_ms + self.cfg.expiration_check_interval_ms
            gone = [m for m in self.txns.values() if m.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
                    and m.update_ms >= 0 and now_ms - m.update_ms >= self.cfg.id_expiration_ms]
            if gone:
                log.info("transactions.expired_ids", count=len(gone))
                out.append(CoordinatorResult([(txn_key(m.transactional_id), None) for m in gone], 0))
        return out


class TransactionCoordinator:
    """Which __transaction_state partitions this broker owns, and the operations on them (the runtime's coordinator
    interface: begin/finish_loading, unload, poll, next_deadline_ms, drain_completions)."""

    def __init__(self, config: dict | Config, send_markers: Callable[[MarkerJob], None] = lambda job: None):
        self.cfg = config if isinstance(config, Config) else Config.from_kafka(config)
        self.shards: dict[int, TransactionShard] = {}
        self.loading: dict[int, TransactionShard] = {}
        self.send_markers = send_markers

    def partition_of(self, tid: str) -> int:
        return partition_for(tid, self.cfg.num_partitions)

    def shard_for(self, tid: str | None) -> tuple[int, TransactionShard | None]:
        if not tid:
            return E.INVALID_REQUEST, None
        p = self.partition_of(tid)
        if p in self.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS, None
        shard = self.shards.get(p)
        return (0, shard) if shard is not None else (E.NOT_COORDINATOR, None)

    def begin_loading(self, partition: int, now_ms: int) -> TransactionShard:
        self.unload(partition)
        shard = self.loading[partition] = TransactionShard(partition, self.cfg, now_ms)
        return shard

    def finish_loading(self, partition: int, now_ms: int) -> None:
        shard = self.loading.pop(partition, None)
        if shard is not None:
            self.shards[partition] = shard
            for job in shard.loaded(now_ms):
                self.send_markers(job)

    def unload(self, partition: int) -> None:
        self.loading.pop(partition, None)
        self.shards.pop(partition, None)

    completed: tuple = ()  # (drain_completions': no request of this coordinator is completed by another's operation)

    def drain_completions(self) -> list:
        return []

    def next_deadline_ms(self) -> int | None:
        return min((s.next_deadline_ms() for s in self.shards.values()), default=None)

    def poll(self, now_ms: int) -> list[tuple[TransactionShard, CoordinatorResult]]:
        return [(s, r) for s in list(self.shards.values()) for r in s.poll(now_ms, self.send_markers)]

    # -- operations ----------------------------------------------------------------------------------------
    def init_producer_id(self, tid: str, timeout_ms: int, producer_id: int, producer_epoch: int,
                         new_producer_id: int | None, now_ms: int):
        """-> (shard, CoordinatorResult[InitResult]) or (shard, NEED_PRODUCER_ID)."""
        if timeout_ms <= 0 or timeout_ms > self.cfg.max_timeout_ms:
            return None, CoordinatorResult(response=InitResult(E.INVALID_TRANSACTION_TIMEOUT))
        err, shard = self.shard_for(tid)
        if err:
            return None, CoordinatorResult(response=InitResult(err))
        return shard, shard.init_producer_id(tid, timeout_ms, producer_id, producer_epoch, new_producer_id, now_ms,
                                             self.send_markers)

    def add_partitions(self, tid: str, producer_id: int, producer_epoch: int, partitions: list[tuple[str, int]],
                       now_ms: int) -> tuple[TransactionShard | None, CoordinatorResult[int]]:
        err, shard = self.shard_for(tid)
        if err:
            return None, CoordinatorResult(response=err)
        return shard, shard.add_partitions(tid, producer_id, producer_epoch, partitions, now_ms)

    def end_txn(self, tid: str, producer_id: int, producer_epoch: int, commit: bool, now_ms: int
                ) -> tuple[TransactionShard | None, CoordinatorResult[int]]:
        err, shard = self.shard_for(tid)
        if err:
            return None, CoordinatorResult(response=err)
        return shard, shard.end_txn(tid, producer_id, producer_epoch, commit, now_ms, self.send_markers)

    def verify(self, tid: str, producer_id: int, producer_epoch: int, partitions: list[tuple[str, int]]
               ) -> dict[tuple[str, int], int]:
        err, shard = self.shard_for(tid)
        if err:
            return {tp: int(err) for tp in partitions}
        return shard.verify(tid, producer_id, producer_epoch, partitions)

    def complete(self, job: MarkerJob, now_ms: int) -> tuple[TransactionShard | None, CoordinatorResult[int]]:
        shard = self.shards.get(job.shard)
        if shard is None:
            return None, CoordinatorResult(response=E.NOT_COORDINATOR)
        return shard, shard.complete(job, now_ms)

    def describe(self, tid: str) -> tuple[int, TxnMetadata | None]:
        err, shard = self.shard_for(tid)
        if err:
            return err, None
        m = shard.txns.get(tid)
        return (0, m) if m is not None else (E.TRANSACTIONAL_ID_NOT_FOUND, None)

    def list(self) -> list[TxnMetadata]:
        return [m for s in self.shards.values() for m in s.txns.values()]
