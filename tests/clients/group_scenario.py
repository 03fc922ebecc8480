"""The group scenario every client runs: split, leave, crash, commit-after-processing accounting."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).parent


class ConsumerProc:
    """A consumer process; collects what it processed and what it committed."""

    def __init__(self, argv: list[str]):
        # stderr kept in a file: a consumer that dies unexpectedly says why when the scenario fails
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self.processed: list[tuple[int, int]] = []
        self.committed_upto = 0  # number of processed records covered by the last commit
        self.unconfirmed: set[tuple[int, int]] = set()  # processed, but their commit was refused
        self.closed = False
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if "rec" in ev:
                self.processed.append(tuple(ev["rec"]))
            elif "commit" in ev:
                self.committed_upto = ev["commit"]
            elif "commit_failed" in ev:
                self.unconfirmed.update(self.processed[self.committed_upto:ev["commit_failed"]])
            elif ev.get("closed"):
                self.closed = True

    def leave(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)
        self._t.join(5)

    def crash(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self._t.join(5)

    def uncommitted(self) -> list[tuple[int, int]]:
        return self.processed[self.committed_upto:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.stderr.close()

    def diagnosis(self) -> str:
        self.stderr.seek(0)
        tail = self.stderr.read()[-2000:]
        return f"exit={self.proc.poll()} processed={len(self.processed)} stderr tail:\n{tail}"


def python_consumer(client: str, bs: str, topic: str, group: str, strategy: str | None = None) -> ConsumerProc:
    argv = [sys.executable, str(HERE / "py_consumer.py"), client, bs, topic, group]
    if strategy:
        argv.append(strategy)
    return ConsumerProc(argv)


def wait_for(pred, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out: {what}")


def group_members(bs: str, group: str) -> dict[str, set[int]]:
    """member id -> assigned partitions, from DescribeGroups (consumer protocol assignment)."""
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment
    from kafka.protocol.admin import DescribeGroupsRequest
    from kafkite.testing.wire_client import WireClient
    with WireClient.connect(bs.split(",")[0]) as w:
        from kafka.protocol.metadata import FindCoordinatorRequest
        fc = w.request(FindCoordinatorRequest(key=group, key_type=0), 3)
    with WireClient(fc.host, fc.port) as w:
        d = w.request(DescribeGroupsRequest(groups=[group], include_authorized_operations=False), 5).groups[0]
    out = {}
    if d.group_state != "Stable":
        return {}
    for m in d.members:
        raw = bytes(m.member_assignment)
        parts: set[int] = set()
        if raw:
            version = int.from_bytes(raw[:2], "big")
            a = ConsumerProtocolAssignment.decode(raw, version=min(version, 3))
            for tp in a.assigned_partitions:
                parts.update(tp.partitions)
        out[m.member_id] = parts
    return out


def produce_batch(bs: str, topic: str, start: int, n: int) -> list[tuple[int, int]]:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 2})
    acked = []

    def cb(err, msg):
        assert err is None, err
        acked.append((msg.partition(), msg.offset()))
    for i in range(start, start + n):
        p.produce(topic, key=str(i).encode(), value=b"v%d" % i, on_delivery=cb)
    assert p.flush(30) == 0
    return acked


def run_group_scenario(bs: str, topic: str, group: str, make_consumer, n_partitions: int = 6,
                       session_timeout_s: float = 3.0) -> None:
    """3 consumers split the partitions; one leaves; one crashes; nothing skipped; duplicates only
    from the crashed member's uncommitted tail."""
    produced: list[tuple[int, int]] = []
    consumers = [make_consumer() for _ in range(3)]
    try:
        produced += produce_batch(bs, topic, 0, 300)

        def all_seen():
            seen = {r for c in consumers for r in c.processed}
            return set(produced) <= seen
        wait_for(lambda: len(group_members(bs, group)) == 3 and
                 all(len(p) == n_partitions // 3 for p in group_members(bs, group).values()), 60,
                 "3 members with 2 partitions each")
        wait_for(all_seen, 60, "first records processed")
        # one leaves cleanly
        consumers[0].leave()
        wait_for(lambda: len(group_members(bs, group)) == 2 and
                 sum(len(p) for p in group_members(bs, group).values()) == n_partitions, 60,
                 "the other two take over")
        produced += produce_batch(bs, topic, 300, 300)
        wait_for(all_seen, 60, "records after the leave processed")
        # one crashes: its partitions move after the session timeout
        crashed = consumers[1]
        crashed.crash()
        wait_for(lambda: len(group_members(bs, group)) == 1 and
                 sum(len(p) for p in group_members(bs, group).values()) == n_partitions,
                 60 + session_timeout_s, "the survivor takes every partition")
        produced += produce_batch(bs, topic, 600, 300)
        wait_for(all_seen, 60, "records after the crash processed")
        all_processed = [r for c in consumers for r in c.processed]
        seen = set(all_processed)
        assert set(produced) <= seen, "a record was skipped"
        dupes = {r for r in seen if all_processed.count(r) > 1}
        allowed = set(crashed.uncommitted()).union(*(c.unconfirmed for c in consumers))
        assert dupes <= allowed, f"processed twice beyond the crashed member's uncommitted tail: {sorted(dupes - allowed)[:5]}"
    except AssertionError as e:
        raise AssertionError(f"{e}\n" + "\n".join(f"consumer {i}: {c.diagnosis()}"
                                                    for i, c in enumerate(consumers))) from None
    finally:
        for c in consumers:
            c.stop()
