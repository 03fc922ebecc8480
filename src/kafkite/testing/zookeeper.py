"""A standalone ZooKeeper for tests: Debian's `zookeeper` package (3.8) on a free port, a data dir of its own.

    with ZooKeeperServer() as zk:
        zk.connect_string          # "127.0.0.1:PORT"
        zk.chroot("/kafkite-1")    # "127.0.0.1:PORT/kafkite-1" for zookeeper.connect

It runs `java -cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar ...QuorumPeerMain zoo.cfg` (the
classpath Debian's package documents; `KAFKITE_ZOOKEEPER_CLASSPATH` replaces it), waits until the server
answers the `srvr` four-letter command, and stops it (SIGTERM, then SIGKILL) at the end. Its log is kept
in the data dir's `zookeeper.log`; the last lines are shown when it does not start.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

DEFAULT_CLASSPATH = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar"
MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


def classpath() -> str:
    return os.environ.get("KAFKITE_ZOOKEEPER_CLASSPATH", DEFAULT_CLASSPATH)


def missing() -> str | None:
    """Why a ZooKeeper cannot be started here (None: it can)."""
    if shutil.which("java") is None:
        return "java is not installed"
    jars = [p for p in classpath().split(":") if p.endswith(".jar")]
    if not jars or not all(Path(j).exists() for j in jars):
        return f"ZooKeeper is not installed ({classpath()}; Debian: apt-get install zookeeper)"
    return None


def four_letter(host: str, port: int, word: str = "srvr", timeout: float = 1.0) -> str:
    """ZooKeeper's four-letter-word admin command over a fresh connection; its whole answer."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word.encode())
        chunks = []
        while chunk := s.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ZooKeeperServer:
    def __init__(self, *, tick_ms: int = 500, min_session_timeout_ms: int = 1000,
                 max_session_timeout_ms: int = 60000, data_dir: str | Path | None = None):
        self.tick_ms = tick_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self._given_dir = data_dir
        self._tmp: tempfile.TemporaryDirectory | None = None
        self.proc: subprocess.Popen | None = None
        self.host = "127.0.0.1"
        self.port = 0

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    def chroot(self, path: str) -> str:
        """`zookeeper.connect` with a chroot, as Kafka writes it: host:port/path."""
        return f"{self.connect_string}/{path.strip('/')}"

    def start(self, timeout: float = 60.0) -> "ZooKeeperServer":
        why = missing()
        if why:
            raise FileNotFoundError(why)
        if self._given_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="kafkite-zk-")
            self.dir = Path(self._tmp.name)
        else:
            self.dir = Path(self._given_dir)
            self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "data").mkdir(exist_ok=True)
        self.port = self.port or _free_port()
        cfg = self.dir / "zoo.cfg"
        cfg.write_text(f"tickTime={self.tick_ms}\ndataDir={self.dir / 'data'}\nclientPort={self.port}\n"
                       f"clientPortAddress={self.host}\nadmin.enableServer=false\n"
                       f"minSessionTimeout={self.min_session_timeout_ms}\n"
                       f"maxSessionTimeout={self.max_session_timeout_ms}\n4lw.commands.whitelist=srvr,ruok\n")
        self.log_path = self.dir / "zookeeper.log"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(["java", "-Xmx256m", "-cp", classpath(), MAIN, str(cfg)],
                                         stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if "Mode:" in four_letter(self.host, self.port):
                    return self
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = self.log_path.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"ZooKeeper did not start on {self.connect_string}:\n{tail}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> "ZooKeeperServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
