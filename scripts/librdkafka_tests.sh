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
# test-runner process with a time limit, and prints one line per test:
#   <test> PASSED|FAILED|SKIPPED|TIMEOUT  (log in $OUT/<test>.log)
# Environment:
#   KAFKITE_PYTHON   the python with kafkite importable (default: .venv/bin/python of this repo,
#                    with src/ first on PYTHONPATH)
#   RDK_CONFIGURE    extra ./configure flags (default disables zstd, lz4-ext, curl, gssapi: what
#                    a machine without those -dev packages lacks)
#   BROKERS_N        brokers of the in-process cluster (default 3, as librdkafka's trivup cluster;
#                    the broker gets trivup's num.partitions=4 and default.replication.factor)
#   TEST_TIMEOUT_S   wall-clock limit per test (default 300)
#   OUT              where logs go (default /tmp/kafkite-librdkafka-tests)
#   PROTOCOL         consumer (default) or classic
set -u
RDK=${1:?usage: $0 /path/to/librdkafka [TEST ...]}
shift
RDK=$(cd "$RDK" && pwd)
HERE=$(cd "$(dirname "$0")/.." && pwd)
PY=${KAFKITE_PYTHON:-$HERE/.venv/bin/python}
OUT=${OUT:-/tmp/kafkite-librdkafka-tests}
BROKERS_N=${BROKERS_N:-3}
TEST_TIMEOUT_S=${TEST_TIMEOUT_S:-300}
PROTOCOL=${PROTOCOL:-consumer}
RDK_CONFIGURE=${RDK_CONFIGURE:---no-download --disable-zstd --disable-gssapi --disable-curl --disable-lz4-ext}

# The tests that use consumer groups (subscribe, commit, list/describe groups) and run against a
# real broker. librdkafka's mock-cluster tests (TEST_F_LOCAL: 0106, 0113_local, 0116, 0117, 0120,
# 0143, 0147, 0148, 0153, ...) test its own mock broker, not us, and are left out.
DEFAULT_TESTS=(0018 0019 0020 0022 0026 0028 0029 0030 0033 0034 0040 0042 0045 0050 0056 0061
               0069 0081 0089 0091 0093 0099 0102 0107 0109 0113 0118 0122 0130 0132 0137 0140)
if [ $# -gt 0 ]; then TESTS_LIST=("$@"); else TESTS_LIST=("${DEFAULT_TESTS[@]}"); fi

mkdir -p "$OUT"
if [ ! -x "$RDK/tests/test-runner" ]; then
  echo "building librdkafka in $RDK ..." >&2
  (cd "$RDK" && { [ -f Makefile.config ] || ./configure $RDK_CONFIGURE; } \
     && make -j2 libs && make -C tests -j2 build) > "$OUT/build.log" 2>&1 \
     || { echo "build failed, see $OUT/build.log" >&2; exit 1; }
fi

PORT=$("$PY" -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
DATA=$(mktemp -d)
PYTHONPATH="$HERE/src${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m kafkite.cli serve --brokers "$BROKERS_N" \
    --port "$PORT" --data-dir "$DATA" --log-level WARNING \
    --override num.partitions=4 --override default.replication.factor="$(( BROKERS_N < 3 ? BROKERS_N : 3 ))" \
    > "$OUT/kafkite.log" 2>&1 &
KPID=$!
cleanup() { kill "$KPID" 2>/dev/null; wait "$KPID" 2>/dev/null; rm -rf "$DATA"; }
trap cleanup EXIT
for _ in $(seq 1 60); do
  (exec 3<>/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null && break
  sleep 0.5
done

CONF="$OUT/test.conf"
cat > "$CONF" <<EOF
bootstrap.servers=127.0.0.1:$PORT
test.topic.random=true
EOF

cd "$RDK/tests"
for t in "${TESTS_LIST[@]}"; do
  log="$OUT/$t.log"
  RDKAFKA_TEST_CONF="$CONF" TESTS="$t" TEST_KAFKA_VERSION=4.0.0 \
    TEST_CONSUMER_GROUP_PROTOCOL="$PROTOCOL" LD_LIBRARY_PATH="$RDK/src:$RDK/src-cpp" \
    timeout "$TEST_TIMEOUT_S" ./test-runner > "$log" 2>&1
  rc=$?
  if [ $rc -eq 124 ]; then res=TIMEOUT
  elif [ $rc -eq 0 ] && grep -q "SKIPPED" "$log" && ! grep -q "PASSED" "$log"; then res=SKIPPED
  elif [ $rc -eq 0 ]; then res=PASSED
  else res=FAILED; fi
  echo "$t $res"
done
