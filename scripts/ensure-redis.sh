#!/usr/bin/env bash
# Makes sure Redis answers at REDIS_URL (default: redis://127.0.0.1:6379).
# When none answers and the address is local: start the installed server
# (bound to the loopback address, in the background), or, as root on
# Debian/Ubuntu, install it from the OS packages first.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/ensure.sh
. "$here/lib/ensure.sh"

ensure_address "${REDIS_URL:-redis://127.0.0.1:6379}" 6379

answers() { redis-cli -h "$host" -p "$port" ping 2>/dev/null | grep -q PONG; }

if command -v redis-cli >/dev/null 2>&1 && answers; then
  exit 0
fi
ensure_local Redis REDIS_URL
ensure_installed Redis redis-server redis-server

echo "Starting Redis..." >&2
# The packaged configuration when there is one (loopback, protected mode);
# otherwise the same settings on the command line.
if [ -r /etc/redis/redis.conf ] && [ "$port" = 6379 ]; then
  redis-server /etc/redis/redis.conf --daemonize yes >/dev/null
else
  redis-server --bind 127.0.0.1 ::1 --port "$port" --protected-mode yes --daemonize yes >/dev/null
fi
if ! ensure_wait 30 answers; then
  echo "Redis did not come up on $host:$port within 30 s." >&2
  exit 1
fi
echo "Redis is up on $host:$port." >&2
