#!/usr/bin/env bash
# Regenerates docs/RELIABILITY.md: runs every fault scenario of the test suite with long
# settings, then the fuzz targets, and renders the rows they record into the table.
#
#   bash scripts/reliability.sh            # the documented long run (about an hour on 2 cores)
#
# Settings (environment; defaults are the long run's):
#   WEIR_CHAOS_ROUNDS       random-moment kills per chaos job (2 jobs)         default 250
#   WEIR_KILL_POINT_ROUNDS  kills per named kill point (8 points)              default 25
#   WEIR_KAFKA_ROUNDS       kills of the kafka → kafka job (a quarter for each of
#                           file → kafka and kafka → file)                     default 500
#   WEIR_CLUSTER_ROUNDS     rounds of the kafka → kafka job on a 3-node Apache Kafka cluster,
#                           each with a broker killed or paused                default 30
#   WEIR_WORKER_ROUNDS      rounds of the three-worker job on that cluster     default 12
#   WEIR_BACKPRESSURE_SECS  length of the healthy back-pressure run, seconds   default 300
#   WEIR_FUZZ_SECS          seconds per fuzz target (0: skip fuzzing, noted)   default 300
#   WEIR_CHAOS_SEED         seed of the kill plans (a number or `random`)      default fixed
#   WEIR_RELIABILITY_AREAS  only these areas, comma-separated (chaos, kafka, kafka-cluster, isolation,
#                           storage, back-pressure, misuse, fuzz): their sections of the table are
#                           replaced, each saying which run made it; the rest is kept    default all
# CI runs the same tests with the small defaults of the tests themselves (`.ci/run`).
set -euo pipefail
cd "$(dirname "$0")/.."

export WEIR_CHAOS_ROUNDS="${WEIR_CHAOS_ROUNDS:-250}"
export WEIR_KILL_POINT_ROUNDS="${WEIR_KILL_POINT_ROUNDS:-25}"
export WEIR_KAFKA_ROUNDS="${WEIR_KAFKA_ROUNDS:-500}"
export WEIR_CLUSTER_ROUNDS="${WEIR_CLUSTER_ROUNDS:-30}"
export WEIR_WORKER_ROUNDS="${WEIR_WORKER_ROUNDS:-12}"
export WEIR_BACKPRESSURE_SECS="${WEIR_BACKPRESSURE_SECS:-300}"
fuzz_secs="${WEIR_FUZZ_SECS:-300}"

rows="$PWD/target/reliability/rows.jsonl"
mkdir -p "$(dirname "$rows")"
rm -f "$rows"
export WEIR_RELIABILITY_LOG="$rows"

source scripts/lib/host-build.sh
# What is measured is the tree as it is now; say so if it differs from the commit.
commit="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . || echo ' + uncommitted changes')"
started=$(date +%s)
areas="${WEIR_RELIABILITY_AREAS:-}"
wants() { [ -z "$areas" ] || [[ ",$areas," == *",$1,"* ]]; }
# The test modules that record each area's rows.
modules=()
wants chaos && modules+=(chaos:: kill_points:: event_time::a_restored_source_keeps_its_idle_partition_idle)
wants kafka && modules+=(kafka::exactly_once:: kafka::source::a_restore_onto_a_topic_created_again)
wants kafka-cluster && modules+=(kafka::cluster:: workers::three_workers_killed_at_random_on_a_cluster)
wants isolation && modules+=(isolation::)
wants storage && modules+=(storage_faults::)
wants back-pressure && modules+=(backpressure::)
wants misuse && modules+=(misuse:: bad_job_files:: control::)
if [ ${#modules[@]} -gt 0 ]; then
    echo "== fault scenarios: ${modules[*]}"
    # Whole modules by name; every test in them records its row when it passes.
    cargo test -p weir-tests --test all -- --test-threads 2 "${modules[@]}"
fi

if ! wants fuzz; then
    fuzz_secs=0
elif [ "$fuzz_secs" -gt 0 ]; then
    echo "== fuzzing, $fuzz_secs s per target"
    bash scripts/fuzz.sh "$fuzz_secs"
else
    echo "!! WEIR_FUZZ_SECS=0: fuzzing skipped; the table will say so" >&2
fi
elapsed=$(( $(date +%s) - started ))

command="bash scripts/reliability.sh"
[ -n "$areas" ] && command="WEIR_RELIABILITY_AREAS=$areas $command"
export WEIR_RELIABILITY_COMMAND="$command (took $((elapsed / 60)) min $((elapsed % 60)) s)"
export WEIR_RELIABILITY_COMMIT="$commit"
export WEIR_RELIABILITY_SETTINGS="WEIR_CHAOS_ROUNDS=$WEIR_CHAOS_ROUNDS, WEIR_KILL_POINT_ROUNDS=$WEIR_KILL_POINT_ROUNDS, WEIR_KAFKA_ROUNDS=$WEIR_KAFKA_ROUNDS, WEIR_CLUSTER_ROUNDS=$WEIR_CLUSTER_ROUNDS, WEIR_WORKER_ROUNDS=$WEIR_WORKER_ROUNDS, WEIR_BACKPRESSURE_SECS=$WEIR_BACKPRESSURE_SECS, WEIR_FUZZ_SECS=$fuzz_secs, WEIR_CHAOS_SEED=${WEIR_CHAOS_SEED:-default}; debug build"
export WEIR_RELIABILITY_MACHINE="$(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), Linux $(uname -r), $(date -u +%Y-%m-%d)"
touch "$rows"
if [ -n "$areas" ]; then
    cargo run -q -p weir-tests --bin reliability-table -- "$rows" docs/RELIABILITY.md --only "$areas"
else
    cargo run -q -p weir-tests --bin reliability-table -- "$rows" docs/RELIABILITY.md
fi
