# What the ensure-*.sh scripts share, to make sure a service answers at its
# URL: where the URL points, whether that is this machine, installing the
# server from the OS packages, and waiting for it. Sourced, not run; the
# functions set and read `host` and `port`.

# Sets `address` (URL $1 without its scheme and user: host[:port][/...]),
# `host` and `port` (its port, else $2).
ensure_address() {
  address="${1#*://}"; address="${address#*@}"
  local hostport="${address%%/*}"
  host="${hostport%%:*}"; port="${hostport##*:}"
  if [ "$port" = "$hostport" ]; then port="$2"; fi
}

# Whether `host` is this machine.
ensure_is_local() {
  case "$host" in 127.*|localhost|::1) return 0 ;; *) return 1 ;; esac
}

# Exits unless `host` is this machine: then no $1 (the service) answers at
# the address $2 (the variable that holds the URL) gives, and this script
# cannot start one there.
ensure_local() {
  ensure_is_local && return 0
  echo "No $1 answers at $host:$port ($2). Start it there, or unset $2 to use a local one." >&2
  exit 1
}

# Makes sure $1 (the service) is installed, by its command $2: when it is
# not, installs the OS package $3 as root on Debian/Ubuntu, or else exits
# saying how to.
ensure_installed() {
  local service="$1" command="$2" package="$3"
  command -v "$command" >/dev/null 2>&1 && return 0
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "$service is not installed. Install it (Debian/Ubuntu: sudo apt-get install $package) and run this again." >&2
    exit 1
  fi
  echo "Installing $service from the OS packages..." >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "$package" >/dev/null
}

# Whether something listens on TCP port $1 of `host`.
ensure_listens() { (exec 3<>"/dev/tcp/$host/$1") 2>/dev/null; }

# Runs the command after $1 once a second until it succeeds, for at most
# $1 seconds; fails when it never did.
ensure_wait() {
  local seconds="$1"
  shift
  for _ in $(seq 1 "$seconds"); do
    "$@" && return 0
    sleep 1
  done
  return 1
}
