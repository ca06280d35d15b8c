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
source "$root/scripts/lib/install.sh"
dir="$root/benches/peers/kafka-streams"
pom="$dir/pom.xml"
stamp="$dir/target/.built"
require_file "$pom" "it builds kafka-bench's Kafka Streams peer"
# What the stamp holds: the checksum of the pom and every source, so editing either rebuilds.
want="$(cd "$dir" && find pom.xml src -type f | LC_ALL=C sort | xargs sha256sum | sha256sum \
  | cut -d' ' -f1)"
built() {
  stamp_holds "$stamp" "$want" && [ -f "$dir/target/kafka-streams-peer.jar" ]
}
if done_or_locked "$dir/.build.lock" built; then
  echo "$dir"
  exit 0
fi
require_commands "the Kafka Streams peer needs Java 17 or newer and Maven" \
  "\`bash scripts/install-apache-kafka.sh\` installs both" java mvn
echo "weir: building the Kafka Streams peer (mvn -B -q package in benches/peers/kafka-streams)" >&2
rm -rf "$dir/target"
mvn_quietly "build the Kafka Streams peer" \
  "run \`mvn -f benches/peers/kafka-streams/pom.xml package\` and fix what it reports" \
  -f "$pom" package
if [ ! -f "$dir/target/kafka-streams-peer.jar" ]; then
  echo "weir: Maven ran, but wrote no target/kafka-streams-peer.jar" >&2
  exit 1
fi
echo "$want" >"$stamp"
echo "$dir"
