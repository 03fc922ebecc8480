"""The control plane's routes (sans-IO: method, path, query and JSON body in; status and JSON out), each with
its body's JSON schema. The same table validates a request's body, answers it, and is the OpenAPI document
(GET /v1/openapi.json), so the document cannot list a route that is not served or miss one that is.

Bad input answers 4xx with {"error": "<what is wrong>"} and changes nothing: 400 for a body or value that cannot
be used, 401 for a missing or wrong token, 404 for an unknown route, 405 for a method a route does not take, 409
for a control that needs the broker while a ZooKeeper-mode process's broker is stopped (POST /v1/brokers/start
first), 413 for a body over MAX_BODY (http.py)."""
from __future__ import annotations

import inspect
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

from kafka.protocol.api_key import ApiKey

from . import views
from .model import Faults, api_key, error_code
from .schema import _BROKER, _OPT_INT, _OPT_STR, BadRequest, Route, _obj, _short, openapi, validate
from .topology_routes import TOPOLOGY_ROUTES, TopologyAnswers

MAX_BODY = 1 << 20

_API = {"type": ["string", "integer"], "description": "a Kafka API name (Produce, Fetch, JoinGroup, ...) or key"}
_ERR = {"type": ["string", "integer"], "description": "a Kafka error name (NOT_LEADER_OR_FOLLOWER, NONE, ...) or code"}


ROUTES: dict[str, dict[str, Route]] = {
    "/v1": {"GET": Route("the routes and this process's brokers", "index")},
    "/v1/openapi.json": {"GET": Route("this API as an OpenAPI 3.1 document", "openapi")},
    "/v1/faults": {"GET": Route("every control in force", "state"),
                   "DELETE": Route("remove every control (holds release what they held); the log stays", "clear")},
    "/v1/reset": {"POST": Route("remove every control and empty the request log; with data: also every topic, group, "
                                "ACL and SCRAM user (ZooKeeper mode: topics, ACLs, users cluster-wide, the groups "
                                "this broker coordinates)", "reset",
                                _obj({"data": {"type": "boolean", "description": "empty the brokers too"}}))},
    "/v1/errors": {
        "GET": Route("the error rules in force", "state"),
        "POST": Route("answer an API's requests with errors, in turn", "add_error", _obj({
            "api": _API,
            "error": _ERR,
            "errors": {"type": "array", "items": _ERR, "minItems": 1, "maxItems": 1000,
                       "description": "answered in turn (NONE lets that request through); instead of error"},
            "count": {"type": "integer", "minimum": -1, "description": "times (over the sequence); -1: until "
                                                                       "cleared; default 1"},
            "rtts": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 600_000}, "minItems": 1,
                     "maxItems": 1000, "description": "ms each answer waits first, one per error in turn (librdkafka's "
                                                      "push_request_error_rtts); one value: for every error"},
            "broker": _BROKER,
            "version": {**_OPT_INT, "description": "only requests of this API version"},
            "client_id": {**_OPT_STR, "description": "only requests with this client id"},
            "topic": {**_OPT_STR, "description": "Produce, Fetch, ListOffsets, OffsetForLeaderEpoch: only this "
                                                 "topic's partitions answer the error, the others are served; "
                                                 "Metadata: the topic's entry; AddPartitionsToTxn: its partitions, the "
                                                 "others OPERATION_NOT_ATTEMPTED"},
            "partition": {**_OPT_INT, "description": "with topic: only this partition"}}, ("api",))),
        "DELETE": Route("remove every error rule, or the one with that id", "clear_errors", _obj({"id": _OPT_INT}))},
    "/v1/drops": {
        "GET": Route("the drop rules in force", "state"),
        "POST": Route("close the connection of an API's requests, after handling them (or before)", "add_drop",
                      _obj({"api": _API, "count": {"type": "integer", "minimum": -1}, "skip": _OPT_INT,
                            "broker": _BROKER, "handled": {"type": "boolean", "description": "true (default): "
                                                           "after the request took effect; false: before"}},
                           ("api",))),
        "DELETE": Route("remove every drop rule, or the one with that id", "clear_drops", _obj({"id": _OPT_INT}))},
    "/v1/latency": {
        "GET": Route("the delays in force", "state"),
        "POST": Route("delay requests to a broker, of an API, or both (matching delays add up); ms 0 removes it",
                      "add_latency", _obj({"broker": _BROKER, "api": {**_API, "type": ["string", "integer", "null"]},
                                           "ms": {"type": "integer", "minimum": 0, "maximum": 600_000}}, ("ms",))),
        "DELETE": Route("remove every delay", "clear_latency")},
    "/v1/holds": {
        "GET": Route("the holds and the requests they hold (request-log entries)", "holds"),
        "POST": Route("hold an API's requests until released", "add_hold",
                      _obj({"api": _API, "broker": _BROKER, "client_id": _OPT_STR}, ("api",))),
        "DELETE": Route("remove holds (of api, or that id, or all) and release what they hold", "unhold",
                        _obj({"api": _API, "id": _OPT_INT}))},
    "/v1/holds/release": {
        "POST": Route("release held requests (the oldest count, or all); the holds stay", "release",
                      _obj({"api": _API, "id": _OPT_INT, "count": {"type": ["integer", "null"], "minimum": 1}}))},
    "/v1/versions": {
        "GET": Route("the version caps in force", "state"),
        "POST": Route("advertise and serve only min_version..max_version of an API, or remove it", "add_version",
                      _obj({"api": _API, "min_version": _OPT_INT, "max_version": _OPT_INT, "broker": _BROKER,
                            "remove": {"type": "boolean"}}, ("api",))),
        "DELETE": Route("remove every version cap", "clear_versions")},
    "/v1/followers": {
        "GET": Route("the followers consumers are sent to", "state"),
        "POST": Route("the partition's leader answers consumers' Fetch (v11+) with this replica as the preferred read "
                      "replica and no records, whatever their rack (librdkafka's mock partition_set_follower): they "
                      "fetch from it, up to its high watermark; broker null: no longer (ZooKeeper mode: the leader's "
                      "listener)", "set_follower",
                      _obj({"topic": {"type": "string"}, "partition": {"type": "integer", "minimum": 0},
                            "broker": {**_OPT_INT, "description": "a replica of the partition; null: none"}},
                           ("topic", "partition", "broker"))),
        "DELETE": Route("remove every follower set", "clear_followers")},
    "/v1/metadata/leaders": {
        "GET": Route("the leaders Metadata answers are to name", "metadata_leaders"),
        "POST": Route("the next count Metadata answers that list the partition name this leader and leader epoch "
                      "(stale or made-up metadata; the partition is unchanged), one answer each, in the order pushed "
                      "(librdkafka's mock partition_push_leader_response)", "push_metadata_leader",
                      _obj({"topic": {"type": "string"}, "partition": {"type": "integer", "minimum": 0},
                            "leader": {"type": "integer", "minimum": -1, "description": "a broker id; -1: none"},
                            "leader_epoch": {"type": "integer", "minimum": -1},
                            "count": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "default 1"}},
                           ("topic", "partition", "leader", "leader_epoch"))),
        "DELETE": Route("remove every pushed leader", "clear_metadata_leaders")},
    **TOPOLOGY_ROUTES,
    "/v1/requests": {
        "GET": Route("the request log (the newest 10,000 client requests)", "requests", query=(
            ("api", {"type": "string"}, "only this API"), ("since", {"type": "integer"}, "only after this seq"))),
        "DELETE": Route("empty the request log", "clear_requests")},
}


def _api(value: Any) -> int:
    try:
        return api_key(value)
    except (KeyError, ValueError, TypeError):
        raise BadRequest(400, f"unknown api {_short(value)}: a Kafka API name (Produce, Fetch, ...) or key") from None


def _error(value: Any) -> int:
    try:
        return error_code(value)
    except (KeyError, ValueError, TypeError):
        raise BadRequest(400, f"unknown error {_short(value)}: a Kafka error name (NOT_LEADER_OR_FOLLOWER, ...) or "
                              "code") from None


class ControlApp(TopologyAnswers):
    """The routes over one Faults model and the ids of this process's brokers (the topology and data answers:
    topology_routes.py)."""

    def __init__(self, faults: Faults, broker_ids: list[int], brokers: Callable[[], dict] | None = None,
                 node: Callable[[], Any] | None = None) -> None:
        """`brokers`: this process's brokers by id (for the views and data controls), called on their event loop;
        `node`: their server.node.Node (stop and start a broker)."""
        self.faults = faults
        self._broker_ids = list(broker_ids)
        self.brokers = brokers
        self.node = node

    @property
    def broker_ids(self) -> list[int]:
        """This process's brokers now (added and removed ones counted), else the ids it was made with."""
        brokers = None if self.brokers is None else self.brokers()
        return sorted(brokers) if brokers else self._broker_ids

    async def handle_async(self, method: str, target: str, body: Any) -> tuple[int, Any]:
        """handle(), and the routes that wait (a broker stopped or started, a compaction in a worker thread)."""
        status, out = self.handle(method, target, body)
        if inspect.iscoroutine(out):
            try:
                out = await out
            except ValueError as exc:
                raise BadRequest(400, str(exc)) from None
        return status, out

    def handle(self, method: str, target: str, body: Any) -> tuple[int, Any]:
        """The answer; for a route that waits, a coroutine to await on the brokers' loop (handle_async)."""
        url = urlsplit(target)
        path = url.path.rstrip("/") or "/"
        if path not in ROUTES:
            raise BadRequest(404, f"no route {path}: see GET /v1/openapi.json")
        if method not in ROUTES[path]:
            raise BadRequest(405, f"{path} takes {', '.join(ROUTES[path])}, not {method}")
        route = ROUTES[path][method]
        if route.body is not None:
            validate(route.body, {} if body is None else body)
        try:
            return 200, getattr(self, route.action)(body or {}, parse_qs(url.query), path)
        except ValueError as exc:  # the model refused a value
            raise BadRequest(400, str(exc)) from None

    def _broker(self, value: Any) -> int | None:
        if value is not None and value not in self.broker_ids:
            raise BadRequest(400, f"unknown broker {value}: this process runs brokers {self.broker_ids}")
        return value

    def _state(self, path: str, **extra) -> dict:
        state = self.faults.state()
        part = path.rsplit("/", 1)[-1]
        return {**({part: state[part]} if part in state else state), **extra}

    # -- answers --------------------------------------------------------------------------------
    def index(self, body, query, path):
        return {"routes": {p: {m: r.summary for m, r in ms.items()} for p, ms in ROUTES.items()},
                "brokers": self.broker_ids}

    def openapi(self, body, query, path):
        return openapi(ROUTES)

    def state(self, body, query, path):
        return self._state(path)

    def clear(self, body, query, path):
        self.faults.clear()
        return self.faults.state()

    def reset(self, body, query, path):
        if body.get("data") and self._zk_mode():
            return self._reset_zk_data()
        if body.get("data"):
            views.can_empty(self._brokers())  # a ValueError (400) before anything changed
            return self._reset_data()
        self.faults.reset()
        return self.faults.state()

    async def _reset_data(self):
        import time
        t0 = time.perf_counter()
        self.faults.clear()  # holds let their requests go before the topics go
        emptied = await views.empty(self._brokers())
        self.faults.reset()
        return {**self.faults.state(), "emptied": emptied, "took_ms": round((time.perf_counter() - t0) * 1000, 2)}

    async def _reset_zk_data(self):
        import time
        from . import zk_reset
        t0 = time.perf_counter()
        self.faults.clear()  # holds let their requests go before the topics go
        emptied = await zk_reset.empty(self._brokers())
        self.faults.reset()
        return {**self.faults.state(), "emptied": emptied, "took_ms": round((time.perf_counter() - t0) * 1000, 2)}

    def add_error(self, body, query, path):
        if ("error" in body) == ("errors" in body):
            raise BadRequest(400, "give error (one) or errors (a sequence answered in turn)")
        api = _api(body["api"])
        errors = [_error(e) for e in (body["errors"] if "errors" in body else [body["error"]])]
        broker = self._broker(body.get("broker"))
        rid = self.faults.inject_error(api, errors, count=body.get("count", 1), broker_id=broker,
                                       version=body.get("version"), client_id=body.get("client_id"),
                                       topic=body.get("topic"), partition=body.get("partition"),
                                       rtt_ms=None if body.get("rtts") is None else (
                                           body["rtts"] * len(errors) if len(body["rtts"]) == 1 else body["rtts"]))
        return self._state(path, id=rid)

    def clear_errors(self, body, query, path):
        self.faults.clear_errors(body.get("id"))
        return self._state(path)

    def add_drop(self, body, query, path):
        rid = self.faults.drop_response(_api(body["api"]), count=body.get("count", 1),
                                        broker_id=self._broker(body.get("broker")), skip=body.get("skip") or 0,
                                        handled=body.get("handled", True))
        return self._state(path, id=rid)

    def clear_drops(self, body, query, path):
        self.faults.clear_drops(body.get("id"))
        return self._state(path)

    def add_latency(self, body, query, path):
        api = None if body.get("api") is None else _api(body["api"])
        self.faults.set_latency(self._broker(body.get("broker")), body["ms"], api=api)
        return self._state(path)

    def clear_latency(self, body, query, path):
        self.faults.clear_latency()
        return self._state(path)

    def holds(self, body, query, path):
        return {"holds": self.faults.state()["holds"], "held": self.faults.holding()}

    def add_hold(self, body, query, path):
        rid = self.faults.hold(_api(body["api"]), broker_id=self._broker(body.get("broker")),
                               client_id=body.get("client_id"))
        return {**self.holds(body, query, path), "id": rid}

    def unhold(self, body, query, path):
        api = None if body.get("api") is None else _api(body["api"])
        removed = self.faults.unhold(api, hold_id=body.get("id"))
        return {**self.holds(body, query, path), "removed": removed}

    def release(self, body, query, path):
        api = None if body.get("api") is None else _api(body["api"])
        n = self.faults.release(api, count=body.get("count"), hold_id=body.get("id"))
        return {**self.holds(body, query, path), "released": n}

    def add_version(self, body, query, path):
        api, broker = _api(body["api"]), self._broker(body.get("broker"))
        if body.get("remove"):
            if body.get("min_version") is not None or body.get("max_version") is not None:
                raise BadRequest(400, "remove takes no versions")
            self.faults.remove_api(api, broker_id=broker)
        elif body.get("min_version") is None and body.get("max_version") is None:
            raise BadRequest(400, "give max_version and/or min_version, or remove: true")
        else:
            self.faults.set_api_versions(api, max_version=body.get("max_version"),
                                         min_version=body.get("min_version"), broker_id=broker)
        return self._state(path)

    def set_follower(self, body, query, path):
        topic, partition, broker = body["topic"], body["partition"], body["broker"]
        if broker is not None and self.brokers is not None:
            brokers = self._brokers()
            p = brokers[min(brokers)].metadata.partition(topic, partition) if brokers else None
            if p is None:
                raise BadRequest(400, f"no partition {_short(topic)}-{partition}")
            if broker not in p.replicas:
                raise BadRequest(400, f"broker {broker} is not a replica of {_short(topic)}-{partition}: its replicas "
                                      f"are {p.replicas}")
        self.faults.set_follower(topic, partition, broker)
        return self._state(path)

    def push_metadata_leader(self, body, query, path):
        topic, partition = body["topic"], body["partition"]
        if self.brokers is not None:
            brokers = self._brokers()
            if brokers and brokers[min(brokers)].metadata.partition(topic, partition) is None:
                raise BadRequest(400, f"no partition {_short(topic)}-{partition}")
        self.faults.push_metadata_leader(topic, partition, body["leader"], body["leader_epoch"], body.get("count", 1))
        return self._state("/v1/metadata_leaders")

    def metadata_leaders(self, body, query, path):
        return self._state("/v1/metadata_leaders")

    def clear_metadata_leaders(self, body, query, path):
        self.faults.clear_metadata_leaders()
        return self._state("/v1/metadata_leaders")

    def clear_followers(self, body, query, path):
        for f in self.faults.state()["followers"]:
            self.faults.set_follower(f["topic"], f["partition"], None)
        return self._state(path)

    def clear_versions(self, body, query, path):
        self.faults.clear_versions()
        return self._state(path)

    def requests(self, body, query, path):
        rows = list(self.faults.requests)
        if "api" in query:
            names = {ApiKey(_api(a)).name for a in query["api"]}
            rows = [r for r in rows if r["api"] in names]
        if "since" in query:
            try:
                since = int(query["since"][0])
            except ValueError:
                raise BadRequest(400, f"since must be an integer, got {_short(query['since'][0])}") from None
            rows = [r for r in rows if r["seq"] > since]
        return {"requests": rows}

    def clear_requests(self, body, query, path):
        self.faults.clear_requests()
        return {"requests": []}
