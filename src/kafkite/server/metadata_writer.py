"""The cluster metadata snapshot written off the event loop, one write for every change made meanwhile.

A broker with a data dir keeps its cluster metadata in `kafkite-metadata.json` (and the producer id block in
`latest_producer_id_block`), each replaced atomically with an fsync. Written on the event loop, every CreateTopics,
DeleteTopics, CreatePartitions, AlterConfigs, new producer id block, SCRAM user or ACL change held every
connection for a write and two fsyncs. Here `ClusterMetadata` defers its writes (controller/metadata.py): a change
is made in memory, and this writer puts the snapshot on disk in a worker thread; changes made while a write is in
flight go into the next one (group commit). The request that made a change is answered only once a snapshot
holding it is durable (`durable`), and what follows the write (the logs made or removed, the brokers told) runs
here, in the order the changes were made, right after it (`durable(then=...)`). When a write fails, every change
not yet durable is undone and its callers get the OSError (KAFKA_STORAGE_ERROR, as before); nothing acknowledged
is ever lost. The brokers are told only what is on disk (`ClusterMetadata.published_snapshot`), and they are told
once for all the changes of one write (`batch`).

The controller's own changes (elections, ISRs: `ClusterMetadata.persist`) go the same way (`write_soon`): the brokers
are told once they are on disk (`publish`, after the write), never before, so that no broker acts on a leader or ISR
a crash would forget; AlterPartition is answered once the new ISR is durable (it awaits `durable()`). Before, each
was written and fsynced on the loop (50-65 ms for 1,000 partitions). `write_now` (at once, on the caller's thread,
with every change pending before it) stays for a caller outside the loop; a lock keeps it and the worker's write
apart, and a write older than what is on disk is skipped.
"""
from __future__ import annotations

import contextlib
import contextvars
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager

import structlog
import trio

from ..controller.metadata import ClusterMetadata, PendingWrite

log = structlog.get_logger("kafkite.metadata")


@dataclass(eq=False)
class _Waiter:
    version: int
    then: Callable[[], Any] | None
    done: trio.Event = field(default_factory=trio.Event)
    result: Any = None
    error: BaseException | None = None
    context: contextvars.Context = field(default_factory=contextvars.copy_context)  # the request's (its log lines)

    def run(self) -> None:
        if self.then is not None:
            try:
                self.result = self.context.run(self.then)
            except Exception as exc:
                self.error = exc


def resolved(then: Callable[[], Any] | None = None) -> _Waiter:
    """A change on disk already (or written at once): `then()` now, for `wait`."""
    w = _Waiter(0, then)
    w.run()
    w.done.set()
    return w


async def wait(w: _Waiter) -> Any:
    """-> the result of the callback of a registered change once it is on disk (its error raised)."""
    await w.done.wait()
    if w.error is not None:
        raise w.error
    return w.result


class MetadataWriter:
    def __init__(self, md: ClusterMetadata) -> None:
        self.md = md
        self.writes = 0  # snapshots written (a figure for tests and benchmarks)
        self._wake = trio.Event()
        self._waiters: list[_Waiter] = []
        self._lock = threading.Lock()  # one write at a time: the worker's or write_now's
        self._on_disk = md.durable_version
        self.batch: Callable[[], ContextManager] = contextlib.nullcontext  # around the callbacks of one write
        self.publish: Callable[[], None] = lambda: None  # tells the brokers (a controller's change, once written)
        self._holds = 0

    # -- DeferredWrites (called by ClusterMetadata, on the loop) -------------------------
    def changed(self) -> None:
        self._wake.set()

    def write_soon(self) -> None:
        self.register(then=self.publish)
        self._wake.set()

    def write_now(self) -> None:
        pending = self.md.take_pending()
        try:
            text = self._write(pending)
        except OSError:
            self.md.dirty = True  # the changes before it are still to be written (or undone) by the worker
            self._wake.set()
            raise
        self.md.written(pending, text)
        self._wake.set()  # the callbacks of the changes it made durable run in the worker (not inside the caller)

    @contextlib.contextmanager
    def hold(self):
        """No write starts meanwhile (the changes of one request are being made: they go in one write)."""
        self._holds += 1
        try:
            yield
        finally:
            self._holds -= 1
            self._wake.set()

    # -- the worker ------------------------------------------------------------------------
    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Write the snapshot whenever something changed, until cancelled; then write what is left."""
        self.md.defer_writes(self)
        task_status.started()
        try:
            while True:
                await self._wake.wait()
                self._wake = trio.Event()
                self._resolve()
                if self.md.dirty and not self._holds:
                    await self._write_pending()
        finally:
            with trio.CancelScope(shield=True):
                while self.md.dirty:  # (changes made during the last write too)
                    try:
                        await self._write_pending()
                    except Exception as exc:  # (an OSError is handled there)
                        log.warning("metadata.last_write_failed", error=repr(exc))
                        break
            self.md.defer_writes(None)
            self._fail_waiters(RuntimeError("the broker stopped before the metadata was written"))

    async def durable(self, version: int | None = None, then: Callable[[], Any] | None = None) -> Any:
        """Once every change up to `version` (default: all made so far) is on disk: `then()`, run by the writer
        in the order of the changes (also when this caller is cancelled meanwhile) -> its result. OSError when
        the write failed (the change was undone)."""
        return await wait(self.register(version, then))

    def register(self, version: int | None = None, then: Callable[[], Any] | None = None) -> "_Waiter":
        """`durable` in two steps: registered now, right after the change (its callback keeps the change's turn),
        waited for later (`wait`), e.g. once the other changes of the same request are made too."""
        v = self.md.version if version is None else version
        if not self.md.deferred or (v <= self.md.durable_version and (then is None or not self._waiters)):
            return resolved(then)  # on disk already (or the writer stopped: written at once)
        w = _Waiter(v, then)
        self._waiters.append(w)
        if v <= self.md.durable_version:  # durable, but callbacks before it are still to run: keep the order
            self._resolve()
        return w

    async def _write_pending(self) -> None:
        pending = self.md.take_pending()
        try:
            text = await trio.to_thread.run_sync(self._write, pending)
        except OSError as exc:
            if self.md.durable_version >= pending.version:  # write_now put a newer snapshot there meanwhile
                self._resolve()
                return
            log.warning("metadata.write_failed", error=str(exc), undone=self.md.version - self.md.durable_version)
            self.md.write_failed()
            self._fail_waiters(exc)
            return
        except BaseException:
            self.md.dirty = True  # cancelled before the thread started: not written
            raise
        self._written(pending, text)

    def _write(self, pending: PendingWrite) -> str | None:
        """Any thread: write `pending` unless a newer snapshot is on disk already -> its JSON text (None: skipped)."""
        with self._lock:
            if pending.version <= self._on_disk:
                return None
            text = self.md.write(pending)
            self._on_disk = pending.version
            self.writes += 1
            return text

    def _written(self, pending: PendingWrite, text: str | None) -> None:
        self.md.written(pending, text)
        self._resolve()

    def _resolve(self) -> None:
        """Run the callbacks of the changes now durable, oldest first (inside `batch()`: the broker tells the
        brokers once for all of them), then wake their callers."""
        ready = []
        while self._waiters and self._waiters[0].version <= self.md.durable_version:
            ready.append(self._waiters.pop(0))
        if not ready:
            return
        with self.batch():
            for w in ready:
                w.run()
        for w in ready:
            w.done.set()

    def _fail_waiters(self, exc: BaseException) -> None:
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            if w.version <= self.md.durable_version:  # durable after all (a callback that waited its turn)
                self._waiters.append(w)
            else:
                w.error = exc
                w.done.set()
        self._resolve()
