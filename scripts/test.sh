#!/usr/bin/env bash
# The whole test suite: unit tests, compile-fail tests and integration tests
# against a real RabbitMQ (started, or installed, when none answers) and, for
# the web console, a real headless Chromium (installed when missing), and for
# the dedupe stores a real PostgreSQL and Redis (likewise); then the
# fault tests on a three-node cluster (tests/cluster.rs), started beside the
# default node by scripts/cluster.sh and stopped again, even on failure; and
# the amqps:// tests on a node with TLS listeners, started and stopped the
# same way by scripts/tls.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-broker.sh
scripts/ensure-postgres.sh
scripts/ensure-redis.sh
scripts/browser.sh
cargo test --workspace --all-targets --locked "$@"
cargo test --workspace --doc --locked

trap 'scripts/cluster.sh down' EXIT
scripts/cluster.sh up
# --nocapture: the tests print what they measured (recovery times, duplicates).
cargo test --locked --features cluster-tests --test cluster -- --nocapture
scripts/cluster.sh down
trap - EXIT

trap 'scripts/tls.sh down' EXIT
scripts/tls.sh up
# The handshake against the node, then a consumer and the CLI over amqps://.
cargo test --locked -p rabbit-backoff-runtime --features tls --lib transport::tls
cargo test --locked --features tls --test tls
cargo test --locked -p rabbit-backoff-cli --features tls --test tls
scripts/tls.sh down
trap - EXIT
