"""Running the non-Python clients from tests: the Java driver, kafkajs, kcat, and the peer broker Tansu.

Tools come from .ci/install-clients.sh into $KAFKITE_TOOLS (default <repo>/.tools); a test that
needs a missing tool is skipped with the reason (`need(...)`, or any `run_*` helper).

The drivers' command syntax and output are documented at the head of tests/clients/java/KafkiteDriver.java
and tests/clients/js/driver.js. Both print JSON objects one a line; `run_java`/`run_node` return them
as a list of dicts. Records are {"p","o","ts","k","v","h"} with base64 bytes: `decode_records`.
"""
from __future__ import annotations

import base64
import contextlib
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator

import json

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent


def tools_dir() -> Path:
    return Path(os.environ.get("KAFKITE_TOOLS") or ROOT / ".tools")


TOOLS = tools_dir()          # kept for existing importers; the functions below re-read the env var
JAVA_DIR = TOOLS / "java"
JS_DIR = TOOLS / "js"
INSTALL_HINT = "run .ci/install-clients.sh"


# The Java kafka-clients the driver runs on, a folder of $KAFKITE_TOOLS: "java" (3.9.1, the suite's) or "java4"
# (4.3.0). A test that runs on both takes the `java_client` fixture (tests/conftest.py), which sets this for it.
JAVA_CLIENTS = {"3.9": "java", "4.3": "java4"}
JAVA_CLIENT = "java"


def _java_dir() -> Path:
    return tools_dir() / JAVA_CLIENT


def _js_dir() -> Path:
    return tools_dir() / "js"


# -- availability -------------------------------------------------------------------------------
def _driver_built(folder: Path, main: str) -> bool:
    return (folder / "classes" / f"{main}.class").exists() and shutil.which("java") is not None


def java_available() -> bool:
    return _driver_built(_java_dir(), "KafkiteDriver")


def node_available() -> bool:
    return (_js_dir() / "node_modules" / "kafkajs").exists() and shutil.which("node") is not None


def kcat_available() -> bool:
    return shutil.which("kcat") is not None


def tansu_binary() -> Path | None:
    """The Tansu executable ($KAFKITE_TOOLS/bin/tansu, else `tansu` on PATH), or None."""
    p = tools_dir() / "bin" / "tansu"
    if p.is_file() and os.access(p, os.X_OK):
        return p
    w = shutil.which("tansu")
    return Path(w) if w else None


def tansu_available() -> bool:
    return tansu_binary() is not None


def java4_available() -> bool:
    return _driver_built(tools_dir() / JAVA_CLIENTS["4.3"], "Kafka4Driver")


_AVAILABLE = {"java": java_available, "java4": java4_available, "node": node_available, "kafkajs": node_available,
              "kcat": kcat_available, "tansu": tansu_available}


def need(*tools: str) -> None:
    """pytest.skip unless every named tool (java, java4, node/kafkajs, kcat, tansu) is installed."""
    missing = [t for t in tools if not _AVAILABLE[t]()]
    if missing:
        import pytest  # only here: the module is usable without pytest (benchmarks/peer.py)
        pytest.skip(f"{', '.join(missing)} not installed ({INSTALL_HINT})")


# -- running ------------------------------------------------------------------------------------
def java_argv(*args: str, main: str = "KafkiteDriver", jd: Path | None = None) -> list[str]:
    jd = jd or _java_dir()
    cp = os.pathsep.join([str(jd / "classes")] + [str(p) for p in sorted(jd.glob("*.jar"))])
    # small, quick-starting JVM: C1 only, serial GC; each driver call is one short-lived process
    return ["java", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-cp", cp,
            main, *args]


def java4_argv(*args: str) -> list[str]:
    """The 4.x-only driver (tests/clients/java/Kafka4Driver.java) on kafka-clients 4.3.0."""
    return java_argv(*args, main="Kafka4Driver", jd=tools_dir() / JAVA_CLIENTS["4.3"])


def node_argv(*args: str) -> list[str]:
    return ["node", str(HERE / "js" / "driver.js"), *args]


def node_env() -> dict[str, str]:
    return {"KAFKITE_JS": str(_js_dir())}


class DriverError(AssertionError):
    pass


def _run(argv: list[str], timeout: float, env: dict | None = None, check: bool = True) -> list[dict]:
    e = dict(os.environ)
    e.update(node_env())
    e.update(env or {})
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=e)
    except subprocess.TimeoutExpired as exc:
        raise DriverError(f"{argv[0]} {' '.join(argv[-6:])}: no exit within {timeout}s; "
                          f"stdout tail: {(exc.stdout or b'')[-1000:]!r}") from None
    lines = []
    for line in proc.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            lines.append(json.loads(line))
    # a failed run must end with its error JSON; one that died half-way (no error line) is a DriverError
    if check and proc.returncode != 0 and not (lines and "error" in lines[-1]):
        raise DriverError(f"{argv[0]} {' '.join(argv[-6:])} exited {proc.returncode} after {len(lines)} JSON lines; "
                          f"stderr: {proc.stderr[-3000:]}")
    return lines


def run_java(*args: str, timeout: float = 180, check: bool = True, props: dict | None = None) -> list[dict]:
    """Run the Java kafka-clients driver; returns its JSON lines. Skips when it isn't installed.
    Raises DriverError when the process fails without printing any JSON (an error JSON is returned).
    props: client properties passed as `--prop k=v` (commands that take them: produce, consume-*, txn-*)."""
    need("java")
    extra = [a for k, v in (props or {}).items() for a in ("--prop", f"{k}={v}")]
    return _run(java_argv(*map(str, args), *extra), timeout, check=check)


def run_java4(*args: str, timeout: float = 180, check: bool = True) -> list[dict]:
    """Run a command of the 4.x-only driver (Kafka4Driver.java: regex-group, group-configs, list-groups) on
    kafka-clients 4.3.0; returns its JSON lines, as run_java. Skips when it isn't installed."""
    need("java4")
    return _run(java4_argv(*map(str, args)), timeout, check=check)


def run_node(*args: str, timeout: float = 180, check: bool = True, config: dict | None = None) -> list[dict]:
    """Run the kafkajs driver; returns its JSON lines. Skips when kafkajs isn't installed.
    config: merged into kafkajs' `new Kafka({...})` (e.g. ssl / sasl), through $KAFKITE_JS_CONFIG."""
    need("node")
    env = {"KAFKITE_JS_CONFIG": json.dumps(config)} if config else None
    return _run(node_argv(*map(str, args)), timeout, env=env, check=check)


def run_kcat(*args: str, input: bytes | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run kcat with these arguments; returns the CompletedProcess (bytes stdout/stderr)."""
    need("kcat")
    return subprocess.run(["kcat", *map(str, args)], input=input, capture_output=True, timeout=timeout)


def records(lines: list[dict]) -> list[dict]:
    """Only the record lines of a consume-* output."""
    return [r for r in lines if "p" in r and "o" in r]


def summary(lines: list[dict]) -> dict:
    """The last line (the summary of produce / consume-*), asserting it isn't an error."""
    assert lines, "driver printed nothing"
    last = lines[-1]
    assert "error" not in last, last
    return last


def produce_log_outcome(lines: list[dict]) -> tuple[dict[str, tuple[int, int]], dict[str, str], dict]:
    """The Java driver's produce-log output as ({value: (partition, offset)} acknowledged, {value: error}
    failed, summary). A value reported twice (never expected) is an AssertionError."""
    acked: dict[str, tuple[int, int]] = {}
    failed: dict[str, str] = {}
    for x in lines:
        if "ack" not in x:
            continue
        assert x["v"] not in acked and x["v"] not in failed, f"{x['v']} reported twice"
        if x["ack"]:
            acked[x["v"]] = (x["p"], x["o"])
        else:
            failed[x["v"]] = x["error"]
    return acked, failed, summary(lines)


def decode_records(lines: list[dict]):
    """Driver JSON records -> (partition, offset, timestamp, key, value, headers) like tests/helpers.py."""
    def b(x):
        return None if x is None else base64.b64decode(x)
    return [(r["p"], r["o"], r["ts"], b(r["k"]), b(r["v"]), tuple((k, b(v)) for k, v in r["h"]))
            for r in lines if "p" in r and "o" in r]


# -- sockets and the peer broker -----------------------------------------------------------------
def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def kafka_ready(host: str, port: int, timeout: float = 1.0) -> bool:
    """True when host:port answers a Kafka ApiVersions v0 request (a real response, not just accept())."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.settimeout(timeout)
            client_id = b"kafkite-probe"
            body = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
            s.sendall(struct.pack(">i", len(body)) + body)
            head = _recv_exact(s, 8)
            size, corr = struct.unpack(">ii", head)
            return corr == 7 and size >= 6
    except OSError:
        return False


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise OSError("closed")
        buf += chunk
    return buf


def wait_kafka_ready(host: str, port: int, timeout: float = 30.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode} before listening on {host}:{port}")
        if kafka_ready(host, port):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing answered Kafka requests on {host}:{port} within {timeout}s")


def tansu_argv(port: int, host: str = "127.0.0.1", storage: str = "memory://tansu/",
               cluster_id: str = "tansu_cluster", advertised_port: int | None = None) -> list[str]:
    binary = tansu_binary()
    if binary is None:
        raise FileNotFoundError(f"tansu not installed ({INSTALL_HINT})")
    return [str(binary), "broker", "--listener-url", f"tcp://{host}:{port}",
            "--advertised-listener-url", f"tcp://{host}:{advertised_port or port}",
            "--storage-engine", storage, "--cluster-id", cluster_id]


@contextlib.contextmanager
def tansu_broker(port: int | None = None, host: str = "127.0.0.1", storage: str = "memory://tansu/",
                 ready_timeout: float = 30.0, log_path: Path | str | None = None,
                 skip_if_missing: bool = True, advertised_port: int | None = None) -> Iterator[str]:
    """Start Tansu (in memory by default) on a free port; yields "host:port" once it answers ApiVersions;
    stops it (SIGTERM, then SIGKILL after 10 s) at the end. Its log goes to `log_path` (default: a temp
    file, deleted afterwards unless the broker failed to start). Skips the test when Tansu isn't installed
    (raises FileNotFoundError instead with skip_if_missing=False, e.g. outside pytest).
    `advertised_port`: advertise another port in metadata (e.g. a proxy's); the listener is still yielded."""
    if tansu_binary() is None:
        if skip_if_missing:
            need("tansu")
        raise FileNotFoundError(f"tansu not installed ({INSTALL_HINT})")
    port = port or free_port(host)
    own_log = log_path is None
    if own_log:
        fd, log_name = tempfile.mkstemp(prefix="tansu-", suffix=".log")
        os.close(fd)
        log_path = Path(log_name)
    log_path = Path(log_path)
    env = dict(os.environ)
    env.setdefault("RUST_LOG", "warn")
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(tansu_argv(port, host, storage, advertised_port=advertised_port), stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True)
    ok = False
    try:
        try:
            wait_kafka_ready(host, port, ready_timeout, proc)
        except Exception as e:
            raise RuntimeError(f"{e}; log: {log_path}:\n{log_path.read_text(errors='replace')[-2000:]}") from None
        ok = True
        yield f"{host}:{port}"
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        if own_log and ok:
            with contextlib.suppress(OSError):
                log_path.unlink()
