#!/usr/bin/env bash
# Makes sure PostgreSQL answers at DATABASE_URL (default: the local server,
# postgres://postgres@127.0.0.1:5432/test) and that its database exists.
# When none answers and the address is local: start the installed cluster,
# or, as root on Debian/Ubuntu, install it from the OS packages first. A
# cluster this script sets up trusts connections from the loopback address
# only (the tests connect as `postgres` without a password).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/ensure.sh
. "$here/lib/ensure.sh"

ensure_address "${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}" 5432
database="${address#*/}"; database="${database%%\?*}"
[ "$database" = "$address" ] && database=postgres

answers() { ensure_listens "$port"; }

create_database() {
  [ "$database" = "postgres" ] && return 0
  local exists
  exists=$(psql -h "$host" -p "$port" -U postgres -d postgres -tAc \
    "SELECT 1 FROM pg_database WHERE datname = '$database'" 2>/dev/null || true)
  [ "$exists" = "1" ] && return 0
  psql -h "$host" -p "$port" -U postgres -d postgres -qc "CREATE DATABASE \"$database\"" >/dev/null
  echo "Created the database $database." >&2
}

ready() { answers && pg_isready -q -h "$host" -p "$port" 2>/dev/null; }

if answers; then
  create_database
  exit 0
fi
ensure_local PostgreSQL DATABASE_URL
ensure_installed PostgreSQL pg_ctlcluster postgresql

version=$(ls /usr/lib/postgresql/ | sort -V | tail -n 1)
if ! pg_lsclusters -h 2>/dev/null | awk '{print $1" "$2}' | grep -q "^$version main$"; then
  pg_createcluster "$version" main --port "$port" >/dev/null
fi
hba="/etc/postgresql/$version/main/pg_hba.conf"
if [ -w "$hba" ] && ! grep -q '^host all all 127.0.0.1/32 trust' "$hba"; then
  # Loopback only: the tests connect as postgres without a password.
  sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\nlocal all all trust' "$hba"
fi

echo "Starting PostgreSQL $version..." >&2
pg_ctlcluster "$version" main start >/dev/null 2>&1 || pg_ctlcluster "$version" main reload >/dev/null 2>&1 || true
if ! ensure_wait 60 ready; then
  echo "PostgreSQL did not come up on $host:$port within 60 s; see /var/log/postgresql/." >&2
  exit 1
fi
create_database
echo "PostgreSQL is up on $host:$port." >&2
