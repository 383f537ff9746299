#!/usr/bin/env bash
# A three-node RabbitMQ cluster on this machine, beside the default node, for
# the cluster tests (tests/cluster.rs), the cluster benchmark and trying
# failover by hand, of the version in RABBITMQ_VERSION: 3.10 (the default,
# the installed server, which scripts/ensure-broker.sh installs), 4.0 or 4.3
# (Debian's packages in a root of their own: scripts/lib/rabbitmq.sh). It
# never touches the default node (rabbit@localhost, 5672).
#
#   scripts/cluster.sh up                        start the cluster and wait until all three nodes run in it
#   scripts/cluster.sh kill rabbit-b@localhost   kill -9 one node's Erlang VM
#   scripts/cluster.sh status                    each node's state
#   scripts/cluster.sh ctl ARG...                rabbitmqctl of this version (give -n NODE)
#   scripts/cluster.sh down                      stop the cluster and remove its data
#
# Nodes: rabbit-a@localhost, rabbit-b@localhost, rabbit-c@localhost; AMQP on
# 127.0.0.1:5673, 5674, 5675 (guest/guest); distribution on 25673-25675; no
# plugins (the management port 15672 stays the default node's). One cluster
# runs at a time, of one version. Each node has its own data, logs, PID file,
# configuration and plugins file under $RABBIT_BACKOFF_CLUSTER_DIR (default
# /var/lib/rabbitmq/rabbit-backoff-cluster, inside the version's root for
# 4.x), owned by the rabbitmq user, and runs as that user, sharing its Erlang
# cookie with rabbitmqctl. `up` is idempotent: it starts only what is not
# running, so after a `kill` it restarts the killed node, which rejoins the
# cluster.
#
# Every node's advanced.config sets the quorum dead-letter worker's confirm
# timeout to 10 s (180 s by default in 3.10.8): on RabbitMQ 3.10 a message
# dead-lettered at-least-once to a queue whose leader died can wait that long
# before it is sent again.
set -euo pipefail
RB_SCRIPT=cluster.sh
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/rabbitmq.sh
. "$here/lib/rabbitmq.sh"

VERSION="${RABBITMQ_VERSION:-3.10}"
rb_check_version "$VERSION"
NODES=(rabbit-a rabbit-b rabbit-c)
HOST=$RB_HOST
SEED="rabbit-a@$HOST"
# As the nodes see it (inside the version's root for 4.x).
BASE="${RABBIT_BACKOFF_CLUSTER_DIR:-/var/lib/rabbitmq/rabbit-backoff-cluster}"
UP_TIMEOUT=60

die() { rb_die "$@"; }

usage() {
  echo "usage: [RABBITMQ_VERSION=3.10|4.0|4.3] scripts/cluster.sh up | down | kill NODE | status | ctl ARG..." >&2
  echo "  NODE: rabbit-a@localhost, rabbit-b@localhost or rabbit-c@localhost" >&2
  exit 2
}

# The short name (rabbit-a), port offset, AMQP and distribution ports of a node.
index_of() {
  local i
  for i in "${!NODES[@]}"; do
    [ "${NODES[$i]}" = "$1" ] && { echo "$i"; return 0; }
  done
  return 1
}
amqp_port() { echo $((5673 + $(index_of "$1"))); }
dist_port() { echo $((25673 + $(index_of "$1"))); }
dir_of() { echo "$BASE/$1"; }
# The same folder seen from this machine.
host_dir_of() { rb_host_path "$VERSION" "$(dir_of "$1")"; }

ctl() { rb_ctl "$VERSION" "$@"; }

check_prerequisites() {
  rb_ensure_version "$VERSION"
  if [ "$(id -u)" -ne 0 ] && [ "$(id -un)" != rabbitmq ]; then
    die "run this as root or as the rabbitmq user (the nodes run as rabbitmq and share its Erlang cookie)."
  fi
}

# Writes a node's configuration (each time: a changed script takes effect).
prepare() {
  local name=$1 dir port dport host
  dir=$(dir_of "$name"); port=$(amqp_port "$name"); dport=$(dist_port "$name")
  host=$(host_dir_of "$name")
  rb_node_dir "$VERSION" "$dir"
  cat >"$host/rabbitmq.conf" <<EOF
listeners.tcp.local = 127.0.0.1:$port
loopback_users.guest = true
EOF
  cat >"$host/advanced.config" <<'EOF'
[{rabbit, [{dead_letter_worker_publisher_confirm_timeout, 10000}]}].
EOF
  echo '[].' >"$host/enabled_plugins"
  rb_write_node_env "$VERSION" "$dir" "$name@$HOST" "$dport"
}

# The PID of a node's Erlang VM when it runs (it wrote its PID file and that
# process is a VM started with this node's settings).
pid_of() { rb_pid_of "$VERSION" "$(dir_of "$1")/rabbitmq-env.conf" "$(dir_of "$1")/pid"; }

answers() { rb_answers 127.0.0.1 "$1"; }

start_node() {
  local dir
  dir=$(dir_of "$1")
  rm -f "$(host_dir_of "$1")/pid"
  rb_start_node "$VERSION" "$dir/rabbitmq-env.conf" "$dir/log/console.log"
}

# Waits until a node's application runs (its PID file, then rabbitmqctl wait).
wait_node() {
  rb_wait_node "$VERSION" "$1@$HOST" "$(dir_of "$1")/pid" "$UP_TIMEOUT" \
    || { echo "see $(host_dir_of "$1")/log/" >&2; return 1; }
}

# The nodes running in the cluster, as `name@host` words, seen from `$1`.
running_nodes() {
  ctl -n "$1" -q cluster_status --formatter json 2>/dev/null \
    | grep -o '"running_nodes":\[[^]]*\]' | grep -o 'rabbit-[a-z]@[A-Za-z0-9.-]*' | sort -u
}

# A node with no data joins the seed node's cluster.
join() {
  local node="$1@$HOST"
  ctl -n "$node" -q stop_app >/dev/null
  ctl -n "$node" -q join_cluster "$SEED" >/dev/null
  ctl -n "$node" -q start_app >/dev/null
  touch "$(host_dir_of "$1")/joined"
}

cmd_up() {
  check_prerequisites
  local started=() name fresh=()
  for name in "${NODES[@]}"; do
    prepare "$name"
    if ! pid_of "$name" >/dev/null; then
      [ -f "$(host_dir_of "$name")/joined" ] || [ "$name@$HOST" = "$SEED" ] || fresh+=("$name")
      # A node with no data yet joins the seed below; one with data rejoins by itself.
      start_node "$name"
      started+=("$name")
    fi
  done
  local start=$SECONDS pids=()
  for name in "${started[@]}"; do
    wait_node "$name" & pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || die "a node did not start within ${UP_TIMEOUT} s"; done
  pids=()
  for name in "${fresh[@]}"; do
    join "$name" & pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || die "a node could not join $SEED; see $(rb_host_path "$VERSION" "$BASE")/*/log/"; done
  local want="${#NODES[@]}" seen
  while true; do
    seen=$(running_nodes "$SEED" | wc -l)
    [ "$seen" -eq "$want" ] && break
    [ $((SECONDS - start)) -lt "$UP_TIMEOUT" ] || die "only $seen of $want nodes run in the cluster after ${UP_TIMEOUT} s; see $(rb_host_path "$VERSION" "$BASE")/*/log/"
    sleep 0.5
  done
  if [ "${#started[@]}" -gt 0 ]; then
    echo "RabbitMQ $(rb_full_version "$VERSION") cluster up in $((SECONDS - start)) s: started ${started[*]}; amqp://guest:guest@127.0.0.1:5673,5674,5675" >&2
  else
    echo "RabbitMQ $VERSION cluster already up: amqp://guest:guest@127.0.0.1:5673,5674,5675" >&2
  fi
}

cmd_kill() {
  local node=${1:-}
  [ -n "$node" ] || usage
  local name=${node%@*}
  index_of "$name" >/dev/null && [ "$node" = "$name@$HOST" ] || die "unknown node $node (one of ${NODES[*]/%/@$HOST})"
  local pid
  pid=$(pid_of "$name") || die "$node is not running"
  rb_kill "$pid"
  echo "killed $node (pid $pid)" >&2
}

cmd_down() {
  check_prerequisites
  local name pid pids=()
  for name in "${NODES[@]}"; do
    if pid=$(pid_of "$name"); then
      # Its data is removed next: no need for an orderly stop.
      kill -9 "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
  done
  for pid in "${pids[@]}"; do
    while [ -e "/proc/$pid" ]; do sleep 0.05; done
  done
  rm -rf "$(rb_host_path "$VERSION" "$BASE")"
  echo "RabbitMQ $VERSION cluster down${pids[*]:+ (stopped ${#pids[@]} nodes)}; data removed" >&2
}

cmd_status() {
  local name pid state members=""
  printf '%-20s %-9s %-8s %s\n' NODE STATE PID AMQP
  for name in "${NODES[@]}"; do
    if pid=$(pid_of "$name"); then
      if answers "$(amqp_port "$name")"; then state=running; else state=starting; fi
      [ -n "$members" ] || members=$(running_nodes "$name@$HOST" | paste -sd " " -)
    else
      pid=-; state=down
    fi
    printf '%-20s %-9s %-8s %s\n' "$name@$HOST" "$state" "$pid" "127.0.0.1:$(amqp_port "$name")"
  done
  [ -z "$members" ] || echo "running in the cluster: $members"
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  kill) cmd_kill "${2:-}" ;;
  status) cmd_status ;;
  ctl) shift; ctl "$@" ;;
  *) usage ;;
esac
