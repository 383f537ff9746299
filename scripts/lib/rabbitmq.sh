# RabbitMQ nodes of any supported version on this machine, for the scripts
# that start test nodes (broker.sh, cluster.sh, tls.sh). Sourced, not run.
#
# Versions:
#   3.10  the OS package (Debian 12's rabbitmq-server), as installed on this
#         machine by scripts/ensure-broker.sh; its files are the machine's own
#   4.0   Debian 13's rabbitmq-server (trixie, Erlang 27)
#   4.3   Debian forky's rabbitmq-server (Erlang 29)
# A 4.x version lives in a Debian root of its own, made once with debootstrap
# from Debian's archive and kept under $RABBIT_BACKOFF_ROOTS (default
# /var/cache/rabbit-backoff/rabbitmq-roots/VERSION). Its nodes run chrooted
# there, as that root's rabbitmq user, sharing the machine's network (so
# their ports are on 127.0.0.1 beside the 3.10 node's) and its epmd.
#
# Paths given to these functions are the paths a node sees: for 4.x they are
# inside the root, and `rb_host_path` gives the same file seen from here.

RB_VERSIONS=(3.10 4.0 4.3)
RB_ROOTS="${RABBIT_BACKOFF_ROOTS:-/var/cache/rabbit-backoff/rabbitmq-roots}"
RB_BIN=/usr/lib/rabbitmq/bin
RB_HOST=localhost

rb_die() { echo "${RB_SCRIPT:-rabbitmq}: $*" >&2; exit 1; }

# Fails with the list of versions when $1 is not one of them.
rb_check_version() {
  local v
  for v in "${RB_VERSIONS[@]}"; do [ "$v" = "$1" ] && return 0; done
  rb_die "unknown RabbitMQ version '$1': one of ${RB_VERSIONS[*]}"
}

# The Debian suite a 4.x version comes from, and the debootstrap script for it.
rb_suite() {
  case "$1" in
    4.0) echo trixie ;;
    4.3) echo forky ;;
    *) return 1 ;;
  esac
}
rb_suite_script() {
  # debootstrap in Debian 12 has no script named forky: sid's makes it.
  case "$1" in
    forky) echo /usr/share/debootstrap/scripts/sid ;;
    *) echo "" ;;
  esac
}

# The root a version's files are in ("" for 3.10, the machine's own).
rb_root() {
  case "$1" in
    3.10) echo "" ;;
    *) echo "$RB_ROOTS/$1" ;;
  esac
}

# A path a node of version $1 sees ($2), as seen from this machine.
rb_host_path() { echo "$(rb_root "$1")$2"; }

# The rabbitmq user's home in a version's root.
rb_home() {
  if [ "$1" = 3.10 ]; then
    getent passwd rabbitmq | cut -d: -f6
  else
    grep '^rabbitmq:' "$(rb_root "$1")/etc/passwd" | cut -d: -f6
  fi
}

# Makes sure a version's files are here: 3.10 must be installed on the
# machine (scripts/ensure-broker.sh installs it); a 4.x root is made once
# (about a minute on a fresh machine, most of it downloading ~100 MB of
# packages) and kept. A root is made in a temporary folder and moved into
# place only when complete, so an interrupted run leaves nothing half-made.
rb_ensure_version() {
  local version=$1 root suite script tmp
  rb_check_version "$version"
  if [ "$version" = 3.10 ]; then
    [ -x "$RB_BIN/rabbitmq-server" ] || rb_die "RabbitMQ 3.10 is not installed ($RB_BIN/rabbitmq-server is missing): run scripts/ensure-broker.sh as root first."
    getent passwd rabbitmq >/dev/null || rb_die "there is no rabbitmq user: install the rabbitmq-server package (scripts/ensure-broker.sh)."
    return 0
  fi
  root=$(rb_root "$version")
  if [ ! -x "$root$RB_BIN/rabbitmq-server" ]; then
    [ "$(id -u)" -eq 0 ] || rb_die "RabbitMQ $version needs a Debian root in $root, which only root can make: run this as root."
    suite=$(rb_suite "$version")
    script=$(rb_suite_script "$suite")
    if ! command -v debootstrap >/dev/null 2>&1 || { [ -n "$script" ] && [ ! -e "$script" ]; }; then
      command -v apt-get >/dev/null 2>&1 || rb_die "debootstrap is missing and there is no apt-get to install it."
      echo "Installing debootstrap from the OS packages..." >&2
      DEBIAN_FRONTEND=noninteractive apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
    fi
    echo "Making a Debian $suite root with RabbitMQ $version in $root (once; about a minute)..." >&2
    install -d "$RB_ROOTS"
    tmp=$(mktemp -d "$RB_ROOTS/.making-$version.XXXXXX")
    # The root's / must be open to its rabbitmq user (mktemp makes it 0700).
    chmod 0755 "$tmp"
    # shellcheck disable=SC2086
    if ! debootstrap --variant=minbase --include=rabbitmq-server "$suite" "$tmp" \
      "${RABBIT_BACKOFF_DEBIAN_MIRROR:-http://deb.debian.org/debian}" $script >"$tmp.log" 2>&1; then
      tail -n 20 "$tmp.log" >&2
      rm -rf "$tmp"
      rb_die "debootstrap of $suite failed (log above, kept in $tmp.log)"
    fi
    rm -f "$tmp.log"
    rm -rf "$root"
    mv "$tmp" "$root"
  fi
  local installed
  installed=$(chroot "$root" dpkg-query -W -f '${Version}' rabbitmq-server 2>/dev/null || true)
  case "$installed" in
    "$version".*) ;;
    *) rb_die "the root $root holds rabbitmq-server '$installed', not $version.x; remove it and run this again." ;;
  esac
  # Without the machine's hosts file `localhost` does not resolve in the root
  # and a node stops with `epmd_error ... nxdomain`.
  cp /etc/hosts "$root/etc/hosts"
}

# The exact version a root holds (4.3.6, say), or the machine's for 3.10.
rb_full_version() {
  if [ "$1" = 3.10 ]; then
    dpkg-query -W -f '${Version}' rabbitmq-server 2>/dev/null | sed 's/-.*//'
  else
    chroot "$(rb_root "$1")" dpkg-query -W -f '${Version}' rabbitmq-server 2>/dev/null | sed 's/-.*//'
  fi
}

# What commands of the functions below run in: nothing (this machine's
# network) or, when RB_NETNS names a network namespace, `ip netns exec` of it
# (scripts/lib/netns.sh), with the host name RB_DIST_IP (the namespace's
# address) in a UTS namespace of its own: the command-line tools' own
# Erlang node is named after the host name, and the other nodes of the
# cluster answer it there (list_queues would time out on `vm.localdomain`).
# Set for one call: RB_NETNS=rbp-1 RB_DIST_IP=10.213.0.11 rb_ctl ...
rb_in_netns() {
  if [ -n "${RB_NETNS:-}" ]; then
    ip netns exec "$RB_NETNS" unshare --uts -- sh -c 'hostname "$0" && exec "$@"' "$RB_DIST_IP" "$@"
  else
    "$@"
  fi
}

# Runs a command of version $1 as its rabbitmq user (with its HOME, so with
# its Erlang cookie), in its root for 4.x, in RB_NETNS when set.
rb_as_rabbitmq() {
  local version=$1; shift
  local home
  home=$(rb_home "$version")
  if [ "$version" = 3.10 ]; then
    if [ "$(id -un)" = rabbitmq ]; then
      (cd / && HOME="$home" rb_in_netns "$@")
    else
      (cd / && rb_in_netns runuser -u rabbitmq -- env HOME="$home" "$@")
    fi
  else
    # With /proc mounted in the root (in a mount namespace that ends with
    # the command): `rabbitmqctl wait` looks for the node's process there;
    # and with this machine's /tmp, so that a file named there (definitions
    # to import, say) is the same file for the command.
    local root
    root=$(rb_root "$version")
    rb_in_netns unshare --mount --propagation private -- sh -c \
      'mount -t proc proc "$1/proc" && mount --bind /tmp "$1/tmp" && shift && cd / && exec chroot "$@"' sh \
      "$root" "$root" runuser -u rabbitmq -- env HOME="$home" "$@"
  fi
}

# rabbitmqctl of version $1 (then its arguments, starting with -n NODE).
rb_ctl() {
  local version=$1; shift
  rb_as_rabbitmq "$version" "$RB_BIN/rabbitmqctl" "$@"
}

# Starts the server of version $1 with the node settings in the env file $2
# (a path the node sees), its console output appended to $3 (likewise), in a
# session of its own with every descriptor redirected, so that it outlives
# the caller and never holds its pipes. A 4.x node runs in a mount namespace
# of its own with the root's /proc mounted; the mount goes with the node.
# On this machine's network the node and its epmd listen on 127.0.0.1 only;
# in the network namespace RB_NETNS, on every address of it, the node's
# distribution on RB_DIST_IP (its address there) only.
rb_start_node() {
  local version=$1 env_file=$2 log=$3 home root
  home=$(rb_home "$version")
  local settings=(RABBITMQ_CONF_ENV_FILE="$env_file" ERL_EPMD_ADDRESS=127.0.0.1
    "ERL_FLAGS=-kernel inet_dist_use_interface {127,0,0,1}")
  if [ -n "${RB_NETNS:-}" ]; then
    settings=(RABBITMQ_CONF_ENV_FILE="$env_file"
      "ERL_FLAGS=-kernel inet_dist_use_interface {${RB_DIST_IP//./,}}")
  fi
  local netns=()
  [ -z "${RB_NETNS:-}" ] || netns=(ip netns exec "$RB_NETNS")
  if [ "$version" = 3.10 ]; then
    local as=()
    if [ "$(id -un)" != rabbitmq ]; then as=(runuser -u rabbitmq --); fi
    (cd "$(dirname "$env_file")" && exec setsid "${netns[@]}" "${as[@]}" env HOME="$home" "${settings[@]}" \
      "$RB_BIN/rabbitmq-server" >>"$log" 2>&1 </dev/null) &
  else
    root=$(rb_root "$version")
    (cd / && exec setsid "${netns[@]}" unshare --mount --propagation private -- sh -c \
      'mount -t proc proc "$1/proc" && shift && exec chroot "$@"' sh \
      "$root" "$root" runuser -u rabbitmq -- env HOME="$home" "${settings[@]}" \
      "$RB_BIN/rabbitmq-server" >>"$root$log" 2>&1 </dev/null) &
  fi
}

# The PID of the VM started with the env file $2 (a path the node sees) when
# it runs: it wrote the PID file $3 and that process has those settings.
rb_pid_of() {
  local version=$1 env_file=$2 pid_file pid
  pid_file=$(rb_host_path "$version" "$3")
  [ -r "$pid_file" ] || return 1
  pid=$(tr -dc '0-9' <"$pid_file")
  [ -n "$pid" ] && [ -r "/proc/$pid/environ" ] || return 1
  tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "RABBITMQ_CONF_ENV_FILE=$env_file" || return 1
  echo "$pid"
}

# Waits until node $2 of version $1, whose PID file is $3 (seen by the node),
# runs its application, for at most $4 seconds.
rb_wait_node() {
  local version=$1 node=$2 pid_file=$3 timeout=$4 deadline
  deadline=$((SECONDS + timeout))
  until [ -s "$(rb_host_path "$version" "$pid_file")" ]; do
    [ $SECONDS -lt $deadline ] || { echo "$node wrote no PID file within $timeout s" >&2; return 1; }
    sleep 0.2
  done
  rb_ctl "$version" -n "$node" -q wait "$pid_file" --timeout "$timeout" >/dev/null \
    || { echo "$node did not start" >&2; return 1; }
}

# Kills a VM and waits until it is gone.
rb_kill() {
  kill -9 "$1" 2>/dev/null || true
  while [ -e "/proc/$1" ]; do sleep 0.05; done
}

# True when something accepts TCP connections on $1:$2.
rb_answers() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# Makes a folder the node sees as $2 (and its mnesia and log folders), owned
# by the version's rabbitmq user.
rb_node_dir() {
  local version=$1 dir=$2 host uid gid
  host=$(rb_host_path "$version" "$dir")
  if [ "$version" = 3.10 ]; then
    install -d -o rabbitmq -g rabbitmq -m 0750 "$host" "$host/mnesia" "$host/log"
  else
    uid=$(grep '^rabbitmq:' "$(rb_root "$version")/etc/passwd" | cut -d: -f3)
    gid=$(grep '^rabbitmq:' "$(rb_root "$version")/etc/passwd" | cut -d: -f4)
    install -d -o "$uid" -g "$gid" -m 0750 "$host" "$host/mnesia" "$host/log"
  fi
}

# Hands files in a node's folder to the version's rabbitmq user.
rb_chown() {
  local version=$1; shift
  if [ "$version" = 3.10 ]; then
    chown rabbitmq:rabbitmq "$@"
  else
    local uid gid
    uid=$(grep '^rabbitmq:' "$(rb_root "$version")/etc/passwd" | cut -d: -f3)
    gid=$(grep '^rabbitmq:' "$(rb_root "$version")/etc/passwd" | cut -d: -f4)
    chown "$uid:$gid" "$@"
  fi
}

# Writes the settings of node $3 (distribution port $4) whose folder the node
# sees as $2 (rabbitmq.conf, enabled_plugins and, when present,
# advanced.config in it), read by the server's scripts instead of
# /etc/rabbitmq/rabbitmq-env.conf, which names the default node (a long
# name when its host is an address, 10.213.0.11 say); then hands
# the folder's files to the version's rabbitmq user.
rb_write_node_env() {
  local version=$1 dir=$2 node=$3 dist_port=$4 host advanced=""
  host=$(rb_host_path "$version" "$dir")
  [ -e "$host/advanced.config" ] && advanced="ADVANCED_CONFIG_FILE=$dir/advanced.config"
  {
    echo "NODENAME=$node"
    # A host with dots (an address) is a long name.
    case "${node#*@}" in *.*) echo "USE_LONGNAME=true" ;; esac
    echo "DIST_PORT=$dist_port"
    echo "MNESIA_BASE=$dir/mnesia"
    echo "LOG_BASE=$dir/log"
    echo "PID_FILE=$dir/pid"
    echo "CONFIG_FILE=$dir/rabbitmq.conf"
    [ -z "$advanced" ] || echo "$advanced"
    echo "ENABLED_PLUGINS_FILE=$dir/enabled_plugins"
  } >"$host/rabbitmq-env.conf"
  local files=("$host/rabbitmq.conf" "$host/enabled_plugins" "$host/rabbitmq-env.conf")
  [ -z "$advanced" ] || files+=("$host/advanced.config")
  rb_chown "$version" "${files[@]}"
}
