"""The group scenario every client runs: split, leave, crash, commit-after-processing accounting."""
from __future__ import annotations

import collections
import json
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).parent

# What Kafka's GroupCoordinator answers a member's commit while its group rebalances (CompletingRebalance:
# REBALANCE_IN_PROGRESS; the generation moved on: ILLEGAL_GENERATION), as each client reports it
# (kafka-python/aiokafka CommitFailedError or RebalanceInProgressError, aiokafka IllegalStateError for a
# partition revoked by that rebalance, librdkafka and the Java client the broker's error name or text).
REBALANCE_REFUSAL = re.compile(r"CommitFailed|RebalanceInProgress|IllegalStateError|REBALANCE_IN_PROGRESS|"
                               r"ILLEGAL_GENERATION|generation id is not valid|group is rebalancing", re.I)


class ConsumerProc:
    """A consumer process; collects what it processed and what it committed."""

    def __init__(self, argv: list[str]):
        # stderr kept in a file: a consumer that dies unexpectedly says why when the scenario fails
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self.processed: list[tuple[int, int]] = []
        self.committed_upto = 0  # number of processed records covered by the last commit
        self.unconfirmed: set[tuple[int, int]] = set()  # processed, but their commit was refused
        self.refused: set[int] = set()  # indexes in `processed` whose commit was refused
        self.commit_failures: list[tuple[float, str]] = []  # (when read, the client's error)
        self.errors: list[dict] = []  # any other {"error": ...} line (a driver's exception, a crash event)
        self.closed = False
        self.kicks: list[float] = []  # when a rejoin kick was read (each starts a rebalance the test counts as caused)
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
                self.refused.update(range(self.committed_upto, ev["commit_failed"]))
                self.commit_failures.append((time.monotonic(), str(ev.get("error"))))
            elif "rejoin_kick" in ev:  # (py_consumer.py: a stuck kafka-python member asked to rejoin)
                self.kicks.append(time.monotonic())
            elif "error" in ev:
                self.errors.append(ev)
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

    def stderr_text(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read()

    def diagnosis(self) -> str:
        tail = self.stderr_text()[-2000:]
        return (f"exit={self.proc.poll()} kicks={len(self.kicks)} processed={len(self.processed)} refused commits="
                f"{[e for _, e in self.commit_failures][:3]} errors={self.errors[:3]} stderr tail:\n{tail}")


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


def describe_group(bs: str, group: str) -> str:
    """The group's state, protocol, generation-less member list (id, client host) and assignments, or the error."""
    try:
        from kafka.protocol.admin import DescribeGroupsRequest
        from kafka.protocol.metadata import FindCoordinatorRequest
        from kafkite.testing.wire_client import WireClient
        with WireClient.connect(bs.split(",")[0]) as w:
            fc = w.request(FindCoordinatorRequest(key=group, key_type=0), 3)
        with WireClient(fc.host, fc.port) as w:
            d = w.request(DescribeGroupsRequest(groups=[group], include_authorized_operations=False), 5).groups[0]
        return (f"error={d.error_code} state={d.group_state} protocol={d.protocol_data} members="
                f"{[(m.member_id, len(bytes(m.member_assignment))) for m in d.members]}")
    except Exception as exc:  # (a diagnosis only)
        return repr(exc)


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


# An exception a consumer did not handle, on its stderr (a Python traceback, a Java thread's uncaught
# exception, a Node unhandled rejection): an error even when the consumer kept going.
UNHANDLED = re.compile(r"Traceback \(most recent call last\)|Exception in thread|UnhandledPromiseRejection|"
                       r"unhandledRejection")


def run_group_scenario(bs: str, topic: str, group: str, make_consumer, n_partitions: int = 6,
                       session_timeout_s: float = 3.0, refused_commit: re.Pattern | None = REBALANCE_REFUSAL,
                       rebalance_grace_s: float = 1.5) -> None:
    """3 consumers split the partitions; one leaves; one crashes; nothing skipped.

    The scenario rebalances the group three times: the members joining, a clean leave, a crash found by the
    session timeout. Each rebalance's window runs from the moment the test causes it until `rebalance_grace_s`
    after DescribeGroups shows the group stable with every partition assigned; the next records are produced
    only once that window closed, so they are consumed and committed in a group that is not rebalancing.
    Duplicates it allows, and only these, one processing more per reason:
    - the crashed member's uncommitted tail (processed, never committed: its next owner reads it again);
    - a commit refused inside a rebalance window with the client's error for REBALANCE_IN_PROGRESS /
      ILLEGAL_GENERATION (`refused_commit`; None: no commit may be refused): its records may be processed
      again by the partition's next owner.
    A record processed more often than that, a commit refused with another error or outside a rebalance
    window, any other error a consumer reports (an {"error": ...} line, an unhandled exception on its
    stderr), a consumer that exits on its own, or a clean leave that does not close: each fails the scenario."""
    produced: list[tuple[int, int]] = []
    rebalances: list[list[float]] = []  # [start, end] (monotonic) of each rebalance window the test causes

    def start_rebalance() -> list[float]:
        window = [time.monotonic(), float("inf")]
        rebalances.append(window)
        return window

    running = {0, 1, 2}  # the consumers expected alive

    def live() -> bool:
        for i in running:  # fails at once (not at a wait's time limit) when a consumer died on its own
            assert consumers[i].proc.poll() is None, f"consumer {i} exited on its own"
        return True

    def settled(window: list[float], until, timeout: float, what: str) -> None:
        try:
            wait_for(lambda: live() and until(), timeout, what)
        except AssertionError as e:  # the group as the coordinator describes it, for the diagnosis
            raise AssertionError(f"{e}; the group: {describe_group(bs, group)}") from None
        window[1] = time.monotonic() + rebalance_grace_s
        time.sleep(rebalance_grace_s)  # what follows runs in a settled group

    def check() -> None:
        live()
        for i, c in enumerate(consumers):
            check_one(i, c)

    def check_one(i: int, c: ConsumerProc) -> None:
        assert not c.errors, f"consumer {i} reported errors: {c.errors[:3]}"
        m = UNHANDLED.search(c.stderr_text())
        assert m is None, f"consumer {i}: an unhandled exception on its stderr ({m.group(0)})"
        for when, error in c.commit_failures:
            assert refused_commit is not None and refused_commit.search(error), \
                f"consumer {i}: a commit failed with an error no rebalance explains: {error}"
            kicked = [k for x in consumers for k in x.kicks]  # (a kick's rebalance: settled well within 15 s)
            assert any(start <= when <= end for start, end in rebalances) or any(k <= when <= k + 15 for k in kicked), \
                f"consumer {i}: a commit was refused ({error}) while the group was not rebalancing"

    joining = start_rebalance()
    consumers = [make_consumer() for _ in range(3)]
    try:
        produced += produce_batch(bs, topic, 0, 300)

        def all_seen():
            live()
            seen = {r for c in consumers for r in c.processed}
            return set(produced) <= seen
        settled(joining, lambda: len(group_members(bs, group)) == 3 and
                all(len(p) == n_partitions // 3 for p in group_members(bs, group).values()), 60,
                "3 members with 2 partitions each")
        wait_for(all_seen, 60, "first records processed")
        check()
        # one leaves cleanly
        leaving = start_rebalance()
        running.discard(0)
        consumers[0].leave()
        assert consumers[0].closed, "consumer 0, asked to leave, did not close"
        settled(leaving, lambda: len(group_members(bs, group)) == 2 and
                sum(len(p) for p in group_members(bs, group).values()) == n_partitions, 60,
                "the other two take over")
        produced += produce_batch(bs, topic, 300, 300)
        wait_for(all_seen, 60, "records after the leave processed")
        check()
        # one crashes: its partitions move after the session timeout
        crashed = consumers[1]
        crashing = start_rebalance()
        running.discard(1)
        crashed.crash()
        settled(crashing, lambda: len(group_members(bs, group)) == 1 and
                sum(len(p) for p in group_members(bs, group).values()) == n_partitions,
                60 + session_timeout_s, "the survivor takes every partition")
        produced += produce_batch(bs, topic, 600, 300)
        wait_for(all_seen, 60, "records after the crash processed")
        survivor = consumers[2]
        wait_for(lambda: live() and set(range(survivor.committed_upto, len(survivor.processed))) <= survivor.refused,
                 30, "the survivor's last commit answered")
        check()
        all_processed = [r for c in consumers for r in c.processed]
        assert set(produced) <= set(all_processed), "a record was skipped"
        # each record: processed once, plus once per processing of it that was never committed
        again: collections.Counter = collections.Counter()
        for c in consumers:
            lost = set(c.refused) | (set(range(c.committed_upto, len(c.processed))) if c is crashed else set())
            again.update(c.processed[i] for i in lost)
        times = collections.Counter(all_processed)
        dupes = {r: n for r, n in times.items() if n > 1 + again[r]}
        assert not dupes, ("processed more often than the crashed member's uncommitted tail and the commits "
                           f"refused in a rebalance allow ((partition, offset): times): {sorted(dupes.items())[:5]}")
    except AssertionError as e:
        raise AssertionError(f"{e}\n" + "\n".join(f"consumer {i}: {c.diagnosis()}"
                                                    for i, c in enumerate(consumers))) from None
    finally:
        for c in consumers:
            c.stop()
