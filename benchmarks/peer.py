"""The peer broker for benchmarks: Tansu 0.6.0 (Rust, Kafka-compatible), in memory, on a free port.

    from peer import tansu                 # benchmarks/ on sys.path (as when running a script here)
    with tansu() as bootstrap:             # "127.0.0.1:PORT", answering Kafka requests
        ...

    python benchmarks/peer.py [--port N] [--seconds S] [--storage memory://tansu/]
        starts Tansu, prints its bootstrap on stdout, runs until Ctrl-C / SIGTERM (or S seconds).

The binary comes from .ci/install-clients.sh ($KAFKITE_TOOLS/bin/tansu); `ensure_tansu()` runs that
script when it is missing. Starting, readiness (an ApiVersions round trip, no fixed sleeps) and
stopping are tests/clients/drivers.py's `tansu_broker`, shared with the driver tests.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from clients import drivers  # noqa: E402

TANSU_VERSION = "0.6.0"


def tansu_binary() -> Path | None:
    return drivers.tansu_binary()


def ensure_tansu() -> Path:
    """The Tansu binary, running .ci/install-clients.sh first when it isn't installed."""
    b = drivers.tansu_binary()
    if b is None:
        env = dict(os.environ, PYTHON=os.environ.get("PYTHON", sys.executable))
        subprocess.run(["bash", str(ROOT / ".ci" / "install-clients.sh")], check=True, env=env,
                       stdout=sys.stderr)
        b = drivers.tansu_binary()
    if b is None:
        raise FileNotFoundError("tansu could not be installed (see .ci/install-clients.sh)")
    return b


def tansu_version() -> str:
    b = ensure_tansu()
    return subprocess.run([str(b), "--version"], capture_output=True, text=True, timeout=30).stdout.strip()


@contextlib.contextmanager
def tansu(port: int | None = None, storage: str = "memory://tansu/", install: bool = True,
          log_path: str | Path | None = None) -> Iterator[str]:
    """A running Tansu for the duration of the block; yields its bootstrap "127.0.0.1:PORT"."""
    if install:
        ensure_tansu()
    with drivers.tansu_broker(port=port, storage=storage, log_path=log_path, skip_if_missing=False) as bs:
        yield bs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=None)
    ap.add_argument("--seconds", type=float, default=None, help="stop after this long (default: until signalled)")
    ap.add_argument("--storage", default="memory://tansu/")
    args = ap.parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with tansu(port=args.port, storage=args.storage) as bs:
        print(bs, flush=True)
        stop.wait(args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
