#!/usr/bin/env bash
# Runs every cargo-fuzz target of fuzz/ for SECONDS_PER_TARGET (default 60) and prints the
# executions and crashes of each. See fuzz/README.md.
#
#   bash scripts/fuzz.sh [SECONDS_PER_TARGET]
#
# Environment:
#   WEIR_FUZZ_TARGETS     space-separated targets to run (default: all four)
#   WEIR_RELIABILITY_LOG  a file to append one JSON line per target to, for docs/RELIABILITY.md
#
# Needs a nightly toolchain (libFuzzer's instrumentation) and cargo-fuzz, which it installs
# when missing. New inputs go to fuzz/target/corpus/<target>/ (not committed); a crash is
# saved by libFuzzer under fuzz/artifacts/<target>/ and makes the script exit 1 once every
# target has run. Replay a crash with: cargo +nightly fuzz run <target> <file>
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

seconds=${1:-60}
if ! [[ $seconds =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: bash scripts/fuzz.sh [SECONDS_PER_TARGET]   (a positive integer, default 60)" >&2
  exit 2
fi
read -r -a targets <<<"${WEIR_FUZZ_TARGETS:-batch_codec checkpoint_metadata job_file guest_restore}"

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  cat >&2 <<'EOF'
############################################################################
weir: cargo fuzz needs a NIGHTLY Rust toolchain, and none is installed.
      Install it, then run this script again:

          rustup toolchain install nightly --profile minimal

      (The replay of the fuzz corpora in `cargo test` runs on stable.)
############################################################################
EOF
  exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "weir: installing cargo-fuzz (cargo install --locked cargo-fuzz)" >&2
  cargo install --locked cargo-fuzz
fi

# The restore target embeds the Rust count guest. Build it here with the default (stable)
# toolchain, which has the wasm32 target; fuzz/checks/build.rs picks it up from this variable.
source scripts/lib/host-build.sh
cargo build --release --target wasm32-unknown-unknown -p weir-example-count
export WEIR_FUZZ_GUEST_COUNT=$root/target/wasm32-unknown-unknown/release/weir_example_count.wasm

echo "== cargo +nightly fuzz build (${targets[*]})"
for target in "${targets[@]}"; do
  (cd fuzz && cargo +nightly fuzz build "$target")
done

# Longest a single input may run before libFuzzer calls it a hang, in seconds. Guest calls are
# cut at 5 s by the restore target's own limits, so only a host hang gets this far.
per_input_timeout=30
status=0
summary=()
for target in "${targets[@]}"; do
  work=fuzz/target/corpus/$target
  artifacts=fuzz/artifacts/$target
  log=fuzz/target/logs/$target.log
  mkdir -p "$work" "$artifacts" "$(dirname "$log")"
  seeds=("fuzz/corpus/$target")
  [[ -d fuzz/regressions/$target ]] && seeds+=("fuzz/regressions/$target")
  dict=()
  [[ -f fuzz/dicts/$target.dict ]] && dict=("-dict=$root/fuzz/dicts/$target.dict")
  known=$(ls -1 "$artifacts")

  echo "== $target: ${seconds} s (log: $log)"
  set +e
  (cd fuzz && cargo +nightly fuzz run "$target" "$root/$work" "${seeds[@]/#/$root/}" -- \
    -max_total_time="$seconds" -timeout="$per_input_timeout" -print_final_stats=1 \
    -artifact_prefix="$root/$artifacts/" "${dict[@]}") >"$log" 2>&1
  code=$?
  set -e

  executions=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
  # The files libFuzzer saved in this run: crash-*, timeout-*, oom-*, leak-*.
  new=$(comm -13 <(echo "$known") <(ls -1 "$artifacts") | sed '/^$/d')
  crashes=$(printf '%s' "$new" | grep -c . || true)
  if [[ -z $executions ]]; then
    echo "weir: $target did not report its executions (exit $code); the end of $log:" >&2
    tail -n 30 "$log" >&2
    status=1
    continue
  fi
  if ((code != 0 && crashes == 0)); then
    echo "weir: $target exited with $code without saving a crash; the end of $log:" >&2
    tail -n 30 "$log" >&2
    status=1
  fi
  if ((crashes == 1)); then result="1 crash"; else result="$crashes crashes"; fi
  line="$target: $executions executions, $result"
  if ((crashes > 0)); then
    status=1
    line+=": $(printf '%s' "$new" | sed "s|^|$artifacts/|" | paste -sd ' ')"
  fi
  echo "$line"
  summary+=("$line")

  if [[ -n ${WEIR_RELIABILITY_LOG:-} ]]; then
    printf '{"area":"fuzz","scenario":"cargo fuzz target `%s` for %s s","rounds":%s,"faults":"random and mutated bytes","result":"%s"}\n' \
      "$target" "$seconds" "$executions" "$result" \
      >>"$WEIR_RELIABILITY_LOG"
  fi
done

echo "== summary (${seconds} s per target)"
printf '%s\n' "${summary[@]}"
exit "$status"
