#!/usr/bin/env bash
# Makes sure a RabbitMQ broker answers on AMQP_URL (default: the local one).
# When none answers and the address is local: start the installed server, or,
# as root on Debian/Ubuntu, install it from the OS packages first.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/ensure.sh
. "$here/lib/ensure.sh"

ensure_address "${AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/%2f}" 5672

answers() { ensure_listens "$port"; }

# Enables the plugin $1 of the local broker, which listens on port $2, and
# waits up to 30 s for it to listen.
enable_plugin() {
  ensure_is_local || return 0
  command -v rabbitmq-plugins >/dev/null 2>&1 || return 0
  ensure_listens "$2" && return 0
  rabbitmq-plugins enable "$1" >/dev/null 2>&1 || return 0
  ensure_wait 30 ensure_listens "$2" || true
}

enable_plugins() {
  # The management API lets `rabbit-backoff status` find retry tiers of older schedules.
  enable_plugin rabbitmq_management 15672
  # The stream protocol (port 5552) reads the dead-letter index faster than
  # AMQP; without it the library reads the index over AMQP.
  enable_plugin rabbitmq_stream 5552
}

if answers; then
  enable_plugins
  exit 0
fi
ensure_local RabbitMQ AMQP_URL
ensure_installed RabbitMQ rabbitmq-server rabbitmq-server

echo "Starting RabbitMQ..." >&2
rabbitmq-server -detached >/dev/null 2>&1 || true
# The AMQP listener opens last while the broker boots: once it answers, the
# broker is up. `await_startup` makes sure where rabbitmqctl is usable.
if ! ensure_wait 60 answers; then
  echo "RabbitMQ did not come up on $host:$port within 60 s; see /var/log/rabbitmq/." >&2
  exit 1
fi
rabbitmqctl -q await_startup --timeout 60 >/dev/null 2>&1 || true
enable_plugins
echo "RabbitMQ is up on $host:$port." >&2
