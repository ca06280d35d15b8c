#!/usr/bin/env bash
# Runs the Kafka benchmark (docs/BENCHMARKS.md §5): Kafka → count → Kafka exactly-once through
# the release `weir`, beside the same job as a Kafka Streams application (exactly_once_v2, its
# commit interval Weir's checkpoint interval; benches/peers/kafka-streams, built with Maven by
# scripts/build-kafka-streams-peer.sh) and a plain librdkafka consume → produce loop with the
# same transactions per second, on a broker of its own: Apache Kafka (installed by
# scripts/install-apache-kafka.sh), or noida-db with WEIR_KAFKA_BROKER=noida-db (the broker of
# the older figures in BENCHMARKS.md §5). Each system's records/s, produce → visible latency,
# CPU time and peak memory. Kept out of scripts/bench.sh, whose time it would double.
#
#   bash scripts/bench-kafka.sh --repeat 3                # what BENCHMARKS.md §5 quotes: medians of 3
#   bash scripts/bench-kafka.sh --records 200000 --seconds 10      # a quick pass
#   bash scripts/bench-kafka.sh --no-streams              # without Kafka Streams (no Java build)
#
# Arguments go to kafka-bench (`target/release/kafka-bench --help`). Results are written to
# target/kafka-bench-results.json unless WEIR_BENCH_OUT says otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/host-build.sh
CARGO_TARGET_DIR="$(realpath -m "${CARGO_TARGET_DIR:-target}")"
export CARGO_TARGET_DIR
out="$(realpath -m "${WEIR_BENCH_OUT:-$CARGO_TARGET_DIR/kafka-bench-results.json}")"
cargo build --release -p weir --bin weir -p weir-benches --bin kafka-bench
echo "== load before: $(cat /proc/loadavg)"
"$CARGO_TARGET_DIR/release/kafka-bench" --json "$out" "$@"
echo "== load after: $(cat /proc/loadavg)"
