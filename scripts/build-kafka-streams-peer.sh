#!/usr/bin/env bash
# Builds kafka-bench's Kafka Streams peer (benches/peers/kafka-streams, docs/BENCHMARKS.md §5):
# `mvn -B -q package` of its pom (Kafka Streams pinned at the broker's version), which writes
# target/kafka-streams-peer.jar and its dependencies into target/lib, both git-ignored. Does
# nothing when target/ holds a build of the current pom and sources (a stamp with their
# checksum, like scripts/install-apache-kafka.sh). Needs Java 17 or newer and Maven, as the
# broker's install does (that script installs them when missing; run it first).
#
# Prints one line on stdout (everything else goes to stderr): the peer's folder, so that
# `java -cp 'FOLDER/target/kafka-streams-peer.jar:FOLDER/target/lib/*' dev.weir.bench.StreamsCount`
# runs it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/benches/peers/kafka-streams"
pom="$dir/pom.xml"
stamp="$dir/target/.built"
if [ ! -f "$pom" ]; then
  echo "weir: $pom is missing (it builds kafka-bench's Kafka Streams peer)" >&2
  exit 1
fi
# What the stamp holds: the checksum of the pom and every source, so editing either rebuilds.
want="$(cd "$dir" && find pom.xml src -type f | LC_ALL=C sort | xargs sha256sum | sha256sum \
  | cut -d' ' -f1)"
built() {
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -f "$dir/target/kafka-streams-peer.jar" ]
}
if built; then
  echo "$dir"
  exit 0
fi
exec 9>"$dir/.build.lock"
flock 9
if built; then
  echo "$dir"
  exit 0
fi
for tool in java mvn; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "weir: the Kafka Streams peer needs $tool (Java 17 or newer, and Maven):" \
         "\`bash scripts/install-apache-kafka.sh\` installs both" >&2
    exit 1
  fi
done
echo "weir: building the Kafka Streams peer (mvn -B -q package in benches/peers/kafka-streams)" >&2
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
rm -rf "$dir/target"
if ! mvn -B -q -f "$pom" package >"$out" 2>&1; then
  tail -40 "$out" >&2
  echo "weir: Maven could not build the Kafka Streams peer (what it printed is above): run" \
       "\`mvn -f benches/peers/kafka-streams/pom.xml package\` and fix what it reports" >&2
  exit 1
fi
if [ ! -f "$dir/target/kafka-streams-peer.jar" ]; then
  echo "weir: Maven ran, but wrote no target/kafka-streams-peer.jar" >&2
  exit 1
fi
echo "$want" >"$stamp"
echo "$dir"
