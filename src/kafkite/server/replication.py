"""Replication between brokers (ZooKeeper mode, and the brokers of an in-process cluster): the replica fetchers of a follower and the ISR requests of a leader.

**Followers** copy from their leaders as Kafka's ReplicaFetcherManager / ReplicaFetcherThread do: one fetcher
per (leader broker, fetcher id), `num.replica.fetchers` per leader, partitions spread by hash. A fetcher holds
one connection to the leader's inter-broker listener and loops:

1. partitions that became followers of a new leader epoch (or whose append did not follow on) first truncate:
   OffsetForLeaderEpoch with the follower's latest epoch; the follower cuts its log to the end of the largest
   epoch both have (Kafka's KIP-101/279 rounds), so a divergent suffix it wrote as an earlier leader goes;
2. Fetch v12 with the replica id (`replica.fetch.wait.max.ms`, `replica.fetch.min.bytes`,
   `replica.fetch.max.bytes` per partition, `replica.fetch.response.max.bytes` in all) from each partition's
   log end offset, at the leader epoch it follows, in an incremental fetch session (KIP-227, as Kafka's
   followers: `_Session`, Kafka's FetchSessionHandler): after a first full fetch, a fetch names only the
   partitions whose offsets or leader epoch changed (and forgets those no longer fetched), and its answer
   carries only the partitions with something new -- a follower of 1,000 idle partitions no longer sends and
   reads them all every round (3 in-process brokers of 1,000 idle partitions at replication factor 3: the
   loop's CPU from 167-172 to 113-141 ms a second, the fetchers' own from 41 to 11-14);
3. the leader's batches are appended as they are (`append_as_follower`), written and fsynced in a worker
   thread before the next fetch (whose offset tells the leader what this replica holds), and the follower's
   high watermark becomes the leader's, as far as its log reaches.

A fetch answered OFFSET_OUT_OF_RANGE below the leader's log start offset starts the log over there; above, the
partition truncates again. Leadership errors back off `replica.fetch.backoff.ms` until the LeaderAndIsr that
moves it arrives. A connection that fails is made again after the same backoff.

**Leaders** change the ISR through the controller (Kafka's AlterPartitionManager): a follower that caught up
joins (proposed from its fetch), one that has not caught up for `replica.lag.time.max.ms` leaves (checked every
half of it). The proposal is AlterPartition v1 to the controller's inter-broker listener with the leader epoch
and partition epoch; the answer's ISR and partition epoch are taken (FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION
and the like drop the proposal: the next LeaderAndIsr or UpdateMetadata brings the state to build on).
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog
import trio

from ..storage.unified_log import UnexpectedAppend
from ..wire.errors import E, name_of
from ..wire.frame import FrameReader
from ..wire.lazy_kafka import lazy_names
from .context import now_ms
from .fetch_session import INITIAL_EPOCH, next_epoch
from .controller_channel import exchange
from .interbroker import InterBrokerAuthenticationError
from .replica_manager import KafkaStorageException

if TYPE_CHECKING:
    from .broker import Broker
    from .partition import Partition

log = structlog.get_logger("kafkite.replication")
# imported when a follower first fetches, or a leader first proposes an ISR change (wire/lazy_kafka.py LazyName)
(FetchRequest,) = lazy_names(globals(), "kafka.protocol.consumer.fetch", "FetchRequest")
(OffsetForLeaderEpochRequest,) = lazy_names(globals(), "kafka.protocol.consumer.offsets", "OffsetForLeaderEpochRequest")
(AlterPartitionRequest,) = lazy_names(globals(), "kafkite.wire.interbroker", "AlterPartitionRequest")
(inter_broker_endpoint,) = lazy_names(globals(), "kafkite.controller.zk_requests", "inter_broker_endpoint")
FETCH_VERSION = 12  # replica id in the body, topic names, log start offset (Kafka 3.x with names)
OFFSET_FOR_LEADER_EPOCH_VERSION = 4  # replica id (v3+), flexible
ALTER_PARTITION_VERSION = 1
ALTER_PARTITION_TIMEOUT_S = 5.0
Key = tuple[str, int]


class InterBrokerClient:
    """One connection to another broker's inter-broker listener (TLS and SASL as server/interbroker.py sets them up);
    a failure closes it (the next request reconnects)."""

    def __init__(self, node_id: int, timeout: float, security=None) -> None:
        self.client_id = f"broker-{node_id}-fetcher"
        self.timeout = timeout
        # server/interbroker.InterBrokerSecurity: TLS and SASL as the inter-broker listener asks (None: plain TCP)
        self.security = security
        self.endpoint: tuple[str, int] | None = None
        self._stream: trio.SocketStream | None = None
        self._reader = FrameReader()
        self._correlation = 0
        self._scope: trio.CancelScope | None = None  # the request in flight (`abort` cuts it)

    async def request(self, endpoint: tuple[str, int], req, extra_timeout: float = 0.0):
        if self._stream is not None and endpoint != self.endpoint:
            await self.close()
        with trio.fail_after(self.timeout + extra_timeout), trio.CancelScope() as self._scope:
            if self._stream is None:
                self._stream = (await self.security.connect(*endpoint, client_id=self.client_id)
                                if self.security is not None else await trio.open_tcp_stream(*endpoint))
                self.endpoint, self._reader = endpoint, FrameReader()
            self._correlation += 1
            try:
                return await exchange(self._stream, self._reader, req, self._correlation, self.client_id)
            except BaseException:
                await self.close()
                raise
        raise ConnectionError("the link to the leader was cut (a test fault)")  # aborted: nothing was read

    def abort(self) -> None:
        """The request in flight fails (ConnectionError) and its connection closes: a test fault's cut link."""
        if self._scope is not None:
            self._scope.cancel()

    async def close(self) -> None:
        if self._stream is not None:
            stream, self._stream = self._stream, None
            await trio.aclose_forcefully(stream)


@dataclass
class _FetchState:
    leader_epoch: int
    truncating: bool = True
    delayed_until: float = 0.0


@dataclass
class _Session:
    """A fetcher's side of its leader's incremental fetch session (Kafka's FetchSessionHandler; the leader's side is
    server/fetch_session.py). `sent`: what the leader's session holds of each partition, (fetch offset, log start
    offset, leader epoch). At epoch 0 a fetch is a full one asking for a session (and closing the one `id` names);
    the leader's answer names the new session, or 0 when it has no room (the next fetch asks again). In one, a fetch
    sends the partitions whose state changed and forgets those no longer fetched (backing off, truncating, moved
    away). As Kafka's: an answer with a top-level error, a request that failed, or an answer not applied, makes the
    next fetch a full one that closes this session (nextCloseExisting: the leader keeps no stale session, and the
    full answer carries again what an unapplied one did); FETCH_SESSION_ID_NOT_FOUND or a session the leader
    closed, a full one without an id."""
    id: int = 0
    epoch: int = INITIAL_EPOCH
    sent: dict[Key, tuple[int, int, int]] = field(default_factory=dict)

    def request(self, wanted: dict[Key, tuple[int, int, int]]) -> tuple[dict, list[Key]]:
        """(the partitions to name, the partitions to forget) for a fetch of `wanted`."""
        if self.epoch == INITIAL_EPOCH:
            return wanted, []
        return {k: w for k, w in wanted.items() if self.sent.get(k) != w}, [k for k in self.sent if k not in wanted]

    def answered(self, wanted: dict[Key, tuple[int, int, int]], error: int, session_id: int) -> None:
        if error:
            self.reset(close=error != E.FETCH_SESSION_ID_NOT_FOUND)
        elif not session_id:  # no room for one, or the leader closed it (its last partition forgotten)
            self.reset(close=False)
        elif self.epoch == INITIAL_EPOCH or session_id == self.id:
            self.id, self.epoch, self.sent = session_id, next_epoch(self.epoch), dict(wanted)
        else:  # an answer of another session than the one asked for
            self.reset()

    def reset(self, close: bool = True) -> None:
        """The next fetch a full one; `close`: naming this session, for the leader to close it first."""
        self.id, self.epoch, self.sent = self.id if close else 0, INITIAL_EPOCH, {}


@dataclass
class _Fetcher:
    leader: int
    fetcher_id: int
    partitions: dict[Key, _FetchState] = field(default_factory=dict)
    running: bool = False
    wake: trio.Event = field(default_factory=trio.Event)
    client: InterBrokerClient | None = None
    session: _Session = field(default_factory=_Session)


class Replication:
    """A replicating broker's replica fetchers and ISR proposals (see the module comment)."""

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        cfg = broker.state.config
        self.node_id = broker.node_id
        self.num_fetchers = max(1, cfg.get("num.replica.fetchers"))
        self.fetch_max_bytes = cfg.get("replica.fetch.max.bytes")
        self.fetch_min_bytes = cfg.get("replica.fetch.min.bytes")
        self.fetch_wait_ms = cfg.get("replica.fetch.wait.max.ms")
        self.response_max_bytes = cfg.get("replica.fetch.response.max.bytes")
        self.backoff = cfg.get("replica.fetch.backoff.ms") / 1000.0
        self.lag_ms = cfg.get("replica.lag.time.max.ms")
        self.socket_timeout = cfg.get("replica.socket.timeout.ms") / 1000.0
        self.security = broker.inter_broker_security  # the inter-broker listener's name, TLS and SASL
        self.fetchers: dict[tuple[int, int], _Fetcher] = {}
        self._nursery: trio.Nursery | None = None
        self._proposals: dict[Key, tuple[int, list[int], int]] = {}  # key -> (leader epoch, ISR, partition epoch)
        self._proposed = trio.Event()
        self._resumed: trio.Event | None = None  # set while paused (a test fault), set when resumed
        self.cut: dict[int, trio.Event] = {}  # a test fault: leader -> set when this broker may fetch from it again

    # -- a test fault: this broker's followers stop fetching (the leaders see them fall behind) --------
    def pause(self) -> None:
        if self._resumed is None:
            self._resumed = trio.Event()
            log.info("replica_fetchers.paused", broker=self.node_id)

    def resume(self) -> None:
        if self._resumed is not None:
            self._resumed.set()
            self._resumed = None
            log.info("replica_fetchers.resumed", broker=self.node_id)

    @property
    def paused(self) -> bool:
        return self._resumed is not None

    def cut_from(self, leader: int) -> None:
        """A test fault: this broker's fetchers stop fetching from `leader` only (the link between the two cut)."""
        if leader not in self.cut:
            self.cut[leader] = trio.Event()
            log.info("replica_fetchers.cut", broker=self.node_id, leader=leader)
        for f in self.fetchers.values():  # what is in flight is lost with the link
            if f.leader == leader and f.client is not None:
                f.client.abort()

    def heal_from(self, leader: int) -> None:
        healed = self.cut.pop(leader, None)
        if healed is not None:
            healed.set()
            log.info("replica_fetchers.healed", broker=self.node_id, leader=leader)

    @property
    def rm(self):
        return self.broker.replicas

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._isr_shrink_loop)
            nursery.start_soon(self._alter_partition_sender)
            task_status.started()
            await trio.sleep_forever()

    # -- followers: fetchers --------------------------------------------------------------------------
    def add_fetch(self, key: Key, leader: int, leader_epoch: int) -> None:
        """Follow `leader` for this partition (truncating first); moves it off any other fetcher."""
        fid = (leader, hash(key) % self.num_fetchers)
        self.remove_fetch(key, keep=fid)
        f = self.fetchers.get(fid)
        if f is None:
            f = self.fetchers[fid] = _Fetcher(leader, fid[1])
        f.partitions[key] = _FetchState(leader_epoch)
        f.wake.set()
        if not f.running and self._nursery is not None:
            try:
                self._nursery.start_soon(self._fetcher, f)
            except RuntimeError:  # the broker is stopping: its fetchers are not started again
                self._nursery = None
                return
            f.running = True

    def remove_fetch(self, key: Key, keep: tuple[int, int] | None = None) -> None:
        for fid, f in self.fetchers.items():
            if fid != keep:
                f.partitions.pop(key, None)

    def _endpoint(self, broker_id: int) -> tuple[str, int] | None:
        """The broker's inter-broker listener, as this broker's cache knows it (None: not a live broker)."""
        info = self.broker.cache.brokers.get(broker_id)
        return None if info is None else inter_broker_endpoint(vars(info), self.security.listener)

    async def _fetcher(self, f: _Fetcher) -> None:
        client = f.client = InterBrokerClient(self.node_id, self.socket_timeout, self.security)
        try:
            while f.partitions:
                if self._resumed is not None:
                    await self._resumed.wait()
                    continue
                if f.leader in self.cut:
                    await self.cut[f.leader].wait()
                    continue
                endpoint = self._endpoint(f.leader)
                if endpoint is None:
                    await self._sleep(f, self.backoff)
                    continue
                try:
                    if any(s.truncating for s in f.partitions.values()):
                        await self._truncate(f, client, endpoint)
                    if not await self._fetch(f, client, endpoint):
                        await self._sleep(f, self.backoff)
                except (OSError, trio.BrokenResourceError, trio.TooSlowError, ConnectionError, ValueError) as exc:
                    # a refused login (server/interbroker.py) is a misconfiguration: a warning, with the leader's answer
                    (log.warning if isinstance(exc, InterBrokerAuthenticationError) else log.info)(
                        "replica_fetcher.connection_failed", leader=f.leader, error=str(exc) or repr(exc))
                    await client.close()
                    f.session.reset()  # (the leader may or may not have taken the last fetch: start over)
                    await self._sleep(f, self.backoff)
                except KafkaStorageException:
                    return  # the log dir is offline: this broker replicates nothing more
        finally:
            f.running = False
            await client.close()

    async def _sleep(self, f: _Fetcher, seconds: float) -> None:
        f.wake = trio.Event()
        with trio.move_on_after(seconds):
            await f.wake.wait()

    def _ready(self, f: _Fetcher) -> dict[Key, _FetchState]:
        now = trio.current_time()
        return {k: s for k, s in f.partitions.items() if s.delayed_until <= now and not s.truncating
                and self.rm.follower(k) is not None}

    async def _truncate(self, f: _Fetcher, client: InterBrokerClient, endpoint) -> None:
        """OffsetForLeaderEpoch rounds until every truncating partition has cut its log to the common epoch."""
        T = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
        P = T.OffsetForLeaderPartition
        for _round in range(8):
            asked = {k: s for k, s in f.partitions.items() if s.truncating and self.rm.follower(k) is not None}
            if not asked:
                return
            todo: dict[Key, int] = {}
            for k, s in asked.items():
                epoch = self.rm.follower(k).log.epochs.latest_epoch
                if epoch < 0:  # nothing written under any epoch: nothing to cut
                    s.truncating = False
                else:
                    todo[k] = epoch
            if not todo:
                return
            topics: dict[str, list] = {}
            for (t, i), epoch in todo.items():
                topics.setdefault(t, []).append(P(partition=i, current_leader_epoch=asked[(t, i)].leader_epoch,
                                                  leader_epoch=epoch))
            req = OffsetForLeaderEpochRequest[OFFSET_FOR_LEADER_EPOCH_VERSION](
                replica_id=self.node_id, topics=[T(topic=t, partitions=ps) for t, ps in topics.items()])
            resp = await client.request(endpoint, req)
            for rt in resp.topics:
                for rp in rt.partitions:
                    k = (rt.topic, rp.partition)
                    s = f.partitions.get(k)
                    p = self.rm.follower(k)
                    if s is None or p is None or k not in todo:
                        continue
                    lg = p.log
                    if rp.error_code:
                        s.delayed_until = trio.current_time() + self.backoff
                        log.info("replica_fetcher.truncation_deferred", topic=k[0], partition=k[1], leader=f.leader,
                                 error=E(rp.error_code).name)
                        continue
                    before = lg.log_end_offset
                    if rp.end_offset < 0:  # the leader knows no such epoch: keep what the high watermark covers
                        target, done = lg.high_watermark, True
                    else:
                        mine_epoch, mine_end = lg.end_offset_for_epoch(rp.leader_epoch)
                        target = min(rp.end_offset, mine_end) if mine_end >= 0 else rp.end_offset
                        done = mine_epoch == rp.leader_epoch or mine_epoch < 0
                    if target < lg.log_end_offset:  # (else nothing to cut: no worker, the log never busy)
                        await self._change_in_worker(k, p, "truncating", lambda p=p, t=target: p.truncate_to(t))
                    if done:
                        s.truncating = False
                    if lg.log_end_offset != before:
                        log.info("replica.truncated", topic=k[0], partition=k[1], leader=f.leader,
                                 from_offset=before, to_offset=lg.log_end_offset, leader_epoch=rp.leader_epoch)
            if any(s.delayed_until > trio.current_time() for s in asked.values()):
                return
        for s in f.partitions.values():
            s.truncating = False

    async def _change_in_worker(self, key: Key, p: "Partition", what: str, change) -> None:
        """Cut a follower's log (`change`: its truncation) in a worker thread: it fsyncs, rescans the cut segment
        and walks every segment's batch headers to rebuild the producer state, seconds for a big log of small
        batches. This fetcher is the log's only writer and waits for it; meanwhile the log is `busy`: the
        periodic services skip it, requests for it are answered NOT_LEADER_OR_FOLLOWER, and a LeaderAndIsr or
        StopReplica that arrives waits in `after_busy`, applied in order once the cut is done (as Kafka's
        makeLeader waits for the partition's lock the fetcher's truncation holds)."""
        lg = p.log
        lg.busy, lg.after_busy = True, []
        lg.version += 1  # a cleaning under way is not swapped in
        try:
            with self._disk(key, what):
                await trio.to_thread.run_sync(change)
        finally:
            waiting, lg.busy, lg.after_busy = lg.after_busy, False, ()
            for run in waiting:
                try:
                    run()
                except Exception:  # one bad change must not keep the others from being applied
                    log.exception("replica.deferred_change_failed", topic=key[0], partition=key[1])

    @contextmanager
    def _disk(self, key: Key, what: str):
        """A disk error while changing a follower's log takes the log dir offline (KafkaStorageException ends the
        fetcher), as Kafka's fetcher reports it to the LogDirFailureChannel; not a connection failure."""
        try:
            yield
        except OSError as exc:
            raise self.rm.handle_log_dir_failure(exc, f"{what} {key[0]}-{key[1]} as a follower") from None

    async def _fetch(self, f: _Fetcher, client: InterBrokerClient, endpoint) -> bool:
        """One Fetch round; False when nothing could be asked (all partitions backing off)."""
        ready = self._ready(f)
        if not ready:
            return False
        T = FetchRequest.FetchTopic
        P = T.FetchPartition
        wanted: dict[Key, tuple[int, int, int]] = {}
        for key, s in ready.items():
            lg = self.rm.follower(key).log
            wanted[key] = (lg.log_end_offset, lg.log_start_offset, s.leader_epoch)
        asked = {k: w[0] for k, w in wanted.items()}
        named, forget = f.session.request(wanted)
        topics: dict[str, list] = {}
        for (t, i), (offset, start, epoch) in named.items():
            topics.setdefault(t, []).append(P(
                partition=i, current_leader_epoch=epoch, fetch_offset=offset, last_fetched_epoch=-1,
                log_start_offset=start, partition_max_bytes=self.fetch_max_bytes))
        forgotten: dict[str, list[int]] = {}
        for t, i in forget:
            forgotten.setdefault(t, []).append(i)
        req = FetchRequest[FETCH_VERSION](
            replica_id=self.node_id, max_wait_ms=self.fetch_wait_ms, min_bytes=self.fetch_min_bytes,
            max_bytes=self.response_max_bytes, isolation_level=0, session_id=f.session.id,
            session_epoch=f.session.epoch, topics=[T(topic=t, partitions=ps) for t, ps in topics.items()],
            forgotten_topics_data=[FetchRequest.ForgottenTopic(topic=t, partitions=ps) for t, ps in forgotten.items()],
            rack_id="")
        resp = await client.request(endpoint, req, extra_timeout=self.fetch_wait_ms / 1000.0)
        f.session.answered(wanted, resp.error_code, resp.session_id)
        if resp.error_code:  # (a session error: the next fetch is a full one, at once)
            log.info("replica_fetcher.session_reset", leader=f.leader, error=name_of(resp.error_code))
            return True
        if self.paused:  # paused while it waited: as if the answer never arrived (the leader's session thinks it did)
            f.session.reset()
            return True
        for rt in resp.responses:
            for rp in rt.partitions:
                await self._apply(f, (rt.topic, rp.partition_index), rp, asked)
        return True

    async def _apply(self, f: _Fetcher, key: Key, rp, asked: dict[Key, int]) -> None:
        s = f.partitions.get(key)
        p = self.rm.follower(key)
        if s is None or p is None or key not in asked or p.log.log_end_offset != asked[key]:
            return  # moved, stopped or truncated meanwhile
        err = rp.error_code
        if err == E.OFFSET_OUT_OF_RANGE:
            if asked[key] < rp.log_start_offset:
                log.info("replica.start_over", topic=key[0], partition=key[1], leader=f.leader,
                         log_start_offset=rp.log_start_offset)
                await self._change_in_worker(key, p, "starting over",
                                             lambda: p.truncate_fully_and_start_at(rp.log_start_offset))
            else:
                s.truncating = True
            return
        if err:
            s.delayed_until = trio.current_time() + self.backoff
            log.info("replica_fetcher.partition_error", topic=key[0], partition=key[1], leader=f.leader,
                     error=E(err).name)
            return
        if rp.records:
            try:
                got = self.rm.append_as_follower(key, rp.records)
            except UnexpectedAppend as exc:
                log.warning("replica_fetcher.unexpected_append", topic=key[0], partition=key[1], error=str(exc))
                s.truncating = True
                return
            if got is not None:
                await self.rm.wait_durable(*got)
        if self.rm.follower(key) is p:
            start = p.log.log_start_offset
            with self._disk(key, "moving the watermarks of"):
                p.update_follower_watermarks(rp.high_watermark, rp.log_start_offset)
            if p.log.log_start_offset != start:  # its deleted segments' renames and files, in a worker thread
                await self.rm.rename_deleted_segments([key])

    # -- leaders: ISR changes through the controller --------------------------------------------------
    def maybe_expand_isr(self, p: "Partition") -> None:
        new = p.isr_to_expand()
        if new is not None:
            self._propose(p, new, "caught up")

    def _propose(self, p: "Partition", new_isr: list[int], why: str) -> None:
        p.pending_isr = list(new_isr)
        self._proposals[(p.topic, p.index)] = (p.leader_epoch, list(new_isr), p.partition_epoch)
        log.info("isr.proposed", topic=p.topic, partition=p.index, isr=list(p.isr), new_isr=new_isr, reason=why,
                 leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch)
        self._proposed.set()

    async def _isr_shrink_loop(self) -> None:
        while True:
            await trio.sleep(max(0.05, self.lag_ms / 2000.0))
            now = now_ms()
            for p in list(self.rm.partitions.values()):
                new = p.isr_to_shrink(now, self.lag_ms)
                if new is not None:
                    self._propose(p, new, f"not caught up for {self.lag_ms} ms")

    async def _alter_partition_sender(self) -> None:
        # a controller that stopped answering (paused, cut off) must not hold ISR changes for long: the request
        # is given up after a few seconds and sent again to whoever is controller then
        client = InterBrokerClient(self.node_id, min(self.socket_timeout, ALTER_PARTITION_TIMEOUT_S), self.security)
        T = AlterPartitionRequest.TopicData
        P = T.PartitionData
        while True:
            if not self._proposals:
                self._proposed = trio.Event()
                await self._proposed.wait()
            batch, self._proposals = self._proposals, {}
            controller = self.broker.cache.controller_id
            endpoint = self._endpoint(controller) if controller >= 0 else None
            topics: dict[str, list] = {}
            for (t, i), (le, isr, pe) in batch.items():
                topics.setdefault(t, []).append(P(partition_index=i, leader_epoch=le, new_isr=isr,
                                                  leader_recovery_state=0, partition_epoch=pe))
            req = AlterPartitionRequest[ALTER_PARTITION_VERSION](
                broker_id=self.node_id, broker_epoch=self.broker.broker_epoch,
                topics=[T(topic_name=t, partitions=ps) for t, ps in topics.items()])
            try:
                if endpoint is None:
                    raise ConnectionError("no controller known")
                resp = await client.request(endpoint, req)
            except (OSError, trio.BrokenResourceError, trio.TooSlowError, ConnectionError, ValueError) as exc:
                log.info("alter_partition.failed", controller=controller, error=repr(exc))
                await client.close()
                for k, v in batch.items():  # tried again, unless something newer was proposed meanwhile
                    self._proposals.setdefault(k, v)
                await trio.sleep(0.1)
                continue
            self._apply_alter(batch, resp)

    def _apply_alter(self, batch: dict[Key, tuple[int, list[int], int]], resp) -> None:
        if resp.error_code:
            log.info("alter_partition.refused", error=E(resp.error_code).name)
        answered = set()
        for rt in resp.topics:
            for rp in rt.partitions:
                key = (rt.topic_name, rp.partition_index)
                answered.add(key)
                p = self.rm.partitions.get(key)
                if p is None or key not in batch or p.leader_epoch != batch[key][0]:
                    continue  # not proposed, or leadership moved since: the LeaderAndIsr state stands
                if rp.error_code:
                    log.info("alter_partition.partition_refused", topic=key[0], partition=key[1],
                             error=E(rp.error_code).name)
                    p.pending_isr = None
                    continue
                if rp.leader_epoch == p.leader_epoch and p.apply_isr(list(rp.isr), rp.partition_epoch):
                    log.info("isr.changed", topic=key[0], partition=key[1], isr=list(rp.isr),
                             partition_epoch=rp.partition_epoch)
                    p.maybe_increment_hw()
                    self.rm.notify(*key)  # acks=all waiters look again (the watermark, min.insync.replicas)
        for key in batch:
            p = self.rm.partitions.get(key)
            if key not in answered and p is not None:
                p.pending_isr = None
