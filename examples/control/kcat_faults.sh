#!/usr/bin/env bash
# Kafkite's control plane from a shell script, with kcat as the client: a produce error injected three times
# (kcat retries and delivers; the request log shows the three failed Produce requests and the one served), then a
# partition leader moved under a running kcat consumer (it follows the move and reads every record).
#
#   kafkite serve --in-memory --brokers 3 --port 0 --control-port 0   # prints bootstrap=... control=http://...
#   BOOTSTRAP=127.0.0.1:P1,... CONTROL_URL=http://127.0.0.1:C examples/control/kcat_faults.sh
#
# Needs kcat, the kafkite CLI ($KAFKITE, default `kafkite`) and python3 ($PYTHON) to read the JSON answers.
# Prints "OK" and exits 0 when every check holds; else "FAIL: ..." on stderr and exit 1.
set -euo pipefail
: "${BOOTSTRAP:?BOOTSTRAP=host:port,... of a 3-broker kafkite serve}" "${CONTROL_URL:?CONTROL_URL=http://...}"
KAFKITE=${KAFKITE:-kafkite}
PY=${PYTHON:-python3}
TOPIC=${TOPIC:-control-example-$$}

fail() { echo "FAIL: $*" >&2; exit 1; }
ctl() { $KAFKITE control --url "$CONTROL_URL" "$@"; }
# json EXPR: evaluate a Python expression over the JSON on stdin (d)
json() { "$PY" -c "import json, sys; d = json.load(sys.stdin); print($1)"; }
produce() { kcat -P -b "$BOOTSTRAP" -t "$TOPIC" -p 0 -X retry.backoff.ms=50 "$@"; }
until_true() {  # until_true WHAT CMD...: poll for 30 s
  local what=$1; shift
  for _ in $(seq 300); do "$@" && return 0; sleep 0.1; done
  fail "$what: not within 30 s"
}
full_isr() { [ "$(ctl partitions --topic "$TOPIC" | json 'len(d["partitions"][0]["isr"])')" = 3 ]; }

$KAFKITE topics create "$TOPIC" --partitions 1 --replication-factor 3 --bootstrap-server "$BOOTSTRAP" >/dev/null
until_true "a full ISR" full_isr
echo first | produce

# 1. NOT_LEADER_OR_FOLLOWER three times: kcat retries, the fourth Produce is served
ctl requests --clear >/dev/null
ctl error Produce NOT_LEADER_OR_FOLLOWER --count 3 >/dev/null
echo second | produce || fail "kcat did not deliver through three errors"
errors=$(ctl requests --api Produce | json '" ".join(str(r["error"]) for r in d["requests"])')
[ "$errors" = "NOT_LEADER_OR_FOLLOWER NOT_LEADER_OR_FOLLOWER NOT_LEADER_OR_FOLLOWER None" ] \
  || fail "the request log's Produce errors: $errors"
[ "$(ctl requests --api Metadata | json 'len(d["requests"])')" -ge 1 ] || fail "no Metadata refresh in the log"
echo "produce error: kcat delivered after 3 x NOT_LEADER_OR_FOLLOWER"

# 2. the leader moved under a running kcat consumer, which reads on (from the new leader, or from the old one as a
# follower, as Kafka lets a consumer of Fetch v11+ do); a producer started after the move goes to the new leader
old=$(ctl partitions --topic "$TOPIC" | json 'd["partitions"][0]["leader"]')
new=$(ctl partitions --topic "$TOPIC" | json "[b for b in d['partitions'][0]['isr'] if b != $old][0]")
ctl requests --clear >/dev/null
out=$(mktemp)
kcat -C -u -b "$BOOTSTRAP" -t "$TOPIC" -p 0 -o beginning -c 4 -q >"$out" 2>&1 &
consumer=$!
trap 'kill "$consumer" 2>/dev/null || true; rm -f "$out"' EXIT
read_two() { [ "$(wc -l <"$out")" -ge 2 ]; }
until_true "the consumer reading from broker $old" read_two
fetched_from() { [ "$(ctl requests --api Fetch | json "sum(r['broker'] == $1 for r in d['requests'])")" -ge 1 ]; }
fetched_from "$old" || fail "no Fetch to the leader $old"
moved=$(ctl leader "$TOPIC" 0 "$new" | json 'd["partitions"][0]["leader"]')
[ "$moved" = "$new" ] || fail "leader $moved after moving it to $new"
ctl requests --clear >/dev/null
printf 'third\nfourth\n' | produce || fail "kcat did not deliver after the leader move"
# (the two records may go in one Produce or in two, as librdkafka's linger allows: every one goes to the new leader)
to=$(ctl requests --api Produce | json '" ".join(sorted({str(r["broker"]) for r in d["requests"]}))')
[ "$to" = "$new" ] || fail "Produce after the move went to brokers $to, not $new"
for _ in $(seq 300); do kill -0 "$consumer" 2>/dev/null || break; sleep 0.1; done
kill -0 "$consumer" 2>/dev/null && { kill "$consumer"; fail "the consumer read $(wc -l <"$out") of 4 records"; }
wait "$consumer" || fail "the consumer failed"
got=$(tr '\n' ' ' <"$out")
[ "$got" = "first second third fourth " ] || fail "read: $got"
echo "leader move: broker $old -> $new, the kcat producer went to $new, the consumer read on, nothing lost"
echo OK
