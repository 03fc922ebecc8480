"""The control model without sockets (kafkite.control.model, kafkite.control.routes): rules as data, their
filters and counts, holds released in order, version caps, and the body schemas that guard the HTTP door."""
from __future__ import annotations

import itertools
import re
from types import SimpleNamespace

import pytest
import trio
import trio.testing
from kafka.protocol.api_key import ApiKey

from kafkite.control.model import Faults
from kafkite.control.routes import ROUTES, BadRequest, ControlApp, validate
from kafkite.server.router import supported
from kafkite.wire.errors import E

_corr = itertools.count(1)


def ctx(api="Produce", version=9, client_id="c", broker=1):
    key = ApiKey[api]
    req = SimpleNamespace(api_key=int(key), api_name=api, api_version=version, client_id=client_id,
                          correlation_id=next(_corr), body=SimpleNamespace(acks=-1, topic_data=[]))
    b = SimpleNamespace(node_id=broker, router=SimpleNamespace(supported=supported))
    return SimpleNamespace(request=req, broker=b, fault_log_entry=None, version=version, body=req.body)


def answers(f: Faults, n: int, **kw) -> list:
    """The error each of n requests gets (None: handled)."""
    out = []
    for _ in range(n):
        c = ctx(**kw)
        early = trio.run(f.before, c)
        if early is None:
            out.append(None)
        elif hasattr(early[0], "error_code"):
            out.append(early[0].error_code)
        else:
            out.append(early[0].responses[0].partition_responses[0].error_code)
    return out


def test_a_sequence_repeats_count_times_and_none_lets_a_request_through():
    f = Faults()
    rid = f.inject_error("InitProducerId", [E.NOT_COORDINATOR, 0, E.COORDINATOR_LOAD_IN_PROGRESS], count=2)
    [rule] = f.state()["errors"]
    assert rule["id"] == rid and rule["remaining"] == 6
    assert rule["errors"] == ["NOT_COORDINATOR", "NONE", "COORDINATOR_LOAD_IN_PROGRESS"] * 2
    expected = [E.NOT_COORDINATOR, None, E.COORDINATOR_LOAD_IN_PROGRESS] * 2 + [None]
    assert answers(f, 7, api="InitProducerId", version=4) == expected
    assert f.state()["errors"] == []


def test_until_cleared_filters_and_removal_by_id():
    f = Faults()
    keep = f.inject_error("Heartbeat", "REBALANCE_IN_PROGRESS", count=-1, client_id="victim", version=4)
    other = f.inject_error("Heartbeat", E.UNKNOWN_MEMBER_ID, broker_id=2)
    assert answers(f, 3, api="Heartbeat", client_id="victim", version=4) == [E.REBALANCE_IN_PROGRESS] * 3
    assert answers(f, 1, api="Heartbeat", client_id="other", version=4) == [None]
    assert answers(f, 1, api="Heartbeat", client_id="victim", version=3) == [None]
    rules = {r["id"]: r for r in f.state()["errors"]}
    assert rules[keep]["remaining"] == -1 and rules[keep]["fired"] == 3 and rules[other]["fired"] == 0
    f.clear_errors(keep)
    assert [r["id"] for r in f.state()["errors"]] == [other]
    assert answers(f, 2, api="Heartbeat", broker=2, client_id="victim", version=4) == [E.UNKNOWN_MEMBER_ID, None]


@pytest.mark.parametrize("bad", [dict(count=0), dict(count=-2), dict(topic="t"), dict(partition=0)])
def test_refused_rules(bad):
    with pytest.raises(ValueError):
        Faults().inject_error("JoinGroup", 6, **bad)  # no topics in JoinGroup


def test_version_caps_per_broker_and_removal():
    f = Faults()
    f.set_api_versions("Fetch", max_version=4)
    f.set_api_versions("Metadata", min_version=4, max_version=9, broker_id=2)
    f.remove_api("ListGroups")
    one, two = f.advertised(1, supported()), f.advertised(2, supported())
    assert one[ApiKey.Fetch] == two[ApiKey.Fetch] == (4, 4)
    assert one[ApiKey.Metadata] == supported()[ApiKey.Metadata] and two[ApiKey.Metadata] == (4, 9)
    assert ApiKey.ListGroups not in one and ApiKey.ListGroups not in two
    assert trio.run(f.before, ctx("Fetch", version=5)) == "close"
    assert trio.run(f.before, ctx("Fetch", version=4)) is None
    assert trio.run(f.before, ctx("ApiVersions", version=3)) is None
    f.set_api_versions("ApiVersions", max_version=2)
    early = trio.run(f.before, ctx("ApiVersions", version=3))  # KIP-511: a v0 answer with the capped list
    assert early[1] == 0 and early[0].error_code == E.UNSUPPORTED_VERSION
    with pytest.raises(ValueError, match="leave none"):
        f.set_api_versions("Fetch", max_version=3)
    with pytest.raises(ValueError, match="not served to clients"):
        f.set_api_versions("LeaderAndIsr", max_version=7)
    f.clear()
    assert f.advertised(1, supported()) == supported()


def test_holds_release_the_oldest_first_and_unhold_releases_the_rest():
    f = Faults()
    f.hold("JoinGroup")
    done: list[int] = []

    async def request(i: int) -> None:
        c = ctx("JoinGroup")
        await f.before(c)
        done.append(i)

    async def main() -> None:
        async with trio.open_nursery() as n:
            for i in range(3):
                n.start_soon(request, i)
                await trio.testing.wait_all_tasks_blocked()
            assert [e["held"] for e in f.holding()] == [True] * 3 and done == []
            assert f.release("JoinGroup", count=1) == 1
            await trio.testing.wait_all_tasks_blocked()
            assert done == [0]
            assert f.unhold() == 1
        assert sorted(done) == [0, 1, 2] and f.state()["holds"] == []

    trio.run(main)


def test_a_cancelled_held_request_leaves_the_hold():
    f = Faults()
    f.hold("SyncGroup")

    async def main() -> None:
        with trio.move_on_after(0.05):
            await f.before(ctx("SyncGroup"))
        assert f.holding() == [] and f.state()["holds"][0]["held"] == []

    trio.run(main)


def test_body_schemas():
    schema = ROUTES["/v1/errors"]["POST"].body
    validate(schema, {"api": "Produce", "errors": ["NONE", 6], "count": -1, "broker": None})
    for bad, message in (({"api": "Produce", "count": True}, "count must be integer"),
                         ({"api": "Produce", "x": 1}, "not 'x'"), ({"count": 1}, "needs 'api'"),
                         ({"api": "Produce", "errors": []}, "1..1000 items"),
                         ({"api": "Produce", "errors": [None]}, "errors[0] must be string or integer")):
        with pytest.raises(BadRequest, match=re.escape(message)):
            validate(schema, bad)
    app = ControlApp(Faults(), [1])
    with pytest.raises(BadRequest, match="no view"):
        app.handle("GET", "/v1/groups", {})
    assert app.handle("DELETE", "/v1/errors", {"id": 12})[0] == 200


def test_an_acks_0_produce_with_an_error_closes_its_connection():
    """Kafka has no answer to carry an acks=0 Produce's error: it closes the connection (at once for the whole
    request; after handling the other partitions for one partition's error)."""
    f = Faults()
    f.inject_error("Produce", E.NOT_LEADER_OR_FOLLOWER)
    c = ctx("Produce")
    c.body.acks = 0
    assert trio.run(f.before, c) == "close"
    f.inject_error("Produce", E.NOT_LEADER_OR_FOLLOWER, topic="t", partition=0)
    part = SimpleNamespace(index=0, records=b"")
    c = ctx("Produce")
    c.body.acks, c.body.topic_data = 0, [SimpleNamespace(name="t", partition_data=[part, SimpleNamespace(index=1)])]
    assert trio.run(f.before, c) is None
    assert [p.index for t in c.body.topic_data for p in t.partition_data] == [1]  # partition 1 is still written
    assert f.should_drop(c)


def test_a_failing_control_answers_500_and_the_listener_goes_on():
    """A control that raises (here: a brokers view that fails) is answered 500 with its message; the next request
    on the same listener is served."""
    import json
    import urllib.error
    import urllib.request

    from kafkite.control.http import serve_control

    def broken():
        raise RuntimeError("boom")

    app = ControlApp(Faults(), [1], broken)

    def get(port, path):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    async def main():
        async with trio.open_nursery() as n:
            port = await n.start(serve_control, app, "127.0.0.1", 0)
            assert await trio.to_thread.run_sync(get, port, "/v1/partitions") == (500, {"error": "RuntimeError: boom"})
            assert (await trio.to_thread.run_sync(get, port, "/v1/faults"))[0] == 200
            n.cancel_scope.cancel()

    trio.run(main)
