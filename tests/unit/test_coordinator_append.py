"""A coordinator's append (ReplicaManager.append_coordinator_batch): the batch built at the log end with its header,
handed to the log unparsed, is stored exactly as the validating route (`append(..., trusted=True)`) stores the same
records; a topic that would rewrite it (compression.type, LogAppendTime) or refuse it (max.message.bytes) takes that
route instead."""
from __future__ import annotations

import gzip
import types
import uuid

import pytest

from kafkite.config import BrokerConfig
from kafkite.controller.metadata import PartitionInfo, TopicInfo
from kafkite.server.broker import ClusterState
from kafkite.server.replica_manager import ReplicaManager
from kafkite.storage.batch import build_batch, build_batch_with_header, crc_ok, decode_batch, iter_batches, read_header

NOW = 1_700_000_000_000
RECORDS = [(b"key-0", b"value-0"), (b"key-1", None), (b"k" * 70, b"v" * 300)]


@pytest.fixture(params=["memory", "file"])
def rm(request, tmp_path):
    disk = request.param == "file"
    state = ClusterState(BrokerConfig(static={}), data_dir=tmp_path if disk else None, in_memory=not disk)
    rm = ReplicaManager(state, node_id=1, data_dir=tmp_path / "b" if disk else None, in_memory=not disk,
                        replicated=False)
    rm.lifecycle.open_all(0)
    yield rm
    rm.close()


def _open(rm, name: str, configs: dict[str, str] | None = None) -> None:
    leading = PartitionInfo(0, [1], leader=1, leader_epoch=7, isr=[1], partition_epoch=0)
    assert rm.become_replica(TopicInfo(name, uuid.uuid4(), [leading], dict(configs or {})), leading) == 0


def _write_both(rm, configs=None):
    """The same two writes (a plain one, a transactional one) by the new route to topic "a" and by the validating
    route to topic "b" -> the outcomes and each log's bytes."""
    _open(rm, "a", configs)
    _open(rm, "b", configs)
    outs = []
    for pid, epoch in ((-1, -1), (4000, 3)):
        new = rm.append_coordinator_batch("a", 0, RECORDS, NOW, leader_epoch=7, producer_id=pid,
                                          producer_epoch=epoch)
        txn = pid >= 0
        data = build_batch([(k, v, []) for k, v in RECORDS], timestamp_ms=NOW, producer_id=pid,
                           producer_epoch=epoch, base_sequence=0 if txn else -1, is_transactional=txn)
        old = rm.append("b", 0, data, NOW, leader_epoch=7, trusted=True)
        outs.append((new, old))
    logs = [rm.get(t, 0) for t in ("a", "b")]
    return outs, [lg.read(0, 1 << 20) if lg.log_end_offset else b"" for lg in logs], logs


def test_the_built_batch_is_stored_as_the_validating_route_stores_it(rm):
    outs, (a, b), (la, lb) = _write_both(rm)
    for new, old in outs:
        assert (new.error, new.base_offset, new.last_offset) == (old.error, old.base_offset, old.last_offset)
    assert a == b and len(a) > 0
    hs = list(iter_batches(a))
    assert [(h.base_offset, h.last_offset, h.partition_leader_epoch, h.is_transactional, h.producer_id,
             h.base_sequence) for _, h in hs] == [(0, 2, 7, False, -1, -1), (3, 5, 7, True, 4000, 0)]
    assert all(crc_ok(a, pos, h) for pos, h in hs)
    assert [(r.key, r.value) for r in decode_batch(a[:hs[0][1].size])] == RECORDS
    assert la.producer_state.last_entry(4000) is not None  # the transactional batch opened its transaction
    assert la.log_end_offset == lb.log_end_offset == 6


def test_the_builder_header_is_the_one_read_back():
    data, h = build_batch_with_header(RECORDS, base_offset=42, timestamp_ms=NOW, partition_leader_epoch=3,
                                      producer_id=9, producer_epoch=1, base_sequence=0, is_transactional=True,
                                      headerless=True)
    assert h == read_header(data) and h.size == len(data)
    assert data == build_batch([(k, v, []) for k, v in RECORDS], base_offset=42, timestamp_ms=NOW,
                               partition_leader_epoch=3, producer_id=9, producer_epoch=1, base_sequence=0,
                               is_transactional=True)
    with pytest.raises(ValueError):
        build_batch_with_header([], base_offset=0, timestamp_ms=NOW, headerless=True)


@pytest.mark.parametrize("key", [None, b"", b"k" * 63, b"k" * 64])
@pytest.mark.parametrize("value", [None, b"v" * 20, b"v" * 300])
@pytest.mark.parametrize("txn", [False, True])
def test_a_one_record_batch_is_the_one_the_general_builder_makes(key, value, txn):
    """The one-record batch (a commit's, built in one pass) is byte for byte build_batch's, its header read back."""
    kw = dict(base_offset=42, timestamp_ms=NOW, partition_leader_epoch=3, producer_id=9 if txn else -1,
              producer_epoch=1 if txn else -1, base_sequence=0 if txn else -1, is_transactional=txn)
    data, h = build_batch_with_header([(key, value)], headerless=True, **kw)
    assert data == build_batch([(key, value, [])], **kw) and h == read_header(data) and crc_ok(data, 0, h)


@pytest.mark.parametrize("configs, check", [
    ({"compression.type": "gzip"}, lambda h: h.compression == 1),
    ({"message.timestamp.type": "LogAppendTime"}, lambda h: h.log_append_time),
])
def test_a_topic_that_rewrites_batches_takes_the_validating_route(rm, configs, check, monkeypatch):
    # gzip writes the current second into its header: both routes' batches compress at the same pinned second, else
    # two compressions across a second's turn differ in that field (and the CRC) and `a == b` fails now and then
    monkeypatch.setattr(gzip, "time", types.SimpleNamespace(time=lambda: NOW // 1000))
    outs, (a, b), _ = _write_both(rm, configs)
    assert [o.error for pair in outs for o in pair] == [0, 0, 0, 0]
    assert all(check(h) for _, h in iter_batches(a))
    if "compression.type" in configs:
        assert a == b


def test_a_batch_over_max_message_bytes_is_refused_as_the_validating_route_refuses_it(rm):
    outs, (a, b), (la, _) = _write_both(rm, {"max.message.bytes": "200"})
    assert [(new.error, old.error) for new, old in outs] == [(outs[0][1].error,) * 2] * 2
    assert outs[0][0].error != 0 and la.log_end_offset == 0


def test_run_in_worker_runs_off_the_loop_returns_raises_and_waits_out_a_cancel():
    """wait_durable's hop to a worker thread (trio.to_thread.run_sync without its thread renaming)."""
    import threading
    import time

    import trio

    from kafkite.server.replica_manager import run_in_worker

    done = []

    def slow():
        time.sleep(0.05)
        done.append(threading.current_thread().name)

    def boom():
        raise OSError(28, "no space left")

    async def main():
        loop = threading.get_ident()
        assert await run_in_worker(threading.get_ident) != loop
        with pytest.raises(OSError):
            await run_in_worker(boom)
        with trio.move_on_after(0.001):
            await run_in_worker(slow)
        assert len(done) == 1  # the cancelled caller still waited for its job (no write left running unseen)
    trio.run(main)
