"""New partitions' logs made in a worker thread before the metadata names them.

Kafka makes a partition's log (LogManager.getOrCreateLog: its directory, first segment, partition.metadata, each
with an fsync) on a request handler thread, never on the network threads. Here the event loop is both, so a
CreateTopics of 1,000 partitions held it for over a second. The broker asks `prepare` for the partitions it is
about to create; their logs are made in a worker thread and wait here, and ReplicaManager._open `take`s them
instead of making them on the loop. Whatever was prepared and not taken (the creation failed after all) is
`discard`ed: closed and its fresh directory removed.

By default only directories that do not exist yet are prepared; `existing=True` loads (and recovers) the logs whose
directory exists too (an in-process cluster's broker, whose logs open with their first leader and ISR), which a
discard then closes, never removes. A caller prepares under its own creation lock, so no two makers ever work in
one directory.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable, Iterable

import structlog
import trio

from ..gil_pacing import paced

log = structlog.get_logger("kafkite.prepared_logs")
Key = tuple[str, int]


class PreparedLogs:
    def __init__(self, directory_of: Callable[[Key], Path], delete_directory: Callable[[Key], None]) -> None:
        self._directory_of = directory_of
        self._delete_directory = delete_directory  # renamed at once, removed in a worker (ReplicaManager's)
        self._ready: dict[Key, object] = {}
        self._topic_ids: dict[Key, object] = {}
        self._loaded: set[Key] = set()  # prepared from a directory that existed: closed, never removed, if unused

    async def prepare(self, keys: Iterable[Key], topic_id, is_open: Callable[[Key], bool],
                      make: Callable[[Key], object], *, existing: bool = False) -> int:
        """Make the logs of `keys` (one topic's, `topic_id`) that are not open and have no directory yet (or, with
        `existing`, whose directory exists too: loaded and recovered) with `make(key)`, in a worker thread -> how
        many."""
        todo = [k for k in keys if k not in self._ready and not is_open(k)]
        fresh = {k for k in todo if not self._directory_of(k).exists()}
        if not existing:
            todo = [k for k in todo if k in fresh]
        if not todo:
            return 0

        def make_all() -> dict[Key, object]:
            made = {}
            for k in paced(todo):  # (~2 ms of Python a log: the GIL given up between them, kafkite/gil_pacing.py)
                try:
                    made[k] = make(k)
                except Exception as exc:  # the usual path makes (or loads) it again and answers its error
                    log.info("log.prepare_failed", partition=f"{k[0]}-{k[1]}", error=repr(exc))
                    if k in fresh:
                        shutil.rmtree(self._directory_of(k), ignore_errors=True)  # fresh: what it began is ours
                    break
            return made
        made = await trio.to_thread.run_sync(make_all)
        self._ready.update(made)
        self._topic_ids.update((k, topic_id) for k in made)
        self._loaded.update(k for k in made if k not in fresh)
        return len(made)

    def __contains__(self, key: Key) -> bool:
        return key in self._ready

    def take(self, key: Key, topic_id):
        """The log prepared for `key` with `topic_id`, or None (one prepared for another topic id is discarded)."""
        lg = self._ready.get(key)
        if lg is None:
            return None
        if self._topic_ids.get(key) != topic_id:
            self.discard([key])
            return None
        del self._ready[key]
        self._topic_ids.pop(key, None)
        self._loaded.discard(key)
        return lg

    def discard(self, keys: Iterable[Key]) -> None:
        """Logs prepared and not taken: closed, their directories renamed at once (a later log of the name starts
        clean) and removed in a worker thread."""
        for k in keys:
            lg = self._ready.pop(k, None)
            self._topic_ids.pop(k, None)
            if k in self._loaded:  # an existing log: kept on disk for its next opening
                self._loaded.discard(k)
                lg.close()
            elif lg is not None:
                lg.close_for_deletion()
                self._delete_directory(k)
