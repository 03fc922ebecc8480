"""The ceiling of the commit (and produce) benchmarks: Kafkite with an OffsetCommit (a Produce) that does no work.

    python benchmarks/null_broker.py --port N [--fsync-dir D] [--produce]

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

--produce also answers every Produce without validating or storing its records: each partition's
answer says no error, at an offset counted per partition from the batches' record counts. What is
left of a Produce is the network layer's work, its decoding (the records as a view of the frame) and
its answer's encoding. benchmarks/throughput.py --modes null runs it beside the real brokers: the
most any broker could produce at with the same producers on this machine. Nothing is kept, so
nothing can be consumed from it.
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


def install_produce() -> None:
    """Replace the Produce handler (the router's route for API key 0) with one that stores nothing."""
    from kafkite.server import router
    from kafkite.storage.batch import iter_batches
    from kafkite.wire.produce_response import PartitionAnswer, ProduceAnswer, TopicAnswer

    ends: dict[tuple[str, int], int] = {}  # (topic, partition) -> the next offset it would have given

    async def handle_null_produce(apis, ctx):
        topics = []
        for td in ctx.body.topic_data:
            parts = []
            for pd in td.partition_data:
                count = sum(h.record_count for _, h in iter_batches(pd.records or b""))
                base = ends.get((td.name, pd.index), 0)
                ends[(td.name, pd.index)] = base + count
                parts.append(PartitionAnswer(pd.index, 0, base, -1, 0))
            topics.append(TopicAnswer(td.name, parts))
        return None if ctx.body.acks == 0 else ProduceAnswer(topics)

    lo, hi, _ = router.ROUTES[0]
    router.ROUTES[0] = (lo, hi, handle_null_produce)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--fsync-dir", help="fsync a file here before each cached answer")
    ap.add_argument("--produce", action="store_true", help="answer every Produce without storing it")
    args = ap.parse_args(argv)
    install(args.fsync_dir)
    if args.produce:
        install_produce()
    from kafkite.cli import main as cli
    return cli(["serve", "--in-memory", "--port", str(args.port), "--log-level", "WARNING"])


if __name__ == "__main__":
    sys.exit(main())
