#!/usr/bin/env bash
# The whole test suite: unit tests, compile-fail tests and integration tests
# against a real RabbitMQ (started, or installed, when none answers) and, for
# the web console, a real headless Chromium (installed when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-broker.sh
scripts/browser.sh
cargo test --workspace --all-targets --locked "$@"
cargo test --workspace --doc --locked
