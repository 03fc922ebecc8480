"""Full garbage collections kept short (issue 24 item 2): few GC-tracked objects per log, and kafkite.gc_freeze."""
from __future__ import annotations

import gc
import weakref

import pytest

from kafkite import gc_freeze
from kafkite.storage.log_config import LogConfig
from kafkite.storage.unified_log import FileLog


def test_an_idle_file_log_holds_few_objects_the_garbage_collector_tracks(tmp_path):
    # a broker holds 1,000s of logs and a full collection goes through every tracked object, stopping the event
    # loop: a new log on disk held ~45 (paths as PosixPath, a Condition and locks per segment, empty lists)
    n, config = 200, LogConfig()
    gc.collect()
    before = len(gc.get_objects())
    logs = [FileLog(tmp_path / f"t-{i}", config, now_ms=0) for i in range(n)]
    for lg in logs:
        lg.epochs.assign(0, 0)  # as a leader or follower does
    gc.collect()
    per_log = (len(gc.get_objects()) - before) / n
    for lg in logs:
        lg.close()
    assert per_log <= 12, per_log  # 10: the log, its segment and 2 indexes, epoch cache (+ lock, list), 4 others


def test_a_file_log_still_works_after_its_lazy_parts_are_made(tmp_path):
    lg = FileLog(tmp_path / "t-0", LogConfig(), now_ms=0)
    lg.append(_batch(), now_ms=1, defer_flush=True)
    assert lg.high_watermark == 0  # the deferred write and fsync still to come
    target, run = lg.deferred_flush()
    run()
    lg.mark_flushed(target)
    assert lg.high_watermark == 1
    assert lg.active.log_path.name == "00000000000000000000.log"
    assert lg.active.log_path.stat().st_size == lg.active.size > 0
    assert lg.read(0, 1 << 20)
    lg.close()



def test_a_partition_keeps_its_replicas_and_isr_in_objects_the_garbage_collector_does_not_track():
    # server/partition.py: as lists, a partition's replicas and ISR were 2 tracked objects per replica (6,000 for
    # 3 brokers x 1,000 partitions); as tuples of ints, the collector stops tracking them at its next pass
    from kafkite.server.partition import Partition
    from kafkite.storage.unified_log import MemoryLog
    n, config = 200, LogConfig()
    logs = [MemoryLog(config) for _ in range(n)]
    gc.collect()
    before = len(gc.get_objects())
    parts = [Partition("t", i, 1, logs[i]) for i in range(n)]
    for i, p in enumerate(parts):
        if i % 2:
            p.make_follower(2, 0, 0, [2, 1, 3], [2, 1, 3])
        else:
            p.make_leader(0, 0, [1, 2, 3], [1, 2, 3], now_ms=0)
            p.apply_isr([1, 2], 1)
    gc.collect()
    per_partition = (len(gc.get_objects()) - before) / n
    assert per_partition <= 2.6, per_partition  # the Partition, a leader's remotes dict and 2 Replicas (were +2)
    assert parts[0].isr == (1, 2) and parts[0].maximal_isr == (1, 2) and parts[1].replicas == (2, 1, 3)
    parts[0].pending_isr = [1, 2, 3]
    assert parts[0].maximal_isr == [1, 2, 3]

def _batch() -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    b.append(0, timestamp=1, key=b"k", value=b"v", headers=[])
    return bytes(b.build())


class _Cycle:
    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def no_frozen():
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_a_part_made_once_is_one_object_for_every_thread_and_then_a_plain_attribute():
    """log_segment.MadeOnce: threads asking for a log's lock at once all get the same one; once made it is in the
    instance's dict, where a read finds it without the descriptor."""
    import threading
    from kafkite.storage.log_segment import MadeOnce

    made = []

    class Part:
        lock = MadeOnce(lambda: made.append(threading.Lock()) or made[-1])

    for _ in range(20):
        made.clear()
        part, got = Part(), []
        start = threading.Barrier(8)

        def ask():
            start.wait()
            got.append(part.lock)
        threads = [threading.Thread(target=ask) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(made) == 1 and all(g is made[0] for g in got)
        assert vars(part) == {"lock": made[0]}
    assert isinstance(Part.lock, MadeOnce)


def test_survivors_of_a_full_collection_are_frozen_and_given_back_after_refresh_s(no_frozen):
    now = [0.0]
    hook = gc_freeze.FreezeAfterFullCollections(refresh_s=60, clock=lambda: now[0])
    keep = _Cycle()
    hook("stop", {"generation": 1})  # a young collection: nothing frozen
    assert gc.get_freeze_count() == 0
    hook("stop", {"generation": 2})
    assert gc.get_freeze_count() > 0 and hook.frozen == 1
    # a cycle frozen alive, then dropped: not collected while frozen...
    ref = weakref.ref(keep)
    del keep
    gc.collect()
    assert ref() is not None
    # ...until refresh_s later the frozen objects are given back: the next full collection frees it
    now[0] = 61.0
    hook("stop", {"generation": 2})
    assert hook.refreshes == 1 and gc.get_freeze_count() == 0
    gc.collect()
    assert ref() is None


def test_install_freezes_after_each_full_collection_and_uninstall_gives_everything_back(no_frozen):
    assert gc_freeze._installed is None  # nothing in the test process installs it: the host's GC is left alone
    hook = gc_freeze.install()
    try:
        assert gc_freeze.install() is hook and gc.callbacks.count(hook) == 1
        gc.collect()
        assert gc.get_freeze_count() > 0 and hook.frozen == 1
        assert gc_freeze.settle() and hook.frozen == 2  # (kafkite serve's, once ready)
    finally:
        gc_freeze.uninstall()
    assert hook not in gc.callbacks and gc.get_freeze_count() == 0
    assert not gc_freeze.settle()  # not installed: the host process's GC left alone


@pytest.mark.parametrize("raw, expected", [("", True), ("0", False), ("off", False), ("1", True), ("on", True)])
def test_kafkite_gc_freeze_env(monkeypatch, raw, expected):
    monkeypatch.setenv(gc_freeze.ENV, raw)
    assert gc_freeze.enabled_from_env() is expected


def test_kafkite_gc_freeze_env_rejects_other_values(monkeypatch):
    monkeypatch.setenv(gc_freeze.ENV, "maybe")
    with pytest.raises(ValueError):
        gc_freeze.enabled_from_env()


@pytest.mark.parametrize("flag, env, installed", [(None, "", True), ("off", "", False), ("on", "0", True),
                                                  (None, "0", False)])
def test_kafkite_serve_installs_the_gc_freeze_unless_told_not_to(monkeypatch, flag, env, installed):
    from kafkite import app
    from kafkite.cli import build_parser
    calls = []
    monkeypatch.setattr(gc_freeze, "install", lambda: calls.append(1))
    monkeypatch.setenv(gc_freeze.ENV, env)
    args = build_parser().parse_args(["serve", "--in-memory"] + ([] if flag is None else ["--gc-freeze", flag]))
    assert app.install_gc_freeze(None if args.gc_freeze is None else args.gc_freeze == "on") is installed
    assert calls == ([1] if installed else [])


def test_kafkite_serve_settles_the_gc_freeze_once_ready(monkeypatch):
    """`kafkite serve` runs the process's first full collection (kafkite.gc_freeze.settle) right after its ready
    line, not at some later moment while it serves."""
    import trio
    from kafkite import app
    from kafkite.config import BrokerConfig
    events = []
    monkeypatch.setattr(gc_freeze, "install", lambda: events.append("install"))
    monkeypatch.setattr(gc_freeze, "settle", lambda: events.append("settle"))
    monkeypatch.setattr(app, "_ready", lambda *a: events.append("ready"))

    async def main():
        async with trio.open_nursery() as n:
            config = BrokerConfig(static={"listeners": "PLAINTEXT://127.0.0.1:0"})
            await n.start(lambda task_status: app.serve(config, data_dir=None, in_memory=True, gc_freeze=True,
                                                        task_status=task_status))
            await trio.sleep(0)
            n.cancel_scope.cancel()
    trio.run(main)
    assert events == ["install", "ready", "settle"]
