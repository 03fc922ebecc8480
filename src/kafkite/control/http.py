"""The control listener: HTTP/1.1 with JSON bodies (h11 on Trio), off unless asked (`kafkite serve --control-port
P`), bound to 127.0.0.1 unless `--control-host` says otherwise, and behind a bearer token when
`--control-token` is given (401 without it). The routes (control/routes.py; GET /v1/openapi.json describes them)
work on the broker process's one control model (control/model.py):

  GET          /v1, /v1/openapi.json     the routes; the OpenAPI 3.1 document
  GET|DELETE   /v1/faults                every control in force / remove them all;  POST /v1/reset: and the log
  GET|POST|DELETE /v1/errors             {"api", "error" | "errors": [...], "count", "broker", "version",
                                          "client_id", "topic", "partition", "rtts"}
  GET|POST|DELETE /v1/drops              {"api", "count", "skip", "broker", "handled"}
  GET|POST|DELETE /v1/latency            {"broker", "api", "ms"}
  GET|POST|DELETE /v1/holds              {"api", "broker", "client_id"}; POST /v1/holds/release {"api", "id", "count"}
  GET|POST|DELETE /v1/versions           {"api", "min_version", "max_version", "broker", "remove"}
  GET|DELETE   /v1/requests              the request log (?api=Produce, ?since=SEQ) / empty it
  GET|POST|DELETE /v1/followers          {"topic", "partition", "broker"}: consumers sent to that replica
  GET|POST|DELETE /v1/metadata/leaders   {"topic", "partition", "leader", "leader_epoch", "count"}: what the next
                                         Metadata answers name as the partition's leader
  GET          /v1/partitions, /v1/groups  partition and group state (?topic=, ?group=)
  POST         /v1/leaders               {"topic", "partition", "broker"}: move a partition's leader
  POST         /v1/replicas              {"topic", "partition", "replicas"}: a reassignment (new ones catch up first)
  POST         /v1/leaders/shuffle       {"topics", "coordinators", "seed"}: leaders moved at random
  POST         /v1/coordinators          {"group" | "transactional_id", "broker"}: move a coordinator
  POST         /v1/replication/pause, /v1/replication/resume  {"broker"}: its followers stop / fetch again
  POST         /v1/replication/cut, /v1/replication/heal  {"follower", "leader"}: one link; GET /v1/replication
  POST         /v1/controller/cut, /v1/controller/heal  {"broker"}: the controller's link to it; GET /v1/controller
  GET|POST|DELETE /v1/leaderless         {"topic", "partition"}: leader -1 until restored (DELETE)
  GET|POST     /v1/clock                 {"advance_ms", "broker"}: the log clock moved forward
  GET          /v1/brokers               live or stopped; POST /v1/brokers/stop {"broker", "clean"}, /v1/brokers/start
                                         {"broker"} (ZooKeeper mode: the process's own broker, control/zk_restart.py)
  POST|DELETE  /v1/brokers               {"broker", "rack"} / {"broker"}: add a broker / decommission one;
                                         POST /v1/brokers/rack {"broker", "rack"}: its broker.rack changed
  POST         /v1/compact, /v1/retention  {"topic", "partition"} (retention: "advance_ms"): run them now

A body is read whole, at most MAX_BODY bytes: a larger Content-Length is refused (413) before any of it is read.
"""
from __future__ import annotations

import hmac
import json
from typing import Any

import h11
import structlog
import trio

from .routes import MAX_BODY, BadRequest, ControlApp  # ControlApp: also this module's API (app.py)

log = structlog.get_logger("kafkite.control")


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
            length = dict(request.headers).get(b"content-length", b"0")
            if not length.isdigit() or int(length) > MAX_BODY:
                await _send(conn, stream, 413, {"error": f"a body of at most {MAX_BODY} bytes"})
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
            status, out = await _answer(app, token, request, bytes(body))
            await _send(conn, stream, status, out)
            if conn.our_state is h11.MUST_CLOSE:
                return
            conn.start_next_cycle()
    except (h11.RemoteProtocolError, trio.BrokenResourceError, trio.ClosedResourceError):
        return
    finally:
        with trio.move_on_after(1):
            await stream.aclose()


async def _answer(app: ControlApp, token: str | None, request: h11.Request, raw: bytes) -> tuple[int, bytes]:
    method, target = request.method.decode(), request.target.decode()
    try:
        if token is not None:
            given = dict(request.headers).get(b"authorization", b"").decode(errors="replace")
            if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                raise BadRequest(401, "a control token is required: Authorization: Bearer <token>")
        try:
            body = json.loads(raw) if raw.strip() else {}
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
            raise BadRequest(400, f"the body is not usable JSON: {str(exc)[:200]}") from None
        status, out = await app.handle_async(method, target, body)
        data = json.dumps(out).encode()  # (here: an answer that is not JSON is a 500, not the listener's end)
    except BadRequest as exc:
        status, data = exc.status, json.dumps({"error": str(exc)}).encode()
    except Exception as exc:  # a bug or a broker that failed: answered, never the listener's (or broker's) end
        log.exception("control.failed", method=method, target=target)
        status, data = 500, json.dumps({"error": f"{type(exc).__name__}: {str(exc)[:500]}"}).encode()
    log.info("control.request", method=method, target=target, status=status)
    return status, data


async def _next_event(conn: h11.Connection, stream: trio.SocketStream):
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        data = await stream.receive_some(65536)
        conn.receive_data(data)  # b"" is the end of the stream


async def _send(conn: h11.Connection, stream: trio.SocketStream, status: int, body: Any) -> None:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = [("content-type", "application/json"), ("content-length", str(len(data)))]
    await stream.send_all(conn.send(h11.Response(status_code=status, headers=headers)))
    await stream.send_all(conn.send(h11.Data(data=data)))
    await stream.send_all(conn.send(h11.EndOfMessage()))
