"""The cluster metadata snapshot written off the event loop (server/metadata_writer.py): one write for the changes
made while another is in flight, callers answered in the order of their changes once a snapshot holding theirs is
durable, every change not durable undone when a write fails."""
from __future__ import annotations

import threading

import pytest
import trio
import trio.testing

from kafkite.controller.metadata import BrokerInfo, ClusterMetadata, MemoryMetadataStore
from kafkite.server.metadata_writer import MetadataWriter


class HeldStore(MemoryMetadataStore):
    """Saves wait for `gate`; `fail` saves raise ENOSPC; each save's topics and whether it ran on a Trio loop."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.fail = 0
        self.saves: list[list[str]] = []
        self.on_loop: list[bool] = []

    def save(self, snapshot: dict) -> None:
        try:
            trio.lowlevel.current_task()
            self.on_loop.append(True)
        except RuntimeError:
            self.on_loop.append(False)
        self.entered.set()
        assert self.gate.wait(10)
        if self.fail:
            self.fail -= 1
            raise OSError(28, "No space left on device")
        super().save(snapshot)
        self.saves.append(sorted(t["name"] for t in snapshot["topics"]))


def metadata() -> tuple[ClusterMetadata, HeldStore]:
    store = HeldStore()
    md = ClusterMetadata(store)
    md.register_broker(BrokerInfo(1, "127.0.0.1", 9092))
    store.saves.clear()
    store.on_loop.clear()
    store.entered.clear()
    return md, store


async def run_with_writer(md: ClusterMetadata, body) -> None:
    w = MetadataWriter(md)
    async with trio.open_nursery() as n:
        await n.start(w.run)
        await body(w, n)
        n.cancel_scope.cancel()
    assert not md.deferred  # stopped: written at once again


def test_changes_made_during_a_write_go_in_the_next_one_and_are_answered_in_order():
    md, store = metadata()
    made: list[str] = []
    answered: list[str] = []

    async def create(w: MetadataWriter, name: str) -> None:
        md.create_topic(name, [[1]], {})
        made.append(name)
        assert await w.durable(then=lambda: answered.append(name) or name) == name

    async def body(w: MetadataWriter, n: trio.Nursery) -> None:
        store.gate.clear()
        n.start_soon(create, w, "a")
        await trio.to_thread.run_sync(store.entered.wait)  # the first write is in flight, held
        for name in "bcde":
            n.start_soon(create, w, name)
        await trio.testing.wait_all_tasks_blocked()
        assert answered == [] and sorted(md.topics) == list("abcde")  # made, not answered before it is durable
        assert md.published_snapshot()["topics"] == []  # nor shown to the brokers
        store.gate.set()
        with trio.fail_after(10):
            while len(answered) < 5:
                await trio.sleep(0.001)
        assert await w.durable() is None  # nothing pending: at once
        assert w.writes == 2
        assert sorted(t["name"] for t in md.published_snapshot()["topics"]) == list("abcde")
    trio.run(run_with_writer, md, body)
    assert store.saves == [["a"], ["a", "b", "c", "d", "e"]]
    assert store.on_loop == [False, False]  # written in a worker thread
    assert answered == made  # in the order of the changes


def test_a_failed_write_undoes_every_change_not_yet_durable_and_answers_the_error():
    md, store = metadata()
    md.create_topic("kept", [[1]], {})  # written at once (no writer yet)
    errors: dict[str, BaseException] = {}

    async def answer(w: MetadataWriter, name: str, version: int) -> None:
        try:
            await w.durable(version, then=lambda: pytest.fail("answered a change that is not on disk"))
        except OSError as exc:
            errors[name] = exc

    async def body(w: MetadataWriter, n: trio.Nursery) -> None:
        store.gate.clear()
        store.fail = 1
        md.create_topic("new", [[1]], {})
        n.start_soon(answer, w, "new", md.version)
        await trio.to_thread.run_sync(store.entered.wait)  # its write in flight, held (and failing)
        md.set_topic_configs("kept", {"retention.ms": "1"})
        n.start_soon(answer, w, "configs", md.version)
        md.delete_topic("kept")
        n.start_soon(answer, w, "delete", md.version)
        md.allocate_producer_id()
        n.start_soon(answer, w, "pid", md.producer_id_block_version)
        await trio.testing.wait_all_tasks_blocked()
        store.gate.set()
        with trio.fail_after(10):
            while len(errors) < 4:
                await trio.sleep(0.001)
        # undone, newest first: what is visible is what is on disk
        assert sorted(md.topics) == ["kept"] and md.topic("kept").configs == {}
        assert store.producer_id_block_end == 0 and md.producer_id_next_block == 0
        md.create_topic("after", [[1]], {})
        await w.durable()
        assert md.allocate_producer_id() == 0  # the block's ids were never answered: handed out now
        await w.durable(version=md.producer_id_block_version)
        assert store.producer_id_block_end == 1000  # the block's file before the snapshot naming it
    trio.run(run_with_writer, md, body)
    assert all(isinstance(e, OSError) and e.errno == 28 for e in errors.values())
    assert store.saves == [["kept"], ["after", "kept"], ["after", "kept"]]
    assert ClusterMetadata(store).snapshot() == md.snapshot()


def test_a_controller_change_is_written_off_the_loop_and_told_once_written():
    """The controller's change (an election) is written by the worker with what is pending (before: at once, on the
    loop), and the brokers are told (the writer's `publish`) only once it is on disk."""
    md, store = metadata()
    told = []

    async def body(w: MetadataWriter, n: trio.Nursery) -> None:
        w.publish = lambda: told.append(md.durable_version)
        md.create_topic("t", [[1]], {})  # deferred: the writer has not run yet
        p = md.partition("t", 0)
        p.leader_epoch += 1
        md.persist()  # the controller's (an election): written soon
        assert store.saves == [] and md.durable_version < md.version and told == []
        await w.durable()
        assert store.saves == [["t"]] and md.durable_version == md.version
        assert told == [md.version] and w.writes == 1
    trio.run(run_with_writer, md, body)
    assert store.on_loop == [False]


def test_what_is_pending_when_the_writer_stops_is_written_before_it_stops():
    md, store = metadata()

    async def body(w: MetadataWriter, n: trio.Nursery) -> None:
        store.gate.clear()
        md.create_topic("first", [[1]], {})
        await trio.to_thread.run_sync(store.entered.wait)  # its write in flight
        md.create_topic("during", [[1]], {})  # made meanwhile, then the broker stops
        store.gate.set()
    trio.run(run_with_writer, md, body)
    assert store.saves == [["first"], ["during", "first"]]
    assert md.durable_version == md.version


def test_the_metadata_keeps_one_copy_of_each_partition_in_memory():
    """Memory per partition of the controller's metadata with its writes deferred (a broker with a data dir): its
    PartitionInfo objects, and the last durable snapshot kept as JSON text, not as a second copy of dicts (~450
    bytes a partition more: over the bound); an in-memory store keeps text too. What the brokers are told is
    still the durable snapshot, in fresh objects."""
    import gc
    import tracemalloc
    md = ClusterMetadata(MemoryMetadataStore(), node_id=1)
    md.register_broker(BrokerInfo(1, "127.0.0.1", 9092))
    n = 3000

    async def body(w, nursery):
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        md.create_topic("t", [[1]] * n, {})
        md.persist()
        await w.durable()
        gc.collect()
        per_partition = (tracemalloc.get_traced_memory()[0] - before) / n
        tracemalloc.stop()
        assert per_partition < 550, per_partition
        md.create_topic("later", [[1]], {})  # not written yet: the brokers are told the durable snapshot
        told = md.published_snapshot()
        assert [t["name"] for t in told["topics"]] == ["t"] and len(told["topics"][0]["partitions"]) == n
        assert told["topics"][0]["partitions"][5] == {"index": 5, "replicas": [1], "leader": 1, "leader_epoch": 0,
                                                      "isr": [1], "partition_epoch": 0}
        assert md.published_snapshot()["topics"][0] is not told["topics"][0]
    trio.run(run_with_writer, md, body)
