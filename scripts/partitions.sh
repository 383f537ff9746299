#!/usr/bin/env bash
# The partition suite (cluster-tests/tests/partitions/) repeated: each fault several times,
# for each RabbitMQ version, partition handling and queue type asked, each on
# a namespaced cluster of its own (CLUSTER_NETNS=1 scripts/cluster.sh). Run as
# root (it makes network namespaces); PostgreSQL must answer (run
# scripts/ensure-postgres.sh first). scripts/test.sh runs the short form: one
# run per fault, 4.3, pause_minority, quorum.
#
#   scripts/partitions.sh                  5 runs per fault of every combination below
#   REPEATS=2 VERSIONS=4.3 scripts/partitions.sh
#   scripts/partitions.sh retry_tier      arguments go to cargo test (a test name, say)
#
# Environment (defaults in brackets):
#   VERSIONS   RabbitMQ versions                 [4.3 3.10]
#   HANDLINGS  cluster_partition_handling values [pause_minority autoheal]
#   TYPES      queue types                       [quorum classic]; classic runs
#              with the first handling only, and fails only on a duplicate
#              effect (its losses are reported, not asserted)
#   REPEATS    runs per fault                    [5]
#   HOLD       seconds a cut lasts               [15]
# Every run prints one line per fault (lost, duplicates, pauses); they are
# gathered at the end, and kept in $PARTITIONS_LOG (default
# target/partitions.log). The cluster is removed at the end, even on failure.
# Each combination takes about REPEATS x 3 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

versions=(${VERSIONS:-4.3 3.10})
handlings=(${HANDLINGS:-pause_minority autoheal})
types=(${TYPES:-quorum classic})
repeats=${REPEATS:-5}
hold=${HOLD:-15}
log=${PARTITIONS_LOG:-target/partitions.log}
export CLUSTER_NETNS=1

current=""
cleanup() {
  [ -z "$current" ] || RABBITMQ_VERSION=$current scripts/cluster.sh down >/dev/null 2>&1 || true
}
trap cleanup EXIT

mkdir -p "$(dirname "$log")"
: >"$log"
# --workspace: the build scripts/test.sh makes (see there).
cargo test --locked --workspace --test partitions --no-run "$@"
failed=()
for version in "${versions[@]}"; do
  for handling in "${handlings[@]}"; do
    for type in "${types[@]}"; do
      # Classic queues once per version, with the first handling.
      [ "$type" = quorum ] || [ "$handling" = "${handlings[0]}" ] || continue
      echo "==================== $version, $handling, $type, $repeats runs per fault ====================" | tee -a "$log"
      export RABBITMQ_VERSION=$version CLUSTER_PARTITION_HANDLING=$handling
      # A fresh cluster: the partition handling is read at start.
      current=$version
      scripts/cluster.sh down >/dev/null 2>&1 || true
      scripts/cluster.sh up
      status=0
      PARTITION_REPEATS=$repeats PARTITION_QUEUE_TYPE=$type PARTITION_HOLD_SECS=$hold \
        cargo test --locked --workspace --test partitions "$@" -- --nocapture \
        >"$log.run" 2>&1 || status=$?
      cat "$log.run" >>"$log"
      grep -E '^partitions,|^test |panicked' "$log.run" || true
      rm -f "$log.run"
      [ "$status" -eq 0 ] || failed+=("$version/$handling/$type")
      scripts/cluster.sh down
      current=""
    done
  done
done
echo "==================== every run ===================="
grep '^partitions,' "$log" || true
if [ "${#failed[@]}" -gt 0 ]; then
  echo "failed: ${failed[*]} (see $log)" >&2
  exit 1
fi
