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
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

_READY = re.compile(r"bootstrap='?([\d.:,]+)")


def spawn_serve(args: list[str], *, cwd: str | Path | None = None, timeout: float = 60.0,
                log_tail: collections.deque[str] | None = None) -> tuple[subprocess.Popen, str]:
    """`kafkite serve --port 0 ARGS` as a child process; returns (process, bootstrap) once it logged its
    ready line (bootstrap is comma-separated with `--brokers N`). Its stderr is read for its whole life
    (a full pipe would stall the broker's logging, and so the broker), the last lines kept in `log_tail`."""
    tail = log_tail if log_tail is not None else collections.deque(maxlen=200)
    proc = subprocess.Popen([sys.executable, "-m", "kafkite.cli", "serve", "--port", "0", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=cwd)
    found: list[str] = []
    settled = threading.Event()  # ready, or stderr closed

    def drain() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            tail.append(line)
            m = None if settled.is_set() else _READY.search(line)
            if m and "ready" in line:
                found.append(m.group(1))
                settled.set()
        settled.set()

    threading.Thread(target=drain, daemon=True, name="kafkite-broker-stderr").start()
    settled.wait(timeout)
    if not found:
        why = "exited before it was ready" if settled.is_set() else f"not ready within {timeout}s"
        proc.kill()
        proc.wait(10)
        raise RuntimeError(f"broker process {why}:\n" + "".join(tail))
    return proc, found[0]


class BrokerProcess:
    def __init__(self, *, data_dir: str | Path | None = None, overrides: dict[str, str] | None = None,
                 start_timeout: float = 60.0, control: bool = False, control_token: str | None = None,
                 brokers: int = 1):
        """control: also serve the control listener (kafkite.control.http) on a free port: `control_url`; brokers:
        `kafkite serve --brokers N` (a one-process cluster on free ports)."""
        self.brokers = brokers
        self.control = control
        self.control_token = control_token
        self.control_url: str | None = None
        self.data_dir = Path(data_dir) if data_dir is not None else None
        # the same test-friendly default as BrokerThread: the first join is not held back 3 s
        self.overrides = {"group.initial.rebalance.delay.ms": "0", **(overrides or {})}
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None
        self._bootstrap: str | None = None
        self.log_tail: collections.deque[str] = collections.deque(maxlen=200)

    def start(self) -> "BrokerProcess":
        args = ["--data-dir", str(self.data_dir)] if self.data_dir is not None else ["--in-memory"]
        if self.brokers != 1:
            args += ["--brokers", str(self.brokers)]
        for k, v in self.overrides.items():
            args += ["--override", f"{k}={v}"]
        if self.control:
            args += ["--control-port", "0"] + (["--control-token", self.control_token] if self.control_token else [])
        self.proc, self._bootstrap = spawn_serve(args, timeout=self.start_timeout, log_tail=self.log_tail)
        if self.control:
            ready = next(line for line in list(self.log_tail) if "ready" in line and "control=" in line)
            self.control_url = re.search(r"control='?(http://[^' ]+)", ready).group(1)
        return self

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
