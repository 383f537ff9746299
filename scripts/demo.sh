#!/usr/bin/env bash
# The orders demo: publishes sample orders and shows them move through the
# retry tiers to success or to the dead-letter queue.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-broker.sh
exec cargo run --quiet --example orders -- --demo "$@"
