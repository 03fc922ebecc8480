"""How long a file log takes to open after a clean shutdown and after a crash (LogLoader + producer state).

    PYTHONPATH=src python benchmarks/open_time.py [BATCHES] [SEGMENT_BYTES]

Writes BATCHES one-record batches (1,000-byte values, 50 idempotent producers; default 100,000: ~102 MB) into one
partition (segment.bytes SEGMENT_BYTES, default 1 GB: one active segment), copies the directory as a crash would
leave it (flushed, not closed), closes the log cleanly, then opens each copy and prints the time; then once more the
crashed copy as that recovery left it (a second crash right after it). Page caches are
dropped first when this process may (root with a writable /proc/sys/vm/drop_caches), else the opens are warm.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kafkite.storage.batch import build_batch_with_header
from kafkite.storage.log_config import LogConfig
from kafkite.storage.unified_log import FileLog


def drop_caches() -> bool:
    subprocess.run(["sync"], check=False)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    cfg = LogConfig(segment_bytes=int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 30)
    root = Path(tempfile.mkdtemp())
    try:
        d = root / "t-0"
        lg = FileLog(d, cfg)
        val = b"x" * 1000
        for i in range(n):
            b = bytearray(build_batch_with_header([(None, val, [])], base_offset=0, timestamp_ms=1_700_000_000_000 + i,
                                                  producer_id=1000 + i % 50, producer_epoch=0,
                                                  base_sequence=i // 50)[0])
            lg.append(b, now_ms=1_700_000_000_000 + i)
        lg.flush()
        rp = lg.recovery_point
        shutil.copytree(d, root / "crash")
        lg.close()
        size = sum(p.stat().st_size for p in d.glob("*.log"))
        print(f"{n} batches, {size / 1e6:.0f} MB in {len(lg.segments)} segment(s)")
        for name, path, kw in (("clean", d, {"had_clean_shutdown": True, "recovery_point": n}),
                               ("crash", root / "crash", {"recovery_point": rp}),
                               ("second crash", root / "crash-again", {"recovery_point": rp})):
            cold = drop_caches()
            t0 = time.perf_counter()
            opened = FileLog(path, cfg, **kw)
            took = time.perf_counter() - t0
            print(f"open after a {name} shutdown: {took:.3f} s ({'cold' if cold else 'warm'} cache), "
                  f"log end {opened.log_end_offset}, {len(opened.producer_state.producers)} producers")
            if name == "crash":  # a crash again right after that recovery: its directory as the load left it
                shutil.copytree(path, root / "crash-again")
            opened.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
