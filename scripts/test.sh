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
step "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
# The host alone, as the release `weir` is built: without the test crates' `test-hooks` feature.
cargo clippy -p weir --all-targets -- -D warnings
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
cargo test --workspace
step "done"
