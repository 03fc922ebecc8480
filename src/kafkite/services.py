"""Background services attached to the shared state: partition logs, coordinator, timers.

Kafka's LogManager schedules, each a loop here:
- retention: every log.retention.check.interval.ms, delete segments past retention.ms /
  retention.bytes (cleanup.policy=delete);
- segment file deletion: a deleted segment's files (retention, DeleteRecords, truncation, the files a
  compaction replaced) are renamed `.deleted` at once and removed file.delete.delay.ms later, in a
  worker thread (Kafka's "delete-file" tasks on its scheduler); checked every 100 ms here, so a file
  goes at most that long after its delay (storage/local_log.py, `files_to_delete`);
- the log cleaner (cleanup.policy=compact): continuously, the dirtiest log first
  (storage/log_cleaner.py); the cleaning runs in a worker thread, and so do the renames that swap its result
  in (under the log's lock); log.cleaner.backoff.ms between checks when nothing is to clean;
- the flush scheduler: fsync (in a worker thread) the logs whose flush.ms has passed since their
  last flush, checked every log.flush.scheduler.interval.ms -- at least every second here
  (Kafka's default, Long.MAX, never runs it), so flush.ms holds without further appends;
- the data dir's recovery-point-offset-checkpoint, every log.flush.offset.checkpoint.interval.ms,
  and log-start-offset-checkpoint, every log.flush.start.offset.checkpoint.interval.ms, and for a
  replicating broker replication-offset-checkpoint (the high watermarks), every
  replica.high.watermark.checkpoint.interval.ms (written and fsynced in a worker thread;
  storage/log_manager.py).

Retention, segment file deletion and the flush scheduler look at LOGS_PER_STEP logs in one step of the event loop,
then let other tasks run (a log deleted or moved meanwhile is skipped).

A disk error in any of them takes the log dir offline (LogLifecycle.handle_log_dir_failure), as
Kafka's LogManager and LogCleaner report an IOException to the LogDirFailureChannel; the offline
logs leave `state.replicas.logs`, so no service touches them again.
"""
from __future__ import annotations


import structlog
import trio

from .gil_pacing import Pacer
from .storage.log_cleaner import LogCleaner

log = structlog.get_logger("kafkite.services")


class Storage:
    """One broker's partitions and the services over them, for a broker of an in-process cluster: its own
    ReplicaManager (replicated: its partitions open with the controller's leader and ISR, followers copy from
    their leaders) in its own data dir. `run` and `close` take it as they take a single broker's state."""

    def __init__(self, state, node_id: int, data_dir, in_memory: bool) -> None:
        from .server.context import now_ms
        from .server.replica_manager import ReplicaManager
        self.config = state.config
        self.replicas = ReplicaManager(state, node_id=node_id, data_dir=data_dir, in_memory=in_memory,
                                       replicated=True)
        self.replicas.lifecycle.open_all(now_ms())
        self.log_cleaner = LogCleaner(state.config.get("log.cleaner.dedupe.buffer.size"), pace=Pacer)


class StorageHooks:
    """The topic lifecycle for the brokers of an in-process cluster (each its own Storage): a deleted topic
    leaves every broker's disk, a stopped broker's too; a config change reaches every broker's logs. Logs are
    created by the controller's leader and ISR (ReplicaManager.become_replica), not here."""

    def __init__(self, storages: dict) -> None:
        self.storages = storages

    def on_topic_created(self, topic) -> None:
        pass

    def on_partitions_added(self, topic) -> None:
        pass

    def on_topic_deleted(self, topic) -> None:
        for s in self.storages.values():
            s.replicas.lifecycle.on_topic_deleted(topic)

    def on_configs_changed(self, topic) -> None:
        for s in self.storages.values():
            s.replicas.lifecycle.on_configs_changed(topic)


def attach(state) -> None:
    from .server.context import now_ms
    from .server.replica_manager import ReplicaManager
    state.replicas = ReplicaManager(state)
    state.hooks.append(state.replicas.lifecycle)
    state.replicas.lifecycle.open_all(now_ms())
    state.log_cleaner = LogCleaner(state.config.get("log.cleaner.dedupe.buffer.size"), pace=Pacer)


def _logs(state):
    return [(f"{topic}-{partition}", lg) for (topic, partition), lg in list(state.replicas.logs.items())
            if not lg.busy]


LOGS_PER_STEP = 100  # the periodic services look at this many logs in one step of the event loop, then let others run


async def _pace(i: int) -> None:
    """Every LOGS_PER_STEP logs a periodic service looks at, let the other tasks run (a broker of thousands of
    partitions held the loop 100-600 ms per pass when they went in one step)."""
    if i and i % LOGS_PER_STEP == 0:
        await trio.sleep(0)


def _serving(state, key, lg) -> bool:
    """The log is still the partition's (not deleted nor moved while the service let other tasks run) and no worker
    is changing it (a follower's truncation: it is left for the next round)."""
    return state.replicas.logs.get(key) is lg and not lg.busy


async def run(state, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(retention, state)
        nursery.start_soon(clean_logs, state)
        nursery.start_soon(flush_logs, state)
        if state.replicas.log_dir is not None:
            nursery.start_soon(delete_segment_files, state)
            log_dir = state.replicas.log_dir
            nursery.start_soon(checkpoint, state, "log.flush.offset.checkpoint.interval.ms",
                               log_dir.recovery_points_of, log_dir.write_recovery_points)
            nursery.start_soon(checkpoint, state, "log.flush.start.offset.checkpoint.interval.ms",
                               log_dir.log_start_offsets_of, log_dir.write_log_start_offsets)
            if state.replicas.is_replicated:
                nursery.start_soon(checkpoint, state, "replica.high.watermark.checkpoint.interval.ms",
                                   log_dir.high_watermarks_of, log_dir.write_high_watermarks)
        task_status.started()


async def retention(state) -> None:
    while True:
        await trio.sleep(state.config.get("log.retention.check.interval.ms") / 1000)
        now = state.replicas.log_now_ms()  # (once a pass: a few ms late at most for its last logs)
        for i, ((topic, partition), lg) in enumerate(list(state.replicas.logs.items())):
            await _pace(i)
            segs = lg.segments
            delete = "delete" in lg.config.cleanup_policy
            if (len(segs) < 2 and (segs[0].size == 0 or not delete)) or not _serving(state, (topic, partition), lg):
                continue  # (an empty log has nothing to delete: most logs, cheaply)
            if not delete and segs[1].base > lg.log_start_offset:
                continue  # (compacted only: only segments below the log start go, as on Kafka)
            try:
                n = lg.enforce_retention(now, defer_renames=True, delete=delete)
                renames = lg.renames() if n else None  # (none deferred otherwise: 1,000s of logs a pass)
                if renames is not None:  # the segments' files renamed `.deleted` in a worker thread
                    await trio.to_thread.run_sync(renames)
                    lg.schedule_renamed()
            except OSError as exc:
                if state.replicas.get(topic, partition) is lg:  # else deleted meanwhile: not a disk fault
                    state.replicas.handle_log_dir_failure(exc, f"deleting old segments of {topic}-{partition}")
                    break
                continue
            if n:
                log.info("log.retention", log=f"{topic}-{partition}", segments_deleted=n,
                         log_start_offset=lg.log_start_offset)


FILE_DELETE_CHECK_S = 0.1


async def delete_segment_files(state) -> None:
    """Remove the `.deleted` files whose file.delete.delay.ms has passed, in a worker thread."""
    while True:
        await trio.sleep(FILE_DELETE_CHECK_S)
        now = state.replicas.log_now_ms()
        due = [(key, lg) for key, lg in state.replicas.logs.items() if lg.deletions_pending]
        for i, ((topic, partition), lg) in enumerate(due):
            await _pace(i)
            if not _serving(state, (topic, partition), lg):
                continue
            run = lg.files_to_delete(now)
            if run is None:
                continue
            try:
                await trio.to_thread.run_sync(run)
            except OSError as exc:  # Kafka's maybeHandleIOException: the log dir goes offline
                if state.replicas.get(topic, partition) is not lg:
                    continue  # deleted meanwhile (its directory with it): not a disk fault
                state.replicas.handle_log_dir_failure(exc, f"deleting segment files of {topic}-{partition}")
                break


async def clean_logs(state) -> None:
    cleaner: LogCleaner = state.log_cleaner
    while True:
        logs = _logs(state)
        read = cleaner.checkpoint_reads(lg for _, lg in logs if lg.config.compacted)
        if read is not None:  # a log dir's cleaner-offset-checkpoint file, the first time: in a worker thread
            try:
                cleaner.loaded(await trio.to_thread.run_sync(read))
            except OSError:  # (read again after the backoff)
                log.exception("log_cleaner.checkpoint_unreadable")
                await trio.sleep(state.config.get("log.cleaner.backoff.ms") / 1000)
                continue
        job = cleaner.grab_filthiest_log(logs, state.replicas.log_now_ms())
        if job is None or not await _clean(state, cleaner, job):
            await trio.sleep(state.config.get("log.cleaner.backoff.ms") / 1000)
        await trio.sleep(0)


async def _clean(state, cleaner: LogCleaner, job) -> bool:
    """Run one cleaning in a worker thread and swap its result in; False when nothing changed."""
    try:
        result = await trio.to_thread.run_sync(job.run, abandon_on_cancel=True)
        # the swap-in's renames in a worker too, under the log's lock (storage/local_log.py)
        if not cleaner.swapped(job, result, await trio.to_thread.run_sync(cleaner.swap_work(job, result))):
            return False
        write = cleaner.checkpoint_writes()
        if write is not None:  # (the cleaner-offset-checkpoint file, in a worker thread)
            cleaner.forget(await trio.to_thread.run_sync(write))
    except FileNotFoundError:  # the partition (or a segment) deleted meanwhile: try again after the backoff
        log.info("log_cleaner.gone", log=job.name)
        return False
    except OSError as exc:  # a disk error: the log dir goes offline, as Kafka's cleaner reports it
        if job.log in state.replicas.logs.values():
            state.replicas.handle_log_dir_failure(exc, f"cleaning {job.name}")
        return False
    except Exception:  # a bug must not stop the cleaner: try again after the backoff
        log.exception("log_cleaner.failed", log=job.name)
        return False
    if result.replacements:
        log.info("log.compacted", log=job.name, records_removed=result.records_removed,
                 segments_rewritten=len(result.replacements), dirty_ratio=round(job.dirty_ratio, 3))
    return True


async def flush_logs(state) -> None:
    while True:
        await trio.sleep(min(state.config.get("log.flush.scheduler.interval.ms"), 1000) / 1000)
        for i, ((topic, partition), lg) in enumerate(list(state.replicas.logs.items())):
            await _pace(i)
            if not _serving(state, (topic, partition), lg):
                continue
            job = lg.scheduled_flush(state.replicas.log_now_ms())
            if job is not None:
                target, run = job
                try:
                    await trio.to_thread.run_sync(run)
                except OSError as exc:
                    if state.replicas.get(topic, partition) is not lg:
                        continue  # deleted meanwhile: not a disk fault
                    state.replicas.handle_log_dir_failure(exc, f"flushing {topic}-{partition}")
                    break
                if state.replicas.log_dir_offline:
                    break
                lg.mark_flushed(target)
                state.replicas.notify(topic, partition)


async def checkpoint(state, interval_key: str, collect, write) -> None:
    """Every `interval_key` ms: collect a data-dir checkpoint's offsets on the loop, write it in a worker."""
    while True:
        await trio.sleep(state.config.get(interval_key) / 1000)
        offsets = collect(state.replicas.logs)
        try:
            await trio.to_thread.run_sync(write, offsets)
        except OSError:  # e.g. a full disk: the previous checkpoint stands, the next run tries again
            log.exception("log_dir.checkpoint_failed", checkpoint=interval_key)


def close(state) -> None:
    state.replicas.close()


def abandon(state) -> None:
    """Close the logs' files as a killed process leaves them (control/zk_restart.py): what was written stays (the
    OS has it), but nothing is flushed or fsynced and no checkpoint or clean-shutdown marker is written, so the next
    start recovers the logs from their recovery points."""
    replicas = state.replicas
    replicas.lifecycle.wait_closing()  # (StopReplica's closes under way: theirs is the next start's directory too)
    for lg in list(replicas.logs.values()):
        try:
            lg.close_for_deletion()  # (its pending writes completed, its files closed; nothing flushed)
        except Exception:
            log.exception("log.close_failed")
    replicas.logs.clear()
