"""A broker in a child process, for clients that must not share the interpreter with it.

`BrokerThread` runs the broker in a thread of the test's own Python process. That is
fastest, but the broker then needs the GIL to answer anything. confluent-kafka's consumer
calls librdkafka's `rd_kafka_assign()` from its rebalance callback *while holding the GIL*
(the fallback assign in `Consumer_rebalance_cb`), and that call can wait for the group
coordinator; with the coordinator in the same process, neither side can move again
(seen on `Consumer.close()` of a subscribed consumer). Group consumers of confluent-kafka
(and anything else that blocks in C with the GIL held) need the broker in another process:

    with BrokerProcess(overrides={"group.min.session.timeout.ms": "1000"}) as b:
        Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "g", ...})
"""
from __future__ import annotations

import collections
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

_READY = re.compile(r"bootstrap='?([\d.]+:\d+)")


class BrokerProcess:
    def __init__(self, *, data_dir: str | Path | None = None, overrides: dict[str, str] | None = None,
                 start_timeout: float = 60.0):
        self.data_dir = Path(data_dir) if data_dir is not None else None
        # the same test-friendly default as BrokerThread: the first join is not held back 3 s
        self.overrides = {"group.initial.rebalance.delay.ms": "0", **(overrides or {})}
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None
        self._bootstrap: str | None = None
        self.log_tail: collections.deque[str] = collections.deque(maxlen=200)

    def start(self) -> "BrokerProcess":
        argv = [sys.executable, "-m", "kafkite.cli", "serve", "--port", "0"]
        argv += ["--data-dir", str(self.data_dir)] if self.data_dir is not None else ["--in-memory"]
        for k, v in self.overrides.items():
            argv += ["--override", f"{k}={v}"]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        lines: queue.Queue[str | None] = queue.Queue()
        # stderr is read for the broker's whole life: a full pipe would stall its logging, and so the broker
        threading.Thread(target=self._drain, args=(self.proc, lines), daemon=True,
                         name="kafkite-broker-stderr").start()
        try:
            while True:
                line = lines.get(timeout=self.start_timeout)
                if line is None:
                    raise RuntimeError("broker process exited before it was ready:\n" + "".join(self.log_tail))
                m = _READY.search(line)
                if m and "ready" in line:
                    self._bootstrap = m.group(1)
                    return self
        except queue.Empty:
            self.kill()
            raise RuntimeError(f"broker process not ready within {self.start_timeout}s:\n" + "".join(self.log_tail))
        except BaseException:
            self.kill()
            raise

    def _drain(self, proc: subprocess.Popen, lines: queue.Queue) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            self.log_tail.append(line)
            if self._bootstrap is None:
                lines.put(line)
        lines.put(None)

    @property
    def bootstrap_servers(self) -> str:
        assert self._bootstrap is not None, "not started"
        return self._bootstrap

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (a clean shutdown), SIGKILL if it has not exited within `timeout`."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL: the broker dies without any shutdown work, as on a crash."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def __enter__(self) -> "BrokerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
