"""Partition logs: Kafka's segment files, or memory, behind one interface.

On disk a partition is a directory `<topic>-<partition>/` holding segments
`<20-digit base offset>.log` (v2 record batches exactly as on the wire),
`.index` (8-byte entries: relative last offset of an appended batch, file
position of that batch, one every `index.interval.bytes`) and `.timeindex`
(12-byte entries: max timestamp so far, relative offset), plus Kafka's
`leader-epoch-checkpoint` text file and a `log-start-offset` checkpoint.

Recovery on open: every batch of the last segment is re-checked (length and
CRC32C); a torn tail is truncated away and the indexes of that segment are
rebuilt; the index of an older segment is rebuilt when missing or stale.
Durability: the active segment is fsynced after every `flush.messages` records
(1 by default here: an acknowledged write is on disk).
"""
from __future__ import annotations

import bisect
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from .batch import (crc_ok, decode_batch, iter_batches, patch_base_offset, patch_partition_leader_epoch,
                    read_header, rebuild_batch, set_log_append_time)
from .producer_state import ProducerStateManager

LONG_MAX = 9223372036854775807


class OffsetOutOfRange(Exception):
    pass


@dataclass
class LogConfig:
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000
    retention_bytes: int = -1
    flush_interval_messages: int = 1
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3600000
    cleanup_policy: tuple[str, ...] = ("delete",)
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    min_insync_replicas: int = 1

    @classmethod
    def from_topic_configs(cls, c: dict[str, str]) -> "LogConfig":
        def i(name, default):
            return int(c[name]) if name in c and c[name] not in (None, "") else default
        return cls(
            segment_bytes=i("segment.bytes", cls.segment_bytes),
            segment_ms=i("segment.ms", cls.segment_ms),
            index_interval_bytes=i("index.interval.bytes", cls.index_interval_bytes),
            retention_ms=i("retention.ms", cls.retention_ms),
            retention_bytes=i("retention.bytes", cls.retention_bytes),
            flush_interval_messages=i("flush.messages", cls.flush_interval_messages),
            max_message_bytes=i("max.message.bytes", cls.max_message_bytes),
            message_timestamp_type=c.get("message.timestamp.type") or "CreateTime",
            message_timestamp_before_max_ms=i("message.timestamp.before.max.ms", LONG_MAX),
            message_timestamp_after_max_ms=i("message.timestamp.after.max.ms", 3600000),
            cleanup_policy=tuple(x.strip() for x in (c.get("cleanup.policy") or "delete").split(",") if x.strip()),
            delete_retention_ms=i("delete.retention.ms", cls.delete_retention_ms),
            min_compaction_lag_ms=i("min.compaction.lag.ms", 0),
            min_insync_replicas=i("min.insync.replicas", 1),
        )


@dataclass
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time_ms: int
    log_start_offset: int


class LeaderEpochCache:
    """(leader epoch, start offset) pairs, Kafka's leader-epoch-checkpoint."""

    def __init__(self, path: Path | None):
        self.path = path
        self.entries: list[tuple[int, int]] = []
        if path is not None and path.exists():
            lines = path.read_text().split("\n")
            try:
                n = int(lines[1])
                self.entries = [tuple(map(int, ln.split())) for ln in lines[2:2 + n]]  # type: ignore[misc]
            except (ValueError, IndexError):
                self.entries = []

    def assign(self, epoch: int, start_offset: int) -> None:
        if self.entries and epoch <= self.entries[-1][0]:
            return
        self.entries.append((epoch, start_offset))
        self._save()

    def truncate_from_end(self, end_offset: int) -> None:
        before = len(self.entries)
        self.entries = [e for e in self.entries if e[1] < end_offset]
        if len(self.entries) != before:
            self._save()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        if not self.entries:
            return -1, -1
        if epoch >= self.entries[-1][0]:
            return self.entries[-1][0], log_end_offset
        if epoch < self.entries[0][0]:
            return -1, -1
        for i, (e, _start) in enumerate(self.entries):
            if e > epoch:
                return self.entries[i - 1][0], self.entries[i][1]
        return self.entries[-1][0], log_end_offset

    def _save(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("0\n%d\n%s" % (len(self.entries), "".join(f"{e} {o}\n" for e, o in self.entries)))
        os.replace(tmp, self.path)


# -- the shared logic -------------------------------------------------------------------------
class _LogBase:
    config: LogConfig
    log_start_offset: int
    log_end_offset: int

    def __init__(self) -> None:
        self.producer_state = ProducerStateManager()
        self._hw: int | None = None

    @property
    def high_watermark(self) -> int:
        return self.log_end_offset if self._hw is None else min(self._hw, self.log_end_offset)

    @high_watermark.setter
    def high_watermark(self, v: int) -> None:
        self._hw = v

    def _prepare(self, buf: bytearray, now_ms: int, leader_epoch: int) -> tuple[list, int, int]:
        """Assign offsets (patch baseOffset), stamp the leader epoch and LogAppendTime."""
        offset = self.log_end_offset
        lat = -1
        headers = []
        for pos, h in list(iter_batches(buf)):
            patch_base_offset(buf, pos, offset)
            patch_partition_leader_epoch(buf, pos, leader_epoch)
            if self.config.message_timestamp_type == "LogAppendTime":
                set_log_append_time(buf, pos, now_ms)
                lat = now_ms
            h = read_header(buf, pos)
            headers.append((pos, h))
            offset = h.next_offset
        return headers, offset, lat

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.epochs.end_offset_for(epoch, self.log_end_offset)

    def _check_range(self, offset: int) -> None:
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRange(f"offset {offset} not in [{self.log_start_offset}, {self.log_end_offset}]")

    @staticmethod
    def _first_record_at_or_after(batch_bytes, ts: int) -> tuple[int, int] | None:
        for r in decode_batch(batch_bytes):
            if r.timestamp >= ts:
                return r.offset, r.timestamp
        return None

    @staticmethod
    def _max_record(batch_bytes) -> tuple[int, int]:
        best = None
        for r in decode_batch(batch_bytes):
            if best is None or r.timestamp > best[1]:
                best = (r.offset, r.timestamp)
        return best

    @staticmethod
    def _latest_offsets(batches) -> dict[bytes, int]:
        """key -> offset of its newest record, over the given (header, bytes) batches in log order."""
        latest: dict[bytes, int] = {}
        for h, data in batches:
            if h.is_control:
                continue
            for r in decode_batch(data):
                if r.key is not None:
                    latest[r.key] = r.offset
        return latest

    @staticmethod
    def _clean_batch(h, data, latest: dict[bytes, int], now_ms: int, delete_retention_ms: int) -> bytes | None:
        """The batch with superseded records removed (and tombstones past delete.retention.ms);
        None when nothing is left; the same bytes when nothing changed."""
        if h.is_control:
            return data
        recs = decode_batch(data)
        keep = [r for r in recs
                if r.key is not None and latest.get(r.key) == r.offset
                and not (r.value is None and h.max_timestamp < now_ms - delete_retention_ms)]
        if len(keep) == len(recs):
            return data
        if not keep:
            return None
        return rebuild_batch(h, keep)

    def _trim(self, data: memoryview, max_bytes: int, min_one: bool, max_offset: int | None) -> bytes:
        """Whole batches from the front of data: up to max_bytes (at least one if min_one), below max_offset."""
        end = 0
        for pos, h in iter_batches(data):
            if max_offset is not None and h.base_offset >= max_offset:
                break
            if pos + h.size > max_bytes and not (min_one and pos == 0):
                break
            end = pos + h.size
        return bytes(data[:end])


class MemoryLog(_LogBase):
    """Batches kept in memory: for --in-memory brokers and tests."""

    def __init__(self, config: LogConfig, *, now_ms: int = 0):
        super().__init__()
        self.config = config
        self.batches: list[bytes] = []
        self.bases: list[int] = []
        self.lasts: list[int] = []
        self.max_ts: list[int] = []
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.epochs = LeaderEpochCache(None)
        self.size_bytes = 0

    def append(self, buf: bytearray, *, now_ms: int, leader_epoch: int = 0) -> AppendResult:
        headers, next_offset, lat = self._prepare(buf, now_ms, leader_epoch)
        base = self.log_end_offset
        self.epochs.assign(leader_epoch, base)
        for pos, h in headers:
            self.batches.append(bytes(buf[pos:pos + h.size]))
            self.bases.append(h.base_offset)
            self.lasts.append(h.last_offset)
            self.max_ts.append(h.max_timestamp)
            self.size_bytes += h.size
            self.producer_state.update_from_header(h)
        self.log_end_offset = next_offset
        return AppendResult(base, next_offset - 1, lat, self.log_start_offset)

    def _index_of(self, offset: int) -> int:
        return bisect.bisect_left(self.lasts, offset)

    def read(self, offset: int, max_bytes: int, *, min_one: bool = True, max_offset: int | None = None) -> bytes:
        self._check_range(offset)
        i = self._index_of(offset)
        out, size = [], 0
        while i < len(self.batches):
            b = self.batches[i]
            if max_offset is not None and self.bases[i] >= max_offset:
                break
            if size + len(b) > max_bytes and not (min_one and not out):
                break
            out.append(b)
            size += len(b)
            i += 1
        return b"".join(out)

    def offset_for_timestamp(self, ts: int):
        for i, b in enumerate(self.batches):
            if self.lasts[i] < self.log_start_offset or self.max_ts[i] < ts:
                continue
            found = self._first_record_at_or_after(b, ts)
            if found is not None:
                return found[0], found[1], read_header(b).partition_leader_epoch
        return None

    def max_timestamp_entry(self):
        if not self.batches:
            return None
        i = max(range(len(self.batches)), key=lambda j: (self.max_ts[j], -j))
        off, ts = self._max_record(self.batches[i])
        return off, ts, read_header(self.batches[i]).partition_leader_epoch

    def delete_records_before(self, offset: int) -> int:
        if offset > self.high_watermark:
            raise OffsetOutOfRange(f"offset {offset} is above the high watermark {self.high_watermark}")
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            while self.batches and self.lasts[0] < offset:
                self._drop_first()
        return self.log_start_offset

    def _drop_first(self) -> None:
        self.size_bytes -= len(self.batches[0])
        for lst in (self.batches, self.bases, self.lasts, self.max_ts):
            lst.pop(0)

    def enforce_retention(self, now_ms: int) -> int:
        n = 0
        cfg = self.config
        while len(self.batches) > 1:
            too_old = cfg.retention_ms >= 0 and self.max_ts[0] < now_ms - cfg.retention_ms
            too_big = cfg.retention_bytes >= 0 and self.size_bytes - len(self.batches[0]) >= cfg.retention_bytes
            if not (too_old or too_big):
                break
            self.log_start_offset = self.lasts[0] + 1
            self._drop_first()
            n += 1
        return n

    def compact(self, now_ms: int) -> int:
        """Keep the newest record per key in all but the newest batch (the "active segment");
        drop tombstones older than delete.retention.ms. Offsets are preserved. Returns records removed."""
        if len(self.batches) < 2:
            return 0
        hs = [(read_header(b), b) for b in self.batches]
        latest = self._latest_offsets(hs)
        removed = 0
        out = []
        for i, (h, b) in enumerate(hs):
            nb = b if i == len(hs) - 1 else self._clean_batch(h, b, latest, now_ms, self.config.delete_retention_ms)
            if nb is None:
                removed += h.record_count
                continue
            if nb is not b:
                removed += h.record_count - read_header(nb).record_count
            out.append(nb)
        self.batches = out
        hdrs = [read_header(b) for b in out]
        self.bases = [h.base_offset for h in hdrs]
        self.lasts = [h.last_offset for h in hdrs]
        self.max_ts = [h.max_timestamp for h in hdrs]
        self.size_bytes = sum(len(b) for b in out)
        return removed

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


# -- segments on disk -----------------------------------------------------------------------
_IDX = struct.Struct(">ii")
_TIDX = struct.Struct(">qi")


def _name(base: int) -> str:
    return f"{base:020d}"


class Segment:
    def __init__(self, directory: Path, base: int, created_ms: int):
        self.base = base
        self.log_path = directory / (_name(base) + ".log")
        self.index_path = directory / (_name(base) + ".index")
        self.time_path = directory / (_name(base) + ".timeindex")
        self.created_ms = created_ms
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.index: list[tuple[int, int]] = []  # (relative last offset, position)
        self.timeindex: list[tuple[int, int]] = []  # (max timestamp so far, relative offset)
        self.bytes_since_index = 0
        self.max_ts = -1
        self.max_ts_batch_pos = -1
        self.last_offset = base - 1
        self._idx_f = None
        self._tidx_f = None

    # indexes
    def open_index_writers(self) -> None:
        self._idx_f = open(self.index_path, "ab")
        self._tidx_f = open(self.time_path, "ab")

    def load_indexes(self) -> bool:
        """Load .index/.timeindex; False if missing or stale (then rebuild)."""
        if not self.index_path.exists() or not self.time_path.exists():
            return False
        raw = self.index_path.read_bytes()
        traw = self.time_path.read_bytes()
        if len(raw) % 8 or len(traw) % 12:
            return False
        self.index = [_IDX.unpack_from(raw, i) for i in range(0, len(raw), 8)]
        self.timeindex = [_TIDX.unpack_from(traw, i) for i in range(0, len(traw), 12)]
        if self.index and self.index[-1][1] >= self.size:
            return False
        return True

    def rebuild(self, scan_tail: bool) -> int:
        """Scan the .log: rebuild indexes and stats; with scan_tail, check CRCs and return valid length."""
        self.index, self.timeindex = [], []
        self.bytes_since_index = 0
        self.max_ts, self.max_ts_batch_pos, self.last_offset = -1, -1, self.base - 1
        valid = 0
        pos = 0
        while True:
            hdr = os.pread(self.fd, 61, pos)
            if len(hdr) < 61:
                break
            h = read_header(hdr)
            if h.batch_length < 49 or pos + h.size > self.size or h.magic != 2:
                break
            if scan_tail:
                data = os.pread(self.fd, h.size, pos)
                if not crc_ok(data, 0, h):
                    break
            self._note_batch(h, pos)
            pos += h.size
            valid = pos
        self._write_indexes_whole()
        return valid

    def _write_indexes_whole(self) -> None:
        with open(self.index_path, "wb") as f:
            f.write(b"".join(_IDX.pack(*e) for e in self.index))
        with open(self.time_path, "wb") as f:
            f.write(b"".join(_TIDX.pack(*e) for e in self.timeindex))

    def _note_batch(self, h, pos: int, interval: int = 4096, write: bool = False) -> None:
        rel_last = h.last_offset - self.base
        if not self.index or self.bytes_since_index >= interval:
            entry = (rel_last, pos)
            self.index.append(entry)
            self.bytes_since_index = 0
            if write:
                self._idx_f.write(_IDX.pack(*entry))
        self.bytes_since_index += h.size
        if h.max_timestamp > self.max_ts:
            self.max_ts = h.max_timestamp
            self.max_ts_batch_pos = pos
            t = (h.max_timestamp, rel_last)
            self.timeindex.append(t)
            if write:
                self._tidx_f.write(_TIDX.pack(*t))
        self.last_offset = h.last_offset

    def find_position(self, offset: int) -> int:
        """Position of the batch containing offset: index lookup, then a short scan."""
        rel = offset - self.base
        i = bisect.bisect_right(self.index, (rel, 1 << 62)) - 1
        pos = self.index[i][1] if i >= 0 else 0
        while pos < self.size:
            hdr = os.pread(self.fd, 61, pos)
            h = read_header(hdr)
            if h.last_offset >= offset:
                return pos
            pos += h.size
        return self.size

    def flush_indexes(self) -> None:
        if self._idx_f:
            self._idx_f.flush()
            self._tidx_f.flush()

    def close(self) -> None:
        if self._idx_f:
            self._idx_f.close()
            self._tidx_f.close()
            self._idx_f = self._tidx_f = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def delete(self) -> None:
        self.close()
        for p in (self.log_path, self.index_path, self.time_path):
            p.unlink(missing_ok=True)


class FileLog(_LogBase):
    def __init__(self, directory: Path, config: LogConfig, *, now_ms: int = 0):
        super().__init__()
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config = config
        self.epochs = LeaderEpochCache(self.dir / "leader-epoch-checkpoint")
        self._unflushed = 0
        self.segments: list[Segment] = []
        bases = sorted(int(p.stem) for p in self.dir.glob("*.log") if p.stem.isdigit())
        for b in bases:
            seg = Segment(self.dir, b, now_ms)
            self.segments.append(seg)
        for seg in self.segments[:-1]:
            if not seg.load_indexes():
                seg.rebuild(scan_tail=False)
            else:
                self._stats_from_index(seg)
        if self.segments:
            last = self.segments[-1]
            valid = last.rebuild(scan_tail=True)
            if valid < last.size:
                os.ftruncate(last.fd, valid)
                os.fsync(last.fd)
                last.size = valid
        else:
            self.segments.append(Segment(self.dir, 0, now_ms))
        self.segments[-1].open_index_writers()
        self.log_end_offset = self.segments[-1].last_offset + 1 if self.segments[-1].size else self.segments[-1].base
        if len(self.segments) > 1 and not self.segments[-1].size:
            self.log_end_offset = self.segments[-1].base
        lso_path = self.dir / "log-start-offset"
        self.log_start_offset = self.segments[0].base
        if lso_path.exists():
            try:
                self.log_start_offset = max(self.log_start_offset, int(lso_path.read_text().strip()))
            except ValueError:
                pass
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self.epochs.truncate_from_end(self.log_end_offset)
        self._rebuild_producer_state()

    def _stats_from_index(self, seg: Segment) -> None:
        # last offset of an older segment = base of the next one - 1
        i = self.segments.index(seg)
        seg.last_offset = self.segments[i + 1].base - 1
        if seg.timeindex:
            seg.max_ts = seg.timeindex[-1][0]
            seg.max_ts_batch_pos = seg.find_position(seg.base + seg.timeindex[-1][1])

    def _rebuild_producer_state(self) -> None:
        self.producer_state = ProducerStateManager()
        for seg in self.segments:
            pos = 0
            while pos < seg.size:
                h = read_header(os.pread(seg.fd, 61, pos))
                self.producer_state.update_from_header(h)
                pos += h.size

    @property
    def active(self) -> Segment:
        return self.segments[-1]

    def _roll(self, now_ms: int) -> None:
        old = self.active
        old.flush_indexes()
        os.fsync(old.fd)
        seg = Segment(self.dir, self.log_end_offset, now_ms)
        seg.open_index_writers()
        self.segments.append(seg)

    def append(self, buf: bytearray, *, now_ms: int, leader_epoch: int = 0) -> AppendResult:
        headers, next_offset, lat = self._prepare(buf, now_ms, leader_epoch)
        seg = self.active
        if seg.size and (seg.size + len(buf) > self.config.segment_bytes or
                         now_ms - seg.created_ms >= self.config.segment_ms):
            self._roll(now_ms)
            seg = self.active
        base = self.log_end_offset
        self.epochs.assign(leader_epoch, base)
        start = seg.size
        written = os.pwrite(seg.fd, bytes(buf), start)
        assert written == len(buf)
        seg.size += len(buf)
        for pos, h in headers:
            seg._note_batch(h, start + pos, self.config.index_interval_bytes, write=True)
            self.producer_state.update_from_header(h)
            self._unflushed += h.record_count
        self.log_end_offset = next_offset
        if self._unflushed >= self.config.flush_interval_messages:
            self.flush()
        return AppendResult(base, next_offset - 1, lat, self.log_start_offset)

    def flush(self) -> None:
        self.active.flush_indexes()
        os.fsync(self.active.fd)
        self._unflushed = 0

    def _segment_for(self, offset: int) -> int:
        return bisect.bisect_right([s.base for s in self.segments], offset) - 1

    def read(self, offset: int, max_bytes: int, *, min_one: bool = True, max_offset: int | None = None) -> bytes:
        self._check_range(offset)
        if offset == self.log_end_offset:
            return b""
        i = max(0, self._segment_for(offset))
        seg = self.segments[i]
        pos = seg.find_position(offset)
        if pos >= seg.size:  # offset sits past this segment's last batch: next segment
            if i + 1 >= len(self.segments):
                return b""
            seg = self.segments[i + 1]
            pos = 0
        want = max(max_bytes, 0)
        if min_one:
            first = read_header(os.pread(seg.fd, 61, pos))
            want = max(want, first.size)
        data = os.pread(seg.fd, min(want, seg.size - pos), pos)
        return self._trim(memoryview(data), max_bytes, min_one, max_offset)

    def offset_for_timestamp(self, ts: int):
        for seg in self.segments:
            if seg.max_ts < ts or seg.last_offset < self.log_start_offset:
                continue
            # last time-index entry whose max timestamp is below ts: everything up to it is earlier
            start_off = seg.base
            for t, rel in seg.timeindex:
                if t < ts:
                    start_off = seg.base + rel + 1
                else:
                    break
            pos = seg.find_position(max(start_off, self.log_start_offset))
            while pos < seg.size:
                h = read_header(os.pread(seg.fd, 61, pos))
                if h.max_timestamp >= ts and h.last_offset >= self.log_start_offset:
                    found = self._first_record_at_or_after(os.pread(seg.fd, h.size, pos), ts)
                    if found is not None and found[0] >= self.log_start_offset:
                        return found[0], found[1], h.partition_leader_epoch
                pos += h.size
        return None

    def max_timestamp_entry(self):
        best = None
        for seg in self.segments:
            if seg.max_ts_batch_pos >= 0 and (best is None or seg.max_ts > best.max_ts):
                best = seg
        if best is None:
            return None
        h = read_header(os.pread(best.fd, 61, best.max_ts_batch_pos))
        off, ts = self._max_record(os.pread(best.fd, h.size, best.max_ts_batch_pos))
        return off, ts, h.partition_leader_epoch

    def _save_log_start(self) -> None:
        p = self.dir / "log-start-offset"
        tmp = p.with_suffix(".tmp")
        tmp.write_text(str(self.log_start_offset))
        os.replace(tmp, p)

    def delete_records_before(self, offset: int) -> int:
        if offset > self.high_watermark:
            raise OffsetOutOfRange(f"offset {offset} is above the high watermark {self.high_watermark}")
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self._save_log_start()
            while len(self.segments) > 1 and self.segments[1].base <= offset:
                self.segments.pop(0).delete()
        return self.log_start_offset

    def enforce_retention(self, now_ms: int) -> int:
        cfg = self.config
        n = 0
        total = sum(s.size for s in self.segments)
        while len(self.segments) > 1:
            seg = self.segments[0]
            ts = seg.max_ts if seg.max_ts >= 0 else int(os.path.getmtime(seg.log_path) * 1000)
            too_old = cfg.retention_ms >= 0 and ts < now_ms - cfg.retention_ms
            too_big = cfg.retention_bytes >= 0 and total - seg.size >= cfg.retention_bytes
            if not (too_old or too_big):
                break
            total -= seg.size
            self.segments.pop(0).delete()
            self.log_start_offset = max(self.log_start_offset, self.segments[0].base)
            n += 1
        if n:
            self._save_log_start()
        return n

    def _segment_batches(self, seg: Segment):
        data = os.pread(seg.fd, seg.size, 0)
        return [(h, data[pos:pos + h.size]) for pos, h in iter_batches(data)]

    def compact(self, now_ms: int) -> int:
        """The log cleaner for cleanup.policy=compact: every segment but the active one is rewritten with
        only the newest record per key (tombstones dropped after delete.retention.ms); offsets and segment
        base offsets are preserved, the new file replaces the old one atomically."""
        if len(self.segments) < 2:
            return 0
        all_batches = []
        for seg in self.segments:
            all_batches.extend(self._segment_batches(seg))
        latest = self._latest_offsets(all_batches)
        removed = 0
        for i, seg in enumerate(self.segments[:-1]):
            new_parts, changed = [], False
            for h, data in self._segment_batches(seg):
                nb = self._clean_batch(h, data, latest, now_ms, self.config.delete_retention_ms)
                if nb is None:
                    removed += h.record_count
                    changed = True
                    continue
                if nb is not data:
                    removed += h.record_count - read_header(nb).record_count
                    changed = True
                new_parts.append(nb)
            if not changed:
                continue
            tmp = seg.log_path.with_suffix(".cleaned")
            with open(tmp, "wb") as f:
                f.write(b"".join(new_parts))
                f.flush()
                os.fsync(f.fileno())
            seg.close()
            os.replace(tmp, seg.log_path)
            fresh = Segment(self.dir, seg.base, seg.created_ms)
            fresh.rebuild(scan_tail=False)
            fresh.last_offset = self.segments[i + 1].base - 1
            self.segments[i] = fresh
        return removed

    def close(self) -> None:
        try:
            self.flush()
        except OSError:
            pass
        for s in self.segments:
            s.close()
