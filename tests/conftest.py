"""Shared fixtures: an in-process broker on a random port (in memory or on disk)."""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest
import structlog
from hypothesis import settings

sys.path.insert(0, str(Path(__file__).parent))  # tests/helpers.py, tests/clients/drivers.py

from clients import drivers  # noqa: E402
from kafkite.testing.runner import BrokerThread  # noqa: E402

# log lines to stderr as `kafkite serve` writes them: a broker thread's WARN never lands in a CLI's output
# that a test reads from stdout
structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(
    getattr(logging, os.environ.get("KAFKITE_TEST_LOG_LEVEL", "WARNING"))),
    logger_factory=lambda *args: structlog.PrintLogger(sys.stderr))  # the sys.stderr of the moment (capture)

# Property tests draw the same examples on every run (a CI run never fails on a draw no run before made);
# explore further with `--hypothesis-profile=explore` (random draws) and keep what it finds
# as an @example.
settings.register_profile("kafkite", derandomize=True, database=None)
settings.register_profile("explore", max_examples=1000)
settings.load_profile("kafkite")

GOLDEN = Path(__file__).resolve().parents[1].parent / "shared" / "golden-requests"


@pytest.fixture
def broker():
    with BrokerThread() as b:
        yield b


@pytest.fixture
def broker_factory(tmp_path):
    started = []

    def make(**kw):
        b = BrokerThread(**kw).start()
        started.append(b)
        return b
    yield make
    for b in started:
        b.stop()


@pytest.fixture(params=sorted(drivers.JAVA_CLIENTS))
def java_client(request):
    """The test runs once on each Java kafka-clients that .ci/install-clients.sh installs (3.9.1 and 4.3.0):
    run_java and java_argv use that one's jars and compiled driver for the test."""
    saved = drivers.JAVA_CLIENT
    drivers.JAVA_CLIENT = drivers.JAVA_CLIENTS[request.param]
    yield request.param
    drivers.JAVA_CLIENT = saved


@pytest.fixture
def wire(broker):
    from kafkite.testing.wire_client import WireClient
    c = WireClient.connect(broker.bootstrap_servers)
    yield c
    c.close()


# -- CI: nothing the suite needs is skipped ----------------------------------------------------------
# Under CI=true every skip is a failure, with its reason, except the one comparison that needs what no
# machine of ours has: a Docker engine for Apache Kafka in testcontainers (its reason starts with
# ALLOWED_SKIP). A skip outside CI keeps its reason; scripts/test.sh passes -rs so the run lists them.
ALLOWED_SKIP = "no Docker engine"


def strict_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _refuse_skip(report) -> None:
    if not (report.skipped and strict_ci()) or hasattr(report, "wasxfail"):
        return
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    if reason.removeprefix("Skipped: ").startswith(ALLOWED_SKIP):
        return
    report.outcome = "failed"
    report.longrepr = (f"CI=true: a skip is a failure (install what the test needs in .ci/): {reason}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _refuse_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _refuse_skip(outcome.get_result())
