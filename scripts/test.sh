#!/usr/bin/env bash
# The whole test suite: unit tests, compile-fail tests and integration tests
# against real RabbitMQ brokers, started (or installed) when none answers:
# the machine's RabbitMQ 3.10 (the OS package) and RabbitMQ 4.3 and 4.0
# (Debian's own packages, each in a root of its own, made once and cached:
# scripts/broker.sh); for the web console a real headless Chromium, for the
# dedupe stores a real PostgreSQL and Redis (likewise installed when missing).
#
#   1. the workspace's tests on 3.10 and on 4.3, side by side (one build);
#   2. the semantics, broker-version, policy and scheduled-retry suites on 4.0;
#   3. the fault tests on a three-node 4.3 cluster with quorum queues
#      (cluster-tests/tests/cluster.rs, scripts/cluster.sh), then the network
#      faults on a three-node 4.3 cluster in network namespaces, one run each
#      (cluster-tests/tests/partitions/; scripts/partitions.sh repeats them);
#   4. the amqps:// tests on a TLS node of 3.10, then of 4.3 (scripts/tls.sh);
#   5. the shipped Prometheus rules: promtool's unit tests, and one alert
#      firing in a real Prometheus scraping examples/orders (scripts/alerts.sh).
#
# Every node it starts is stopped again, even on failure. Arguments go to the
# first step's `cargo test` (a test name, say). RABBIT_BACKOFF_VERSIONS
# (default "3.10 4.3") chooses the brokers of step 1.
set -euo pipefail
cd "$(dirname "$0")/.."

versions=(${RABBIT_BACKOFF_VERSIONS:-3.10 4.3})
logs=$(mktemp -d)

cleanup() {
  scripts/cluster.sh down >/dev/null 2>&1 || true
  RABBITMQ_VERSION=4.3 scripts/cluster.sh down >/dev/null 2>&1 || true
  CLUSTER_NETNS=1 RABBITMQ_VERSION=4.3 scripts/cluster.sh down >/dev/null 2>&1 || true
  scripts/tls.sh down >/dev/null 2>&1 || true
  RABBITMQ_VERSION=4.3 scripts/tls.sh down >/dev/null 2>&1 || true
  scripts/broker.sh down 4.3 >/dev/null 2>&1 || true
  scripts/broker.sh down 4.0 >/dev/null 2>&1 || true
  rm -rf "$logs"
}
trap cleanup EXIT

scripts/ensure-broker.sh
scripts/broker.sh up 4.3
scripts/broker.sh up 4.0
# Whatever broker a suite runs on, the start-up tests (tests/start_up.rs)
# fail over between a 4.3 node and the machine's 3.10.
RABBIT_BACKOFF_URL_4_3=$(eval "$(scripts/broker.sh env 4.3)"; echo "$AMQP_URL")
export RABBIT_BACKOFF_URL_4_3
scripts/ensure-postgres.sh
scripts/ensure-redis.sh
scripts/browser.sh

# One build for every run below, the cluster tests' included (each run below
# names the workspace, so that none builds its dependencies again).
cargo test --workspace --all-targets --locked --no-run "$@"
# The cluster tests wait for step 3 and its cluster.
local_only=(--exclude rabbit-backoff-cluster-tests)

# 1. Each broker's run in the background, its output in a log printed when it
# ends; the step fails when either run does.
suite() {
  local version=$1; shift
  (
    eval "$(scripts/broker.sh env "$version")"
    cargo test --workspace "${local_only[@]}" --all-targets --locked "$@"
  ) >"$logs/$version.log" 2>&1
}
pids=()
for version in "${versions[@]}"; do
  suite "$version" "$@" &
  pids+=($!)
done
failed=()
for i in "${!versions[@]}"; do
  wait "${pids[$i]}" || failed+=("${versions[$i]}")
done
for version in "${versions[@]}"; do
  echo "==================== the suite on RabbitMQ $version ===================="
  cat "$logs/$version.log"
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "the suite failed on RabbitMQ ${failed[*]} (see above)" >&2
  exit 1
fi
cargo test --workspace "${local_only[@]}" --doc --locked

# 2. What the framework promises for one message, what differs between
# versions, and the retry policy (a first failure read from the broker's
# x-death), on 4.0.
echo "==================== semantics on RabbitMQ 4.0 ===================="
(
  eval "$(scripts/broker.sh env 4.0)"
  cargo test --locked --test semantics --test broker_versions --test policy --test scheduled_retry
)
scripts/broker.sh down 4.0

# 3. The cluster: what 4.x users run, three nodes with quorum queues.
export RABBITMQ_VERSION=4.3
scripts/cluster.sh up
# --nocapture: the tests print what they measured (recovery times, duplicates).
# --workspace: the build of step 1 (the crate rabbit-backoff-cluster-tests
# alone would unify its dependencies' features apart, and build them again).
RABBITMQCTL="$PWD/scripts/cluster.sh ctl" \
  cargo test --locked --workspace --test cluster -- --nocapture
scripts/cluster.sh down
# Partitions, a client cut off, a rolling restart: each node a host of its
# own (network namespaces), pause_minority, quorum queues, one run per fault
# (about 8 minutes, both retry backends).
echo "==================== partitions on RabbitMQ 4.3 ===================="
CLUSTER_NETNS=1 scripts/cluster.sh up
CLUSTER_NETNS=1 cargo test --locked --workspace --test partitions -- --nocapture
CLUSTER_NETNS=1 scripts/cluster.sh down
unset RABBITMQ_VERSION

# 4. amqps:// on each version: the handshake against the node, then a
# consumer and the CLI.
for version in 3.10 4.3; do
  echo "==================== TLS on RabbitMQ $version ===================="
  RABBITMQ_VERSION=$version scripts/tls.sh up
  cargo test --locked -p rabbit-backoff-runtime --features tls --lib transport::net::tls
  # The version tells the tests what to expect of retry = "scheduled".
  RABBITMQ_VERSION=$version cargo test --locked --features tls --test tls
  cargo test --locked -p rabbit-backoff-cli --features tls --test tls
  RABBITMQ_VERSION=$version scripts/tls.sh down
done

# 5. The alert rules, unit-tested and firing live.
scripts/alerts.sh
