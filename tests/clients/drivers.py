"""Running the non-Python clients from tests: the Java driver, kafkajs, kcat.

Tools come from .ci/install-clients.sh into $KAFKITE_TOOLS (default <repo>/.tools);
a test that needs a missing tool is skipped with the reason.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOLS = Path(os.environ.get("KAFKITE_TOOLS", ROOT / ".tools"))
JAVA_DIR = TOOLS / "java"
JS_DIR = TOOLS / "js"
HERE = Path(__file__).parent


def java_available() -> bool:
    return (JAVA_DIR / "classes" / "KafkiteDriver.class").exists() and shutil.which("java") is not None


def node_available() -> bool:
    return (JS_DIR / "node_modules" / "kafkajs").exists() and shutil.which("node") is not None


def kcat_available() -> bool:
    return shutil.which("kcat") is not None


def need(tool: str) -> None:
    ok = {"java": java_available, "node": node_available, "kcat": kcat_available}[tool]()
    if not ok:
        pytest.skip(f"{tool} client not installed (run .ci/install-clients.sh)")


def java_argv(*args: str) -> list[str]:
    cp = os.pathsep.join([str(JAVA_DIR / "classes")] + [str(p) for p in sorted(JAVA_DIR.glob("*.jar"))])
    return ["java", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-cp", cp,
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "KafkiteDriver", *args]


def node_argv(*args: str) -> list[str]:
    return ["node", str(HERE / "js" / "driver.js"), *args]


def _run(argv: list[str], timeout: float, env=None) -> list[dict]:
    e = dict(os.environ)
    e["KAFKITE_JS"] = str(JS_DIR)
    e.update(env or {})
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=e)
    lines = []
    for line in proc.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            lines.append(json.loads(line))
    if proc.returncode != 0 and not lines:
        raise AssertionError(f"{argv[0]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return lines


def run_java(*args: str, timeout: float = 180) -> list[dict]:
    need("java")
    return _run(java_argv(*args), timeout)


def run_node(*args: str, timeout: float = 180) -> list[dict]:
    need("node")
    return _run(node_argv(*args), timeout)


def run_kcat(*args: str, input: bytes | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    need("kcat")
    return subprocess.run(["kcat", *args], input=input, capture_output=True, timeout=timeout)


def decode_records(lines: list[dict]):
    """Driver JSON records -> (partition, offset, timestamp, key, value, headers) like tests/helpers.py."""
    def b(x):
        return None if x is None else base64.b64decode(x)
    return [(r["p"], r["o"], r["ts"], b(r["k"]), b(r["v"]), tuple((k, b(v)) for k, v in r["h"]))
            for r in lines if "p" in r]
