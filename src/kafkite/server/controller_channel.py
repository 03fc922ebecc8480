"""The controller's connections to the brokers: Kafka's ControllerChannelManager, on Trio.

In ZooKeeper mode the active controller sends LeaderAndIsr (api 4), StopReplica (5) and
UpdateMetadata (6) to every live broker. Like Kafka (kafka.controller.ControllerChannelManager
and its RequestSendThread), there is one queue and one sender per broker:

* requests to one broker go one at a time, in the order `send` queued them; the next one is
  written only after the previous one's response was read;
* a failure (connect refused or timed out, connection closed or reset, request timed out, an
  answer that does not decode or carries another correlation id) closes the connection; after
  `retry_backoff` (Kafka: 100 ms) the connection is made again and the SAME request is sent
  again, for as long as the broker is not removed (Kafka retries until removeBroker). A failure
  on a connection kept from an earlier request (the broker may have closed it as idle) is
  first retried at once on a fresh connection, without backoff or warning;
* the client id is the controller's broker id as a string (Kafka gives its NetworkClient
  `config.brokerId.toString`); correlation ids count up per broker, across reconnects, as
  Kafka's one NetworkClient per broker does.

Where Kafkite differs: a callback is told `None` when its request will never be answered
(the broker was removed, or was unknown when `send` was called), where Kafka drops it silently;
and `add_broker` with a new endpoint for a known id moves that broker's queue to the new
endpoint (Kafka's addBroker ignores a known id).

Everything here runs on the Trio thread: `add_broker`, `remove_broker` and `send` do not block
and must be called from it; callbacks are called on it. A callback that raises is logged and
does not stop the sender.

`send_once` is the one-shot form (one connection, one request, one response) that a broker's
controlled shutdown uses to ask the controller.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Callable

import structlog
import trio

from ..wire import registry
from ..wire.frame import FrameReader

log = structlog.get_logger("kafkite.controller_channel")

Callback = Callable[[Any], None]

_RECEIVE_CHUNK = 65536


class ResponseMismatch(Exception):
    """An answer whose correlation id is not the one of the request in flight."""


def encode_request(request, correlation_id: int, client_id: str) -> bytes:
    """`request` framed (4-byte size) with its request header; API_VERSION must be set.

    Sets the request's header (kafka-python keeps it on the object); encoding follows at
    once, with no await between, so one request object may be queued for several brokers."""
    if request.API_VERSION is None:
        raise ValueError(f"{type(request).__name__}: API_VERSION must be set before sending")
    request.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(request.encode(header=True, framed=True))


async def _read_frame(stream: trio.abc.Stream, reader: FrameReader) -> bytes:
    while True:
        frame = reader.next_frame()
        if frame is not None:
            return frame
        data = await stream.receive_some(_RECEIVE_CHUNK)
        if not data:
            raise ConnectionError("connection closed by the broker")
        reader.feed(data)


async def exchange(stream: trio.abc.Stream, reader: FrameReader, request, correlation_id: int,
                    client_id: str):
    """Write `request`, read and decode its response; raises on any failure."""
    await stream.send_all(encode_request(request, correlation_id, client_id))
    frame = await _read_frame(stream, reader)
    response = registry.response_class(request.API_KEY).decode(frame, version=request.API_VERSION, header=True)
    got = response.header.correlation_id
    if got != correlation_id:
        raise ResponseMismatch(f"response correlation id {got}, expected {correlation_id}")
    return response


async def send_once(host: str, port: int, request, *, timeout: float, client_id: str = "kafkite",
                    correlation_id: int = 0, connect=None):
    """One connection, one request, one response (decoded), all within `timeout` seconds.

    For a broker's ControlledShutdown to the controller (Kafka's client id there is the
    broker's id as a string; pass `client_id=str(broker_id)`). Raises trio.TooSlowError on
    timeout, OSError / trio.BrokenResourceError / ConnectionError when the connection fails,
    ResponseMismatch or a decoding error on a bad answer. `connect(host, port)`: how the connection is made
    (server/interbroker.py: TLS and SASL on a secured inter-broker listener), plain TCP by default."""
    with trio.fail_after(timeout):
        stream = await (connect or trio.open_tcp_stream)(host, port)
        try:
            return await exchange(stream, FrameReader(), request, correlation_id, client_id)
        finally:
            await trio.aclose_forcefully(stream)


class _Item:
    __slots__ = ("request", "callback", "done")

    def __init__(self, request, callback: Callback | None):
        self.request = request
        self.callback = callback
        self.done = False


class _Broker:
    """One broker's endpoint, queue and sender state."""

    def __init__(self, broker_id: int, host: str, port: int):
        self.broker_id = broker_id
        self.host = host
        self.port = port
        self.queue: deque[_Item] = deque()  # the head is the request in flight
        self.wakeup = trio.Event()
        self.task_scope = trio.CancelScope()  # the sender task; cancelled by remove_broker
        self.attempt_scope: trio.CancelScope | None = None  # one connect+exchange; cancelled on a new endpoint
        self.removed = False
        self.started = False
        self.failures = 0  # consecutive failed attempts (logging: warn on the first only)
        self.correlation_id = 0

    @property
    def endpoint(self) -> tuple[str, int]:
        return self.host, self.port


class ControllerChannelManager:
    def __init__(self, controller_id: int, *, connect_timeout: float = 5.0, request_timeout: float = 30.0,
                 retry_backoff: float = 0.1):
        self.controller_id = controller_id
        self.client_id = str(controller_id)  # Kafka: config.brokerId.toString
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout
        self.retry_backoff = retry_backoff
        # how a connection is made: plain TCP, or TLS and SASL on a secured inter-broker listener (the broker sets
        # its server/interbroker.InterBrokerSecurity.connect)
        self.connect = trio.open_tcp_stream
        self._brokers: dict[int, _Broker] = {}
        self._nursery: trio.Nursery | None = None
        self.cut: set[int] = set()  # a test control: the brokers whose link is cut (each attempt fails until healed)
        self._running = False

    # -- lifecycle ------------------------------------------------------------------------

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Runs the per-broker sender tasks until cancelled (start with nursery.start).

        Brokers added before `run` get their senders when it starts. When `run` is cancelled
        the connections are closed; callbacks of requests still queued are not called."""
        if self._running:
            raise RuntimeError("ControllerChannelManager.run is already running")
        self._running = True
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for st in list(self._brokers.values()):
                    self._start_sender(st)
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            self._running = False
            for st in self._brokers.values():
                st.started = False
                st.task_scope = trio.CancelScope()  # a later run() starts fresh senders

    def _start_sender(self, st: _Broker) -> None:
        if self._nursery is not None and not st.started:
            st.started = True
            self._nursery.start_soon(self._sender, st, name=f"controller-to-broker-{st.broker_id}")

    # -- brokers --------------------------------------------------------------------------

    @property
    def brokers(self) -> dict[int, tuple[str, int]]:
        return {bid: st.endpoint for bid, st in self._brokers.items()}

    def pending(self, broker_id: int) -> int:
        """Requests queued for `broker_id`, the one in flight included (0 for an unknown id)."""
        st = self._brokers.get(broker_id)
        return len(st.queue) if st else 0

    def add_broker(self, broker_id: int, host: str, port: int) -> None:
        """Idempotent; a new endpoint for a known id replaces the old one: the connection is
        remade there and the request in flight, if any, is sent again to it."""
        st = self._brokers.get(broker_id)
        if st is None:
            st = self._brokers[broker_id] = _Broker(broker_id, host, port)
            log.debug("broker.added", controller_id=self.controller_id, broker_id=broker_id, host=host, port=port)
            self._start_sender(st)
            return
        if st.endpoint == (host, port):
            return
        log.info("broker.endpoint_changed", controller_id=self.controller_id, broker_id=broker_id,
                 old=f"{st.host}:{st.port}", new=f"{host}:{port}")
        st.host, st.port = host, port
        st.failures = 0
        if st.attempt_scope is not None:
            st.attempt_scope.cancel()  # the sender reconnects to the new endpoint at once

    def remove_broker(self, broker_id: int) -> None:
        """Drop the broker's queue and stop its sender; pending callbacks get None."""
        st = self._brokers.pop(broker_id, None)
        if st is None:
            log.debug("broker.remove_unknown", controller_id=self.controller_id, broker_id=broker_id)
            return
        st.removed = True
        st.task_scope.cancel()
        dropped = list(st.queue)
        st.queue.clear()
        log.info("broker.removed", controller_id=self.controller_id, broker_id=broker_id, dropped=len(dropped))
        for item in dropped:
            self._complete(item, None)

    def cut_link(self, broker_id: int, cut: bool = True) -> None:
        """A test control: the link to `broker_id` cut (the request in flight is abandoned, every attempt fails as
        a refused connection and is retried after `retry_backoff`, the queue grows) or healed (the next retry
        connects and the queue goes out in order)."""
        if not cut:
            self.cut.discard(broker_id)
            return
        self.cut.add(broker_id)
        st = self._brokers.get(broker_id)
        if st is not None and st.attempt_scope is not None:
            st.attempt_scope.cancel()

    # -- sending --------------------------------------------------------------------------

    def send(self, broker_id: int, request, callback: Callback | None = None) -> None:
        """Queue `request` (API_VERSION set) for `broker_id`; see the module docstring.

        `callback(response)` is called on the Trio thread with the decoded response, or with
        None when the broker is removed before an answer. To an unknown broker id the request
        is logged and dropped, and `callback(None)` is called before `send` returns."""
        if request.API_VERSION is None:
            raise ValueError(f"{type(request).__name__}: API_VERSION must be set before sending")
        item = _Item(request, callback)
        st = self._brokers.get(broker_id)
        if st is None:
            log.warning("send.unknown_broker", controller_id=self.controller_id, broker_id=broker_id,
                        api_key=request.API_KEY, api_version=request.API_VERSION)
            self._complete(item, None)
            return
        st.queue.append(item)
        st.wakeup.set()

    def _complete(self, item: _Item, response) -> None:
        if item.done:
            return
        item.done = True
        if item.callback is None:
            return
        try:
            item.callback(response)
        except Exception:
            log.exception("callback.failed", controller_id=self.controller_id,
                          api_key=item.request.API_KEY)

    # -- the sender (Kafka's RequestSendThread) -------------------------------------------

    async def _sender(self, st: _Broker) -> None:
        stream: trio.abc.Stream | None = None
        reader = FrameReader()
        connected_to: tuple[str, int] | None = None
        try:
            with st.task_scope:
                while True:
                    while not st.queue:
                        st.wakeup = trio.Event()
                        await st.wakeup.wait()
                    item = st.queue[0]
                    while True:
                        if stream is not None and connected_to != st.endpoint:
                            await trio.aclose_forcefully(stream)
                            stream = None
                        response = None
                        error: BaseException | None = None
                        reused = stream is not None
                        with trio.CancelScope() as st.attempt_scope:
                            try:
                                if st.broker_id in self.cut:
                                    if stream is not None:
                                        await trio.aclose_forcefully(stream)
                                        stream = None
                                    raise ConnectionRefusedError("the link is cut (a test control)")
                                if stream is None:
                                    connected_to = st.endpoint
                                    with trio.move_on_after(self.connect_timeout):
                                        stream = await self.connect(*connected_to)
                                    if stream is None:
                                        raise TimeoutError(f"no connection within {self.connect_timeout}s")
                                    reader = FrameReader()
                                    log.debug("connected", controller_id=self.controller_id,
                                              broker_id=st.broker_id, endpoint=f"{connected_to[0]}:{connected_to[1]}")
                                st.correlation_id += 1
                                with trio.move_on_after(self.request_timeout):
                                    response = await exchange(stream, reader, item.request, st.correlation_id,
                                                               self.client_id)
                                if response is None:
                                    raise TimeoutError(f"no response within {self.request_timeout}s")
                            except Exception as exc:  # Kafka: any Throwable -> reconnect and resend
                                error = exc
                        st.attempt_scope = None
                        if response is not None:
                            break
                        if stream is not None:
                            await trio.aclose_forcefully(stream)
                            stream = None
                        if error is None:  # the attempt was cancelled: a new endpoint, retry at once
                            continue
                        if reused:
                            # a connection left idle may have been closed by the broker (its
                            # connections.max.idle.ms): try once on a fresh one before calling it a failure
                            log.debug("send.failed_on_reused_connection", controller_id=self.controller_id,
                                      broker_id=st.broker_id, error=f"{type(error).__name__}: {error}")
                            continue
                        self._log_failure(st, item, connected_to, error)
                        await trio.sleep(self.retry_backoff)
                    if st.removed:  # removed while the answer was arriving: remove_broker answered None
                        return
                    if st.failures:
                        log.info("reconnected", controller_id=self.controller_id, broker_id=st.broker_id,
                                 failed_attempts=st.failures)
                        st.failures = 0
                    if st.queue and st.queue[0] is item:
                        st.queue.popleft()
                    self._complete(item, response)
        finally:
            if stream is not None:
                await trio.aclose_forcefully(stream)

    def _log_failure(self, st: _Broker, item: _Item, endpoint, error: BaseException) -> None:
        st.failures += 1
        fields = dict(controller_id=self.controller_id, broker_id=st.broker_id,
                      endpoint=f"{endpoint[0]}:{endpoint[1]}" if endpoint else None,
                      api_key=item.request.API_KEY, error=f"{type(error).__name__}: {error}",
                      attempt=st.failures)
        if st.failures & (st.failures - 1) == 0:  # attempts 1, 2, 4, 8...: log2(attempts) lines while down
            log.warning("send.failed", **fields, retrying_every=self.retry_backoff)
        else:
            log.debug("send.failed", **fields)
