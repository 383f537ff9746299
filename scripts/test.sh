#!/usr/bin/env bash
# The whole test suite: unit tests, compile-fail tests and integration tests
# against a real RabbitMQ (started, or installed, when none answers).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-broker.sh
cargo test --workspace --all-targets --locked "$@"
cargo test --workspace --doc --locked
