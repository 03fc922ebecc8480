"""What a handler gets besides the request handler object (kafka_apis.py): the decoded request, who sent it,
the time, the request's logger, the waits before its answer is sent."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ..security.authorizer import ANONYMOUS
from ..wire.codec import Request

if TYPE_CHECKING:
    from .broker import Broker


_time = time.time


def now_ms() -> int:
    return int(_time() * 1000)


class RequestContext:
    """One request's context. Built for every request, so it is lean: slots for what every request sets, class
    defaults for what only the control plane sets (an instance's __dict__ is made when it does), and the request's
    logger is bound (peer, api, version, correlation id, client id) only when a handler logs."""
    __slots__ = ("broker", "request", "peer", "_log", "_conn_log", "now_ms", "before_send", "principal",
                 "inter_broker", "listener", "__dict__")
    # the control plane's (control/model.py): this request's entry in the fault injector's request log, when one is on;
    # a partition's injected error patched into the response, and whether the connection closes after handling (an
    # acks=0 Produce that got one)
    fault_log_entry: Any = None
    partition_errors: Any = None
    close_after = False

    def __init__(self, broker: "Broker", request: Request, peer: str = "", log: Any = None, now_ms: int | None = None,
                 principal: str = ANONYMOUS, inter_broker: bool = False, conn_log: Any = None,
                 listener: str | None = None):
        self.broker = broker  # read by the control plane only (control/model.py); handlers use KafkaApis
        self.request = request
        self.peer = peer
        self._log = log  # bound already (a caller's own), or None: bound from conn_log on first use
        self._conn_log = conn_log  # the connection's logger
        self.now_ms = int(_time() * 1000) if now_ms is None else now_ms  # (now_ms(), inline)
        # Awaited before the response is sent; the connection may read and handle the next Produce
        # meanwhile (see network/connection.py). Produce puts its wait for the fsync here.
        self.before_send: list = []
        # who sent it (security/authorizer.py): User:ANONYMOUS, the SASL user, or an SSL client certificate's DN
        self.principal = principal
        self.inter_broker = inter_broker  # on the inter-broker listener: the brokers' own requests, never refused
        # the client listener it came on (its name): Metadata, FindCoordinator and KIP-951's leader hints give the
        # brokers' endpoints on it; None: the broker's primary listener (the inter-broker one, an in-process call)
        self.listener = listener

    @property
    def log(self) -> Any:
        if self._log is None and self._conn_log is not None:
            req = self.request
            self._log = self._conn_log.bind(api=req.api_name, version=req.api_version,
                                            correlation_id=req.correlation_id, client_id=req.client_id)
        return self._log

    @log.setter
    def log(self, value: Any) -> None:
        self._log = value

    @property
    def client_host(self) -> str:
        return self.peer.rsplit(":", 1)[0].strip("[]") if self.peer else ""

    @property
    def version(self) -> int:
        return self.request.api_version

    @property
    def body(self) -> Any:
        return self.request.body

    @property
    def client_id(self) -> str | None:
        return self.request.client_id
