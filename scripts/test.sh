#!/usr/bin/env bash
# The whole test suite: formatting, lints, and every test (the example guests
# are built from source by tests/build.rs). This is the README's test command
# and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step says when it starts and how long the suite has run: CI's limit is the whole.
step() { echo "== $1 ($(date -u +%H:%M:%S) UTC, ${SECONDS}s in)"; }
step "installing what the tests need"
source scripts/lib/host-build.sh
bash scripts/ensure-chromium.sh
# Apache Kafka itself, the broker of the Kafka tests (tests/all/kafka/mod.rs; one node, and the
# three-node cluster of the tests that kill and pause brokers): its jars fetched with Maven
# (tests/kafka/apache/pom.xml; about 45 MB and seconds the first time, nothing after). The tests
# install it themselves when it is missing, so `cargo test` alone works; here it is installed
# before the build, where a failure stops the suite with the script's own message instead of
# skipping those tests.
kafka_jars="$(bash scripts/install-apache-kafka.sh)"
echo "the Kafka tests run Apache Kafka $(sed -n 's:.*<kafka.version>\([^<]*\)</kafka.version>.*:\1:p' \
  tests/kafka/apache/pom.xml) (jars in ${kafka_jars#"$PWD/"})"
# The S3 server of the object-storage tests (tests/all/object_storage/mod.rs): moto, installed the
# same way and for the same reason (about 300 MB and under a minute the first time; nothing after).
bash scripts/install-s3-server.sh >/dev/null
# The Kubernetes schema validator of the deployment test (tests/all/deployment.rs): PyPI's
# kubernetes-validate, installed the same way and for the same reason (seconds the first time).
bash scripts/install-kubernetes-validate.sh >/dev/null
# The Azure Blob Storage emulator of the az:// checkpoint test (tests/all/object_storage/mod.rs):
# npm's azurite, installed the same way and for the same reason (about 400 MB the first time).
bash scripts/install-azure-server.sh >/dev/null
# strace, which the durability test (tests/all/durability.rs) runs `weir` under to see every
# directory it creates made durable.
command -v strace >/dev/null 2>&1 || bash scripts/apt-install.sh "the durability test" strace
rustup component add rustfmt clippy >/dev/null 2>&1 || true
step "cargo fmt --check"
cargo fmt --all -- --check
# Clippy and the tests' build in one compilation. `cargo clippy` type-checks every dependency
# before it lints, and the tests then compile them all again: in a clean run here that check
# took 417 s and the build 433 s. So the workspace's crates are compiled by clippy-driver, as
# `cargo clippy` runs it (RUSTC_WORKSPACE_WRAPPER), every warning of rustc's and clippy's denied
# (RUSTFLAGS; the dependencies are built with their lints capped, as always): the lints of
# every target of every member and the code the tests run come out of one pass, and each
# dependency is compiled once. Exported, because `cargo test` below and the `cargo test
# --workspace --all-targets --no-run` the end-to-end tests run to find the `weir` binary must
# see the very same build (tests/all/support/binary.rs); builds of guests and of new projects
# remove them. Every cargo command here selects `--workspace --all-targets`: another selection
# gives some build dependencies another profile (their debug information), and cargo builds
# them and what depends on them again (78 s, the end-to-end tests' build script among them).
# (The host is not linted a second time without the test crates' `test-hooks` feature, as the
# release binary is built: that resolves the dependencies' features for the host alone and
# builds wasmtime again, minutes for a feature that gates a handful of items. Before changing
# what `test-hooks` gates, run `cargo clippy -p weir --lib --bins -- -D warnings`.)
export RUSTC_WORKSPACE_WRAPPER="$(rustc --print sysroot)/bin/clippy-driver"
export RUSTFLAGS="-D warnings"
step "cargo clippy and the tests' build (clippy-driver compiles the workspace)"
cargo test --workspace --all-targets --no-run
step "cargo clippy (the Rust SDK for wasm32)"
cargo clippy -p weir-sdk --target wasm32-unknown-unknown -- -D warnings
# The SDKs of the component languages, in their own runtimes (docs/COMPONENTS.md): seconds.
if ! command -v python3 >/dev/null 2>&1; then
  bash scripts/apt-install.sh "the Python SDK's tests" python3
fi
step "the host's layers (scripts/import-graph.py: no import runs back up)"
python3 scripts/import-graph.py
step "Python SDK (python3 -m unittest)"
python3 -m unittest discover -q -s guest-sdk/python/tests -t guest-sdk/python
python3 -m unittest discover -q -s examples/python/count
python3 -m unittest discover -q -s examples/python/host-count
bash scripts/install-componentize-js.sh
step "JavaScript SDK (node --test)"
node --test --test-reporter=dot guest-sdk/js/test/ examples/js/count/ examples/js/host-count/
step "cargo test"
# The benchmarks run too, each once as a test (criterion's test mode): seconds.
cargo test --workspace --all-targets
step "done"
