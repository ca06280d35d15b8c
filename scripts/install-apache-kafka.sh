#!/usr/bin/env bash
# Installs the Apache Kafka broker the end-to-end tests run (tests/all/kafka/mod.rs): the jars of
# the Kafka version pinned in tests/kafka/apache/pom.xml (and what they depend on, about 45 MB),
# fetched with Maven (`mvn dependency:copy-dependencies`) into tests/kafka/apache/lib, which is
# git-ignored. Does nothing when that folder holds what the pom names (a stamp with the pom's
# checksum). Needs Java 17 or newer and Maven; installs Debian's openjdk-17-jre-headless and maven
# when they are missing (scripts/apt-install.sh). Fails loudly, naming what to do, when it cannot:
# under CI=true as anywhere else, so CI never runs the Kafka tests without their broker.
#
# Prints one line on stdout (everything else goes to stderr): the folder of the jars, for
# `java -cp 'FOLDER/*' kafka.Kafka server.properties`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/lib/install.sh"
dir="$root/tests/kafka/apache"
pom="$dir/pom.xml"
lib="$dir/lib"
stamp="$lib/.installed"
require_file "$pom" "it pins the Apache Kafka test broker"
version="$(sed -n 's:.*<kafka.version>\([^<]*\)</kafka.version>.*:\1:p' "$pom")"
if [ -z "$version" ]; then
  echo "weir: $pom pins no Kafka version (a line <kafka.version>VERSION</kafka.version>)" >&2
  exit 1
fi
# What the stamp holds: the pom's checksum, so that editing the pom re-installs.
want="$(sha256sum "$pom" | cut -d' ' -f1)"

installed() {
  stamp_holds "$stamp" "$want" && [ -f "$lib/kafka_2.13-$version.jar" ]
}
# Test processes may run this at the same time: one installs, the others wait and find it done.
if done_or_locked "$dir/.install.lock" installed; then
  echo "$lib"
  exit 0
fi

# The major version of the `java` on PATH (17 from "17.0.15", 8 from "1.8.0_392"), or nothing.
java_major() {
  java -version 2>&1 | sed -n 's/.*version "\([0-9]*\)\.\{0,1\}\([0-9]*\).*/\1 \2/p' | head -1 \
    | awk '{ print ($1 == 1 ? $2 : $1) }'
}
if ! command -v java >/dev/null 2>&1 || [ "$(java_major)" -lt 17 ] 2>/dev/null \
   || [ -z "$(java_major)" ]; then
  bash "$root/scripts/apt-install.sh" "the Kafka test broker (Apache Kafka $version needs Java 17)" \
    openjdk-17-jre-headless
fi
if ! command -v mvn >/dev/null 2>&1; then
  bash "$root/scripts/apt-install.sh" "the Kafka test broker (Maven fetches its jars)" maven
fi

echo "weir: installing the Kafka test broker Apache Kafka $version (mvn" \
     "dependency:copy-dependencies into tests/kafka/apache/lib)" >&2
rm -rf "$lib.new"
trap 'rm -rf "$lib.new"' EXIT
fix="run \`mvn -f tests/kafka/apache/pom.xml dependency:copy-dependencies"
fix+=" -DoutputDirectory=tests/kafka/apache/lib\` and fix what it reports (network, proxy in"
fix+=" ~/.m2/settings.xml)"
mvn_quietly "fetch Apache Kafka $version's jars" "$fix" \
  -f "$pom" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$lib.new"
if [ ! -f "$lib.new/kafka_2.13-$version.jar" ]; then
  echo "weir: Maven ran, but fetched no kafka_2.13-$version.jar (into $lib.new)" >&2
  exit 1
fi
echo "$want" >"$lib.new/.installed"
rm -rf "$lib"
mv "$lib.new" "$lib"
echo "$lib"
