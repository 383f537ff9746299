#!/usr/bin/env bash
# Makes sure a RabbitMQ broker answers on AMQP_URL (default: the local one).
# When none answers and the address is local: start the installed server, or,
# as root on Debian/Ubuntu, install it from the OS packages first.
set -euo pipefail

url="${AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/%2f}"
hostport="${url#*://}"; hostport="${hostport#*@}"; hostport="${hostport%%/*}"
host="${hostport%%:*}"; port="${hostport##*:}"
[ "$port" = "$hostport" ] && port=5672

answers() { (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; }

wait_for_broker() {
  # The AMQP listener opens last while the broker boots: once it answers, the
  # broker is up. `await_startup` makes sure where rabbitmqctl is usable.
  for _ in $(seq 1 60); do
    if answers; then
      rabbitmqctl -q await_startup --timeout 60 >/dev/null 2>&1 || true
      return 0
    fi
    sleep 1
  done
  return 1
}

# The management API lets `rabbit-backoff status` find retry tiers of older schedules.
enable_management() {
  case "$host" in 127.*|localhost|::1) ;; *) return 0 ;; esac
  command -v rabbitmq-plugins >/dev/null 2>&1 || return 0
  (exec 3<>"/dev/tcp/$host/15672") 2>/dev/null && return 0
  rabbitmq-plugins enable rabbitmq_management >/dev/null 2>&1 || return 0
  for _ in $(seq 1 30); do (exec 3<>"/dev/tcp/$host/15672") 2>/dev/null && return 0; sleep 1; done
}

# The stream protocol (port 5552) reads the dead-letter index faster than
# AMQP; without it the library reads the index over AMQP.
enable_stream() {
  case "$host" in 127.*|localhost|::1) ;; *) return 0 ;; esac
  command -v rabbitmq-plugins >/dev/null 2>&1 || return 0
  (exec 3<>"/dev/tcp/$host/5552") 2>/dev/null && return 0
  rabbitmq-plugins enable rabbitmq_stream >/dev/null 2>&1 || return 0
  for _ in $(seq 1 30); do (exec 3<>"/dev/tcp/$host/5552") 2>/dev/null && return 0; sleep 1; done
}

if answers; then
  enable_management
  enable_stream
  exit 0
fi
case "$host" in
  127.*|localhost|::1) ;;
  *) echo "No RabbitMQ answers at $host:$port (AMQP_URL). Start it there, or unset AMQP_URL to use a local one." >&2; exit 1 ;;
esac

if ! command -v rabbitmq-server >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "RabbitMQ is not installed. Install it (Debian/Ubuntu: sudo apt-get install rabbitmq-server) and run this again." >&2
    exit 1
  fi
  echo "Installing RabbitMQ from the OS packages..." >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq rabbitmq-server >/dev/null
fi

echo "Starting RabbitMQ..." >&2
rabbitmq-server -detached >/dev/null 2>&1 || true
if ! wait_for_broker; then
  echo "RabbitMQ did not come up on $host:$port within 60 s; see /var/log/rabbitmq/." >&2
  exit 1
fi
enable_management
enable_stream
echo "RabbitMQ is up on $host:$port." >&2
