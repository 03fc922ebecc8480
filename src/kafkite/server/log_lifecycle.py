"""The logs' lifecycle of one broker (Kafka's LogManager role; storage/log_manager.py's LogDirectory is its files).

Owns the broker's log per (topic, partition) -- `FileLog` under `<data dir>/<topic>-<N>/` or `MemoryLog` for
--in-memory --: made when a topic or partitions are created (in a worker thread first: prepared_logs.py), loaded
and recovered at start (`open_all`) or on a LeaderAndIsr (ReplicaManager.become_replica calls `open`), their
configs kept current, closed and their directory removed when the topic is deleted or the replica stopped, and
all of them closed (flushed) with the data dir's checkpoints at shutdown.

Disk faults (Kafka's LogDirFailureChannel): `handle_log_dir_failure` takes the data dir offline at once and for
good (until a restart); its logs are taken out of service (`UnifiedLog.fail`) and cut in a worker thread, and
the ReplicaManager's `on_offline` wakes what waits on them (see replica_manager.py's module comment).

ReplicaManager holds one (`replicas.lifecycle`) and shares its dicts (`logs`, `keys`, `offline_log_dirs`: the
same objects, mutated in place, never rebound). It is the topic hook of a single broker (ClusterState.hooks);
an in-process cluster's brokers are reached through services.StorageHooks.
"""
from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import structlog
import trio

from ..config import TOPIC_CONFIGS
from ..gil_pacing import paced
from ..storage.checkpoint_file import fsync_dir
from ..storage.log_config import LogConfig
from ..storage.checkpoint_file import InconsistentTopicId
from ..storage.log_manager import DELETE_DIR_SUFFIX, LogDirectory
from ..storage.unified_log import FileLog, MemoryLog
from .prepared_logs import PreparedLogs

if TYPE_CHECKING:
    from ..controller.metadata import TopicInfo
    from .broker import ClusterState

log = structlog.get_logger("kafkite.replica_manager")
Key = tuple[str, int]


class KafkaStorageException(Exception):
    """Kafka's KafkaStorageException: the partition's log dir is offline (KAFKA_STORAGE_ERROR)."""


class LogLifecycle:
    def __init__(self, state: "ClusterState", *, data_dir: Path | None, in_memory: bool, is_replicated: bool,
                 clock: Callable[[], int]):
        self.state = state
        self.in_memory = in_memory
        self.data_dir = data_dir
        self.is_replicated = is_replicated
        self.clock = clock  # the log clock (ReplicaManager.log_now_ms)
        self.logs: dict[Key, object] = {}
        self.keys: dict[int, Key] = {}  # id(log) -> its partition
        # the data dir's own files: clean-shutdown marker, offset checkpoints (storage/log_manager.py)
        self.log_dir = None if in_memory else LogDirectory(data_dir)
        self.prepared = PreparedLogs(lambda key: self.dir_of(*key), lambda key: self._delete_dir(*key))
        self.making_logs = trio.Lock()  # held from prepare_logs to discard_prepared: no two makers in one directory
        self.offline_log_dirs: dict[str, str] = {}  # Kafka's LogDirFailureChannel: failed dir -> what failed
        # the random source of the segments' roll jitter (segment.jitter.ms) in the logs opened from now on: None
        # for the `random` module; a test sets its own to make the jitter deterministic
        self.segment_rng = None
        self._log_configs: dict[tuple, LogConfig] = {}  # log_config's, by topic configs (over _defaults)
        self._defaults: dict[str, str] = {}
        self._defaults_seen: tuple | None = None
        # called with the partition whose log was closed (stop_replica); once the log dir went offline
        self.on_removed: Callable[[Key], None] = lambda key: None
        self.on_offline: Callable[[], None] = lambda: None
        self.closing: dict[Key, threading.Event] = {}  # StopReplica's closes under way in worker threads
        self.unclean_closes = 0  # of those, the ones whose flush failed (the shutdown is then not a clean one)

    # -- making and opening logs --------------------------------------------------------------------
    def _broker_defaults(self) -> dict[str, str]:
        """The broker-level value of every topic config, computed again only when the dynamic broker configs
        changed (25 look-ups through the config's synonyms: ~0.1 ms, once per partition a LeaderAndIsr opened)."""
        config = self.state.config
        seen = (tuple(config.dynamic.items()), tuple(config.dynamic_default.items()))
        if seen != self._defaults_seen:
            self._defaults = {name: config.topic_default(name)[0] for name in TOPIC_CONFIGS}
            self._defaults_seen = seen
            self._log_configs.clear()
        return self._defaults

    def effective_configs(self, topic: "TopicInfo") -> dict[str, str]:
        cfg = dict(self._broker_defaults())
        cfg.update((name, value) for name, value in topic.configs.items() if name in cfg)
        return cfg

    def log_config(self, topic: "TopicInfo") -> LogConfig:
        """The topic's LogConfig; one object for equal topic configs over the same broker defaults (parsing one took
        ~0.15 ms: a LeaderAndIsr of 1,000 partitions parsed the same one 1,000 times on the event loop). Never
        changed in place."""
        self._broker_defaults()  # (the cache emptied when they changed)
        key = tuple(sorted(topic.configs.items()))
        cfg = self._log_configs.get(key)
        if cfg is None:
            if len(self._log_configs) >= 256:
                self._log_configs.clear()
            cfg = self._log_configs[key] = LogConfig.from_topic_configs(self.effective_configs(topic))
        return cfg

    def dir_of(self, topic: str, partition: int) -> Path:
        assert self.data_dir is not None
        return self.data_dir / f"{topic}-{partition}"

    def _make_file_log(self, topic: "TopicInfo", partition: int, now_ms: int) -> FileLog:
        self._wait_closed((topic.name, partition))
        return FileLog(self.dir_of(topic.name, partition), self.log_config(topic), now_ms=now_ms,
                       topic_id=topic.topic_id, rng=self.segment_rng, **self.log_dir.load_options(topic.name, partition))

    async def prepare_logs(self, topic: "TopicInfo", indexes: list[int] | None = None, *,
                           existing: bool = False) -> None:
        """The new logs of a topic's partitions (all, or `indexes`) made in a worker thread (server/prepared_logs.py)
        for `open` to take; the caller holds `making_logs` and calls `discard_prepared` once it is done. With
        `existing`, the logs whose directory exists are loaded (and recovered) there too."""
        if not self.in_memory and not self.offline_log_dirs:
            now = self.clock()
            indexes = [p.index for p in topic.partitions] if indexes is None else indexes
            await self.prepared.prepare([(topic.name, i) for i in indexes], topic.topic_id,
                                        self.logs.__contains__, lambda key: self._make_file_log(topic, key[1], now),
                                        existing=existing)

    def must_load(self, key: Key) -> bool:
        """Whether opening the partition's log would make or load it here (on disk, neither open nor prepared)."""
        return not self.in_memory and key not in self.logs and key not in self.prepared and not self.offline_log_dirs

    def discard_prepared(self, topic: "TopicInfo", indexes: list[int] | None = None) -> None:
        indexes = [p.index for p in topic.partitions] if indexes is None else indexes
        self.prepared.discard((topic.name, i) for i in indexes)

    def open(self, topic: "TopicInfo", partition: int, now_ms: int):
        """The partition's log: the prepared one, else made (or loaded and recovered) here."""
        cfg = self.log_config(topic)
        prepared = None if self.in_memory else self.prepared.take((topic.name, partition), topic.topic_id)
        if prepared is not None:
            lg = prepared
            lg.config = cfg
        elif self.in_memory:
            lg = MemoryLog(cfg, now_ms=now_ms, rng=self.segment_rng)
        else:
            d = self.dir_of(topic.name, partition)
            try:
                lg = self._make_file_log(topic, partition, now_ms)
            except InconsistentTopicId as exc:  # another topic's records: kept aside, never served here
                aside = self.log_dir.set_aside(d, topic.name, partition)
                log.warning("log.inconsistent_topic_id", partition=d.name, topic_id=str(topic.topic_id),
                            found_topic_id=str(exc.found), moved_to=str(aside),
                            message=f"{exc}: the directory is set aside as {aside.name}, the partition starts empty")
                lg = FileLog(d, cfg, now_ms=now_ms, topic_id=topic.topic_id, rng=self.segment_rng)
        key = (topic.name, partition)  # (one tuple for both maps)
        self.logs[key] = lg
        self.keys[id(lg)] = key
        return lg

    def open_all(self, now_ms: int) -> None:
        """At start-up: open (and recover) every partition the metadata knows."""
        if self.log_dir is not None:
            self.log_dir.startup()
            log.info("log_dir.loading", data_dir=str(self.log_dir.path),
                     clean_shutdown=self.log_dir.had_clean_shutdown)
        if not self.is_replicated:  # replicated: a partition's log opens with its first LeaderAndIsr
            for t in self.state.metadata.topics.values():
                for p in t.partitions:
                    self.open(t, p.index, now_ms)
        # producer ids found in the logs are never handed out again, even if the metadata forgot them
        seen = max((pid for lg in self.logs.values() for pid in lg.producer_state.producers), default=-1)
        self.state.metadata.raise_producer_id_floor(seen + 1)

    # -- topic hooks (ClusterState.hooks) -----------------------------------------------------------
    def on_topic_created(self, topic: "TopicInfo") -> None:
        """Open the new topic's logs; KafkaStorageException when the disk fails (the log dir is then offline)."""
        self.on_partitions_added(topic)

    def on_partitions_added(self, topic: "TopicInfo") -> None:
        self.check_log_dir()
        for p in topic.partitions:
            if (topic.name, p.index) not in self.logs:
                try:
                    self.open(topic, p.index, self.clock())
                except OSError as exc:
                    raise self.handle_log_dir_failure(exc, f"creating the log of {topic.name}-{p.index}") from None

    def on_topic_deleted(self, topic: "TopicInfo") -> None:
        for p in topic.partitions:
            self.remove(topic.name, p.index, delete=True)

    def on_configs_changed(self, topic: "TopicInfo") -> None:
        cfg = self.log_config(topic)
        for p in topic.partitions:
            lg = self.logs.get((topic.name, p.index))
            if lg is not None:
                lg.config = cfg

    # -- closing and deleting logs ------------------------------------------------------------------
    def remove(self, topic: str, partition: int, *, delete: bool) -> None:
        """Close the partition's log (StopReplica, a deleted topic); with `delete`, remove its directory. A log a
        worker is changing (a follower's truncation) is closed once it is done."""
        lg = self.logs.get((topic, partition))
        if lg is not None and lg.busy:
            lg.after_busy.append(lambda: self.remove(topic, partition, delete=delete))
            return
        lg = self.logs.pop((topic, partition), None)
        if lg is not None:
            self.keys.pop(id(lg), None)
            if delete and not self.in_memory:  # not flushed (no fsync, no index written): its files go next
                lg.close_for_deletion()
            elif self.in_memory:
                lg.close()
            else:
                self._close_in_worker((topic, partition), lg)
        if delete and not self.in_memory:
            self._delete_dir(topic, partition)
        self.on_removed((topic, partition))

    def _close_in_worker(self, key: Key, lg) -> None:
        """StopReplica's close of a log (its last writes, fsync and index files: Kafka's LogManager.close of a
        stopped replica) in a worker thread; the log is out of service already. A log of the partition opened again
        meanwhile waits for it (`_wait_closed`, in the worker that loads it), and so does the broker's shutdown."""
        done = self.closing[key] = threading.Event()

        def close() -> None:
            try:
                if lg.close() is False:
                    self.unclean_closes += 1
            except Exception:
                self.unclean_closes += 1
                log.exception("log.close_failed", partition=f"{key[0]}-{key[1]}")
            finally:
                done.set()
                if self.closing.get(key) is done:
                    self.closing.pop(key, None)
        in_worker(close)

    def _wait_closed(self, key: Key) -> None:
        """Wait for a close of the partition's previous log still under way (`_close_in_worker`)."""
        done = self.closing.get(key)
        if done is not None:
            done.wait()

    def wait_closing(self) -> None:
        """Wait for every close under way (the broker's shutdown, in a worker thread)."""
        for done in list(self.closing.values()):
            done.wait()

    def _delete_dir(self, topic: str, partition: int) -> None:
        """Kafka's LogManager.asyncDelete: renamed at once (a new log of the name starts clean); the rename made
        durable and the directory removed in a worker thread (a big log takes a while, and a topic of many
        partitions would fsync the log dir once each on the event loop); a removal a crash cut short is finished
        at the next start."""
        d = self.dir_of(topic, partition)
        if not d.exists():
            return
        try:
            doomed = self.log_dir.set_aside(d, topic, partition, DELETE_DIR_SUFFIX, sync=False)
        except OSError as exc:
            log.warning("log.delete_failed", partition=d.name, error=repr(exc))
            return

        def remove() -> None:
            try:
                fsync_dir(d.parent)
            except OSError as exc:  # the directory is gone at the next start all the same (a -delete name)
                log.warning("log.delete_rename_not_synced", partition=d.name, error=repr(exc))
            shutil.rmtree(doomed, ignore_errors=True)
        in_worker(remove)

    def close(self) -> None:
        """Close (flush) every log; when all of them closed without an error, write the
        checkpoints (recovery points: the log end offsets) and the clean-shutdown marker. An offline
        log dir gets neither (as Kafka's LogManager writes them for live dirs only): its next start recovers."""
        self.wait_closing()
        clean = not self.offline_log_dirs and not self.unclean_closes
        ends = {tp: lg.log_end_offset for tp, lg in self.logs.items()}
        starts = LogDirectory.log_start_offsets_of(self.logs) if self.log_dir is not None else {}
        hws = LogDirectory.high_watermarks_of(self.logs) if self.log_dir is not None and self.is_replicated else {}
        for lg in paced(self.logs.values()):  # (in a worker thread beside the loop: it gets the GIL back quickly)
            try:
                clean = lg.close() is not False and clean
            except Exception:  # closing is best effort at shutdown
                clean = False
                log.exception("log.close_failed")
        self.logs.clear()
        if self.log_dir is None:
            return
        try:
            if clean:
                self.log_dir.write_recovery_points(ends)
                self.log_dir.write_log_start_offsets(starts)
                if self.is_replicated:
                    self.log_dir.write_high_watermarks(hws)
                self.log_dir.write_clean_shutdown()
        except OSError:
            clean = False
            log.exception("log_dir.checkpoint_failed", data_dir=str(self.log_dir.path))
        if not clean:
            log.warning("log_dir.unclean_shutdown", data_dir=str(self.log_dir.path),
                        message="a log could not be flushed: the next start recovers the logs")

    # -- log dir failure --------------------------------------------------------------------------
    def check_log_dir(self) -> None:
        """KafkaStorageException while the data dir is offline (nothing may be created in it)."""
        if self.offline_log_dirs:
            d, what = next(iter(self.offline_log_dirs.items()))
            raise KafkaStorageException(f"Log directory {d} is offline ({what})")

    def handle_log_dir_failure(self, exc: BaseException, what: str) -> KafkaStorageException:
        """A write or fsync in the data dir failed: take it offline, once. Returns the KafkaStorageException for
        the caller to raise or answer."""
        d = str(self.data_dir)
        if d not in self.offline_log_dirs:
            self.offline_log_dirs[d] = f"{what}: {exc}"
            log.error("log_dir.failed", dir=d, what=what, error=str(exc), partitions=len(self.logs),
                      message=f"Stopping serving replicas in dir {d} because the log directory has failed; "
                              "it stays offline until the broker restarts")
            logs = list(self.logs.values())
            self.logs.clear()
            self.keys.clear()
            runs = [lg.fail() for lg in logs]
            self.on_offline()
            self._abandon(runs)
        return KafkaStorageException(f"Log directory {d} is offline ({self.offline_log_dirs[d]})")

    @staticmethod
    def _abandon(runs: list) -> None:
        """Cut and close the failed logs' files in a worker thread (a write under way ends first)."""
        def run_all() -> None:
            for run in runs:
                try:
                    run()
                except Exception:  # best effort: recovery checks what the disk kept at the next start
                    log.exception("log_dir.abandon_failed")
        in_worker(run_all)


def in_worker(fn) -> None:
    """Run `fn` in a worker thread, off the event loop, without waiting for it (inline outside Trio)."""
    async def run() -> None:
        await trio.to_thread.run_sync(fn, abandon_on_cancel=True)
    try:
        trio.lowlevel.spawn_system_task(run)
    except RuntimeError:  # not inside Trio (tools, tests)
        fn()
