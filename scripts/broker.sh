#!/usr/bin/env bash
# A standalone RabbitMQ node of a given version beside the default one, for
# running the test suite (and trying the framework) on the broker users run.
#
#   scripts/broker.sh up VERSION        make the version's root (once), start its node, wait until it serves
#   scripts/broker.sh down VERSION      stop the node and remove its data (the root stays cached)
#   scripts/broker.sh status VERSION    the node's state and addresses
#   scripts/broker.sh env VERSION       export lines for the test suite: AMQP_URL, RABBITMQCTL,
#                                       RABBITMQ_MANAGEMENT_URL, RABBITMQ_STREAM_PORT,
#                                       RABBITMQ_VERSION
#   scripts/broker.sh ctl VERSION ARG…  that node's rabbitmqctl (-n NODE is added unless given)
#
# VERSION is 3.10 (the machine's own node, rabbit@localhost on 5672, started
# by scripts/ensure-broker.sh; `down` leaves it alone), 4.0 or 4.3. A 4.x node
# runs from Debian's own packages in a root of its own (scripts/lib/rabbitmq.sh):
#
#   version  node                  AMQP             management        stream            distribution
#   4.0      rabbit-v40@localhost  127.0.0.1:5640   127.0.0.1:15640   127.0.0.1:55640   25640
#   4.3      rabbit-v43@localhost  127.0.0.1:5643   127.0.0.1:15643   127.0.0.1:55643   25643
#
# with guest/guest (loopback only), the management plugin and the stream
# plugin (the stream protocol, which reads the dead-letter index; the 3.10
# node has it on 127.0.0.1:5552). `up` and `down`
# are idempotent. The first `up` of a version on a fresh machine makes its
# root: about a minute (debootstrap downloads ~100 MB); later ones start the
# node in 3-20 s.
set -euo pipefail
RB_SCRIPT=broker.sh
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/rabbitmq.sh
. "$here/lib/rabbitmq.sh"
UP_TIMEOUT=90

usage() {
  echo "usage: scripts/broker.sh up|down|status|env VERSION | ctl VERSION ARG..." >&2
  echo "  VERSION: ${RB_VERSIONS[*]}" >&2
  exit 2
}

# The node's name, ports and folder (as the node sees it) for a 4.x version.
suffix() { echo "${1//./}"; }
node_of() { echo "rabbit-v$(suffix "$1")@$RB_HOST"; }
amqp_port() { echo "56$(printf '%02d' "$(suffix "$1")")"; }
management_port() { echo "156$(printf '%02d' "$(suffix "$1")")"; }
dist_port() { echo "256$(printf '%02d' "$(suffix "$1")")"; }
stream_port() {
  if [ "$1" = 3.10 ]; then echo 5552; else echo "556$(printf '%02d' "$(suffix "$1")")"; fi
}
DIR=/var/lib/rabbitmq/rabbit-backoff-broker

url_of() {
  if [ "$1" = 3.10 ]; then
    echo "amqp://guest:guest@127.0.0.1:5672/%2f"
  else
    echo "amqp://guest:guest@127.0.0.1:$(amqp_port "$1")/%2f"
  fi
}
management_of() {
  if [ "$1" = 3.10 ]; then echo "http://127.0.0.1:15672"; else echo "http://127.0.0.1:$(management_port "$1")"; fi
}

prepare() {
  local version=$1 host
  rb_node_dir "$version" "$DIR"
  host=$(rb_host_path "$version" "$DIR")
  cat >"$host/rabbitmq.conf" <<EOF
listeners.tcp.local = 127.0.0.1:$(amqp_port "$version")
management.tcp.ip = 127.0.0.1
management.tcp.port = $(management_port "$version")
loopback_users.guest = true
stream.listeners.tcp.local = 127.0.0.1:$(stream_port "$version")
stream.advertised_host = 127.0.0.1
stream.advertised_port = $(stream_port "$version")
EOF
  echo '[rabbitmq_management,rabbitmq_stream].' >"$host/enabled_plugins"
  rb_write_node_env "$version" "$DIR" "$(node_of "$version")" "$(dist_port "$version")"
}

pid_of_node() { rb_pid_of "$1" "$DIR/rabbitmq-env.conf" "$DIR/pid"; }

wait_serving() {
  local version=$1 deadline=$((SECONDS + UP_TIMEOUT))
  rb_wait_node "$version" "$(node_of "$version")" "$DIR/pid" "$UP_TIMEOUT" \
    || rb_die "see $(rb_host_path "$version" "$DIR/log")/"
  for port in "$(amqp_port "$version")" "$(management_port "$version")" "$(stream_port "$version")"; do
    until rb_answers 127.0.0.1 "$port"; do
      [ $SECONDS -lt $deadline ] || rb_die "$(node_of "$version") runs but nothing answers on 127.0.0.1:$port; see $(rb_host_path "$version" "$DIR/log")/"
      sleep 0.2
    done
  done
}

# A node started before its configuration had the stream plugin gets it
# now, on its own port (the configuration file is read only at boot).
enable_stream_online() {
  local version=$1 node port
  node=$(node_of "$version") port=$(stream_port "$version")
  rb_answers 127.0.0.1 "$port" && return 0
  rb_ctl "$version" -n "$node" eval "application:load(rabbitmq_stream),
    application:set_env(rabbitmq_stream, tcp_listeners, [{\"127.0.0.1\", $port}]),
    application:set_env(rabbitmq_stream, advertised_host, <<\"127.0.0.1\">>),
    application:set_env(rabbitmq_stream, advertised_port, $port)." >/dev/null
  rb_as_rabbitmq "$version" "$RB_BIN/rabbitmq-plugins" -n "$node" enable rabbitmq_stream >/dev/null
}

cmd_up() {
  local version=$1 start=$SECONDS
  if [ "$version" = 3.10 ]; then
    # Not passing the lock on: a node it starts outlives this script.
    exec "$here/ensure-broker.sh" 9>&-
  fi
  rb_ensure_version "$version"
  prepare "$version"
  if pid_of_node "$version" >/dev/null; then
    enable_stream_online "$version"
    wait_serving "$version"
    echo "RabbitMQ $(rb_full_version "$version") already up: $(url_of "$version") (management $(management_of "$version"))" >&2
    return 0
  fi
  rm -f "$(rb_host_path "$version" "$DIR/pid")"
  # Not holding the lock: the node outlives this script.
  rb_start_node "$version" "$DIR/rabbitmq-env.conf" "$DIR/log/console.log" 9>&-
  wait_serving "$version"
  echo "RabbitMQ $(rb_full_version "$version") up in $((SECONDS - start)) s: $(url_of "$version") (management $(management_of "$version"))" >&2
}

cmd_down() {
  local version=$1 pid stopped=""
  [ "$version" != 3.10 ] || { echo "broker.sh: the 3.10 node is the machine's own; left running" >&2; return 0; }
  [ -d "$(rb_root "$version")" ] || { echo "RabbitMQ $version: no root, nothing to stop" >&2; return 0; }
  if pid=$(pid_of_node "$version"); then
    # Its data is removed next: no need for an orderly stop.
    rb_kill "$pid"
    stopped=" (stopped pid $pid)"
  fi
  rm -rf "$(rb_host_path "$version" "$DIR")"
  echo "RabbitMQ $version node down$stopped; data removed" >&2
}

cmd_status() {
  local version=$1 pid state
  if [ "$version" = 3.10 ]; then
    if rb_answers 127.0.0.1 5672; then state=running; else state=down; fi
    printf '%-22s %-8s %s\n' "rabbit@localhost" "$state" "$(url_of 3.10)"
    return 0
  fi
  if [ -d "$(rb_root "$version")" ] && pid=$(pid_of_node "$version"); then
    if rb_answers 127.0.0.1 "$(amqp_port "$version")"; then state=running; else state=starting; fi
  else
    pid=-; state=down
  fi
  printf '%-22s %-8s %-8s %s  %s\n' "$(node_of "$version")" "$state" "$pid" "$(url_of "$version")" "$(management_of "$version")"
}

cmd_env() {
  local version=$1
  echo "export RABBITMQ_VERSION=$version"
  echo "export AMQP_URL='$(url_of "$version")'"
  echo "export RABBITMQ_MANAGEMENT_URL='$(management_of "$version")'"
  echo "export RABBITMQ_STREAM_PORT=$(stream_port "$version")"
  if [ "$version" = 3.10 ]; then
    echo "export RABBITMQCTL=rabbitmqctl"
  else
    echo "export RABBITMQCTL='$here/broker.sh ctl $version'"
  fi
}

cmd_ctl() {
  local version=$1; shift
  if [ "$version" = 3.10 ]; then exec rabbitmqctl "$@"; fi
  case " $* " in
    *" -n "*|*" --node "*) rb_ctl "$version" "$@" ;;
    *) rb_ctl "$version" -n "$(node_of "$version")" "$@" ;;
  esac
}

[ $# -ge 2 ] || usage
command=$1 version=$2
shift 2
rb_check_version "$version"
# Two scripts bringing one version up (or down) at once wait for each other
# instead of making its root or starting its node twice.
locked() {
  mkdir -p /var/lock
  exec 9>"/var/lock/rabbit-backoff-broker-$(suffix "$version").lock"
  flock 9
  "$@"
}
case "$command" in
  up) locked cmd_up "$version" ;;
  down) locked cmd_down "$version" ;;
  status) cmd_status "$version" ;;
  env) cmd_env "$version" ;;
  ctl) cmd_ctl "$version" "$@" ;;
  *) usage ;;
esac
