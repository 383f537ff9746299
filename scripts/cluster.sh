#!/usr/bin/env bash
# A three-node RabbitMQ cluster on this machine, beside the default node, for
# the cluster tests (cluster-tests/tests/cluster.rs, cluster-tests/tests/partitions/), the cluster
# benchmark and trying failover by hand, of the version in RABBITMQ_VERSION:
# 3.10 (the default, the installed server, which scripts/ensure-broker.sh
# installs), 4.0 or 4.3 (Debian's packages in a root of their own:
# scripts/lib/rabbitmq.sh). It never touches the default node
# (rabbit@localhost, 5672).
#
#   scripts/cluster.sh up                        start the cluster and wait until all three nodes run in it
#   scripts/cluster.sh kill NODE                 kill -9 one node's Erlang VM
#   scripts/cluster.sh status                    each node's state (and, namespaced, the faults in place)
#   scripts/cluster.sh nodes                     each node's name and AMQP URL, one line each
#   scripts/cluster.sh ctl ARG...                rabbitmqctl of this version (give -n NODE)
#   scripts/cluster.sh down                      stop the cluster and remove its data (and its network)
#
# On this machine's network (the default): nodes rabbit-a@localhost,
# rabbit-b@localhost, rabbit-c@localhost; AMQP on 127.0.0.1:5673, 5674, 5675
# (guest/guest); distribution on 25673-25675.
#
# In network namespaces (CLUSTER_NETNS=1 in the environment of every
# command): each node is a host of its own, a namespace on a bridge
# (scripts/lib/netns.sh), and its links can fail:
#
#   scripts/cluster.sh cut NODE                  NODE loses the other nodes, they lose it (a partition)
#   scripts/cluster.sh cut-client NODE           NODE and this machine's clients lose each other, the nodes do not
#   scripts/cluster.sh slow NODE DELAY LOSS      netem on NODE's link, each way: slow rabbit-a@10.213.0.11 2s 10% (without netem in the kernel: the loss alone, by nftables)
#   scripts/cluster.sh heal NODE                 NODE's cuts, client cut and netem undone
#   scripts/cluster.sh heal-all                  every fault undone
#   scripts/cluster.sh restart NODE              stop NODE in order, start it, wait until it runs in the cluster again
#   scripts/cluster.sh leader QUEUE              the node leading a quorum queue (asked of the nodes that answer)
#
# Namespaced nodes are rabbit-a@P.11, rabbit-b@P.12, rabbit-c@P.13 (long
# names), P being CLUSTER_NETNS_PREFIX (default 10.213.0; `up` fails when this
# machine uses that /24 already); this machine is P.1 on the bridge rbp-br0.
# Each node has AMQP on its address's port 5672 (guest/guest, allowed from
# other hosts: the bridge reaches only this machine) and distribution on
# 25672. CLUSTER_PARTITION_HANDLING chooses the nodes' partition handling:
# pause_minority (the default), autoheal or ignore; CLUSTER_NET_TICKTIME their
# net_ticktime (default 10 s; RabbitMQ's is 60 s: a lost node is noticed
# within 0.75-1.25 of it). The data lives in a folder of its own
# (.../rabbit-backoff-netns-cluster), so a namespaced cluster and one on this
# machine's network can run side by side.
#
# No plugins (the management port 15672 stays the default node's), unless
# CLUSTER_STREAM=1: then each node serves the stream protocol
# (rabbitmq_stream) too, on 127.0.0.1:5591, 5592, 5593 (namespaced: its
# address's port 5552), advertising that address, for the dead-letter
# index's reads over the stream protocol (`dlq groups`, benches/dead_letters.rs
# with RABBITMQ_STREAM_PORT=5591). It is read when a node is configured: give
# it to `up` on a cluster that is down. One
# cluster of each kind runs at a time, of one version. Each node has its own
# data, logs, PID file, configuration and plugins file under
# $RABBIT_BACKOFF_CLUSTER_DIR (default /var/lib/rabbitmq/rabbit-backoff-cluster,
# inside the version's root for 4.x), owned by the rabbitmq user, and runs as
# that user, sharing its Erlang cookie with rabbitmqctl. `up` is idempotent:
# it starts only what is not running, so after a `kill` it restarts the
# killed node, which rejoins the cluster. Every wait is bounded.
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

# shellcheck source=lib/netns.sh
. "$here/lib/netns.sh"

VERSION="${RABBITMQ_VERSION:-3.10}"
rb_check_version "$VERSION"
NODES=(rabbit-a rabbit-b rabbit-c)
NETNS="${CLUSTER_NETNS:-0}"
case "$NETNS" in 0|1) ;; *) rb_die "CLUSTER_NETNS is 1 (nodes in network namespaces) or 0, not '$NETNS'" ;; esac
PARTITION_HANDLING="${CLUSTER_PARTITION_HANDLING:-pause_minority}"
case "$PARTITION_HANDLING" in
  pause_minority|autoheal|ignore) ;;
  *) rb_die "CLUSTER_PARTITION_HANDLING is pause_minority, autoheal or ignore, not '$PARTITION_HANDLING'" ;;
esac
NET_TICKTIME="${CLUSTER_NET_TICKTIME:-10}"
STREAM="${CLUSTER_STREAM:-0}"
case "$STREAM" in 0|1) ;; *) rb_die "CLUSTER_STREAM is 1 (each node serves the stream protocol) or 0, not '$STREAM'" ;; esac
# As the nodes see it (inside the version's root for 4.x).
if [ "$NETNS" = 1 ]; then
  BASE="${RABBIT_BACKOFF_CLUSTER_DIR:-/var/lib/rabbitmq/rabbit-backoff-netns-cluster}"
  # The command-line tools speak to nodes with long names.
  export RABBITMQ_USE_LONGNAME=true
else
  BASE="${RABBIT_BACKOFF_CLUSTER_DIR:-/var/lib/rabbitmq/rabbit-backoff-cluster}"
fi
UP_TIMEOUT=60
# How long an orderly stop (restart) may take before the node is killed.
STOP_TIMEOUT=60

die() { rb_die "$@"; }

usage() {
  echo "usage: [RABBITMQ_VERSION=3.10|4.0|4.3] [CLUSTER_NETNS=1] scripts/cluster.sh up | down | kill NODE | status | nodes | ctl ARG..." >&2
  echo "       CLUSTER_NETNS=1 scripts/cluster.sh cut NODE | cut-client NODE | slow NODE DELAY LOSS | heal NODE | heal-all | restart NODE | leader QUEUE" >&2
  echo "  NODE: one of $(for n in "${NODES[@]}"; do printf '%s ' "$(node_of "$n")"; done)" >&2
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
# The namespaced host (1-3) of a node.
host_of() { echo $(($(index_of "$1") + 1)); }
# Where clients reach a node.
ip_of() { if [ "$NETNS" = 1 ]; then nb_ip "$(host_of "$1")"; else echo 127.0.0.1; fi; }
amqp_port() { if [ "$NETNS" = 1 ]; then echo 5672; else echo $((5673 + $(index_of "$1"))); fi; }
stream_port() { if [ "$NETNS" = 1 ]; then echo 5552; else echo $((5591 + $(index_of "$1"))); fi; }
dist_port() { if [ "$NETNS" = 1 ]; then echo 25672; else echo $((25673 + $(index_of "$1"))); fi; }
# The node's full name: rabbit-a@localhost, or rabbit-a@10.213.0.11.
node_of() { if [ "$NETNS" = 1 ]; then echo "$1@$(ip_of "$1")"; else echo "$1@$RB_HOST"; fi; }
url_of() { echo "amqp://guest:guest@$(ip_of "$1"):$(amqp_port "$1")/%2f"; }
SEED=$(node_of "${NODES[0]}")
# The short name of a full node name, or fails naming the nodes.
name_of_node() {
  local name=${1%@*}
  index_of "$name" >/dev/null && [ "$1" = "$(node_of "$name")" ] \
    || die "unknown node '$1' (one of $(for n in "${NODES[@]}"; do printf '%s ' "$(node_of "$n")"; done))"
  echo "$name"
}
dir_of() { echo "$BASE/$1"; }
# The same folder seen from this machine.
host_dir_of() { rb_host_path "$VERSION" "$(dir_of "$1")"; }

# rabbitmqctl; namespaced, in the namespace of the node named by -n (node
# a's when none is), whose links a fault never cuts from its own tools.
ctl() {
  if [ "$NETNS" = 1 ]; then
    local node="" prev="" a
    for a in "$@"; do
      if [ "$prev" = -n ] || [ "$prev" = --node ]; then node=$a; fi
      prev=$a
    done
    local name=${NODES[0]}
    [ -z "$node" ] || name=$(name_of_node "$node")
    RB_NETNS=$(nb_ns "$(host_of "$name")") RB_DIST_IP=$(ip_of "$name") rb_ctl "$VERSION" "$@"
  else
    rb_ctl "$VERSION" "$@"
  fi
}
# rabbitmqctl against node $1 (a short name), bounded by $2 seconds.
ctl_at() {
  local name=$1 seconds=$2 netns="" ip=""; shift 2
  [ "$NETNS" = 0 ] || { netns=$(nb_ns "$(host_of "$name")"); ip=$(ip_of "$name"); }
  RB_NETNS=$netns RB_DIST_IP=$ip timeout -k 5 "$seconds" bash -c '. "$0"; rb_ctl "$@"' \
    "$here/lib/rabbitmq.sh" "$VERSION" -n "$(node_of "$name")" "$@"
}

check_netns() {
  [ "$NETNS" = 1 ] || die "$1 is for the cluster in network namespaces: set CLUSTER_NETNS=1 (and start it so)"
  nb_exists || die "there is no namespaced cluster: CLUSTER_NETNS=1 scripts/cluster.sh up"
}

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
  if [ "$NETNS" = 1 ]; then
    # guest from other hosts: the bridge reaches nothing but this machine.
    cat >"$host/rabbitmq.conf" <<EOF
listeners.tcp.default = $port
loopback_users = none
cluster_partition_handling = $PARTITION_HANDLING
EOF
    cat >"$host/advanced.config" <<EOF
[{kernel, [{net_ticktime, $NET_TICKTIME}]},
 {rabbit, [{dead_letter_worker_publisher_confirm_timeout, 10000}]}].
EOF
  else
    cat >"$host/rabbitmq.conf" <<EOF
listeners.tcp.local = 127.0.0.1:$port
loopback_users.guest = true
EOF
    cat >"$host/advanced.config" <<'EOF'
[{rabbit, [{dead_letter_worker_publisher_confirm_timeout, 10000}]}].
EOF
  fi
  if [ "$STREAM" = 1 ]; then
    cat >>"$host/rabbitmq.conf" <<EOF
stream.listeners.tcp.1 = $(ip_of "$name"):$(stream_port "$name")
stream.advertised_host = $(ip_of "$name")
stream.advertised_port = $(stream_port "$name")
EOF
    echo '[rabbitmq_stream].' >"$host/enabled_plugins"
  else
    echo '[].' >"$host/enabled_plugins"
  fi
  rb_write_node_env "$VERSION" "$dir" "$(node_of "$name")" "$dport"
}

# The PID of a node's Erlang VM when it runs (it wrote its PID file and that
# process is a VM started with this node's settings).
pid_of() { rb_pid_of "$VERSION" "$(dir_of "$1")/rabbitmq-env.conf" "$(dir_of "$1")/pid"; }

answers() { rb_answers "$(ip_of "$1")" "$(amqp_port "$1")"; }

start_node() {
  local dir netns="" ip=""
  dir=$(dir_of "$1")
  rm -f "$(host_dir_of "$1")/pid"
  [ "$NETNS" = 0 ] || { netns=$(nb_ns "$(host_of "$1")"); ip=$(ip_of "$1"); }
  RB_NETNS=$netns RB_DIST_IP=$ip rb_start_node "$VERSION" "$dir/rabbitmq-env.conf" "$dir/log/console.log"
}

# Waits until a node's application runs (its PID file, then rabbitmqctl wait).
wait_node() {
  local netns="" ip=""
  [ "$NETNS" = 0 ] || { netns=$(nb_ns "$(host_of "$1")"); ip=$(ip_of "$1"); }
  RB_NETNS=$netns RB_DIST_IP=$ip rb_wait_node "$VERSION" "$(node_of "$1")" "$(dir_of "$1")/pid" "$UP_TIMEOUT" \
    || { echo "see $(host_dir_of "$1")/log/" >&2; return 1; }
}

# The nodes running in the cluster, as `name@host` words, seen from `$1` (a
# full name).
running_nodes() {
  ctl_at "$(name_of_node "$1")" 20 -q cluster_status --formatter json 2>/dev/null \
    | grep -o '"running_nodes":\[[^]]*\]' | grep -o 'rabbit-[a-z]@[A-Za-z0-9.-]*' | sort -u
}

# A node with no data joins the seed node's cluster.
join() {
  local node
  node=$(node_of "$1")
  ctl -n "$node" -q stop_app >/dev/null
  ctl -n "$node" -q join_cluster "$SEED" >/dev/null
  ctl -n "$node" -q start_app >/dev/null
  touch "$(host_dir_of "$1")/joined"
}

cmd_up() {
  check_prerequisites
  if [ "$NETNS" = 1 ]; then
    command -v ip >/dev/null && command -v tc >/dev/null || die "namespaced nodes need ip and tc (iproute2)"
    [ "$(id -u)" -eq 0 ] || die "only root makes network namespaces: run this as root"
    nb_up || die "could not make the namespaces (see above); CLUSTER_NETNS=1 scripts/cluster.sh down removes what was made"
  fi
  local started=() name fresh=()
  for name in "${NODES[@]}"; do
    prepare "$name"
    if ! pid_of "$name" >/dev/null; then
      [ -f "$(host_dir_of "$name")/joined" ] || [ "$(node_of "$name")" = "$SEED" ] || fresh+=("$name")
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
    # Namespaced, one at a time: two 3.10 nodes joining at once over a
    # network can fail to merge their Mnesia schemas.
    if [ "$NETNS" = 1 ]; then
      join "$name" || die "$(node_of "$name") could not join $SEED; see $(rb_host_path "$VERSION" "$BASE")/*/log/"
    else
      join "$name" & pids+=($!)
    fi
  done
  for p in "${pids[@]}"; do wait "$p" || die "a node could not join $SEED; see $(rb_host_path "$VERSION" "$BASE")/*/log/"; done
  local want="${#NODES[@]}" seen
  while true; do
    seen=$(running_nodes "$SEED" | wc -l)
    [ "$seen" -eq "$want" ] && break
    [ $((SECONDS - start)) -lt "$UP_TIMEOUT" ] || die "only $seen of $want nodes run in the cluster after ${UP_TIMEOUT} s; see $(rb_host_path "$VERSION" "$BASE")/*/log/"
    sleep 0.5
  done
  if [ "$STREAM" = 1 ]; then
    for name in "${NODES[@]}"; do
      until rb_answers "$(ip_of "$name")" "$(stream_port "$name")"; do
        [ $((SECONDS - start)) -lt "$UP_TIMEOUT" ] \
          || die "$(node_of "$name") serves no stream protocol on $(ip_of "$name"):$(stream_port "$name") (was the cluster configured without CLUSTER_STREAM=1? scripts/cluster.sh down, then up)"
        sleep 0.2
      done
    done
  fi
  local where=amqp://guest:guest@127.0.0.1:5673,5674,5675
  [ "$NETNS" = 0 ] || where="$(url_of "${NODES[0]}"), $(url_of "${NODES[1]}"), $(url_of "${NODES[2]}") ($PARTITION_HANDLING)"
  [ "$STREAM" = 0 ] || where="$where; streams on port $(stream_port "${NODES[0]}")$([ "$NETNS" = 1 ] || echo "-$(stream_port "${NODES[2]}")")"
  if [ "${#started[@]}" -gt 0 ]; then
    echo "RabbitMQ $(rb_full_version "$VERSION") cluster up in $((SECONDS - start)) s: started ${started[*]}; $where" >&2
  else
    echo "RabbitMQ $VERSION cluster already up: $where" >&2
  fi
}

cmd_kill() {
  local node=${1:-}
  [ -n "$node" ] || usage
  local name
  name=$(name_of_node "$node")
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
  local network=""
  if [ "$NETNS" = 1 ] && [ "$(id -u)" -eq 0 ]; then
    nb_down
    network="; namespaces, links and faults removed"
  fi
  echo "RabbitMQ $VERSION cluster down${pids[*]:+ (stopped ${#pids[@]} nodes)}; data removed$network" >&2
}

cmd_status() {
  local name pid state members=""
  printf '%-20s %-9s %-8s %s\n' NODE STATE PID AMQP
  for name in "${NODES[@]}"; do
    if pid=$(pid_of "$name"); then
      if answers "$name"; then state=running; else state=starting; fi
      [ -n "$members" ] || members=$(running_nodes "$(node_of "$name")" | paste -sd " " -)
    else
      pid=-; state=down
    fi
    printf '%-20s %-9s %-8s %s\n' "$(node_of "$name")" "$state" "$pid" "$(ip_of "$name"):$(amqp_port "$name")"
  done
  [ -z "$members" ] || echo "running in the cluster: $members"
  if [ "$NETNS" = 1 ] && nb_exists; then nb_faults; fi
}

cmd_nodes() {
  local name
  for name in "${NODES[@]}"; do echo "$(node_of "$name") $(url_of "$name")"; done
}

# Stops a node in order (rabbitmqctl stop; killed when it takes longer than
# STOP_TIMEOUT), starts it, and waits until the cluster runs it again.
cmd_restart() {
  local name pid start=$SECONDS
  name=$(name_of_node "${1:-}")
  pid=$(pid_of "$name") || die "$1 is not running"
  ctl_at "$name" "$STOP_TIMEOUT" -q stop >/dev/null 2>&1 || true
  local deadline=$((SECONDS + STOP_TIMEOUT))
  while [ -e "/proc/$pid" ] && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
  [ ! -e "/proc/$pid" ] || { echo "$1 did not stop within ${STOP_TIMEOUT} s: killed" >&2; rb_kill "$pid"; }
  local stopped=$((SECONDS - start)) others
  start_node "$name"
  wait_node "$name" || die "$1 did not start again within ${UP_TIMEOUT} s"
  # Running again: it sees every node of the cluster running.
  while [ "$(running_nodes "$1" | wc -l)" -lt "${#NODES[@]}" ]; do
    [ $((SECONDS - start)) -lt $((STOP_TIMEOUT + UP_TIMEOUT)) ] || die "$1 did not rejoin the cluster; see $(host_dir_of "$name")/log/"
    sleep 0.5
  done
  echo "restarted $1: stopped in $stopped s, running in the cluster $((SECONDS - start)) s after the stop began" >&2
}

# The leader of a quorum queue (the node of a classic one), asked of each
# node in turn (a paused or cut node may not answer). From the queue's record
# on the node asked, not list_queues: on 3.10 that gathers rows from every
# node, which answer the command-line tool's own node, and from a namespace
# they do not reach it.
cmd_leader() {
  local queue=${1:-} name out
  [ -n "$queue" ] || usage
  case "$queue" in *'"'*|*'\'*) die "a queue name without quotes or backslashes, please" ;; esac
  local expr="case rabbit_amqqueue:lookup(rabbit_misc:r(<<\"/\">>, queue, <<\"$queue\">>)) of
    {ok, Q} -> case amqqueue:get_pid(Q) of {_, N} -> N; P when is_pid(P) -> node(P) end;
    _ -> none end."
  for name in "${NODES[@]}"; do
    pid_of "$name" >/dev/null || continue
    out=$(ctl_at "$name" 15 -q eval "$expr" 2>/dev/null | tr -d "'\n ") || continue
    case "$out" in
      rabbit-*@*) echo "$out"; return 0 ;;
      none) die "there is no queue $queue" ;;
    esac
  done
  die "no node names a leader of $queue (no node answers)"
}

# A node's host number (namespaced), from its full name.
host_of_node() { local name; name=$(name_of_node "$1") || exit 1; host_of "$name"; }

# The host of the node a fault command names ($2), checked first.
case "${1:-}" in
  cut|cut-client|slow|heal)
    check_netns "$1"
    FAULT_HOST=$(host_of_node "${2:-}") || exit 1
    ;;
esac

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  kill) cmd_kill "${2:-}" ;;
  status) cmd_status ;;
  nodes) cmd_nodes ;;
  ctl) shift; ctl "$@" ;;
  cut) nb_cut "$FAULT_HOST"; echo "cut $2 from the other nodes" >&2 ;;
  cut-client) nb_cut_client "$FAULT_HOST"; echo "cut $2 from the clients at $(nb_client_ip)" >&2 ;;
  slow)
    [ $# -eq 4 ] || usage
    nb_slow "$FAULT_HOST" "$3" "$4"
    ;;
  heal) nb_heal_host "$FAULT_HOST"; echo "healed $2" >&2 ;;
  heal-all) check_netns heal-all; nb_heal_all; echo "healed every link" >&2 ;;
  restart) check_netns restart; cmd_restart "${2:-}" ;;
  leader) cmd_leader "${2:-}" ;;
  *) usage ;;
esac
