#!/usr/bin/env bash
# Gathers the jars Spark's Kafka connector needs into one directory for the Spark end-to-end tests, and prints
# that directory (prints nothing when a piece is missing: those tests then skip, saying KAFKITE_SPARK_JARS is unset):
#   - the connector jars of $KAFKITE_SPARK_JARS_SRC, default <repo>/../shared/spark-jars (where CI provides
#     spark-sql-kafka-0-10, spark-token-provider-kafka-0-10 and commons-pool2 for Spark 4.0);
#   - kafka-clients.jar, which .ci/install-clients.sh puts in $KAFKITE_TOOLS/java for the Java client tests.
# The directory is $KAFKITE_TOOLS/spark-jars (default <repo>/.tools/spark-jars), symbolic links only, rebuilt
# when what it should hold changes. scripts/test.sh exports it as KAFKITE_SPARK_JARS unless that is set already.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TOOLS=${KAFKITE_TOOLS:-$ROOT/.tools}
SRC=${KAFKITE_SPARK_JARS_SRC:-$ROOT/../shared/spark-jars}
CLIENTS="$TOOLS/java/kafka-clients.jar"
[ -d "$SRC" ] || exit 0
shopt -s nullglob
connector=("$SRC"/*.jar)
if [ ${#connector[@]} -eq 0 ]; then
  echo "spark-jars: $SRC holds no jar" >&2
  exit 0
fi
if [ ! -s "$CLIENTS" ]; then
  echo "spark-jars: no $CLIENTS (.ci/install-clients.sh installs it): the Spark end-to-end tests will skip" >&2
  exit 0
fi
mkdir -p "$TOOLS"
exec 9>"$TOOLS/.install.lock"
command -v flock >/dev/null 2>&1 && flock 9
DIR="$TOOLS/spark-jars"
listing() { for j in "$@"; do echo "$(basename "$j") $(readlink -f "$j")"; done | sort; }
want=$(listing "${connector[@]}" "$CLIENTS")
have=$(listing "$DIR"/*.jar)
if [ "$want" != "$have" ]; then
  tmp=$(mktemp -d "$TOOLS/.spark-jars.XXXXXX")
  for j in "${connector[@]}" "$CLIENTS"; do ln -s "$(readlink -f "$j")" "$tmp/$(basename "$j")"; done
  chmod 755 "$tmp"
  rm -rf "$DIR.old"
  if [ -e "$DIR" ]; then mv "$DIR" "$DIR.old"; fi
  mv "$tmp" "$DIR"
  rm -rf "$DIR.old"
fi
echo "$DIR"
