#!/usr/bin/env bash
# The benchmarks: framework beside a hand-written lapin consumer against the
# real broker (throughput, CPU per message, memory), then the I/O-free hot path.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-broker.sh
cargo bench --locked --bench throughput
cargo bench --locked --bench hot_path
