#!/usr/bin/env bash
# The demo: what Weir is for, in a few seconds. It builds what it needs (the wasm target, the
# example operators, the `weir` binary), then runs a word count (a file source that keeps
# growing → split → count ×2 → the exactly-once file sink) with a checkpoint every 400 ms,
# prints the dashboard's link, kills the job with SIGKILL mid-run, restores it with
# `--restore latest`, stops it with a savepoint, and checks that the committed output is that of
# an uninterrupted run, computed independently with tr | sort | uniq -c. Exits 1 if it is not.
#
# Everything lives in a temporary folder, removed at the end; the endpoint takes a free port.
# WEIR_DEMO_BIN, WEIR_DEMO_SPLIT and WEIR_DEMO_COUNT (all three) name a `weir` binary and the
# two operator modules to use instead of building them (the test suite does so:
# tests/all/demo.rs). WEIR_DEMO_ROUNDS sets how many times the text is fed (default 60, one
# round every 80 ms): more rounds, a longer run, time to open the dashboard.
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C

if [ -n "${WEIR_DEMO_BIN:-}" ] && [ -n "${WEIR_DEMO_SPLIT:-}" ] && [ -n "${WEIR_DEMO_COUNT:-}" ]; then
  weir=$WEIR_DEMO_BIN split=$WEIR_DEMO_SPLIT count=$WEIR_DEMO_COUNT
else
  echo "== building the operators (wasm) and weir (release; the first time takes minutes)"
  bash scripts/build-guests.sh
  source scripts/lib/host-build.sh
  cargo build --release -p weir
  target=${CARGO_TARGET_DIR:-target}
  case $target in /*) ;; *) target=$PWD/$target ;; esac
  weir=$target/release/weir
  split=$target/wasm32-unknown-unknown/release/weir_example_split.wasm
  count=$target/wasm32-unknown-unknown/release/weir_example_count.wasm
fi
rounds=${WEIR_DEMO_ROUNDS:-60}

work=$(mktemp -d "${TMPDIR:-/tmp}/weir-demo.XXXXXX")
job_pid="" feeder_pid=""
cleanup() {
  # Only the processes this script started, by their ids.
  for pid in $job_pid $feeder_pid; do kill -9 "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

start=$EPOCHREALTIME
say() { # [seconds since start] message
  local now=$EPOCHREALTIME
  printf '[%5.1fs] %s\n' "$(awk "BEGIN { print $now - $start }")" "$*"
}
fail() { say "FAILED: $*"; for log in "$work"/run-*.log; do [ -f "$log" ] && { echo "--- $log"; tail -20 "$log"; }; done; exit 1; }
# wait_for SECONDS DESCRIPTION COMMAND…: polls COMMAND every 50 ms.
wait_for() {
  local deadline=$(( ${EPOCHREALTIME%.*} + $1 )) what=$2; shift 2
  until "$@"; do
    [ "${EPOCHREALTIME%.*}" -lt "$deadline" ] || fail "timed out waiting for $what"
    sleep 0.05
  done
}
completed() { grep -c 'checkpoint [0-9]* complete' "$1" 2>/dev/null || true; }
lines_in() { local n=0 f; for f in "$@"; do [ -f "$f" ] && n=$((n + $(wc -l < "$f"))); done; echo "$n"; }
committed() { lines_in "$work"/out/part-*; }
# A one-time link into the running job's dashboard, in link.txt (`weir run` never logs one: its
# log may be read by others); fails while the job's control endpoint is not up yet.
dashboard_up() { "$weir" dashboard "$work/checkpoints" > "$work/link.txt" 2>/dev/null; }

# The input: the README's text, lowercased and without punctuation so that `tr` splits it into
# the same words as the `split` operator, fed ROUNDS times, 30 lines at a time.
tr 'A-Z' 'a-z' < examples/jobs/wordcount.txt | tr -c 'a-z\n' ' ' > "$work/text.txt"
for _ in $(seq "$rounds"); do cat "$work/text.txt"; done > "$work/all.txt"
: > "$work/input.txt"
words=$(tr -s ' ' '\n' < "$work/all.txt" | grep -c .)

cat > "$work/wordcount.toml" <<EOF
name = "wordcount"

[checkpoint]
interval = "400ms"
min_pause = "100ms"
directory = "checkpoints"
on_cancel = "retain"

[[source]]
name = "lines"
type = "file"
path = "input.txt"
follow = true                        # like tail -f: the job runs until it is stopped

[[operator]]
name = "split"
module = "$split"
inputs = ["lines"]

[[operator]]
name = "count"
module = "$count"
parallelism = 2
inputs = [{ from = "split", partition = "key-hash" }]

[[sink]]
name = "out"
type = "file"
path = "out"
parallelism = 2
inputs = ["count"]
EOF

echo "== Weir demo: a word count that survives a SIGKILL with exactly-once output"
echo "   job    lines (file, growing) → split → count (×2, keyed by word) → out (exactly-once files)"
echo "   input  $(wc -l < "$work/all.txt") lines, $words words, appended 30 lines every 80 ms"
echo "   folder $work"
echo

# The input arrives while the job runs, and keeps arriving while it is down.
( for _ in $(seq "$rounds"); do cat "$work/text.txt" >> "$work/input.txt"; sleep 0.08; done ) &
feeder_pid=$!

say "1. start:   weir run wordcount.toml   (a checkpoint every 400 ms)"
"$weir" run "$work/wordcount.toml" > "$work/run-1.log" 2>&1 &
job_pid=$!
wait_for 30 "the dashboard" dashboard_up
say "   dashboard: $(cat "$work/link.txt")"
say "              (a one-time link; \`weir dashboard $work/checkpoints\` prints another)"
enough_checkpoints() { [ "$(completed "$work/run-1.log")" -ge 3 ]; }
wait_for 30 "three checkpoints" enough_checkpoints
kill -0 "$job_pid" 2>/dev/null || fail "the job ended before the crash"
say "   $(completed "$work/run-1.log") checkpoints complete, $(committed) records committed so far"

# Mid-interval: half-way to the next checkpoint, so some records are processed but not committed.
sleep 0.2
{ kill -9 "$job_pid" && wait "$job_pid"; } 2>/dev/null || true
job_pid=""
arrived=$(tr -s ' ' '\n' < "$work/input.txt" | grep -c . || true)
say "2. crash:   kill -9 (SIGKILL) between two checkpoints: $(committed) of the $arrived words so far"
say "            are committed; the rest is read again from checkpoint $(completed "$work/run-1.log")'s offset"
say "            checkpoints on disk: $(cd "$work/checkpoints" && echo chk-*)"

say "3. restore: weir run wordcount.toml --restore latest"
"$weir" run "$work/wordcount.toml" --restore latest > "$work/run-2.log" 2>&1 &
job_pid=$!
wait_for 30 "the restarted job's dashboard" dashboard_up
restored=$(grep -o 'restor[^,;]*chk-[0-9]*' "$work/run-2.log" | head -1 || true)
say "   ${restored:-restored from the latest checkpoint}"
say "   dashboard: $(cat "$work/link.txt")"
wait "$feeder_pid"
feeder_pid=""
say "   all $words words are in the input; waiting until they are committed"
all_committed() { [ "$(committed)" -ge "$words" ]; }
wait_for 30 "the output to be committed" all_committed

savepoint=$("$weir" stop "$work/checkpoints" 2>/dev/null) || fail "weir stop"
wait "$job_pid" || fail "the restored job did not finish with exit code 0"
job_pid=""
say "4. stop:    weir stop → savepoint ${savepoint##*/}, the job finished (exit 0)"

say "5. check:   the committed output against tr | sort | uniq -c over the input"
# Every record the job committed, and what an uninterrupted run must commit: for each word, its
# running counts 1, 2, … n, once each.
cat "$work"/out/part-* | sort > "$work/committed.txt"
tr -s ' ' '\n' < "$work/all.txt" | grep . | sort | uniq -c > "$work/uniq.txt"
awk '{ for (i = 1; i <= $1; i++) print $2 "\t" i }' "$work/uniq.txt" | sort > "$work/expected.txt"
# The final count of each word in the committed output, against uniq -c.
awk -F'\t' '$2 > n[$1] { n[$1] = $2 } END { for (w in n) print n[w], w }' "$work/committed.txt" \
  | sort -k2 > "$work/final.txt"
awk '{ print $1, $2 }' "$work/uniq.txt" | sort -k2 > "$work/uniq-final.txt"

say "   records committed: $(wc -l < "$work/committed.txt"), expected $(wc -l < "$work/expected.txt")"
if ! cmp -s "$work/final.txt" "$work/uniq-final.txt"; then
  diff "$work/uniq-final.txt" "$work/final.txt" | head -20
  fail "the final counts differ from uniq -c (< uniq -c, > weir)"
fi
say "   final counts of all $(wc -l < "$work/final.txt") words equal uniq -c's; the most frequent:"
sort -k1,1nr -k2 "$work/final.txt" | head -5 | awk '{ printf "             %6d %s\n", $1, $2 }'
if ! cmp -s "$work/committed.txt" "$work/expected.txt"; then
  diff "$work/expected.txt" "$work/committed.txt" | head -20
  fail "the committed records are not each word's counts 1…n once each (< expected, > weir)"
fi
say "   every running count 1…n of every word committed exactly once: none lost, none twice"
say "OK: exactly-once output across a SIGKILL and a restore"
