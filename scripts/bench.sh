#!/usr/bin/env bash
# The benchmarks: framework beside a hand-written lapin consumer against the
# real broker (throughput, CPU per message, memory), then the I/O-free hot path.
# BENCH_TARGETS=single-classic,single-quorum,cluster-quorum measures on each
# (see benches/throughput/main.rs); with cluster-quorum the three-node cluster of
# scripts/cluster.sh is started when it does not run, and stopped afterwards.
# The dedupe sides need PostgreSQL and Redis, started (or installed) here.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-broker.sh
scripts/ensure-postgres.sh
scripts/ensure-redis.sh
if [[ ",${BENCH_TARGETS:-}," == *,cluster-quorum,* ]] \
  && ! scripts/cluster.sh status 2>/dev/null | grep -q '^running in the cluster: .*rabbit-a.*rabbit-b.*rabbit-c'; then
  trap 'scripts/cluster.sh down' EXIT
  scripts/cluster.sh up
fi
cargo bench --locked --bench throughput
cargo bench --locked --bench hot_path
