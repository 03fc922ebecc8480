#!/usr/bin/env bash
# Run librdkafka's own test suite (tests/test-runner) against `kafkite serve` with the
# KIP-848 consumer group protocol (TEST_CONSUMER_GROUP_PROTOCOL=consumer).
#
# A LOCAL run, not part of CI: it needs a librdkafka source tree (a checkout of
# https://github.com/confluentinc/librdkafka, kept OUTSIDE this repository) and gcc/make.
#
#   scripts/librdkafka_tests.sh /path/to/librdkafka [TEST ...]
#
# With no TEST arguments it runs DEFAULT_TESTS (below) one at a time, each in its own
# test-runner process with a time limit, and prints test-runner's verdict for each librdkafka test
# ("0045_resubscribe_with_regex | PASSED | 9.283s [default]"; logs in $OUT/<scenario>-<test>.log), then the
# tests of librdkafka's "noautocreate" scenario against a second cluster with auto.create.topics.enable=false.
# Environment:
#   KAFKITE_PYTHON   the python with kafkite importable (default: .venv/bin/python of this repo,
#                    with src/ first on PYTHONPATH)
#   RDK_CONFIGURE    extra ./configure flags (default disables zstd, lz4-ext, curl, gssapi: what
#                    a machine without those -dev packages lacks)
#   BROKERS_N        brokers of the in-process cluster (default 3, as librdkafka's trivup cluster;
#                    the broker gets trivup's num.partitions=4 and default.replication.factor)
#   TEST_TIMEOUT_S   wall-clock limit per test-runner (default 900: 0113 takes about 10 minutes)
#   OUT              where logs go (default /tmp/kafkite-librdkafka-tests)
#   PROTOCOL         consumer (default) or classic
#   SCENARIO         with TEST arguments: default (the default) or noautocreate
#   KAFKITE_OVERRIDES  extra `kafkite serve` arguments for the clusters (e.g. 0081's authorizer, below)
set -u
RDK=${1:?usage: $0 /path/to/librdkafka [TEST ...]}
shift
RDK=$(cd "$RDK" && pwd)
HERE=$(cd "$(dirname "$0")/.." && pwd)
PY=${KAFKITE_PYTHON:-$HERE/.venv/bin/python}
OUT=${OUT:-/tmp/kafkite-librdkafka-tests}
BROKERS_N=${BROKERS_N:-3}
TEST_TIMEOUT_S=${TEST_TIMEOUT_S:-900}
PROTOCOL=${PROTOCOL:-consumer}
RDK_CONFIGURE=${RDK_CONFIGURE:---no-download --disable-zstd --disable-gssapi --disable-curl --disable-lz4-ext}

# The tests that use consumer groups (subscribe, commit, list/describe groups) and run against a
# real broker. librdkafka's mock-cluster tests (TEST_F_LOCAL: 0106, 0113_local, 0116, 0117, 0120,
# 0143, 0147, 0148, 0153, ...) test its own mock broker, not us, and are left out; so are the tests that
# need ACLs set with Kafka's kafka-acls.sh (0109, 0115, 0119) and SASL/OIDC set-ups (0126, 0142).
DEFAULT_TESTS=(0012 0014 0015 0018 0019 0020 0022 0026 0028 0029 0030 0033 0034 0040 0042 0044 0045 0050
               0056 0061 0064 0069 0083 0084 0089 0091 0093 0099 0102 0113 0118 0122 0127 0130 0132
               0137 0140)
# 0081 (admin) needs an authorizer: run it with
#   KAFKITE_OVERRIDES="--override authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
#   --override super.users=User:ANONYMOUS --override allow.everyone.if.no.acl.found=true" $0 RDK 0081
# Tests of the "noautocreate" scenario, run against a second cluster without auto topic creation.
NOAUTOCREATE_TESTS=(0045 0107 0111)
if [ $# -gt 0 ]; then TESTS_LIST=("$@"); else TESTS_LIST=("${DEFAULT_TESTS[@]}"); fi

mkdir -p "$OUT"
if [ ! -x "$RDK/tests/test-runner" ]; then
  echo "building librdkafka in $RDK ..." >&2
  (cd "$RDK" && { [ -f Makefile.config ] || ./configure $RDK_CONFIGURE; } \
     && make -j2 libs && make -C tests -j2 build) > "$OUT/build.log" 2>&1 \
     || { echo "build failed, see $OUT/build.log" >&2; exit 1; }
fi

KPIDS=()
DATAS=()
cleanup() { for p in "${KPIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "${DATAS[@]}"; }
trap cleanup EXIT

# start_kafkite NAME EXTRA_OVERRIDES... -> writes $OUT/NAME.conf (librdkafka's test.conf)
start_kafkite() {
  local name=$1; shift
  local port data
  port=$("$PY" -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
  data=$(mktemp -d); DATAS+=("$data")
  PYTHONPATH="$HERE/src${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m kafkite.cli serve --brokers "$BROKERS_N" \
      --port "$port" --data-dir "$data" --log-level WARNING \
      --override num.partitions=4 --override default.replication.factor="$(( BROKERS_N < 3 ? BROKERS_N : 3 ))" \
      ${KAFKITE_OVERRIDES:-} "$@" > "$OUT/kafkite-$name.log" 2>&1 &
  KPIDS+=($!)
  for _ in $(seq 1 60); do
    (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break
    sleep 0.5
  done
  printf 'bootstrap.servers=127.0.0.1:%s\ntest.topic.random=true\n' "$port" > "$OUT/$name.conf"
}

# librdkafka's test_kafka_topics() runs $KAFKA_PATH/bin/kafka-topics.sh --bootstrap-server $BROKERS ...
# (0045's topic deletion and partition increase): a stand-in on confluent-kafka's AdminClient.
mkdir -p "$OUT/kafka/bin"
printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$PY" "$HERE/scripts/librdkafka_kafka_topics.py" \
  > "$OUT/kafka/bin/kafka-topics.sh"
chmod +x "$OUT/kafka/bin/kafka-topics.sh"

# run_tests NAME SCENARIO TEST... -> one line per librdkafka test (from test-runner's summary table)
run_tests() {
  local name=$1 scenario=$2; shift 2
  local t log rc
  for t in "$@"; do
    log="$OUT/$scenario-$t.log"
    (cd "$RDK/tests" && RDKAFKA_TEST_CONF="$OUT/$name.conf" TESTS="$t" TEST_SCENARIO="$scenario" \
       KAFKA_PATH="$OUT/kafka" BROKERS="$(sed -n 's/^bootstrap.servers=//p' "$OUT/$name.conf")" \
       TEST_KAFKA_VERSION=4.0.0 TEST_CONSUMER_GROUP_PROTOCOL="$PROTOCOL" \
       LD_LIBRARY_PATH="$RDK/src:$RDK/src-cpp" timeout "$TEST_TIMEOUT_S" ./test-runner) > "$log" 2>&1
    rc=$?
    [ $rc -eq 124 ] && echo "$t TIMEOUT after ${TEST_TIMEOUT_S}s ($log)"
    # the summary table's rows: | 0045_subscribe_update | PASSED | 26.834s | reason
    sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -a -E '^\| *[0-9]{4}_[^ ]* *\| *(PASSED|FAILED|SKIPPED)' \
      | tr -s ' ' | sed 's/^| //; s/ |$//' | sed "s/\$/ [$scenario]/"
    if [ $rc -ne 0 ] && [ $rc -ne 124 ]; then  # an abort prints no table: the tests that failed, by name
      sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -a -o -E '^### Test "[0-9]{4}_[^ "]*' | sort -u \
        | sed "s/^### Test \"//; s/\$/ | FAILED [$scenario]/"
      echo "$t test-runner exit $rc ($log)"
    fi
  done
}

if [ "${SCENARIO:-default}" = default ]; then
  start_kafkite default
  run_tests default default "${TESTS_LIST[@]}"
fi
# librdkafka's "noautocreate" scenario: a cluster with auto.create.topics.enable=false
if [ $# -eq 0 ] || [ "${SCENARIO:-}" = noautocreate ]; then
  [ $# -gt 0 ] && NOAUTOCREATE_TESTS=("$@")
  start_kafkite noautocreate --override auto.create.topics.enable=false
  run_tests noautocreate noautocreate "${NOAUTOCREATE_TESTS[@]}"
fi
