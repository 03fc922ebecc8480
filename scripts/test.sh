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
if [ -f .ci/install-clients.sh ]; then
  PYTHON=.venv/bin/python bash .ci/install-clients.sh
fi
export KAFKITE_TOOLS=${KAFKITE_TOOLS:-$PWD/.tools}
exec .venv/bin/python -m pytest -p no:cacheprovider "$@"
