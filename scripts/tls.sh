#!/usr/bin/env bash
# A RabbitMQ node with TLS listeners on this machine, beside the default node,
# for the amqps:// tests (tests/tls.rs, backoff-cli/tests/tls.rs and the
# runtime's handshake tests) and for trying TLS by hand, of the version in
# RABBITMQ_VERSION: 3.10 (the default, the installed server, which
# scripts/ensure-broker.sh installs), 4.0 or 4.3 (Debian's packages in a root
# of their own: scripts/lib/rabbitmq.sh). It never touches the default node
# (rabbit@localhost, 5672) nor the cluster of scripts/cluster.sh. One TLS
# node runs at a time, of one version.
#
#   scripts/tls.sh up       make the certificates, start the node, wait until its TLS listener answers
#   scripts/tls.sh status   the node's state, its listeners and where the certificates are
#   scripts/tls.sh down     stop the node and remove its data and the certificates
#
# Node: rabbit-tls@localhost (guest/guest), distribution on 25676, no plugins.
#   amqps://127.0.0.1:5671  TLS, with the certificate of `localhost` and 127.0.0.1
#   amqps://127.0.0.2:5671  the same listener on another loopback address, which
#                           the certificate does not name (the wrong-host test)
#   amqp://127.0.0.1:5676   plain AMQP
# The node asks clients for a certificate (verify_peer) and refuses one that
# its CA did not sign, but accepts clients that present none.
#
# Certificates, made with openssl once and kept until `down`, in
# $RABBIT_BACKOFF_TLS_DIR (default /tmp/rabbit-backoff-tls), printed by `up`:
#   ca.pem                    the throwaway CA that signed the next three
#   server.pem, server.key    the node's (DNS:localhost, IP:127.0.0.1)
#   client.pem, client.key    a client certificate (CN=guest)
#   other-ca.pem              another CA, which signed nothing of the node's
#   other-client.pem, .key    a client certificate of that other CA
# Keys are not encrypted; none of this is for anything but tests.
#
# The node's data, logs, PID file, configuration and its copy of the
# certificates it needs are under $RABBIT_BACKOFF_TLS_NODE_DIR (default
# /var/lib/rabbitmq/rabbit-backoff-tls, inside the version's root for 4.x),
# owned by the rabbitmq user; the node runs as that user, sharing its Erlang
# cookie with rabbitmqctl. `up` is idempotent: it starts the node only when it
# is not running. Run it as root or as the rabbitmq user.
set -euo pipefail
RB_SCRIPT=tls.sh
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib/rabbitmq.sh
. "$here/lib/rabbitmq.sh"

VERSION="${RABBITMQ_VERSION:-3.10}"
rb_check_version "$VERSION"
NAME=rabbit-tls
HOST=$RB_HOST
NODE="$NAME@$HOST"
TLS_PORT=5671
TLS_ADDRESSES=(127.0.0.1 127.0.0.2)
AMQP_PORT=5676
DIST_PORT=25676
CERTS="${RABBIT_BACKOFF_TLS_DIR:-/tmp/rabbit-backoff-tls}"
# As the node sees it (inside the version's root for 4.x), and from here.
BASE="${RABBIT_BACKOFF_TLS_NODE_DIR:-/var/lib/rabbitmq/rabbit-backoff-tls}"
HOST_BASE=$(rb_host_path "$VERSION" "$BASE")
UP_TIMEOUT=60

die() { rb_die "$@"; }

usage() {
  echo "usage: scripts/tls.sh up | down | status" >&2
  exit 2
}

check_prerequisites() {
  rb_ensure_version "$VERSION"
  command -v openssl >/dev/null || die "openssl is missing: apt-get install openssl"
  if [ "$(id -u)" -ne 0 ] && [ "$(id -un)" != rabbitmq ]; then
    die "run this as root or as the rabbitmq user (the node runs as rabbitmq and shares its Erlang cookie)."
  fi
}

# A key pair on P-256.
new_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# A self-signed CA: new_ca NAME "CN".
new_ca() {
  new_key "$CERTS/$1.key"
  openssl req -x509 -new -key "$CERTS/$1.key" -out "$CERTS/$1.pem" -days 3650 -subj "/CN=$2" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
}

# A certificate signed by a CA: new_cert NAME CA "CN" EXTENSIONS.
new_cert() {
  local name=$1 ca=$2 cn=$3 ext=$4
  new_key "$CERTS/$name.key"
  openssl req -new -key "$CERTS/$name.key" -subj "/CN=$cn" -out "$CERTS/$name.csr" 2>/dev/null
  printf '%b\n' "$ext" >"$CERTS/$name.ext"
  openssl x509 -req -in "$CERTS/$name.csr" -CA "$CERTS/$ca.pem" -CAkey "$CERTS/$ca.key" \
    -CAcreateserial -days 825 -extfile "$CERTS/$name.ext" -out "$CERTS/$name.pem" 2>/dev/null
  rm -f "$CERTS/$name.csr" "$CERTS/$name.ext"
}

# Makes the certificates once; the node reads its own as the rabbitmq user.
make_certificates() {
  if [ ! -s "$CERTS/other-client.pem" ]; then
    rm -rf "$CERTS"
    install -d -m 0755 "$CERTS"
    local leaf='basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment'
    new_ca ca "rabbit-backoff test CA"
    new_cert server ca localhost "$leaf\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1"
    new_cert client ca guest "$leaf\nextendedKeyUsage=clientAuth"
    new_ca other-ca "rabbit-backoff other CA"
    new_cert other-client other-ca guest "$leaf\nextendedKeyUsage=clientAuth"
    rm -f "$CERTS"/*.srl
  fi
  # CA keys stay with whoever ran this; the node reads its key, tests read the rest.
  chmod 0600 "$CERTS/ca.key" "$CERTS/other-ca.key"
  chmod 0600 "$CERTS/server.key"
  chmod 0644 "$CERTS"/*.pem "$CERTS/client.key" "$CERTS/other-client.key"
}

# Writes the node's configuration (each time: a changed script takes effect).
prepare() {
  rb_node_dir "$VERSION" "$BASE"
  # The node's own copy of what it reads: a node in a root of its own does
  # not see this machine's folders.
  install -d -m 0750 "$HOST_BASE/certs"
  cp "$CERTS/ca.pem" "$CERTS/server.pem" "$CERTS/server.key" "$HOST_BASE/certs/"
  rb_chown "$VERSION" "$HOST_BASE/certs" "$HOST_BASE/certs/ca.pem" "$HOST_BASE/certs/server.pem" "$HOST_BASE/certs/server.key"
  chmod 0600 "$HOST_BASE/certs/server.key"
  {
    echo "listeners.tcp.local = 127.0.0.1:$AMQP_PORT"
    local i=1 address
    for address in "${TLS_ADDRESSES[@]}"; do
      echo "listeners.ssl.a$i = $address:$TLS_PORT"
      i=$((i + 1))
    done
    cat <<EOF
ssl_options.cacertfile = $BASE/certs/ca.pem
ssl_options.certfile = $BASE/certs/server.pem
ssl_options.keyfile = $BASE/certs/server.key
ssl_options.verify = verify_peer
ssl_options.fail_if_no_peer_cert = false
loopback_users.guest = true
EOF
  } >"$HOST_BASE/rabbitmq.conf"
  echo '[].' >"$HOST_BASE/enabled_plugins"
  rb_write_node_env "$VERSION" "$BASE" "$NODE" "$DIST_PORT"
}

# The PID of the node's Erlang VM when it runs (it wrote its PID file and
# that process is a VM started with this node's settings).
pid_of_node() { rb_pid_of "$VERSION" "$BASE/rabbitmq-env.conf" "$BASE/pid"; }

answers() { rb_answers "$1" "$2"; }

start_node() {
  rm -f "$HOST_BASE/pid"
  rb_start_node "$VERSION" "$BASE/rabbitmq-env.conf" "$BASE/log/console.log"
}

# Waits until the node's application runs and every listener answers.
wait_node() {
  local deadline=$((SECONDS + UP_TIMEOUT)) address
  rb_wait_node "$VERSION" "$NODE" "$BASE/pid" "$UP_TIMEOUT" || die "see $HOST_BASE/log/"
  for address in "${TLS_ADDRESSES[@]}"; do
    until answers "$address" "$TLS_PORT"; do
      [ $SECONDS -lt $deadline ] || die "$NODE runs but nothing answers on $address:$TLS_PORT; see $HOST_BASE/log/"
      sleep 0.2
    done
  done
  until answers 127.0.0.1 "$AMQP_PORT"; do
    [ $SECONDS -lt $deadline ] || die "$NODE runs but nothing answers on 127.0.0.1:$AMQP_PORT; see $HOST_BASE/log/"
    sleep 0.2
  done
}

cmd_up() {
  check_prerequisites
  local start=$SECONDS
  make_certificates
  prepare
  if pid_of_node >/dev/null; then
    wait_node
    echo "TLS node already up: amqps://guest:guest@127.0.0.1:$TLS_PORT/%2f?cacertfile=$CERTS/ca.pem (plain: amqp://guest:guest@127.0.0.1:$AMQP_PORT/%2f); certificates in $CERTS" >&2
  else
    start_node
    wait_node
    echo "RabbitMQ $(rb_full_version "$VERSION") TLS node up in $((SECONDS - start)) s: amqps://guest:guest@127.0.0.1:$TLS_PORT/%2f?cacertfile=$CERTS/ca.pem (plain: amqp://guest:guest@127.0.0.1:$AMQP_PORT/%2f); certificates in $CERTS" >&2
  fi
}

cmd_down() {
  check_prerequisites
  local pid stopped=""
  if pid=$(pid_of_node); then
    # Its data is removed next: no need for an orderly stop.
    rb_kill "$pid"
    stopped=" (stopped pid $pid)"
  fi
  rm -rf "$HOST_BASE" "$CERTS"
  echo "TLS node down$stopped; data and certificates removed" >&2
}

cmd_status() {
  local pid state address
  if pid=$(pid_of_node); then
    if answers 127.0.0.1 "$TLS_PORT"; then state=running; else state=starting; fi
  else
    pid=-; state=down
  fi
  printf '%-20s %-9s %-8s %s\n' NODE STATE PID LISTENERS
  local listeners=""
  for address in "${TLS_ADDRESSES[@]}"; do listeners+="amqps://$address:$TLS_PORT "; done
  printf '%-20s %-9s %-8s %s\n' "$NODE" "$state" "$pid" "${listeners}amqp://127.0.0.1:$AMQP_PORT"
  if [ -s "$CERTS/ca.pem" ]; then echo "certificates: $CERTS"; else echo "certificates: none (made by up)"; fi
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  *) usage ;;
esac
