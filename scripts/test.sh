#!/usr/bin/env bash
# The test command: sets up everything on a fresh machine, then runs the whole suite.
#   bash scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -e '.[test]'
export KAFKITE_TOOLS=${KAFKITE_TOOLS:-$PWD/.tools}
if [ -f .ci/install-clients.sh ]; then
  PYTHON=.venv/bin/python bash .ci/install-clients.sh
fi
# Spark's Kafka connector for tests/spark: the jars CI provides in ../shared/spark-jars plus kafka-clients
# (elsewhere, set KAFKITE_SPARK_JARS yourself; kafkite.spark.session falls back to spark.jars.packages)
if [ -z "${KAFKITE_SPARK_JARS:-}" ] && [ -f .ci/spark-jars.sh ]; then
  SPARK_JARS=$(bash .ci/spark-jars.sh || true)
  if [ -n "$SPARK_JARS" ]; then
    export KAFKITE_SPARK_JARS=$SPARK_JARS
    echo "spark-jars: KAFKITE_SPARK_JARS=$SPARK_JARS"
  fi
fi
ORDER=()
case "${CI:-}" in
  true|TRUE|True|1|yes)
    if [ -z "${KAFKITE_SPARK_JARS:-}" ]; then
      echo "test.sh: FAILED under CI: no Spark connector jars (bash .ci/spark-jars.sh found none in ${KAFKITE_SPARK_JARS_SRC:-../shared/spark-jars})" >&2
      exit 1
    fi
    # the tests run in a shuffled order (pytest-randomly), the same one every CI run; elsewhere a new one each
    # run (its seed printed at the top: --randomly-seed=N replays it, -p no:randomly keeps the file order)
    ORDER=(--randomly-seed="${KAFKITE_TEST_SEED:-20261125}") ;;
esac
# Kafkite's bytecode compiled once: where PYTHONDONTWRITEBYTECODE is set (as on this project's machines) every
# `kafkite serve` the tests start would compile its ~110 modules again (0.15-0.2 s of CPU a start)
.venv/bin/python -m compileall -q src >/dev/null || true
# two pytest-xdist workers, one a core (KAFKITE_TEST_WORKERS=0 runs in this one process): most tests wait on
# clients, JVMs and timeouts, so two at a time take about half the time. worksteal: a worker that is done takes
# tests queued for the other.
WORKERS=(-n "${KAFKITE_TEST_WORKERS:-2}")
[ "${KAFKITE_TEST_WORKERS:-2}" = 0 ] || WORKERS+=(--dist worksteal)
# -rs: every skip is listed with its reason (under CI=true a skip fails the run: tests/conftest.py)
exec .venv/bin/python -m pytest -p no:cacheprovider -rs "${WORKERS[@]}" "${ORDER[@]}" "$@"
