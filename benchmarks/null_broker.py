"""The ceiling of a commit benchmark: Kafkite with an OffsetCommit that does no work.

    python benchmarks/null_broker.py --port N [--fsync-dir D]

Runs `kafkite serve --in-memory` in this process with one change: after the first OffsetCommit of
each request version (handled by the real coordinator), every OffsetCommit is answered with that
first answer's bytes under the new correlation id. Nothing is decoded, stored or replayed. What is
left is what any broker pays and no broker code can remove: the client library, the two processes'
wake-ups, the loopback socket and one Trio receive and send. With --fsync-dir, each such answer
waits first for a 200-byte append + fsync of a file in D made in a worker thread, as an fsync per
acknowledgement off the event loop must.

benchmarks/commits.py --ceiling runs it next to the real brokers: commits/s against it is the most
any broker could reach with the same client on this machine (a broker doing no work), so a target
above it cannot be met by making the broker faster. Its committed offsets are not real: the
committed() check is skipped for it.
"""
from __future__ import annotations

import argparse
import os
import sys

OFFSET_COMMIT = b"\x00\x08"


def install(fsync_dir: str | None) -> None:
    """Wrap the router's dispatch (the one place a request frame becomes a response frame)."""
    import trio

    from kafkite.server.router import Router

    real = Router.dispatch
    cache: dict[bytes, bytes] = {}  # request version (2 bytes) -> the first answer's frame
    fd = (os.open(os.path.join(fsync_dir, "acks"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
          if fsync_dir else None)
    line = b"x" * 200

    def write_and_fsync() -> None:
        os.write(fd, line)
        os.fsync(fd)

    async def dispatch(self, frame: bytes, peer: str, log, **kw):
        if frame[:2] == OFFSET_COMMIT:
            answer = cache.get(frame[2:4])
            if answer is not None:
                if fd is not None:
                    await trio.to_thread.run_sync(write_and_fsync)
                # size (4 bytes), then the correlation id: the request's, at bytes 4..8 of its payload
                return answer[:4] + frame[4:8] + answer[8:], []
        out, waits = await real(self, frame, peer, log, **kw)
        if frame[:2] == OFFSET_COMMIT and not waits and isinstance(out, (bytes, bytearray)):
            cache[frame[2:4]] = bytes(out)
        return out, waits

    Router.dispatch = dispatch


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--fsync-dir", help="fsync a file here before each cached answer")
    args = ap.parse_args(argv)
    install(args.fsync_dir)
    from kafkite.cli import main as cli
    return cli(["serve", "--in-memory", "--port", str(args.port), "--log-level", "WARNING"])


if __name__ == "__main__":
    sys.exit(main())
