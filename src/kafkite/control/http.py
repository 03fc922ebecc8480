"""The control listener: HTTP/1.1 with JSON bodies (h11 on Trio), off unless asked (`kafkite serve --control-port
P`), bound to 127.0.0.1 unless `--control-host` says otherwise, and behind a bearer token when
`--control-token` is given (401 without it). Every route works on the broker process's one Faults model:

  GET    /v1                  this list, as JSON (the routes and their bodies)
  GET    /v1/faults           the errors, drops and latencies in force
  POST   /v1/errors           {"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER" | 6, "count": 1, "broker": null}
                              the next `count` requests of `api` (to `broker`, or any) are answered with `error`
  POST   /v1/drops            {"api": "Produce", "count": 1, "skip": 0, "broker": null}
                              the next `count` requests (after `skip`) are handled, then their connection is cut
  POST   /v1/latency          {"broker": 1, "ms": 200}: every request to that broker waits that long first
  DELETE /v1/faults           every error, drop and latency removed
  GET    /v1/requests         the request log (the newest 10,000 client requests): seq, time_ms, broker, api,
                              api_key, version, correlation_id, client_id, error (an injected one); ?api=Produce
                              filters by API name, ?since=SEQ returns only later ones
  DELETE /v1/requests         the log emptied

Bad input gets a 4xx with {"error": "<what is wrong>"}: 400 for a body or value that cannot be used, 401 for a
missing or wrong token, 404 for an unknown route, 405 for a method a route does not take.
"""
from __future__ import annotations

import hmac
import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

import h11
import structlog
import trio
from kafka.protocol.api_key import ApiKey

from ..wire.errors import E

log = structlog.get_logger("kafkite.control")
MAX_BODY = 1 << 20

ROUTES = {
    "/v1": {"GET": "this list"},
    "/v1/faults": {"GET": "the faults in force", "DELETE": "remove every error, drop and latency"},
    "/v1/errors": {"POST": '{"api": name, "error": name|code, "count": 1, "broker": id|null}'},
    "/v1/drops": {"POST": '{"api": name, "count": 1, "skip": 0, "broker": id|null}'},
    "/v1/latency": {"POST": '{"broker": id, "ms": 0+}'},
    "/v1/requests": {"GET": "the request log (?api=NAME, ?since=SEQ)", "DELETE": "empty the log"},
}


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _api(value: Any) -> int:
    try:
        return int(ApiKey[value]) if isinstance(value, str) else int(ApiKey(int(value)))
    except (KeyError, ValueError, TypeError):
        raise BadRequest(400, f"unknown api {value!r}: a Kafka API name (Produce, Fetch, ...) or key") from None


def _error(value: Any) -> int:
    try:
        return int(E[value]) if isinstance(value, str) else int(E(int(value)))
    except (KeyError, ValueError, TypeError):
        raise BadRequest(400, f"unknown error {value!r}: a Kafka error name (NOT_LEADER_OR_FOLLOWER, ...) or "
                              "code") from None


def _int(body: dict, key: str, default: Any = None, *, minimum: int = 0, optional: bool = False) -> Any:
    value = body.get(key, default)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise BadRequest(400, f"{key} must be an integer >= {minimum}, got {value!r}")
    return value


class ControlApp:
    """The routes (sans-IO: a request's method, path, query and JSON body in, a status and JSON out)."""

    def __init__(self, faults, broker_ids: list[int]) -> None:
        self.faults = faults
        self.broker_ids = broker_ids

    def _broker(self, body: dict, key: str = "broker", optional: bool = True) -> int | None:
        b = _int(body, key, None, optional=optional)
        if b is not None and b not in self.broker_ids:
            raise BadRequest(400, f"unknown broker {b}: this process runs brokers {self.broker_ids}")
        return b

    def handle(self, method: str, target: str, body: Any) -> tuple[int, Any]:
        url = urlsplit(target)
        path = url.path.rstrip("/") or "/"
        if path not in ROUTES:
            raise BadRequest(404, f"no route {path}: see GET /v1")
        if method not in ROUTES[path]:
            raise BadRequest(405, f"{path} takes {', '.join(ROUTES[path])}, not {method}")
        if method == "POST" and not isinstance(body, dict):
            raise BadRequest(400, "the body must be a JSON object")
        f = self.faults
        if path == "/v1":
            return 200, {"routes": ROUTES, "brokers": self.broker_ids}
        if path == "/v1/faults":
            if method == "DELETE":
                f.clear()
            return 200, f.state()
        if path == "/v1/errors":
            f.inject_error(_api(body.get("api")), _error(body.get("error")), count=_int(body, "count", 1, minimum=1),
                           broker_id=self._broker(body))
            return 200, f.state()
        if path == "/v1/drops":
            f.drop_response(_api(body.get("api")), count=_int(body, "count", 1, minimum=1),
                            broker_id=self._broker(body), skip=_int(body, "skip", 0))
            return 200, f.state()
        if path == "/v1/latency":
            f.set_latency(self._broker(body, optional=False), _int(body, "ms"))
            return 200, f.state()
        # /v1/requests
        if method == "DELETE":
            f.clear_requests()
            return 200, {"requests": []}
        query = parse_qs(url.query)
        rows = list(f.requests)
        if "api" in query:
            names = {ApiKey(_api(a)).name for a in query["api"]}
            rows = [r for r in rows if r["api"] in names]
        if "since" in query:
            try:
                since = int(query["since"][0])
            except ValueError:
                raise BadRequest(400, f"since must be an integer, got {query['since'][0]!r}") from None
            rows = [r for r in rows if r["seq"] > since]
        return 200, {"requests": rows}


async def serve_control(app: ControlApp, host: str, port: int, token: str | None = None, *,
                        task_status=trio.TASK_STATUS_IGNORED) -> None:
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()[1]
    task_status.started(bound)
    await trio.serve_listeners(lambda stream: _connection(stream, app, token), listeners)


async def _connection(stream: trio.SocketStream, app: ControlApp, token: str | None) -> None:
    """One HTTP connection: requests answered in turn (keep-alive), each body read whole (at most MAX_BODY)."""
    conn = h11.Connection(h11.SERVER)
    try:
        while True:
            request = await _next_event(conn, stream)
            if not isinstance(request, h11.Request):
                return
            body = bytearray()
            while True:
                event = await _next_event(conn, stream)
                if isinstance(event, h11.Data):
                    body += event.data
                    if len(body) > MAX_BODY:
                        await _send(conn, stream, 413, {"error": f"a body of at most {MAX_BODY} bytes"})
                        return
                elif isinstance(event, h11.EndOfMessage):
                    break
                else:
                    return
            status, out = _answer(app, token, request, bytes(body))
            await _send(conn, stream, status, out)
            if conn.our_state is h11.MUST_CLOSE:
                return
            conn.start_next_cycle()
    except (h11.RemoteProtocolError, trio.BrokenResourceError, trio.ClosedResourceError):
        return
    finally:
        with trio.move_on_after(1):
            await stream.aclose()


def _answer(app: ControlApp, token: str | None, request: h11.Request, raw: bytes) -> tuple[int, Any]:
    method, target = request.method.decode(), request.target.decode()
    try:
        if token is not None:
            given = dict(request.headers).get(b"authorization", b"").decode(errors="replace")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                raise BadRequest(401, "a control token is required: Authorization: Bearer <token>")
        try:
            body = json.loads(raw) if raw.strip() else {}
        except ValueError as exc:
            raise BadRequest(400, f"the body is not JSON: {exc}") from None
        status, out = app.handle(method, target, body)
    except BadRequest as exc:
        status, out = exc.status, {"error": str(exc)}
    log.info("control.request", method=method, target=target, status=status)
    return status, out


async def _next_event(conn: h11.Connection, stream: trio.SocketStream):
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        data = await stream.receive_some(65536)
        conn.receive_data(data)  # b"" is the end of the stream


async def _send(conn: h11.Connection, stream: trio.SocketStream, status: int, body: Any) -> None:
    data = json.dumps(body).encode()
    headers = [("content-type", "application/json"), ("content-length", str(len(data)))]
    await stream.send_all(conn.send(h11.Response(status_code=status, headers=headers)))
    await stream.send_all(conn.send(h11.Data(data=data)))
    await stream.send_all(conn.send(h11.EndOfMessage()))
