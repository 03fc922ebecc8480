"""ControllerChannelManager (and send_once) against fake brokers on real TCP, in Trio.

A fake broker (trio.serve_tcp on a free port) decodes every request frame with the
interbroker classes, records it, and does what its script says for that request:
answer (with error_code = the request's controller_epoch, so each answer names its
request), close the connection, or hold the request unanswered until the peer hangs up.
"""
from __future__ import annotations

import math
import socket
import struct
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial

import pytest
import trio
from structlog.testing import capture_logs

from kafkite.server.controller_channel import ControllerChannelManager, send_once
from kafkite.wire import registry
from kafkite.wire.frame import FrameReader
from kafkite.wire.interbroker import (
    ControlledShutdownRequest, ControlledShutdownResponse,
    LeaderAndIsrRequest, LeaderAndIsrResponse,
    StopReplicaRequest, StopReplicaResponse,
    UpdateMetadataRequest, UpdateMetadataResponse,
)

CONTROLLER_ID = 1
BACKOFF = 0.01
TEST_DEADLINE = 5.0

ANSWER, CLOSE, HOLD, ANSWER_CLOSE = "answer", "close", "hold", "answer, then close"


def update_metadata(epoch: int, version: int = 8):
    req = UpdateMetadataRequest(controller_id=CONTROLLER_ID, controller_epoch=epoch, broker_epoch=10,
                                live_brokers=[], topic_states=[])
    req.API_VERSION = version
    return req


def leader_and_isr(epoch: int, version: int = 7):
    req = LeaderAndIsrRequest(controller_id=CONTROLLER_ID, controller_epoch=epoch, broker_epoch=10,
                              topic_states=[], live_leaders=[])
    req.API_VERSION = version
    return req


def stop_replica(epoch: int, version: int = 4):
    req = StopReplicaRequest(controller_id=CONTROLLER_ID, controller_epoch=epoch, broker_epoch=10,
                             topic_states=[])
    req.API_VERSION = version
    return req


def answer_for(req):
    """A response to `req` whose error_code is the request's controller epoch."""
    key = req.API_KEY
    epoch = req.controller_epoch if key != 7 else 0
    if key == 4:
        resp = LeaderAndIsrResponse(error_code=epoch, topics=[])
    elif key == 5:
        resp = StopReplicaResponse(error_code=epoch, partition_errors=[])
    elif key == 6:
        resp = UpdateMetadataResponse(error_code=epoch)
    else:
        resp = ControlledShutdownResponse(error_code=0, remaining_partitions=[])
    resp.API_VERSION = req.API_VERSION
    resp.with_header(correlation_id=req.header.correlation_id)
    return bytes(resp.encode(header=True, framed=True))


@dataclass
class Received:
    conn: int  # which connection (1, 2, ...) carried it
    correlation_id: int
    client_id: str
    request: object


@dataclass
class FakeBroker:
    script: list = field(default_factory=list)  # actions for the 1st, 2nd, ... request; then ANSWER
    port: int = 0
    connections: int = 0
    hangups: int = 0  # connections the peer closed while a request was held
    received: list = field(default_factory=list)

    async def handle(self, stream):
        self.connections += 1
        conn = self.connections
        reader = FrameReader()
        async with stream:
            while True:
                frame = reader.next_frame()
                if frame is None:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    reader.feed(data)
                    continue
                api_key, version, corr = struct.unpack(">hhi", frame[:8])
                req = registry.classes(api_key)[0].decode(frame, version=version, header=True)
                assert req.header.correlation_id == corr
                self.received.append(Received(conn, corr, req.header.client_id, req))
                n = len(self.received)
                action = self.script[n - 1] if n <= len(self.script) else ANSWER
                if action == CLOSE:
                    return
                if action == HOLD:
                    while await stream.receive_some(65536):
                        pass
                    self.hangups += 1
                    return
                await stream.send_all(answer_for(req))
                if action == ANSWER_CLOSE:
                    return

    def epochs(self):
        return [r.request.controller_epoch for r in self.received]


@asynccontextmanager
async def fake_broker(script=(), port=0):
    fb = FakeBroker(script=list(script))
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, fb.handle, port, host="127.0.0.1"))
        fb.port = listeners[0].socket.getsockname()[1]
        try:
            yield fb
        finally:
            nursery.cancel_scope.cancel()


@asynccontextmanager
async def channel(**kw):
    kw.setdefault("retry_backoff", BACKOFF)
    mgr = ControllerChannelManager(CONTROLLER_ID, **kw)
    async with trio.open_nursery() as nursery:
        await nursery.start(mgr.run)
        try:
            yield mgr
        finally:
            nursery.cancel_scope.cancel()


async def until(pred):
    while not pred():
        await trio.sleep(0.002)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Answers:
    """Callbacks that record (tag, response)."""

    def __init__(self):
        self.got = []

    def cb(self, tag):
        return lambda resp: self.got.append((tag, resp))


# -- delivery -------------------------------------------------------------------------------

async def test_in_order_delivery_and_callbacks_get_their_responses():
    with trio.fail_after(TEST_DEADLINE):
        async with fake_broker() as fb, channel() as mgr:
            mgr.add_broker(2, "127.0.0.1", fb.port)
            answers = Answers()
            reqs = [leader_and_isr(11), update_metadata(12), stop_replica(13), update_metadata(14, version=5),
                    leader_and_isr(15, version=0)]
            for i, req in enumerate(reqs):
                mgr.send(2, req, answers.cb(i))
            assert mgr.pending(2) == 5
            await until(lambda: len(answers.got) == 5)

            assert fb.epochs() == [11, 12, 13, 14, 15]
            assert [tag for tag, _ in answers.got] == [0, 1, 2, 3, 4]
            assert fb.connections == 1  # one connection for all
            corrs = [r.correlation_id for r in fb.received]
            assert corrs == sorted(corrs) and len(set(corrs)) == 5
            assert {r.client_id for r in fb.received} == {str(CONTROLLER_ID)}  # Kafka: config.brokerId.toString
            for (tag, resp), rec, req in zip(answers.got, fb.received, reqs):
                assert type(resp) is registry.response_class(req.API_KEY)
                assert resp.error_code == req.controller_epoch
                assert resp.header.correlation_id == rec.correlation_id
                assert rec.request.API_VERSION == req.API_VERSION
                assert bytes(rec.request.encode()) == bytes(req.encode())
            assert mgr.pending(2) == 0
            assert mgr.brokers == {2: ("127.0.0.1", fb.port)}


async def test_one_request_in_flight_at_a_time():
    # the broker holds the first request: the second is not written until the first is answered
    with trio.fail_after(TEST_DEADLINE):
        async with fake_broker(script=[HOLD]) as fb, channel(request_timeout=0.3) as mgr:
            mgr.add_broker(2, "127.0.0.1", fb.port)
            answers = Answers()
            mgr.send(2, update_metadata(1), answers.cb(1))
            mgr.send(2, update_metadata(2), answers.cb(2))
            await until(lambda: len(fb.received) == 1)
            await until(lambda: fb.hangups == 1)  # the request timeout closed that connection
            # connection 1 carried request 1 only; the held request comes again first on connection 2
            assert [r.request.controller_epoch for r in fb.received if r.conn == 1] == [1]
            await until(lambda: len(answers.got) == 2)
            assert [(r.conn, r.request.controller_epoch) for r in fb.received] == [(1, 1), (2, 1), (2, 2)]
            assert [(t, r.error_code) for t, r in answers.got] == [(1, 1), (2, 2)]


async def test_connection_closed_mid_request_resends_the_same_request_once_answered():
    with trio.fail_after(TEST_DEADLINE):
        async with fake_broker(script=[ANSWER, CLOSE, CLOSE]) as fb, channel() as mgr:
            mgr.add_broker(2, "127.0.0.1", fb.port)
            answers = Answers()
            mgr.send(2, update_metadata(1), answers.cb("a"))
            mgr.send(2, leader_and_isr(2), answers.cb("b"))
            mgr.send(2, update_metadata(3), answers.cb("c"))
            await until(lambda: len(answers.got) == 3)
            # b was sent on connection 1 (closed), 2 (closed), then answered on 3; then c
            assert fb.epochs() == [1, 2, 2, 2, 3]
            assert [r.conn for r in fb.received] == [1, 1, 2, 3, 3]
            assert fb.received[1].request == fb.received[2].request == fb.received[3].request
            corrs = [r.correlation_id for r in fb.received]
            assert corrs == sorted(corrs) and len(set(corrs)) == 5  # a resend is a new request on the wire
            assert [(t, r.error_code) for t, r in answers.got] == [("a", 1), ("b", 2), ("c", 3)]
            assert answers.got[1][1].header.correlation_id == fb.received[3].correlation_id
            await trio.sleep(5 * BACKOFF)
            assert len(answers.got) == 3  # each callback exactly once


async def test_connection_closed_while_idle_is_remade_quietly():
    # a broker closes an idle connection (connections.max.idle.ms): the next request goes out
    # on a new connection at once, without a warning
    with trio.fail_after(TEST_DEADLINE):
        async with fake_broker(script=[ANSWER_CLOSE]) as fb, channel(retry_backoff=10.0) as mgr:
            mgr.add_broker(2, "127.0.0.1", fb.port)
            answers = Answers()
            mgr.send(2, update_metadata(1), answers.cb(1))
            await until(lambda: answers.got)
            with capture_logs() as logs:
                mgr.send(2, update_metadata(2), answers.cb(2))
                await until(lambda: len(answers.got) == 2)  # long before a 10 s backoff
            assert [(t, r.error_code) for t, r in answers.got] == [(1, 1), (2, 2)]
            assert fb.connections == 2 and fb.epochs() == [1, 2]
            assert [e for e in logs if e["log_level"] == "warning"] == []


async def test_request_timeout_reconnects_and_resends():
    with trio.fail_after(TEST_DEADLINE):
        async with fake_broker(script=[HOLD]) as fb, channel(request_timeout=0.2) as mgr:
            mgr.add_broker(2, "127.0.0.1", fb.port)
            answers = Answers()
            mgr.send(2, stop_replica(7), answers.cb(7))
            await until(lambda: answers.got)
            assert fb.hangups == 1 and fb.connections == 2
            assert fb.epochs() == [7, 7]
            assert answers.got[0][1].error_code == 7


async def test_broker_not_listening_at_first_then_listening():
    port = free_port()
    with trio.fail_after(TEST_DEADLINE):
        async with channel() as mgr:
            with capture_logs() as logs:
                mgr.add_broker(3, "127.0.0.1", port)
                answers = Answers()
                mgr.send(3, update_metadata(5), answers.cb(5))
                await until(lambda: any(e["event"] == "send.failed" for e in logs))
            assert not answers.got and mgr.pending(3) == 1
            failure = next(e for e in logs if e["event"] == "send.failed")
            assert failure["log_level"] == "warning" and failure["broker_id"] == 3
            async with fake_broker(port=port) as fb:
                await until(lambda: answers.got)
                assert fb.epochs() == [5]
                assert answers.got[0][1].error_code == 5


async def test_retry_storm_is_logged_sparsely():
    port = free_port()  # nothing listens: every attempt fails at connect
    with trio.fail_after(TEST_DEADLINE):
        async with channel(retry_backoff=0.001) as mgr:
            with capture_logs() as logs:
                mgr.add_broker(3, "127.0.0.1", port)
                mgr.send(3, update_metadata(5))
                await until(lambda: mgr._brokers[3].failures >= 40)
                attempts = mgr._brokers[3].failures
            warned = [e for e in logs if e["event"] == "send.failed" and e["log_level"] == "warning"]
            assert [e["attempt"] for e in warned] == [1 << i for i in range(len(warned))]
            assert len(warned) <= math.floor(math.log2(attempts)) + 2
            assert mgr.pending(3) == 1


async def test_unknown_broker_gets_callback_none():
    with trio.fail_after(TEST_DEADLINE):
        async with channel() as mgr:
            answers = Answers()
            mgr.send(9, update_metadata(1), answers.cb("x"))
            assert answers.got == [("x", None)]
            mgr.send(9, update_metadata(1))  # no callback: dropped quietly
            assert mgr.pending(9) == 0 and mgr.brokers == {}


def test_send_requires_a_version():
    mgr = ControllerChannelManager(CONTROLLER_ID)
    mgr.add_broker(2, "127.0.0.1", 9)  # queued only: run() is not running
    req = UpdateMetadataRequest(controller_id=1, controller_epoch=1, broker_epoch=1)
    with pytest.raises(ValueError):
        mgr.send(2, req)
    assert mgr.pending(2) == 0
    req.API_VERSION = 8
    mgr.send(2, req)
    assert mgr.pending(2) == 1


# -- removal and endpoints ------------------------------------------------------------------

async def test_remove_broker_while_pending():
    with trio.fail_after(TEST_DEADLINE):
        async with fake_broker(script=[HOLD]) as fb, channel() as mgr:
            mgr.add_broker(2, "127.0.0.1", fb.port)
            answers = Answers()
            mgr.send(2, update_metadata(1), answers.cb(1))
            mgr.send(2, update_metadata(2), answers.cb(2))
            await until(lambda: len(fb.received) == 1)
            mgr.remove_broker(2)
            assert answers.got == [(1, None), (2, None)]  # at once, each exactly once
            assert mgr.brokers == {} and mgr.pending(2) == 0
            await until(lambda: fb.hangups == 1)  # the sender closed its connection
            await trio.sleep(10 * BACKOFF)  # and makes no further attempt
            assert fb.connections == 1 and len(fb.received) == 1
            assert answers.got == [(1, None), (2, None)]
            mgr.remove_broker(2)  # removing again is harmless
            answers2 = Answers()
            mgr.send(2, update_metadata(3), answers2.cb(3))
            assert answers2.got == [(3, None)]


async def test_remove_broker_while_retrying_a_dead_broker():
    port = free_port()
    with trio.fail_after(TEST_DEADLINE):
        async with channel() as mgr:
            with capture_logs() as logs:
                mgr.add_broker(4, "127.0.0.1", port)
                answers = Answers()
                mgr.send(4, leader_and_isr(1), answers.cb(1))
                await until(lambda: any(e["event"] == "send.failed" for e in logs))
                mgr.remove_broker(4)
                assert answers.got == [(1, None)]
            # a broker listening there now never hears the request
            async with fake_broker(port=port) as fb:
                await trio.sleep(10 * BACKOFF)
                assert fb.connections == 0
            assert answers.got == [(1, None)]


async def test_remove_then_add_again_starts_afresh():
    with trio.fail_after(TEST_DEADLINE):
        async with fake_broker() as fb, channel() as mgr:
            mgr.add_broker(2, "127.0.0.1", fb.port)
            mgr.remove_broker(2)
            mgr.add_broker(2, "127.0.0.1", fb.port)
            answers = Answers()
            mgr.send(2, update_metadata(4), answers.cb(4))
            await until(lambda: answers.got)
            assert answers.got[0][1].error_code == 4 and fb.epochs() == [4]


async def test_new_endpoint_takes_over_the_request_in_flight():
    with trio.fail_after(TEST_DEADLINE):
        async with fake_broker(script=[HOLD]) as old, fake_broker() as new, channel() as mgr:
            mgr.add_broker(2, "127.0.0.1", old.port)
            mgr.add_broker(2, "127.0.0.1", old.port)  # idempotent
            answers = Answers()
            mgr.send(2, update_metadata(1), answers.cb(1))
            await until(lambda: len(old.received) == 1)
            mgr.add_broker(2, "127.0.0.1", new.port)
            assert mgr.brokers == {2: ("127.0.0.1", new.port)}
            await until(lambda: answers.got)
            assert new.epochs() == [1] and answers.got[0][1].error_code == 1
            await until(lambda: old.hangups == 1)  # the old connection was closed
            mgr.send(2, update_metadata(2), answers.cb(2))
            await until(lambda: len(answers.got) == 2)
            assert new.epochs() == [1, 2] and old.connections == 1


async def test_brokers_are_independent():
    with trio.fail_after(TEST_DEADLINE):
        async with fake_broker(script=[HOLD]) as stuck, fake_broker() as fine, channel() as mgr:
            mgr.add_broker(1, "127.0.0.1", stuck.port)
            mgr.add_broker(2, "127.0.0.1", fine.port)
            answers = Answers()
            req = update_metadata(6)  # one request object queued for both brokers
            mgr.send(1, req, answers.cb("stuck"))
            mgr.send(2, req, answers.cb("fine"))
            mgr.send(2, leader_and_isr(7), answers.cb("fine2"))
            await until(lambda: len(answers.got) == 2)
            assert [t for t, _ in answers.got] == ["fine", "fine2"]
            assert len(stuck.received) == 1 and stuck.received[0].request == req
            assert mgr.pending(1) == 1
            mgr.remove_broker(1)
            assert answers.got[-1] == ("stuck", None)


async def test_brokers_added_before_run_and_callback_errors():
    mgr = ControllerChannelManager(CONTROLLER_ID, retry_backoff=BACKOFF)
    answers = Answers()

    def bad(resp):
        answers.got.append(("bad", resp))
        raise RuntimeError("callback bug")

    with trio.fail_after(TEST_DEADLINE):
        async with fake_broker() as fb:
            mgr.add_broker(2, "127.0.0.1", fb.port)
            mgr.send(2, update_metadata(1), bad)
            mgr.send(2, update_metadata(2), answers.cb("ok"))
            async with trio.open_nursery() as nursery:
                await nursery.start(mgr.run)
                with pytest.raises(RuntimeError):
                    await mgr.run()
                await until(lambda: len(answers.got) == 2)
                nursery.cancel_scope.cancel()
            assert [(t, r.error_code) for t, r in answers.got] == [("bad", 1), ("ok", 2)]


# -- send_once ------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 1, 2, 3])
async def test_send_once_controlled_shutdown(version):
    with trio.fail_after(TEST_DEADLINE):
        async with fake_broker() as fb:
            req = ControlledShutdownRequest(broker_id=3, broker_epoch=99 if version >= 2 else -1)
            req.API_VERSION = version
            resp = await send_once("127.0.0.1", fb.port, req, timeout=2.0, client_id="3", correlation_id=17)
            assert isinstance(resp, ControlledShutdownResponse) and resp.error_code == 0
            assert resp.header.correlation_id == 17
            (rec,) = fb.received
            assert rec.request.broker_id == 3 and rec.correlation_id == 17
            assert rec.client_id == ("" if version == 0 else "3")  # header v0 has no client id
            await until(lambda: fb.connections == 1)


async def test_send_once_failures():
    req = ControlledShutdownRequest(broker_id=3, broker_epoch=1)
    req.API_VERSION = 3
    with trio.fail_after(TEST_DEADLINE):
        with pytest.raises(OSError):
            await send_once("127.0.0.1", free_port(), req, timeout=2.0)
        async with fake_broker(script=[HOLD]) as fb:
            with pytest.raises(trio.TooSlowError):
                await send_once("127.0.0.1", fb.port, req, timeout=0.2)
            await until(lambda: fb.hangups == 1)
        async with fake_broker(script=[CLOSE]) as fb:
            with pytest.raises(ConnectionError):
                await send_once("127.0.0.1", fb.port, req, timeout=2.0)


async def test_a_cut_link_queues_the_requests_and_a_heal_sends_them_in_order():
    """The control plane's cut (POST /v1/controller/cut): the request held by the broker is abandoned with the link,
    nothing reaches the broker while it is cut, and once healed the queue goes out in order, the abandoned request
    first again."""
    with trio.fail_after(TEST_DEADLINE):
        async with fake_broker(script=[ANSWER, HOLD]) as fb, channel() as mgr:
            mgr.add_broker(2, "127.0.0.1", fb.port)
            answers = Answers()
            mgr.send(2, update_metadata(1), answers.cb(1))
            mgr.send(2, leader_and_isr(2), answers.cb(2))
            await until(lambda: len(fb.received) == 2)  # 2 is held by the broker
            mgr.cut_link(2)
            await until(lambda: fb.hangups == 1)  # the link went with the cut
            mgr.send(2, update_metadata(3), answers.cb(3))
            await trio.sleep(10 * BACKOFF)  # retried meanwhile, never reaching the broker
            assert len(fb.received) == 2 and [t for t, _ in answers.got] == [1] and mgr.pending(2) == 2
            mgr.cut_link(2, False)
            await until(lambda: len(answers.got) == 3)
            assert fb.epochs() == [1, 2, 2, 3] and [t for t, _ in answers.got] == [1, 2, 3]
            assert mgr.cut == set()
