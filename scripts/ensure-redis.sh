#!/usr/bin/env bash
# Makes sure Redis answers at REDIS_URL (default: redis://127.0.0.1:6379).
# When none answers and the address is local: start the installed server
# (bound to the loopback address, in the background), or, as root on
# Debian/Ubuntu, install it from the OS packages first.
set -euo pipefail

url="${REDIS_URL:-redis://127.0.0.1:6379}"
rest="${url#*://}"; rest="${rest#*@}"
hostport="${rest%%/*}"
host="${hostport%%:*}"; port="${hostport##*:}"
[ "$port" = "$hostport" ] && port=6379

answers() { redis-cli -h "$host" -p "$port" ping 2>/dev/null | grep -q PONG; }

if command -v redis-cli >/dev/null 2>&1 && answers; then
  exit 0
fi
case "$host" in
  127.*|localhost|::1) ;;
  *) echo "No Redis answers at $host:$port (REDIS_URL). Start it there, or unset REDIS_URL to use a local one." >&2; exit 1 ;;
esac

if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "Redis is not installed. Install it (Debian/Ubuntu: sudo apt-get install redis-server) and run this again." >&2
    exit 1
  fi
  echo "Installing Redis from the OS packages..." >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq redis-server >/dev/null
fi

echo "Starting Redis..." >&2
# The packaged configuration when there is one (loopback, protected mode);
# otherwise the same settings on the command line.
if [ -r /etc/redis/redis.conf ] && [ "$port" = 6379 ]; then
  redis-server /etc/redis/redis.conf --daemonize yes >/dev/null
else
  redis-server --bind 127.0.0.1 ::1 --port "$port" --protected-mode yes --daemonize yes >/dev/null
fi
for _ in $(seq 1 30); do
  if answers; then
    echo "Redis is up on $host:$port." >&2
    exit 0
  fi
  sleep 1
done
echo "Redis did not come up on $host:$port within 30 s." >&2
exit 1
