"""What handlers call for transactions (Kafka's TransactionCoordinator over its TransactionStateManager and
TransactionMarkerChannelManager): the sans-IO coordinator (coordinator/transaction.py) on the coordinator
runtime, and the markers.

Markers: once a transaction's PrepareCommit/PrepareAbort is durable, WriteTxnMarkers goes to the leader of each
of its partitions -- a call for the partitions this broker leads, WriteTxnMarkers v1 over the inter-broker
listener for the others -- and is sent again (every 100 ms) for a partition whose leader is unknown or
answers a retriable error, until every partition has its marker. A partition deleted meanwhile needs none.
Then CompleteCommit/CompleteAbort is written. When this broker stops leading the __transaction_state
partition, its jobs end; the new coordinator sends them again after its load.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import structlog
import trio

from ..coordinator.transaction import NEED_PRODUCER_ID, InitResult, MarkerJob, TransactionCoordinator
from ..wire.errors import E
from .context import now_ms
from .coordinator_runtime import CoordinatorRuntime
from .group_coordinator_service import OFFSETS_TOPIC
from ..wire.lazy_kafka import lazy_names

if TYPE_CHECKING:
    from .broker import Broker

log = structlog.get_logger("kafkite.transactions")
# (with the controller's request classes, imported when the first markers go to another broker: wire/lazy_kafka.py)
(inter_broker_endpoint,) = lazy_names(globals(), "kafkite.controller.zk_requests", "inter_broker_endpoint")
TXN_TOPIC = "__transaction_state"
WRITE_TXN_MARKERS_VERSION = 1
VERIFY_VERSION = 4  # AddPartitionsToTxn's brokers' form (KIP-890 part 1), verify only
MARKER_RETRY_S = 0.1
MARKER_TIMEOUT_S = 10.0  # Kafka's request.timeout.ms for the marker channel
_CONFIG_KEYS = ["transaction.state.log.num.partitions", "transaction.max.timeout.ms",
                "transaction.abort.timed.out.transaction.cleanup.interval.ms", "transactional.id.expiration.ms",
                "transaction.remove.expired.transaction.cleanup.interval.ms"]


async def write_markers_locally(rm, groups, cache, *, producer_id: int, producer_epoch: int, commit: bool,
                                coordinator_epoch: int, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Append one producer's marker to each partition this broker leads (Kafka's WriteTxnMarkers handling) ->
    error per partition, once each is durable and, on a replicated partition, in the ISR (markers are written
    with acks=all). A marker for __consumer_offsets goes through the group coordinator, which applies it. `rm` the
    replica manager, `groups` the group coordinator (service), `cache` the metadata cache."""
    out: dict[tuple[str, int], int] = {}
    waits = []
    for t, p in partitions:
        if t == OFFSETS_TOPIC:
            out[(t, p)] = await groups.complete_transaction(p, producer_id=producer_id, producer_epoch=producer_epoch,
                                                            commit=commit, coordinator_epoch=coordinator_epoch)
            continue
        o = rm.write_txn_marker(cache, t, p, producer_id=producer_id, producer_epoch=producer_epoch,
                                commit=commit, coordinator_epoch=coordinator_epoch, now_ms=now_ms())
        out[(t, p)] = int(o.error)
        if not o.error:
            waits.append((o, t, p))
    deadline = trio.current_time() + MARKER_TIMEOUT_S
    for o, t, p in waits:
        out[(t, p)] = await rm.complete_produce(t, p, o.durable_wait, o.last_offset, acks_all=True, deadline=deadline)
    return out


class TransactionCoordinatorService:
    def __init__(self, broker: "Broker"):
        self.broker = broker
        self._jobs_in, self._jobs = trio.open_memory_channel(math.inf)
        self.coordinator = TransactionCoordinator({k: broker.config.get(k) for k in _CONFIG_KEYS},
                                                  send_markers=self._jobs_in.send_nowait)
        self.runtime = CoordinatorRuntime(broker, TXN_TOPIC, self.coordinator)
        self.markers_written = 0  # partitions, for tests and the log

    def on_metadata(self, cache) -> None:
        self.runtime.on_metadata(cache)

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(self.runtime.run)
            task_status.started()
            async for job in self._jobs:
                nursery.start_soon(self._send_markers, job)

    async def _answer(self, shard, result):
        """The runtime's write (one that writes nothing answers once what was written before it is committed)."""
        return await self.runtime.write(shard, result)

    # -- the client's requests ------------------------------------------------------------------------
    async def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int = -1,
                               producer_epoch: int = -1) -> InitResult:
        new_pid = None
        for _ in range(2):
            shard, result = self.coordinator.init_producer_id(transactional_id, timeout_ms, producer_id,
                                                              producer_epoch, new_pid, now_ms())
            if result is not NEED_PRODUCER_ID:
                return await self._answer(shard, result)
            new_pid = await self.broker.admin.allocate_producer_id()
        return InitResult(E.CONCURRENT_TRANSACTIONS)

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: list[tuple[str, int]]) -> int:
        return await self._answer(*self.coordinator.add_partitions(transactional_id, producer_id, producer_epoch,
                                                                   partitions, now_ms()))

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> int:
        return await self._answer(*self.coordinator.end_txn(transactional_id, producer_id, producer_epoch, commit,
                                                            now_ms()))

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """KIP-890 part 1, the partition leader's side (Kafka's AddPartitionsToTxnManager): ask the transactional id's
        coordinator whether the partitions are in its ongoing transaction -> error per partition. The coordinator is
        asked in place when this broker is it, else with AddPartitionsToTxn v4 (verify only) on its inter-broker
        listener; a coordinator that cannot be reached answers NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE."""
        b = self.broker
        if not transactional_id:
            return {tp: int(E.INVALID_REQUEST) for tp in partitions}
        shard = self.coordinator.partition_of(transactional_id)
        info = b.metadata.partition(TXN_TOPIC, shard)
        if info is None or info.leader < 0:
            return {tp: int(E.COORDINATOR_NOT_AVAILABLE) for tp in partitions}
        if info.leader == b.node_id:
            return await self.runtime.read(shard, lambda: self.coordinator.verify(
                transactional_id, producer_id, producer_epoch, partitions))
        return await self._verify_remote(info.leader, transactional_id, producer_id, producer_epoch, partitions)

    async def _verify_remote(self, leader: int, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        from kafka.protocol.producer.transaction import AddPartitionsToTxnRequest
        from .replication import InterBrokerClient
        info = self.broker.cache.brokers.get(leader)
        if info is None:
            return {tp: int(E.COORDINATOR_NOT_AVAILABLE) for tp in partitions}
        topics: dict[str, list[int]] = {}
        for t, p in partitions:
            topics.setdefault(t, []).append(p)
        T = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
        req = AddPartitionsToTxnRequest[VERIFY_VERSION](transactions=[T(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
            verify_only=True, topics=[T.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in topics.items()])])
        client = InterBrokerClient(self.broker.node_id, MARKER_TIMEOUT_S, self.broker.inter_broker_security)
        try:
            resp = await client.request(inter_broker_endpoint(vars(info), self.broker.inter_broker_security.listener), req)
        except (OSError, trio.BrokenResourceError, trio.TooSlowError, ConnectionError, ValueError) as exc:
            log.info("transactions.verify_failed", broker=leader, error=repr(exc))
            return {tp: int(E.COORDINATOR_NOT_AVAILABLE) for tp in partitions}
        finally:
            with trio.CancelScope(shield=True):
                await client.close()
        if resp.error_code:
            return {tp: int(resp.error_code) for tp in partitions}
        out = {(t.name, p.partition_index): int(p.partition_error_code)
               for r in resp.results_by_transaction for t in r.topic_results for p in t.results_by_partition}
        return {tp: out.get(tp, int(E.UNKNOWN_SERVER_ERROR)) for tp in partitions}

    def offsets_partition(self, group_id: str) -> tuple[str, int]:
        return OFFSETS_TOPIC, self.broker.groups.coordinator.partition_of(group_id)

    # -- markers --------------------------------------------------------------------------------------
    def _owned(self, job: MarkerJob) -> bool:
        return job.shard in self.coordinator.shards

    async def _send_markers(self, job: MarkerJob) -> None:
        b = self.broker
        remaining = set(job.partitions)
        clients: dict[int, object] = {}
        try:
            while remaining and self._owned(job):
                txn_part = b.metadata.partition(TXN_TOPIC, job.shard)
                coordinator_epoch = txn_part.leader_epoch if txn_part is not None else 0
                by_leader: dict[int, list[tuple[str, int]]] = {}
                for t, p in sorted(remaining):
                    info = b.metadata.partition(t, p)
                    if info is None:  # deleted: no marker needed
                        remaining.discard((t, p))
                    elif info.leader >= 0:
                        by_leader.setdefault(info.leader, []).append((t, p))
                for leader, parts in by_leader.items():
                    if leader == b.node_id:
                        codes = await write_markers_locally(b.replicas, b.groups, b.cache, producer_id=job.producer_id,
                                                            producer_epoch=job.producer_epoch, commit=job.commit,
                                                            coordinator_epoch=coordinator_epoch, partitions=parts)
                    else:
                        codes = await self._remote(clients, leader, job, coordinator_epoch, parts)
                    for tp, code in codes.items():
                        if not code or code in (E.INVALID_PRODUCER_EPOCH, E.UNKNOWN_TOPIC_OR_PARTITION) \
                                and b.metadata.partition(*tp) is None:
                            remaining.discard(tp)
                            self.markers_written += not code
                        elif code == E.INVALID_PRODUCER_EPOCH:  # the partition saw a newer epoch: nothing to end
                            log.info("transactions.marker_stale", transactional_id=job.transactional_id,
                                     topic=tp[0], partition=tp[1])
                            remaining.discard(tp)
                        elif code == E.TRANSACTION_COORDINATOR_FENCED:  # a newer coordinator ended it: this one is
                            # a zombie about to lose its __transaction_state partition, whose new leader takes over
                            log.warning("transactions.coordinator_fenced", transactional_id=job.transactional_id,
                                        topic=tp[0], partition=tp[1], coordinator_epoch=coordinator_epoch)
                            remaining.discard(tp)
                        else:
                            log.debug("transactions.marker_retry", transactional_id=job.transactional_id,
                                      topic=tp[0], partition=tp[1], error=E(code).name)
                if remaining:
                    await trio.sleep(MARKER_RETRY_S)
        finally:
            for c in clients.values():
                with trio.CancelScope(shield=True):
                    await c.close()
        if remaining or not self._owned(job):
            return  # no longer the coordinator: the new one sends them again
        err = await self._answer(*self.coordinator.complete(job, now_ms()))
        log.info("transactions.completed", transactional_id=job.transactional_id, producer_id=job.producer_id,
                 producer_epoch=job.producer_epoch, result="commit" if job.commit else "abort",
                 partitions=len(job.partitions), **({"error": E(err).name} if err else {}))

    async def _remote(self, clients: dict, leader: int, job: MarkerJob, coordinator_epoch: int,
                      parts: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        from kafka.protocol.producer.transaction import WriteTxnMarkersRequest
        from .replication import InterBrokerClient
        info = self.broker.cache.brokers.get(leader)
        retry = {tp: int(E.NOT_LEADER_OR_FOLLOWER) for tp in parts}
        if info is None:
            return retry
        client = clients.get(leader)
        if client is None:
            client = clients[leader] = InterBrokerClient(self.broker.node_id, MARKER_TIMEOUT_S, self.broker.inter_broker_security)
        M = WriteTxnMarkersRequest.WritableTxnMarker
        topics: dict[str, list[int]] = {}
        for t, p in parts:
            topics.setdefault(t, []).append(p)
        req = WriteTxnMarkersRequest[WRITE_TXN_MARKERS_VERSION](markers=[M(
            producer_id=job.producer_id, producer_epoch=job.producer_epoch, transaction_result=job.commit,
            topics=[M.WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in topics.items()],
            coordinator_epoch=coordinator_epoch)])
        try:
            resp = await client.request(inter_broker_endpoint(vars(info), self.broker.inter_broker_security.listener), req)
        except (OSError, trio.BrokenResourceError, trio.TooSlowError, ConnectionError, ValueError) as exc:
            log.info("transactions.marker_request_failed", broker=leader, error=repr(exc))
            return retry
        out = {}
        for m in resp.markers:
            for t in m.topics:
                for p in t.partitions:
                    out[(t.name, p.partition_index)] = int(p.error_code)
        return {tp: out.get(tp, int(E.UNKNOWN_SERVER_ERROR)) for tp in parts}
