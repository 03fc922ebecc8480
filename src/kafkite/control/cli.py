"""`kafkite control`: the control listener of a running `kafkite serve --control-port P` from a shell or a CI
script. Each sub-command is one HTTP request (control/routes.py); the answer is printed as JSON; a 4xx answer is
printed on stderr with exit code 1.

    kafkite control --url http://127.0.0.1:P error Produce NOT_LEADER_OR_FOLLOWER --count 3
    kafkite control --url ... error Produce NOT_LEADER_OR_FOLLOWER REQUEST_TIMED_OUT NONE   # in turn
    kafkite control --url ... error Produce NOT_LEADER_OR_FOLLOWER NONE --rtt 500 --rtt 0   # each answer's delay
    kafkite control --url ... error Fetch NOT_LEADER_OR_FOLLOWER --topic t --partition 0 --count -1
    kafkite control --url ... drop Fetch [--count N] [--skip N] [--broker B] [--before]
    kafkite control --url ... latency [BROKER] MS [--api Fetch]
    kafkite control --url ... hold JoinGroup | holds | release [JoinGroup] [--count N] | unhold [JoinGroup]
    kafkite control --url ... versions Fetch --max 4 | versions Fetch --remove | versions
    kafkite control --url ... faults | clear | reset [--data] | openapi
    kafkite control --url ... requests [--api Produce] [--since SEQ] [--clear]
    kafkite control --url ... partitions [--topic t] | groups [--group g] | leader TOPIC PARTITION BROKER
    kafkite control --url ... replicas TOPIC PARTITION B1 [B2 ...]
    kafkite control --url ... follower TOPIC PARTITION [BROKER] | followers   # consumers sent to BROKER (none: not)
    kafkite control --url ... push-leader TOPIC PARTITION LEADER EPOCH [--count N]   # what Metadata answers name
    kafkite control --url ... shuffle-leaders [TOPIC ...] [--coordinators] [--seed N]
    kafkite control --url ... brokers | stop BROKER [--clean] | start BROKER | coordinator GROUP BROKER
    kafkite control --url ... add-broker [BROKER] [--rack R] | remove-broker BROKER | rack BROKER [RACK]
    kafkite control --url ... pause-replication BROKER | resume-replication BROKER | replication
    kafkite control --url ... cut-replication FOLLOWER LEADER | heal-replication FOLLOWER LEADER
    kafkite control --url ... cut-controller BROKER | heal-controller BROKER | controller
    kafkite control --url ... leaderless TOPIC PARTITION | leaderless | restore-leader [TOPIC [PARTITION]]
    kafkite control --url ... clock [--advance-ms MS] [--broker B]
    kafkite control --url ... compact [--topic t] [--partition p] | retention [--topic t] [--advance-ms MS]
    kafkite control --url ... call POST /v1/errors '{"api": "Produce", "error": 6}'
"""
from __future__ import annotations

import json
import sys
from urllib.parse import urlencode


def _code(value: str):
    return int(value) if value.lstrip("-").isdigit() else value


def add_subparser(sub) -> None:
    c = sub.add_parser("control", help="a running broker's test controls and request log (kafkite serve "
                                       "--control-port)")
    c.add_argument("--url", required=True, help="the control listener, e.g. http://127.0.0.1:9644")
    c.add_argument("--token", help="the broker's --control-token")
    act = c.add_subparsers(dest="action", required=True)
    e = act.add_parser("error", help="answer an API's next requests with errors (several: in turn)")
    e.add_argument("api")
    e.add_argument("errors", nargs="+", help="names or codes; NONE lets that request through")
    e.add_argument("--count", type=int, default=1, help="times (over the sequence); -1: until cleared")
    e.add_argument("--broker", type=int)
    e.add_argument("--version", type=int, help="only requests of this API version")
    e.add_argument("--client-id", help="only requests with this client id")
    e.add_argument("--topic", help="Produce, Fetch, ListOffsets, OffsetForLeaderEpoch: only this topic's "
                                   "partitions answer the error; Metadata: this topic's entry; "
                                   "AddPartitionsToTxn: its partitions (the others not attempted)")
    e.add_argument("--partition", type=int, help="with --topic: only this partition")
    e.add_argument("--rtt", type=int, action="append", metavar="MS", help="the ms each answer waits first: once for "
                   "every error, or once per error, in turn")
    d = act.add_parser("drop", help="close the connection of an API's next requests, after handling them")
    d.add_argument("api")
    d.add_argument("--count", type=int, default=1)
    d.add_argument("--skip", type=int, default=0)
    d.add_argument("--broker", type=int)
    d.add_argument("--before", action="store_true", help="close before handling the request")
    lat = act.add_parser("latency", help="delay requests: latency [BROKER] MS [--api API]; MS 0 removes it")
    lat.add_argument("numbers", type=int, nargs="+", metavar="[BROKER] MS")
    lat.add_argument("--api")
    h = act.add_parser("hold", help="hold an API's requests until released")
    h.add_argument("api")
    h.add_argument("--broker", type=int)
    h.add_argument("--client-id")
    act.add_parser("holds", help="the holds and the requests they hold")
    r = act.add_parser("release", help="release held requests (the holds stay)")
    r.add_argument("api", nargs="?")
    r.add_argument("--count", type=int)
    r.add_argument("--id", type=int)
    u = act.add_parser("unhold", help="remove holds and release what they hold")
    u.add_argument("api", nargs="?")
    u.add_argument("--id", type=int)
    v = act.add_parser("versions", help="cap an API's versions (advertised and served), remove it, or list caps")
    v.add_argument("api", nargs="?")
    v.add_argument("--max", type=int)
    v.add_argument("--min", type=int)
    v.add_argument("--broker", type=int)
    v.add_argument("--remove", action="store_true")
    pv = act.add_parser("partitions", help="the partitions: leader, epochs, replicas, ISR, local offsets")
    pv.add_argument("--topic")
    gv = act.add_parser("groups", help="the groups coordinated by the broker process: state, members, offsets")
    gv.add_argument("--group")
    ml = act.add_parser("leader", help="make a live ISR member a partition's leader: leader TOPIC PARTITION BROKER")
    ml.add_argument("topic")
    ml.add_argument("partition", type=int)
    ml.add_argument("broker", type=int)
    ra = act.add_parser("replicas", help="reassign a partition: replicas TOPIC PARTITION B1 [B2 ...] (the new ones "
                                         "catch up first)")
    ra.add_argument("topic")
    ra.add_argument("partition", type=int)
    ra.add_argument("replicas", type=int, nargs="+")
    fo = act.add_parser("follower", help="send a partition's consumers to a replica (the leader names it their "
                                         "preferred read replica): follower TOPIC PARTITION [BROKER] (none: no longer)")
    fo.add_argument("topic")
    fo.add_argument("partition", type=int)
    fo.add_argument("broker", type=int, nargs="?")
    act.add_parser("followers", help="the followers consumers are sent to")
    pl = act.add_parser("push-leader", help="the next Metadata answers name this leader and epoch for the "
                                            "partition: push-leader TOPIC PARTITION LEADER EPOCH [--count N]")
    pl.add_argument("topic")
    pl.add_argument("partition", type=int)
    pl.add_argument("leader", type=int)
    pl.add_argument("leader_epoch", type=int)
    pl.add_argument("--count", type=int, default=1)
    sh = act.add_parser("shuffle-leaders", help="every partition (of TOPIC ...) led by another live ISR member, at "
                                               "random; --coordinators: the groups' and transactions' coordinators")
    sh.add_argument("topics", nargs="*")
    sh.add_argument("--coordinators", action="store_true")
    sh.add_argument("--seed", type=int)
    co = act.add_parser("coordinator", help="make BROKER the coordinator of a group: coordinator GROUP BROKER "
                                            "[--transactional]")
    co.add_argument("key")
    co.add_argument("broker", type=int)
    co.add_argument("--transactional", action="store_true", help="KEY is a transactional id")
    for name in ("pause-replication", "resume-replication"):
        pr = act.add_parser(name, help="a broker's followers stop fetching (it leaves the ISRs) / fetch again")
        pr.add_argument("broker", type=int)
    for name, what in (("cut-replication", "FOLLOWER stops fetching from LEADER only (it leaves LEADER's ISRs)"),
                       ("heal-replication", "FOLLOWER fetches from LEADER again")):
        cr = act.add_parser(name, help=what)
        cr.add_argument("follower", type=int)
        cr.add_argument("leader", type=int)
    act.add_parser("replication", help="each broker's replication: paused, the leaders it is cut from")
    for name, what in (("cut-controller", "the controller's commands stop reaching BROKER (it keeps its old view)"),
                       ("heal-controller", "BROKER gets what it missed from the controller")):
        cc = act.add_parser(name, help=what)
        cc.add_argument("broker", type=int)
    act.add_parser("controller", help="the controller and the brokers its connection is cut from")
    ll = act.add_parser("leaderless", help="make a partition leaderless: leaderless TOPIC PARTITION (no arguments: "
                                           "the partitions kept leaderless)")
    ll.add_argument("topic", nargs="?")
    ll.add_argument("partition", type=int, nargs="?")
    rl = act.add_parser("restore-leader", help="leaderless partitions (of TOPIC, or that one, or all) elect a leader")
    rl.add_argument("topic", nargs="?")
    rl.add_argument("partition", type=int, nargs="?")
    ck = act.add_parser("clock", help="the brokers' log clocks; --advance-ms moves them forward")
    ck.add_argument("--advance-ms", type=int)
    ck.add_argument("--broker", type=int)
    act.add_parser("brokers", help="this process's brokers (live or stopped) and the controller")
    ab = act.add_parser("add-broker", help="add a broker to a one-process cluster (the next id unless given)")
    ab.add_argument("broker", type=int, nargs="?")
    ab.add_argument("--rack")
    rb = act.add_parser("remove-broker", help="decommission a broker: its partitions move to the others, it stops")
    rb.add_argument("broker", type=int)
    rk = act.add_parser("rack", help="set a running broker's broker.rack (no RACK: none)")
    rk.add_argument("broker", type=int)
    rk.add_argument("rack", nargs="?")
    for name, what in (("stop", "stop a broker as if its process died (ZooKeeper mode: the listener's own broker)"),
                       ("start", "start a stopped broker again on its port and data dir")):
        sb = act.add_parser(name, help=what)
        sb.add_argument("broker", type=int)
        if name == "stop":
            sb.add_argument("--clean", action="store_true",
                            help="ZooKeeper mode: a controlled shutdown (leaderships moved first, logs closed clean)")
    for name, what in (("compact", "compact the compacted topics' replicas now"),
                       ("retention", "apply retention to the delete-policy replicas now")):
        dc = act.add_parser(name, help=what)
        dc.add_argument("--topic")
        dc.add_argument("--partition", type=int)
        if name == "retention":
            dc.add_argument("--advance-ms", type=int, help="as if this much later")
    act.add_parser("faults", help="every control in force")
    act.add_parser("clear", help="remove every control")
    rs = act.add_parser("reset", help="remove every control and empty the request log")
    rs.add_argument("--data", action="store_true", help="and every topic, group, ACL and SCRAM user")
    act.add_parser("openapi", help="the control API as an OpenAPI document")
    q = act.add_parser("requests", help="the request log")
    q.add_argument("--api")
    q.add_argument("--since", type=int)
    q.add_argument("--clear", action="store_true", help="empty the log")
    raw = act.add_parser("call", help="any route: call METHOD PATH [JSON]")
    raw.add_argument("method")
    raw.add_argument("path")
    raw.add_argument("body", nargs="?")
    c.set_defaults(func=run)


def _call(url: str, token: str | None, method: str, path: str, body: dict | None = None) -> tuple[int, object]:
    import urllib.error  # (here: `kafkite serve` builds this parser too, and needs no HTTP client)
    import urllib.request

    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url.rstrip("/") + path, data=data, method=method,
                                 headers={"content-type": "application/json"})
    if token:
        req.add_header("authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def _request(args) -> tuple[str, str, object]:
    a = args.action
    if a == "error":
        codes = [_code(x) for x in args.errors]
        body = {"api": args.api, "count": args.count, "broker": args.broker, "version": args.version,
                "client_id": args.client_id, "topic": args.topic, "partition": args.partition}
        if args.rtt:
            body["rtts"] = args.rtt
        body.update({"error": codes[0]} if len(codes) == 1 else {"errors": codes})
        return "POST", "/v1/errors", body
    if a == "drop":
        return "POST", "/v1/drops", {"api": args.api, "count": args.count, "skip": args.skip, "broker": args.broker,
                                     "handled": not args.before}
    if a == "latency":
        if len(args.numbers) > 2:
            raise SystemExit("latency takes [BROKER] MS")
        *broker, ms = args.numbers
        return "POST", "/v1/latency", {"broker": broker[0] if broker else None, "ms": ms, "api": args.api}
    if a == "hold":
        return "POST", "/v1/holds", {"api": args.api, "broker": args.broker, "client_id": args.client_id}
    if a == "holds":
        return "GET", "/v1/holds", None
    if a == "release":
        return "POST", "/v1/holds/release", {k: v for k, v in (("api", args.api), ("count", args.count),
                                                                ("id", args.id)) if v is not None}
    if a == "unhold":
        return "DELETE", "/v1/holds", {k: v for k, v in (("api", args.api), ("id", args.id)) if v is not None}
    if a == "versions":
        if args.api is None:
            return "GET", "/v1/versions", None
        return "POST", "/v1/versions", {"api": _code(args.api), "max_version": args.max, "min_version": args.min,
                                        "broker": args.broker, "remove": args.remove}
    if a in ("partitions", "groups"):
        key = "topic" if a == "partitions" else "group"
        value = getattr(args, key)
        return "GET", f"/v1/{a}" + (f"?{urlencode({key: value})}" if value is not None else ""), None
    if a == "leader":
        return "POST", "/v1/leaders", {"topic": args.topic, "partition": args.partition, "broker": args.broker}
    if a == "replicas":
        return "POST", "/v1/replicas", {"topic": args.topic, "partition": args.partition, "replicas": args.replicas}
    if a == "follower":
        return "POST", "/v1/followers", {"topic": args.topic, "partition": args.partition, "broker": args.broker}
    if a == "followers":
        return "GET", "/v1/followers", None
    if a == "push-leader":
        return "POST", "/v1/metadata/leaders", {"topic": args.topic, "partition": args.partition,
                                                "leader": args.leader, "leader_epoch": args.leader_epoch,
                                                "count": args.count}
    if a == "shuffle-leaders":
        body = {"topics": args.topics or None, "seed": args.seed}
        if args.coordinators:
            body["coordinators"] = True
        return "POST", "/v1/leaders/shuffle", body
    if a == "coordinator":
        return "POST", "/v1/coordinators", {("transactional_id" if args.transactional else "group"): args.key,
                                             "broker": args.broker}
    if a in ("pause-replication", "resume-replication"):
        return "POST", f"/v1/replication/{a.split('-')[0]}", {"broker": args.broker}
    if a in ("cut-replication", "heal-replication"):
        return "POST", f"/v1/replication/{a.split('-')[0]}", {"follower": args.follower, "leader": args.leader}
    if a in ("cut-controller", "heal-controller"):
        return "POST", f"/v1/controller/{a.split('-')[0]}", {"broker": args.broker}
    if a == "controller":
        return "GET", "/v1/controller", None
    if a == "replication":
        return "GET", "/v1/replication", None
    if a == "leaderless":
        if args.topic is None:
            return "GET", "/v1/leaderless", None
        if args.partition is None:
            raise SystemExit("leaderless takes TOPIC PARTITION")
        return "POST", "/v1/leaderless", {"topic": args.topic, "partition": args.partition}
    if a == "restore-leader":
        return "DELETE", "/v1/leaderless", {"topic": args.topic, "partition": args.partition}
    if a == "clock":
        if args.advance_ms is None:
            return "GET", "/v1/clock", None
        return "POST", "/v1/clock", {"advance_ms": args.advance_ms, "broker": args.broker}
    if a == "brokers":
        return "GET", "/v1/brokers", None
    if a == "add-broker":
        return "POST", "/v1/brokers", {"broker": args.broker, "rack": args.rack}
    if a == "remove-broker":
        return "DELETE", "/v1/brokers", {"broker": args.broker}
    if a == "rack":
        return "POST", "/v1/brokers/rack", {"broker": args.broker, "rack": args.rack}
    if a in ("stop", "start"):
        return "POST", f"/v1/brokers/{a}", {"broker": args.broker, **({"clean": True} if getattr(
            args, "clean", False) else {})}
    if a in ("compact", "retention"):
        body = {"topic": args.topic, "partition": args.partition}
        if a == "retention" and args.advance_ms is not None:
            body["advance_ms"] = args.advance_ms
        return "POST", f"/v1/{a}", body
    if a in ("faults", "clear"):
        return ("GET" if a == "faults" else "DELETE"), "/v1/faults", None
    if a == "reset":
        return "POST", "/v1/reset", {"data": True} if args.data else {}
    if a == "openapi":
        return "GET", "/v1/openapi.json", None
    if a == "call":
        try:
            body = None if args.body is None else json.loads(args.body)
        except ValueError as exc:
            raise SystemExit(f"the body is not JSON: {exc}")
        return args.method.upper(), args.path, body
    query = {k: v for k, v in (("api", args.api), ("since", args.since)) if v is not None}
    return ("DELETE" if args.clear else "GET"), "/v1/requests" + (f"?{urlencode(query)}" if query else ""), None


def run(args) -> int:
    try:
        call = _request(args)
    except SystemExit as exc:  # arguments that make no request: the error as JSON too
        print(json.dumps({"error": str(exc)}), file=sys.stderr)
        return 1
    try:
        status, out = _call(args.url, args.token, *call)
    except OSError as exc:
        print(json.dumps({"error": f"cannot reach {args.url}: {exc}"}), file=sys.stderr)
        return 1
    print(json.dumps(out, indent=None), file=sys.stdout if status < 400 else sys.stderr)
    return 0 if status < 400 else 1
