"""Recovery as Kafka does it (LogManager, LogLoader, LogSegment.recover, ProducerIdManager).

- A clean stop leaves `.kafka_cleanshutdown` (and the offset checkpoints); the next start takes it
  away and rescans nothing for corruption.
- After a crash (kill -9, or any stop that did not leave the marker) the segments from the one
  holding the recovery point on are recovered: truncated at the first invalid batch, the later
  segments deleted, with WARN lines naming the file, the byte offset and the bytes dropped.
  Segments below the recovery point are not rescanned.
- A partition directory of another topic id is never served under a re-created topic: it is set
  aside as `<topic>-<partition>.<hex>-stray`, and the new topic starts empty.
- Producer ids are never handed out twice, not even after the metadata snapshot is lost.
"""
from __future__ import annotations

import json
import logging
import re
import struct
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import structlog
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import CorruptRecordError
from kafka.protocol.consumer import FetchRequest

from helpers import wait_until
from kafkite.controller.metadata import ClusterMetadata, FileMetadataStore, MemoryMetadataStore
from kafkite.storage.batch import decode_records, iter_batches
from kafkite.storage.log_config import LogConfig
from kafkite.storage.log_manager import CLEAN_SHUTDOWN_FILE, LogDirectory, stray_dir_name
from kafkite.storage.unified_log import FileLog
from kafkite.testing.process import BrokerProcess
from kafkite.testing.runner import BrokerThread
from kafkite.testing.wire_client import WireClient

sys.path.insert(0, str(Path(__file__).parents[1] / "unit"))
from test_storage_log import batch, offsets  # noqa: E402 (tests/unit: a v2 batch builder)

SEGMENT_0 = "00000000000000000000.log"


# -- helpers -------------------------------------------------------------------------------------
def create_topic(bs, name, configs=None):
    a = KafkaAdminClient(bootstrap_servers=bs)
    try:
        a.create_topics([NewTopic(name, 1, 1, topic_configs=configs or {})])
    finally:
        a.close()


def produce_batches(bs, topic, n, *, prefix=b"v", **producer_kw):
    """n records, each acknowledged before the next is sent: one batch each. Their offsets."""
    p = KafkaProducer(bootstrap_servers=bs, acks="all", linger_ms=0, **producer_kw)
    try:
        return [p.send(topic, value=prefix + b"-%d-" % i + b"x" * 100).get(timeout=30).offset for i in range(n)]
    finally:
        p.close()


def consumer_at(bs, topic, offset):
    c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, check_crcs=True)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek(tp, offset)
    return c, tp


def read_offsets(bs, topic, start=0):
    """Offsets from `start` to the partition's end (the high watermark)."""
    c, tp = consumer_at(bs, topic, start)
    try:
        end = c.end_offsets([tp])[tp]
        out = []
        deadline = time.monotonic() + 20
        while c.position(tp) < end and time.monotonic() < deadline:
            for msgs in c.poll(timeout_ms=200).values():
                out += [m.offset for m in msgs]
        return out, end
    finally:
        c.close()


def batch_positions(path):
    """(byte position, header) of each batch of a segment file."""
    return list(iter_batches(path.read_bytes()))


def flip_byte_in_batch(path, pos, h):
    """Flip one byte inside the batch's records (covered by its CRC, not a length or an offset)."""
    raw = bytearray(path.read_bytes())
    raw[pos + h.size - 20] ^= 0x5A
    path.write_bytes(bytes(raw))


def events(lines, name):
    """The key=value log lines of one event, as dicts of their int and str fields."""
    out = []
    for line in lines:
        if f"event='{name}'" not in line:
            continue
        fields = dict(re.findall(r"(\w+)=('[^']*'|-?\d+|\[[^\]]*\])", line))
        out.append({k: v.strip("'") if v.startswith("'") else v if v.startswith("[") else int(v)
                    for k, v in fields.items()})
    return out


# -- a clean stop: nothing rescanned -------------------------------------------------------------
def test_clean_stop_keeps_a_batch_damaged_later_and_consumers_catch_it(tmp_path):
    """Kafka after a clean shutdown does no recovery: LogLoader trusts the segments, so a batch
    whose bytes were damaged on disk after the stop stays in the log and is served as it is; the
    consumer's CRC check (check.crcs, on by default in the Java client and kafka-python) reports it
    and the consumer can seek past it. Nothing is dropped: neither that batch nor the five good
    ones after it, and appends continue after them."""
    data = tmp_path / "data"
    b = BrokerThread(data_dir=data).start()
    try:
        create_topic(b.bootstrap_servers, "t")
        assert produce_batches(b.bootstrap_servers, "t", 7) == list(range(7))
    finally:
        b.stop()
    # Kafka's marker and checkpoints, written at the clean stop
    assert json.loads((data / CLEAN_SHUTDOWN_FILE).read_text()) == {"version": 0, "brokerEpoch": -1}
    assert (data / "recovery-point-offset-checkpoint").read_text() == "0\n1\nt 0 7\n"
    seg = data / "t-0" / SEGMENT_0
    size = seg.stat().st_size
    pos, h = batch_positions(seg)[1]
    flip_byte_in_batch(seg, pos, h)

    with structlog.testing.capture_logs() as logs:
        b = BrokerThread(data_dir=data).start()
    try:
        assert not (data / CLEAN_SHUTDOWN_FILE).exists()  # taken away at start: a crash now is unclean
        assert seg.stat().st_size == size
        assert not [e for e in logs if e["log_level"] == "warning" and e["event"].startswith("log")], logs
        bs = b.bootstrap_servers
        c, tp = consumer_at(bs, "t", 0)
        got = []
        with pytest.raises(CorruptRecordError, match="offset 1"):
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                got += [m.offset for msgs in c.poll(timeout_ms=200).values() for m in msgs]
        c.close()
        assert got == [0]
        assert read_offsets(bs, "t", start=2) == ([2, 3, 4, 5, 6], 7)  # the five good batches after it
        assert produce_batches(bs, "t", 1) == [7]
    finally:
        b.stop()


# -- a crash: recovery from the recovery point -----------------------------------------------------
def test_crash_recovery_truncates_at_the_corrupt_batch_with_a_warning(tmp_path):
    """kill -9, then a batch in the middle of the active segment damaged: the next start recovers
    the segment and truncates it at that batch (Kafka's LogSegment.recover), dropping it and every
    batch after it, and says so in WARN lines naming the file, the byte offset and the bytes
    dropped. The log goes on from there."""
    data = tmp_path / "data"
    b = BrokerProcess(data_dir=data).start()
    try:
        create_topic(b.bootstrap_servers, "t")
        assert produce_batches(b.bootstrap_servers, "t", 7) == list(range(7))
    finally:
        b.kill()
    assert not (data / CLEAN_SHUTDOWN_FILE).exists()
    seg = data / "t-0" / SEGMENT_0
    size = seg.stat().st_size
    pos, h = batch_positions(seg)[1]
    flip_byte_in_batch(seg, pos, h)

    b = BrokerProcess(data_dir=data).start()
    try:
        lines = list(b.log_tail)
        [loading] = events(lines, "log_dir.loading")
        assert "clean_shutdown=False" in next(ln for ln in lines if "log_dir.loading" in ln)
        assert loading["data_dir"] == str(data)
        [bad] = events(lines, "log_segment.invalid_messages")
        assert bad["file"] == str(seg) and bad["byte_offset"] == pos and bad["offset"] == 1
        assert bad["bytes_dropped"] == size - pos
        assert "level='warning'" in next(ln for ln in lines if "log_segment.invalid_messages" in ln)
        assert f"Found invalid messages in log segment {seg} at byte offset {pos}: Record is corrupt" in bad["message"]
        [trunc] = events(lines, "log.recovery_truncated")
        assert (trunc["partition"], trunc["truncated_to_offset"], trunc["bytes_dropped"]) == ("t-0", 1, size - pos)
        assert seg.stat().st_size == pos
        assert read_offsets(b.bootstrap_servers, "t") == ([0], 1)
        assert produce_batches(b.bootstrap_servers, "t", 2) == [1, 2]
    finally:
        b.stop()
    assert (data / CLEAN_SHUTDOWN_FILE).exists()


def test_segments_below_the_recovery_point_are_not_rescanned(tmp_path):
    """recovery-point-offset-checkpoint is written every log.flush.offset.checkpoint.interval.ms;
    after a crash only the segments from the one holding the recovery point are recovered. A
    batch damaged in an older segment is not found then (Kafka neither), one in the active
    segment is."""
    data = tmp_path / "data"
    b = BrokerProcess(data_dir=data, overrides={"log.flush.offset.checkpoint.interval.ms": "100"}).start()
    try:
        create_topic(b.bootstrap_servers, "t", {"segment.bytes": "1000"})
        produce_batches(b.bootstrap_servers, "t", 20)
        bases = sorted(int(p.stem) for p in (data / "t-0").glob("*.log"))
        assert len(bases) >= 3
        checkpoint = data / "recovery-point-offset-checkpoint"
        wait_until(lambda: checkpoint.exists() and checkpoint.read_text() == f"0\n1\nt 0 {bases[-1]}\n", timeout=30,
                   what=lambda: f"the recovery point at the active segment {bases[-1]} (segments {bases}; the "
                                f"checkpoint: {checkpoint.read_text() if checkpoint.exists() else None!r}; the "
                                f"segments now: {sorted(int(p.stem) for p in (data / 't-0').glob('*.log'))}; the "
                                f"broker {'running' if b.proc.poll() is None else f'exited {b.proc.poll()}'}; its "
                                f"warnings: {[ln for ln in b.log_tail if 'warn' in ln.lower() or 'error' in ln.lower()]})")
    finally:
        b.kill()
    old, active = data / "t-0" / SEGMENT_0, data / "t-0" / f"{bases[-1]:020d}.log"
    old_size = old.stat().st_size
    flip_byte_in_batch(old, *batch_positions(old)[0])
    flip_byte_in_batch(active, *batch_positions(active)[0])

    b = BrokerProcess(data_dir=data).start()
    try:
        lines = list(b.log_tail)
        assert [e["segment"] for e in events(lines, "log.recovering_segment")] == [bases[-1]]
        [bad] = events(lines, "log_segment.invalid_messages")
        assert bad["file"] == str(active) and bad["byte_offset"] == 0
        assert old.stat().st_size == old_size  # not rescanned: not truncated
        assert active.stat().st_size == 0
        _, end = read_offsets(b.bootstrap_servers, "t", start=bases[1])
        assert end == bases[-1]
    finally:
        b.stop()


# -- a damaged offset index ------------------------------------------------------------------------
def fetch_at(w, topic, offset, max_bytes):
    """One Fetch (v12) of `offset` (a whole batch at least): (error code, high watermark, offsets)."""
    T = FetchRequest.FetchTopic
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
                       session_id=0, session_epoch=-1, topics=[T(topic=topic, topic_id=None, partitions=[
                           T.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=offset,
                                            last_fetched_epoch=-1, log_start_offset=-1,
                                            partition_max_bytes=max_bytes)])],
                       forgotten_topics_data=[], rack_id="")
    p = w.request(req, 12).responses[0].partitions[0]
    return p.error_code, p.high_watermark, [r.offset for r in decode_records(p.records or b"")]


def _forty_batches_stopped(tmp_path):
    """A data dir whose topic t holds 40 one-record batches in segments of 3000 bytes, an index entry every 300
    bytes, after a clean stop."""
    data = tmp_path / "data"
    b = BrokerThread(data_dir=data).start()
    try:
        create_topic(b.bootstrap_servers, "t", {"segment.bytes": "3000", "index.interval.bytes": "300"})
        assert produce_batches(b.bootstrap_servers, "t", 40) == list(range(40))
    finally:
        b.stop()
    return data


# where the damaged entry points, bytes into its batch: without the check, a Fetch there answered no
# error and no records (1), broke the connection on a garbage length (30), or skipped records (61)
@pytest.mark.parametrize("shift", [1, 30, 61])
def test_an_index_entry_damaged_after_a_clean_stop_is_passed_over_and_rebuilt(tmp_path, shift):
    """After a clean stop the older segments' .index files are loaded as they are (Kafka too). One entry
    is damaged so that it points inside a batch -- the file still passes the sanity check. A consumer
    fetching one batch at a time from offset 0 (so that it fetches at every offset, through the damaged
    entry) gets every record; a WARN line names the index file and the entry, and the index is rebuilt
    on disk. Then, damaged again: a Fetch at every offset below the high watermark answers the batch
    holding it, never an empty answer without an error (a consumer there would spin silently)."""
    data = _forty_batches_stopped(tmp_path)
    idx = data / "t-0" / "00000000000000000000.index"
    good = idx.read_bytes()
    ents = [struct.unpack_from(">ii", good, i) for i in range(0, len(good), 8)]
    assert len(ents) >= 3
    seg1 = sorted(int(p.stem) for p in (data / "t-0").glob("*.log"))[1]
    k = len(ents) // 2
    ents[k] = (ents[k][0], ents[k][1] + shift)  # inside the batch starting there
    damaged = b"".join(struct.pack(">ii", r, p) for r, p in ents)

    for phase in ("consumer", "fetch"):
        assert (data / CLEAN_SHUTDOWN_FILE).exists()
        idx.write_bytes(damaged)
        with structlog.testing.capture_logs() as logs:
            b = BrokerThread(data_dir=data).start()
            try:
                bs = b.bootstrap_servers
                if phase == "consumer":
                    c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, max_partition_fetch_bytes=1)
                    tp = TopicPartition("t", 0)
                    c.assign([tp])
                    c.seek(tp, 0)
                    got, deadline = [], time.monotonic() + 15
                    while len(got) < 40 and time.monotonic() < deadline:
                        got += [m.offset for msgs in c.poll(timeout_ms=200).values() for m in msgs]
                    c.close()
                    assert got == list(range(40))
                else:
                    w = WireClient.connect(bs)
                    try:
                        for max_bytes in (1 << 20, 1):  # up to the segment's end, and one batch
                            for off in range(seg1 + 2):
                                err, hw, got = fetch_at(w, "t", off, max_bytes)
                                assert (err, hw) == (0, 40) and got and got[0] <= off <= got[-1], \
                                    (off, max_bytes, err, got)
                    finally:
                        w.close()
                wait_until(lambda: idx.read_bytes() == good, timeout=30, what="the index rebuilt")
            finally:
                b.stop()
        warnings = [e for e in logs if e["log_level"] == "warning"]
        # Only this log's lines: a thread left by an earlier test in this process may log meanwhile.
        ours = [e for e in warnings if e["event"].startswith("log_segment.")]
        assert len(ours) == 1, warnings
        [warn] = ours
        assert warn["event"] == "log_segment.index_corrupt" and warn["file"] == str(idx)
        assert (warn["entry_offset"], warn["position"]) == ents[k]
        assert idx.read_bytes() == good


def test_a_batch_header_damaged_after_a_clean_stop_is_answered_corrupt_message(tmp_path):
    """A batch whose header (its length) was damaged after a clean stop, in a segment not rescanned:
    a Fetch whose read must cross it answers CORRUPT_MESSAGE (Kafka's CorruptRecordException on the read
    path), never an empty answer, and the consumer raises it; the batches before it and those after the
    next index entry are served."""
    data = _forty_batches_stopped(tmp_path)
    seg = data / "t-0" / SEGMENT_0
    raw = (data / "t-0" / "00000000000000000000.index").read_bytes()
    indexed = {struct.unpack_from(">ii", raw, i) for i in range(0, len(raw), 8)}
    pos, h = next((p, h) for p, h in batch_positions(seg) if h.base_offset >= 10 and p not in {q for _, q in indexed})
    after = min(r for r, q in indexed if q > pos) + 1
    damaged = bytearray(seg.read_bytes())
    damaged[pos + 8:pos + 12] = struct.pack(">i", -12)  # batchLength: a batch of 0 bytes
    seg.write_bytes(bytes(damaged))
    with structlog.testing.capture_logs():
        b = BrokerThread(data_dir=data).start()
        try:
            bs = b.bootstrap_servers
            w = WireClient.connect(bs)
            try:
                assert fetch_at(w, "t", h.base_offset, 1 << 20) == (2, 40, [])  # CORRUPT_MESSAGE
                assert fetch_at(w, "t", h.base_offset - 1, 1 << 20) == (0, 40, [h.base_offset - 1])
                err, hw, got = fetch_at(w, "t", after, 1)
                assert (err, hw) == (0, 40) and got[0] <= after <= got[-1]
            finally:
                w.close()
            c, tp = consumer_at(bs, "t", h.base_offset)
            with pytest.raises(CorruptRecordError):
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    c.poll(timeout_ms=200)
            c.close()
        finally:
            b.stop()


# -- topic ids -------------------------------------------------------------------------------------
def test_lost_metadata_snapshot_neither_serves_old_records_nor_reuses_producer_ids(tmp_path):
    """The metadata snapshot is lost; the topic is re-created under its old name (a new topic id):
    it is empty, the old records are not served, the old directory is set aside as Kafka's stray
    log `<topic>-<partition>.<hex>-stray` with a WARN line. A new idempotent producer gets a
    producer id never handed out before (the block file survived) and produces fine."""
    data = tmp_path / "data"
    b = BrokerThread(data_dir=data).start()
    try:
        create_topic(b.bootstrap_servers, "t")
        produce_batches(b.bootstrap_servers, "t", 5, enable_idempotence=True)
        old_pids = set(b.state.replicas.get("t", 0).producer_state.producers)
        old_id = b.state.metadata.topic("t").topic_id
    finally:
        b.stop()
    assert old_pids == {0}
    (data / "kafkite-metadata.json").unlink()

    with structlog.testing.capture_logs() as logs:
        b = BrokerThread(data_dir=data).start()
        try:
            bs = b.bootstrap_servers
            create_topic(bs, "t")
            assert b.state.metadata.topic("t").topic_id != old_id
            assert read_offsets(bs, "t") == ([], 0)
            [aside] = list(data.glob("t-0.*-stray"))
            assert re.fullmatch(r"t-0\.[0-9a-f]{32}-stray", aside.name)
            assert (aside / SEGMENT_0).stat().st_size > 0 and (aside / "partition.metadata").exists()
            [warn] = [e for e in logs if e["event"] == "log.inconsistent_topic_id"]
            assert warn["log_level"] == "warning" and warn["moved_to"] == str(aside)
            assert warn["found_topic_id"] == str(old_id)
            assert "but log already contained topic ID" in warn["message"]
            assert produce_batches(bs, "t", 3, enable_idempotence=True) == [0, 1, 2]
            new_pids = set(b.state.replicas.get("t", 0).producer_state.producers)
            assert new_pids and not new_pids & old_pids and min(new_pids) >= 1000
        finally:
            b.stop()


def test_producer_ids_above_those_in_the_logs_after_a_stale_snapshot(tmp_path):
    """A snapshot restored from before the last block was taken, and no block file: the next
    block still starts above every producer id the logs hold."""
    data = tmp_path / "data"
    b = BrokerThread(data_dir=data).start()
    try:
        create_topic(b.bootstrap_servers, "t")
        produce_batches(b.bootstrap_servers, "t", 2, enable_idempotence=True)
        b.call(lambda: b.state.metadata.raise_producer_id_floor(5000))  # ids far up, as after many restarts
        produce_batches(b.bootstrap_servers, "t", 2, enable_idempotence=True)
        pids = set(b.state.replicas.get("t", 0).producer_state.producers)
    finally:
        b.stop()
    assert pids == {0, 5000}
    snap = json.loads((data / "kafkite-metadata.json").read_text())
    snap["producer_id_next_block"] = 0
    (data / "kafkite-metadata.json").write_text(json.dumps(snap))
    (data / "latest_producer_id_block").unlink()
    b = BrokerThread(data_dir=data).start()
    try:
        produce_batches(b.bootstrap_servers, "t", 2, enable_idempotence=True)
        assert max(b.state.replicas.get("t", 0).producer_state.producers) == 5001
    finally:
        b.stop()


# -- the storage side, without a broker ----------------------------------------------------------
@contextmanager
def info_logs():
    """The log events, INFO ones included (the tests' own set-up shows WARNING and above)."""
    old = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    try:
        with structlog.testing.capture_logs() as logs:
            yield logs
    finally:
        structlog.configure(**old)


def fill(d, n, cfg):
    lg = FileLog(d, cfg)
    for i in range(n):
        lg.append(batch(2, ts=1000 + i), now_ms=0)
    return lg


def test_loader_after_clean_and_unclean_shutdown(tmp_path):
    d = tmp_path / "t-0"
    lg = fill(d, 6, LogConfig())
    lg.close()
    seg = d / SEGMENT_0
    (pos, h) = batch_positions(seg)[2]
    flip_byte_in_batch(seg, pos, h)
    size = seg.stat().st_size
    with structlog.testing.capture_logs() as logs:
        clean = FileLog(d, LogConfig(), had_clean_shutdown=True, recovery_point=12)
    assert clean.log_end_offset == 12 and seg.stat().st_size == size and not logs
    assert offsets(clean.read(6, 1 << 20))[:2] == [6, 7]  # served as it is
    clean.close()
    with structlog.testing.capture_logs() as logs:
        crashed = FileLog(d, LogConfig(), recovery_point=12)
    assert crashed.log_end_offset == 4 and seg.stat().st_size == pos
    bad, trunc = [e for e in logs if e["log_level"] == "warning"]
    assert (bad["event"], bad["file"], bad["byte_offset"], bad["offset"], bad["bytes_dropped"]) == \
        ("log_segment.invalid_messages", str(seg), pos, 4, size - pos)
    assert (trunc["event"], trunc["truncated_to_offset"], trunc["segments_deleted"]) == ("log.recovery_truncated", 4, [])


def test_loader_recovers_from_the_recovery_point_and_deletes_later_segments(tmp_path):
    d = tmp_path / "t-0"
    cfg = LogConfig(segment_bytes=600, index_interval_bytes=150)
    lg = fill(d, 20, cfg)
    bases = [s.base for s in lg.segments]
    lg.close()
    assert len(bases) >= 4
    first = d / SEGMENT_0
    flip_byte_in_batch(first, *batch_positions(first)[0])
    # the recovery point in the third segment: the first two are trusted
    with info_logs() as logs:
        lg = FileLog(d, cfg, recovery_point=bases[2] + 1)
    assert lg.log_end_offset == 40 and [s.base for s in lg.segments] == bases
    assert [e["segment"] for e in logs if e["event"] == "log.recovering_segment"] == bases[2:]
    lg.close()
    # no recovery point (no checkpoint entry): everything recovered, the log ends before the bad batch
    sizes = sum((d / f"{b:020d}.log").stat().st_size for b in bases)
    with structlog.testing.capture_logs() as logs:
        lg = FileLog(d, cfg)
    assert lg.log_end_offset == 0 and [s.base for s in lg.segments] == [0]
    [trunc] = [e for e in logs if e["event"] == "log.recovery_truncated"]
    assert trunc["bytes_dropped"] == sizes and trunc["segments_deleted"] == bases[1:]
    assert sorted(p.name for p in d.glob("*.log")) == [SEGMENT_0]


def test_log_directory_files(tmp_path):
    ld = LogDirectory(tmp_path)
    ld.startup()
    assert not ld.had_clean_shutdown and ld.load_options("t", 0) == \
        {"had_clean_shutdown": False, "recovery_point": 0, "log_start_offset": 0}
    ld.write_recovery_points({("t", 0): 5, ("a.b", 12): 7})
    ld.write_log_start_offsets({("t", 0): 3})
    ld.write_clean_shutdown()
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n2\na.b 12 7\nt 0 5\n"
    assert not list(tmp_path.glob("*.tmp"))
    ld2 = LogDirectory(tmp_path)
    ld2.startup()
    assert ld2.had_clean_shutdown and not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert ld2.load_options("t", 0) == {"had_clean_shutdown": True, "recovery_point": 5, "log_start_offset": 3}
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n2\nt 0 5\n")  # torn: ignored, all recovered
    ld2.startup()
    assert not ld2.had_clean_shutdown and ld2.recovery_points == {}
    d = tmp_path / "t-0"
    d.mkdir()
    aside = ld2.set_aside(d, "t", 0)
    assert not d.exists() and re.fullmatch(r"t-0\.[0-9a-f]{32}-stray", aside.name)
    assert len(stray_dir_name("x" * 249, 3)) == 255  # Kafka caps the name, cutting the topic
    # a deletion a crash cut short (renamed, not yet removed) is finished at the next start; strays are kept
    d.mkdir()
    (d / "00000000000000000000.log").write_bytes(b"x")
    doomed = ld2.set_aside(d, "t", 0, "-delete")
    assert re.fullmatch(r"t-0\.[0-9a-f]{32}-delete", doomed.name)
    ld2.startup()
    assert not doomed.exists() and aside.exists()


def test_a_deleted_topics_directories_are_renamed_at_once_and_removed_off_the_event_loop(tmp_path):
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafkite.testing.runner import BrokerThread
    with BrokerThread(data_dir=tmp_path) as b:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
        try:
            admin.create_topics([NewTopic("gone", 2, 1)])
            p = KafkaProducer(bootstrap_servers=b.bootstrap_servers)
            for i in range(50):
                p.send("gone", b"x" * 1000, partition=i % 2)
            p.flush()
            p.close()
            assert sorted(x.name for x in tmp_path.glob("gone-*")) == ["gone-0", "gone-1"]
            admin.delete_topics(["gone"])
            assert not (tmp_path / "gone-0").exists() and not (tmp_path / "gone-1").exists()
            deadline = time.monotonic() + 10
            while list(tmp_path.glob("gone-*")) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert list(tmp_path.glob("gone-*")) == []
        finally:
            admin.close()


def test_producer_id_blocks_survive_a_lost_snapshot(tmp_path):
    md = ClusterMetadata(FileMetadataStore(tmp_path))
    assert [md.allocate_producer_id() for _ in range(3)] == [0, 1, 2]
    assert json.loads((tmp_path / "latest_producer_id_block").read_text()) == \
        {"version": 1, "broker": 1, "block_start": "0", "block_end": "999"}
    (tmp_path / "kafkite-metadata.json").unlink()
    md2 = ClusterMetadata(FileMetadataStore(tmp_path))
    assert md2.allocate_producer_id() == 1000
    mem = ClusterMetadata(MemoryMetadataStore())
    mem.raise_producer_id_floor(7)
    assert mem.allocate_producer_id() == 7
    mem.raise_producer_id_floor(500)  # above the id in use: that block is given up
    assert mem.allocate_producer_id() == 1007
