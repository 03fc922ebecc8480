"""The event-loop watchdog (kafkite.loop_watchdog): a step holding the loop past the threshold is a WARN line naming
its task; steps that yield are not; 0 turns it off; the test helpers' loops have it on."""
from __future__ import annotations

import time

import pytest
import structlog
import trio

from helpers import wait_until
from kafkite import loop_watchdog
from kafkite.testing.runner import BrokerThread


def run_with(threshold_ms, body):
    out = {}

    async def main():
        out["dog"] = loop_watchdog.install(threshold_ms)
        async with trio.open_nursery() as n:
            n.start_soon(body, name="blocker")
    with structlog.testing.capture_logs() as logs:
        trio.run(main)
    return out["dog"], [e for e in logs if e["event"] == "event_loop.blocked"]


def test_a_step_holding_the_loop_is_named():
    async def body():
        await trio.sleep(0)
        time.sleep(0.25)  # blocking: nothing else runs meanwhile
        await trio.sleep(0)
    dog, warns = run_with(100, body)
    assert [(t, ms >= 250) for t, ms in dog.blocked] == [("blocker", True)]
    assert len(warns) == 1 and warns[0]["task"] == "blocker" and warns[0]["log_level"] == "warning"
    assert warns[0]["held_ms"] >= 250 and warns[0]["threshold_ms"] == 100


def test_steps_that_yield_are_not_reported():
    async def body():
        for _ in range(30):
            time.sleep(0.01)  # 10 ms per step, well under the threshold
            await trio.sleep(0)
    dog, warns = run_with(100, body)
    assert list(dog.blocked) == [] and warns == []


def test_zero_turns_it_off_and_the_environment_sets_it(monkeypatch):
    async def body():
        time.sleep(0.15)
        await trio.sleep(0)
    dog, warns = run_with(0, body)
    assert dog is None and warns == []
    monkeypatch.setenv(loop_watchdog.ENV, "50")
    assert loop_watchdog.threshold_from_env() == 50
    monkeypatch.setenv(loop_watchdog.ENV, "soon")
    with pytest.raises(ValueError, match="KAFKITE_LOOP_WATCHDOG_MS"):
        loop_watchdog.threshold_from_env()


def test_the_test_brokers_loop_has_it(monkeypatch):
    monkeypatch.delenv(loop_watchdog.ENV, raising=False)
    with BrokerThread() as b:
        assert b.watchdog is not None and b.watchdog.threshold_s == 0.1
        b.call(time.sleep, 0.2)  # a blocking call run inside the broker's loop
        # the step ends (and is timed) just after the call's answer reached this thread
        wait_until(lambda: any(ms >= 200 for _, ms in b.watchdog.blocked), timeout=30, what="the blocked step")


def test_a_tasks_last_step_counts_too():
    async def body():
        time.sleep(0.15)  # the task's only step: it exits at its end
    dog, warns = run_with(100, body)
    assert [t for t, _ in dog.blocked] == ["blocker"] and len(warns) == 1
