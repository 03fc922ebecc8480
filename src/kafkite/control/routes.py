"""The control plane's routes (sans-IO: method, path, query and JSON body in; status and JSON out), each with
its body's JSON schema. The same table validates a request's body, answers it, and is the OpenAPI document
(GET /v1/openapi.json), so the document cannot list a route that is not served or miss one that is.

Bad input answers 4xx with {"error": "<what is wrong>"} and changes nothing: 400 for a body or value that cannot
be used, 401 for a missing or wrong token, 404 for an unknown route, 405 for a method a route does not take, 409
for a control that needs the broker while a ZooKeeper-mode process's broker is stopped (POST /v1/brokers/start
first), 413 for a body over MAX_BODY (http.py)."""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

from kafka.protocol.api_key import ApiKey

from . import views
from .model import Faults, api_key, error_code
from .schema import BadRequest, _short, openapi, validate  # noqa: F401 (BadRequest, validate: also this module's API)

MAX_BODY = 1 << 20

_API = {"type": ["string", "integer"], "description": "a Kafka API name (Produce, Fetch, JoinGroup, ...) or key"}
_ERR = {"type": ["string", "integer"], "description": "a Kafka error name (NOT_LEADER_OR_FOLLOWER, NONE, ...) or code"}
_BROKER = {"type": ["integer", "null"], "minimum": 0, "description": "a broker of this process; null: any"}
_OPT_INT = {"type": ["integer", "null"], "minimum": 0}
_OPT_STR = {"type": ["string", "null"]}
_TARGET = {"type": "integer", "minimum": 0, "description": "a broker of this process"}


def _obj(properties: dict, required: tuple = ()) -> dict:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


@dataclass(frozen=True)
class Route:
    summary: str
    action: str                 # the ControlApp method that answers it
    body: dict | None = None    # the JSON schema of its body (None: takes none)
    query: tuple = ()           # (name, schema, description) of its query parameters


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
    "/v1/partitions": {"GET": Route("the partitions: leader, epochs, replicas, ISR, this process's replicas' offsets",
                                    "partitions", query=(("topic", {"type": "string"}, "only this topic"),))},
    "/v1/leaders": {"POST": Route("make a live ISR member the partition's leader (one-process clusters; ZooKeeper "
                                  "mode: the controller's listener)",
                                  "move_leader", _obj({"topic": {"type": "string"}, "partition": {"type": "integer",
                                                                                                  "minimum": 0},
                                                       "broker": {"type": "integer", "minimum": 0}},
                                                      ("topic", "partition", "broker")))},
    "/v1/replicas": {"POST": Route("reassign a partition: the new replicas copy the log and join the ISR, then those not "
                                   "kept leave (a leader not kept hands over); answers once done (ZooKeeper mode: the "
                                   "controller's listener)",
                                   "reassign", _obj({"topic": {"type": "string"},
                                                     "partition": {"type": "integer", "minimum": 0},
                                                     "replicas": {"type": "array", "minItems": 1, "maxItems": 1000,
                                                                  "items": {"type": "integer", "minimum": 0}}},
                                                    ("topic", "partition", "replicas")))},
    "/v1/leaders/shuffle": {"POST": Route(
        "every partition (of topics) whose ISR has another live member is led by one of them, chosen at random "
        "(kfake's ShufflePartitionLeaders); coordinators: the __consumer_offsets and __transaction_state partitions "
        "(kfake's RehashCoordinators). ZooKeeper mode: the controller's listener", "shuffle_leaders",
        _obj({"topics": {"type": ["array", "null"], "items": {"type": "string"}, "maxItems": 10_000},
              "coordinators": {"type": "boolean"}, "seed": {"type": ["integer", "null"],
                                                            "description": "the same seed, the same choice"}}))},
    "/v1/leaderless": {
        "GET": Route("the partitions kept leaderless", "leaderless"),
        "POST": Route("make a partition leaderless, as when no ISR member is live: leader -1 at a new leader epoch "
                      "(Metadata: LEADER_NOT_AVAILABLE; Produce, Fetch: NOT_LEADER_OR_FOLLOWER) until restored "
                      "(one-process clusters and single brokers; ZooKeeper mode: the controller's listener)",
                      "make_leaderless", _obj({"topic": {"type": "string"}, "partition": {"type": "integer",
                                                                                            "minimum": 0}},
                                              ("topic", "partition"))),
        "DELETE": Route("restore leaderless partitions (of topic, or that one, or all): the first live ISR member "
                        "leads", "restore_leader", _obj({"topic": _OPT_STR, "partition": _OPT_INT}))},
    "/v1/coordinators": {"POST": Route("make a broker the coordinator of a group (or transactional id): it leads that "
                                       "key's __consumer_offsets (__transaction_state) partition", "move_coordinator",
                                       _obj({"group": _OPT_STR, "transactional_id": _OPT_STR,
                                             "broker": {"type": "integer", "minimum": 0}}, ("broker",)))},
    "/v1/replication/pause": {"POST": Route("a broker of this process stops fetching as a follower (it serves clients): "
                                            "after replica.lag.time.max.ms it leaves the ISRs", "pause_replication",
                                            _obj({"broker": _TARGET}, ("broker",)))},
    "/v1/replication/resume": {"POST": Route("the broker's followers fetch again, catch up and rejoin the ISRs",
                                             "resume_replication", _obj({"broker": _TARGET}, ("broker",)))},
    "/v1/replication": {"GET": Route("each replicating broker of this process: paused, the leaders it is cut from",
                                     "replication")},
    "/v1/replication/cut": {"POST": Route("broker follower stops fetching from broker leader only (the others it "
                                          "goes on copying): after replica.lag.time.max.ms it leaves that leader's "
                                          "ISRs (ZooKeeper mode: the follower's listener)", "cut_replication",
                                          _obj({"follower": _TARGET, "leader": {"type": "integer", "minimum": 0}},
                                               ("follower", "leader")))},
    "/v1/replication/heal": {"POST": Route("the follower fetches from the leader again, catches up and rejoins",
                                           "heal_replication", _obj({"follower": _TARGET,
                                                                     "leader": {"type": "integer", "minimum": 0}},
                                                                    ("follower", "leader")))},
    "/v1/controller": {"GET": Route("the controller, and the brokers its connection is cut from", "controller_links")},
    "/v1/controller/cut": {"POST": Route("cut the controller's connection to a broker: its LeaderAndIsr and "
                                         "UpdateMetadata do not reach it, it keeps its old view (ZooKeeper mode: the "
                                         "controller's listener)", "cut_controller",
                                         _obj({"broker": {"type": "integer", "minimum": 0}}, ("broker",)))},
    "/v1/controller/heal": {"POST": Route("heal it: the broker gets what it missed and catches up", "heal_controller",
                                          _obj({"broker": {"type": "integer", "minimum": 0}}, ("broker",)))},
    "/v1/clock": {"GET": Route("each broker's log clock: the wall clock plus what it was advanced by", "clock"),
                  "POST": Route("move the log clock forward (of this process's brokers, or one): what retention, "
                                "compaction, segment.ms and LogAppendTime read", "advance_clock",
                                _obj({"advance_ms": {"type": "integer", "minimum": 0, "maximum": 10 ** 13},
                                      "broker": _BROKER}, ("advance_ms",)))},
    "/v1/brokers": {
        "GET": Route("this process's brokers: live or stopped, port, rack; the controller", "brokers_view"),
        "POST": Route("add a broker (one-process clusters of several brokers): empty, on a free port; answers once "
                      "Metadata lists it (topics and partitions made later are placed on it too)", "add_broker",
                      _obj({"broker": {**_OPT_INT, "description": "its id; default: the next one"},
                            "rack": {**_OPT_STR, "description": "its broker.rack"}})),
        "DELETE": Route("decommission a broker (one-process clusters): each of its partitions gets another live "
                        "broker in its place, which copies the log and joins the ISR; then the broker leaves them "
                        "(its leaderships move) and stops for good", "remove_broker",
                        _obj({"broker": _TARGET}, ("broker",)))},
    "/v1/brokers/rack": {"POST": Route("change a running broker's broker.rack (one-process clusters): Metadata and "
                                       "rack-aware fetching and assignment see it", "set_rack",
                                       _obj({"broker": _TARGET, "rack": {**_OPT_STR, "description": "null: none"}},
                                            ("broker", "rack")))},
    "/v1/brokers/stop": {"POST": Route(
        "stop a broker as if its process died (listeners closed, connections dropped, its session ended: its "
        "leaderships move); answers once it is out of the cluster. ZooKeeper mode: this process's broker, its logs "
        "left as a kill leaves them (see control/zk_restart.py)", "stop_broker", _obj({"broker": _TARGET, "clean": {
            "type": "boolean", "description": "ZooKeeper mode: a controlled shutdown, the logs closed clean, as "
            "SIGTERM does (default: a kill)"}}, ("broker",)))},
    "/v1/brokers/start": {"POST": Route(
        "start a stopped broker again on its port and data dir (ZooKeeper mode: as `kafkite serve` restarted: a new "
        "session, the logs recovered, the replicas caught up); answers once it is registered and serving",
        "start_broker", _obj({"broker": _TARGET}, ("broker",)))},
    "/v1/compact": {"POST": Route("compact every compacted replica (of topic, partition) now, the records committed "
                                  "so far included", "compact", _obj({"topic": _OPT_STR, "partition": _OPT_INT}))},
    "/v1/retention": {"POST": Route("apply retention to every delete-policy replica (of topic, partition) now, or "
                                    "as if advance_ms later", "retention",
                                    _obj({"topic": _OPT_STR, "partition": _OPT_INT,
                                          "advance_ms": {"type": "integer", "minimum": 0, "maximum": 10 ** 13,
                                                         "description": "evaluate retention.ms this much later "
                                                                        "than now"}}))},
    "/v1/groups": {"GET": Route("the groups coordinated in this process: state, generation, members, offsets",
                                "groups", query=(("group", {"type": "string"}, "only this group"),))},
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


class ControlApp:
    """The routes over one Faults model and the ids of this process's brokers."""

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

    def _zk_mode(self) -> bool:
        brokers = self._brokers()
        return bool(brokers) and brokers[min(brokers)].state.zk is not None

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

    def clear_versions(self, body, query, path):
        self.faults.clear_versions()
        return self._state(path)

    def _view(self, fn, query, name):
        if self.brokers is None:
            raise BadRequest(404, f"this control listener has no view of its brokers' {name}")
        return fn(self._brokers(), query[name][0] if name in query else None)

    def partitions(self, body, query, path):
        return {"partitions": self._view(views.partitions, query, "topic")}

    async def move_leader(self, body, query, path):
        brokers = self._brokers()
        zk = brokers[min(brokers)].state.zk if brokers else None
        broker = body["broker"] if zk is not None else self._broker(body["broker"])  # ZooKeeper: any broker id
        await views.move_leader(brokers, body["topic"], body["partition"], broker)
        return {"partitions": [p for p in views.partitions(self._brokers(), body["topic"])
                               if p["partition"] == body["partition"]]}

    async def reassign(self, body, query, path):
        from . import topology
        return {"partitions": [await topology.reassign(self._topology_node(), body["topic"], body["partition"],
                                                       body["replicas"])]}

    async def shuffle_leaders(self, body, query, path):
        topics = body.get("topics")
        if body.get("coordinators"):
            if topics is not None:
                raise BadRequest(400, "give topics or coordinators")
            brokers = self._brokers()
            known = brokers[min(brokers)].metadata.topics if brokers else {}
            topics = [t for t in ("__consumer_offsets", "__transaction_state") if t in known]
            if not topics:
                return {"moved": []}
        return {"moved": await views.shuffle_leaders(self._brokers(), topics, body.get("seed"))}

    def _brokers(self) -> dict:
        if self.brokers is None:
            raise BadRequest(404, "this control listener has no view of its brokers")
        brokers = self.brokers()
        runner = self._runner()
        if runner is not None and not brokers:
            raise BadRequest(409, f"broker {runner.node_id} is stopped: start it first (POST /v1/brokers/start)")
        return brokers

    def _runner(self):
        """A ZooKeeper-mode process's broker runner (control/zk_restart.py), else None."""
        from .zk_restart import ZkBrokerRunner
        node = None if self.node is None else self.node()
        return node if isinstance(node, ZkBrokerRunner) else None

    def _node(self):
        node = None if self.node is None else self.node()
        if node is None or (self._runner() is None and node.state.zk is not None):
            raise BadRequest(400, "this control listener cannot stop and start its broker: a ZooKeeper-mode broker "
                                  "does so over its own control listener (kafkite serve --control-port)")
        return node

    def brokers_view(self, body, query, path):
        runner = self._runner()
        if runner is not None and runner.node is None:
            return runner.stopped_view()
        brokers = self._brokers()
        state = brokers[min(brokers)].state if brokers else None
        if state is not None and state.zk is not None:  # this process's broker; the controller as it knows it
            controller = brokers[min(brokers)].controller_id()
        else:
            c = state.active_controller() if state is not None else None
            controller = None if c is None else c.node_id
        live = set(state.brokers) if state is not None and state.zk is None else set(brokers)
        return {"brokers": [{"id": i, "live": i in live, "port": b.bound_port, "rack": b.rack}
                             for i, b in sorted(brokers.items())], "controller": controller}

    def _topology_node(self):
        runner = self._runner()
        if runner is not None:  # ZooKeeper mode: the running broker's node
            self._brokers()  # (409 while stopped)
            return runner.node
        node = None if self.node is None else self.node()
        if node is None:
            raise BadRequest(404, "this control listener has no view of its brokers")
        return node

    async def add_broker(self, body, query, path):
        from . import topology
        node = self._topology_node()
        added = await topology.add_broker(node, body.get("broker"), body.get("rack"))
        return {**self.brokers_view(body, query, path), **added}

    async def remove_broker(self, body, query, path):
        from . import topology
        node, bid = self._topology_node(), self._broker(body["broker"])
        removed = await topology.remove_broker(node, bid)
        return {**self.brokers_view(body, query, path), **removed}

    def set_rack(self, body, query, path):
        from . import topology
        node, bid = self._topology_node(), self._broker(body["broker"])
        topology.set_rack(node, bid, body["rack"])
        return self.brokers_view(body, query, path)

    async def stop_broker(self, body, query, path):
        runner = self._runner()
        if runner is not None:  # ZooKeeper mode: this process's broker (any other id is refused there)
            await runner.stop(body["broker"], clean=bool(body.get("clean")))
            return self.brokers_view(body, query, path)
        if body.get("clean"):
            raise BadRequest(400, "clean is served in ZooKeeper mode (a controlled shutdown); a one-process "
                                  "cluster's broker stops as if its process died")
        node, bid = self._node(), self._broker(body["broker"])
        if bid not in node.live_brokers:
            raise BadRequest(400, f"broker {bid} is not running")
        node.stop_broker(bid)
        await node.wait_stopped(bid)
        return self.brokers_view(body, query, path)

    async def start_broker(self, body, query, path):
        runner = self._runner()
        if runner is not None:
            await runner.start(body["broker"])
            return self.brokers_view(body, query, path)
        node, bid = self._node(), self._broker(body["broker"])
        if bid in node.live_brokers or bid in node._scopes:
            raise BadRequest(400, f"broker {bid} is running")
        await node.start_broker(bid)
        return self.brokers_view(body, query, path)

    def _where(self, body) -> tuple:
        if body.get("partition") is not None and body.get("topic") is None:
            raise BadRequest(400, "partition needs topic")
        return body.get("topic"), body.get("partition")

    async def compact(self, body, query, path):
        return {"compacted": await views.compact(self._brokers(), *self._where(body))}

    def retention(self, body, query, path):
        return {"retention": views.apply_retention(self._brokers(), *self._where(body), body.get("advance_ms", 0))}

    def clock(self, body, query, path):
        return {"clock": views.clock(self._brokers())}

    def advance_clock(self, body, query, path):
        return {"clock": views.advance_clock(self._brokers(), body["advance_ms"], self._broker(body.get("broker")))}

    def leaderless(self, body, query, path):
        return {"leaderless": views.leaderless(self._brokers())}

    async def make_leaderless(self, body, query, path):
        await views.make_leaderless(self._brokers(), body["topic"], body["partition"])
        brokers = self._brokers()
        return {"partitions": [p for p in views.partitions(brokers, body["topic"])
                               if p["partition"] == body["partition"]], "leaderless": views.leaderless(brokers)}

    async def restore_leader(self, body, query, path):
        topic, partition = self._where(body)
        await views.restore_leader(self._brokers(), topic, partition)
        return {"partitions": [p for p in views.partitions(self._brokers(), topic)
                               if partition in (None, p["partition"])] if topic is not None else [],
                "leaderless": views.leaderless(self._brokers())}

    def replication(self, body, query, path):
        return views.replication_state(self._brokers())

    def _cut(self, body, cut: bool):
        follower = self._broker(body["follower"])
        leader = body["leader"] if self._zk_mode() else self._broker(body["leader"])  # ZooKeeper: another process's
        return views.cut_replication(self._brokers(), follower, leader, cut)

    def cut_replication(self, body, query, path):
        return self._cut(body, True)

    def heal_replication(self, body, query, path):
        return self._cut(body, False)

    def controller_links(self, body, query, path):
        return views.controller_links(self._brokers())

    def _cut_controller(self, body, cut: bool):
        broker = body["broker"] if self._zk_mode() else self._broker(body["broker"])  # ZooKeeper: any broker id
        return views.cut_controller(self._brokers(), broker, cut)

    def cut_controller(self, body, query, path):
        return self._cut_controller(body, True)

    def heal_controller(self, body, query, path):
        return self._cut_controller(body, False)

    async def move_coordinator(self, body, query, path):
        from ..coordinator.hashing import partition_for
        if (body.get("group") is None) == (body.get("transactional_id") is None):
            raise BadRequest(400, "give group or transactional_id")
        topic, key = (("__consumer_offsets", body["group"]) if body.get("group") is not None
                      else ("__transaction_state", body["transactional_id"]))
        brokers = self._brokers()
        info = brokers[min(brokers)].metadata.topics.get(topic) if brokers else None
        if info is None:
            raise BadRequest(400, f"no {topic} yet: it is made when a client first finds a coordinator")
        return await self.move_leader({"topic": topic, "partition": partition_for(key, len(info.partitions)),
                                       "broker": body["broker"]}, query, path)

    def _replication(self, body):
        broker = self._brokers().get(self._broker(body["broker"]))
        if broker is None or broker.replicas is None or not broker.replicated:
            raise BadRequest(400, f"broker {body['broker']} does not replicate (a single broker)")
        return broker.replicas.replication

    def pause_replication(self, body, query, path):
        self._replication(body).pause()
        return {"broker": body["broker"], "replication_paused": True}

    def resume_replication(self, body, query, path):
        self._replication(body).resume()
        return {"broker": body["broker"], "replication_paused": False}

    def groups(self, body, query, path):
        return {"groups": self._view(views.groups, query, "group")}

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
