"""Full garbage collections kept short (issue 24 item 2): few GC-tracked objects per log."""
from __future__ import annotations

import gc
import weakref

import pytest

from kafkite.storage.log_config import LogConfig
from kafkite.storage.unified_log import FileLog


def test_an_idle_file_log_holds_few_objects_the_garbage_collector_tracks(tmp_path):
    # a broker holds 1,000s of logs and a full collection goes through every tracked object, stopping the event
    # loop: a new log on disk held ~45 (paths as PosixPath, a Condition and locks per segment, empty lists)
    n = 200
    gc.collect()
    before = len(gc.get_objects())
    logs = [FileLog(tmp_path / f"t-{i}", LogConfig(), now_ms=0) for i in range(n)]
    for lg in logs:
        lg.epochs.assign(0, 0)  # as a leader or follower does
    gc.collect()
    per_log = (len(gc.get_objects()) - before) / n
    for lg in logs:
        lg.close()
    assert per_log <= 12, per_log


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


def _batch() -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    b.append(0, timestamp=1, key=b"k", value=b"v", headers=[])
    return bytes(b.build())
