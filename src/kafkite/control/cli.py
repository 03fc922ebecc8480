"""`kafkite control`: the control listener of a running `kafkite serve --control-port P` from a shell or a CI
script. Each sub-command is one HTTP request (control/http.py); the answer is printed as JSON; a 4xx answer is
printed on stderr with exit code 1.

    kafkite control --url http://127.0.0.1:P error Produce NOT_LEADER_OR_FOLLOWER --count 3
    kafkite control --url ... drop Fetch [--count N] [--skip N] [--broker B]
    kafkite control --url ... latency BROKER MS
    kafkite control --url ... faults | clear
    kafkite control --url ... requests [--api Produce] [--since SEQ] [--clear]
"""
from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from urllib.parse import urlencode


def add_subparser(sub) -> None:
    c = sub.add_parser("control", help="a running broker's faults and request log (kafkite serve --control-port)")
    c.add_argument("--url", required=True, help="the control listener, e.g. http://127.0.0.1:9644")
    c.add_argument("--token", help="the broker's --control-token")
    act = c.add_subparsers(dest="action", required=True)
    e = act.add_parser("error", help="answer the next requests of an API with an error")
    e.add_argument("api")
    e.add_argument("error")
    e.add_argument("--count", type=int, default=1)
    e.add_argument("--broker", type=int)
    d = act.add_parser("drop", help="handle the next requests of an API, then cut their connection")
    d.add_argument("api")
    d.add_argument("--count", type=int, default=1)
    d.add_argument("--skip", type=int, default=0)
    d.add_argument("--broker", type=int)
    lat = act.add_parser("latency", help="delay every request to a broker")
    lat.add_argument("broker", type=int)
    lat.add_argument("ms", type=int)
    act.add_parser("faults", help="the faults in force")
    act.add_parser("clear", help="remove every fault")
    r = act.add_parser("requests", help="the request log")
    r.add_argument("--api")
    r.add_argument("--since", type=int)
    r.add_argument("--clear", action="store_true", help="empty the log")
    c.set_defaults(func=run)


def _call(url: str, token: str | None, method: str, path: str, body: dict | None = None) -> tuple[int, object]:
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


def run(args) -> int:
    a = args.action
    if a == "error":
        code = int(args.error) if args.error.lstrip("-").isdigit() else args.error
        call = ("POST", "/v1/errors", {"api": args.api, "error": code, "count": args.count, "broker": args.broker})
    elif a == "drop":
        call = ("POST", "/v1/drops", {"api": args.api, "count": args.count, "skip": args.skip, "broker": args.broker})
    elif a == "latency":
        call = ("POST", "/v1/latency", {"broker": args.broker, "ms": args.ms})
    elif a == "faults":
        call = ("GET", "/v1/faults", None)
    elif a == "clear":
        call = ("DELETE", "/v1/faults", None)
    else:
        query = {k: v for k, v in (("api", args.api), ("since", args.since)) if v is not None}
        call = ("DELETE" if args.clear else "GET", "/v1/requests" + (f"?{urlencode(query)}" if query else ""), None)
    try:
        status, out = _call(args.url, args.token, *call)
    except OSError as exc:
        print(json.dumps({"error": f"cannot reach {args.url}: {exc}"}), file=sys.stderr)
        return 1
    print(json.dumps(out, indent=None), file=sys.stdout if status < 400 else sys.stderr)
    return 0 if status < 400 else 1
