#!/usr/bin/env bash
# Tests the Prometheus rules of deploy/prometheus/ end to end: `promtool check
# rules` and `promtool test rules`, then a live run in which a real Prometheus
# scrapes examples/orders every second with the shipped rules, permanent
# failures are published to the orders queue, and RabbitBackoffDeadLettering
# must fire within 90 s. Prints one PASS or FAIL line; exits non-zero on
# failure; never skips a step.
#
#   scripts/alerts.sh
#
# Needs the local broker (scripts/ensure-broker.sh starts it and its
# management API, used to publish and to clean up) and promtool and
# prometheus (installed from the OS packages when missing, as root on
# Debian/Ubuntu; the packaged service is stopped and disabled: this script
# runs its own Prometheus). Everything it starts listens on 127.0.0.1 only;
# on exit it stops what it started, deletes the queues and exchanges of its
# uniquely named consumer, and removes its temporary directory.
#
# The live run loads a temporary copy of deploy/prometheus/rabbit-backoff.rules.yml
# whose only change is the `for:` of RabbitBackoffDeadLettering, 2m -> 5s, so
# that the test takes seconds; its expression and its threshold (0.1 dead
# letters/s over 5 minutes) stay as shipped, which 40 dead letters exceed.
set -euo pipefail
cd "$(dirname "$0")/.."

AMQP_URL="${AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/%2f}"
MANAGEMENT="http://127.0.0.1:15672"
MANAGEMENT_AUTH="guest:guest"
RULES=deploy/prometheus/rabbit-backoff.rules.yml
ALERT=RabbitBackoffDeadLettering
JOB=rabbit-backoff-orders
FIRE_TIMEOUT=90

queue="rb-alerts-$(date +%s)-$$"
tmp=""
orders_pid=""
prometheus_pid=""
result=FAIL
reason="stopped before the end"
started=$SECONDS

log() { echo "alerts.sh: $*" >&2; }
fail() { reason="$*"; exit 1; }

# Stops a process this script started: TERM, then KILL after 15 s.
stop_pid() {
  local pid="$1"
  [ -n "$pid" ] || return 0
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 150); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

# Names of the queues or exchanges (`$1`) of this run's consumer on the vhost.
own_objects() {
  curl -sf -u "$MANAGEMENT_AUTH" "$MANAGEMENT/api/$1/%2f?columns=name" \
    | grep -o '"name":"[^"]*"' | sed 's/^"name":"//; s/"$//' \
    | grep -E "^${queue//./\\.}(\.|$)" || true
}

cleanup() {
  local rc=$?
  trap - EXIT ERR
  set +e
  stop_pid "$orders_pid"
  stop_pid "$prometheus_pid"
  local kind name left=""
  if curl -sf -o /dev/null -u "$MANAGEMENT_AUTH" "$MANAGEMENT/api/overview"; then
    for kind in queues exchanges; do
      for name in $(own_objects "$kind"); do
        curl -sf -o /dev/null -u "$MANAGEMENT_AUTH" -X DELETE "$MANAGEMENT/api/$kind/%2f/$name"
      done
      left="$left$(own_objects "$kind")"
    done
  fi
  if [ -n "$left" ]; then
    log "could not delete: $left"
    [ "$rc" -eq 0 ] && { rc=1; result=FAIL; reason="left queues or exchanges behind"; }
  fi
  if [ "$rc" -ne 0 ] && [ -n "$tmp" ] && [ -d "$tmp" ]; then
    for f in orders.log prometheus.log; do
      [ -s "$tmp/$f" ] && { log "last lines of $f:"; tail -n 15 "$tmp/$f" >&2; }
    done
  fi
  [ -n "$tmp" ] && rm -rf "$tmp"
  if [ "$rc" -eq 0 ] && [ "$result" = PASS ]; then
    echo "alerts.sh: PASS: $reason ($((SECONDS - started)) s)"
    exit 0
  fi
  echo "alerts.sh: FAIL: $reason ($((SECONDS - started)) s)"
  [ "$rc" -eq 0 ] && rc=1
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
trap 'reason="failed at line $LINENO: $BASH_COMMAND"' ERR

# A TCP port on 127.0.0.1 that nothing answers on, below the kernel's
# ephemeral range (32768-60999 by default): a port in that range may be the
# local end of an outgoing connection, which answers nothing and still
# makes a bind fail with "Address already in use".
free_port() {
  local port low
  low="$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)"
  [ "$low" -gt 21000 ] 2>/dev/null || low=32768
  for _ in $(seq 1 100); do
    port=$((20000 + RANDOM % (low - 20000)))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return 0
    fi
  done
  return 1
}

# Waits up to $2 seconds for URL $1 to answer 200.
wait_http() {
  for _ in $(seq 1 $(($2 * 5))); do
    curl -sf -o /dev/null "$1" && return 0
    sleep 0.2
  done
  return 1
}

# One instant query to the test Prometheus; prints its JSON answer.
query() {
  curl -sf -G "http://127.0.0.1:$prometheus_port/api/v1/query" --data-urlencode "query=$1"
}

install_prometheus() {
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    fail "promtool or prometheus is missing; install them (Debian/Ubuntu: sudo apt-get install prometheus)"
  fi
  log "installing prometheus from the OS packages..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  # The package enables (and, where services may start, starts) a system-wide
  # Prometheus on :9090; this script runs its own.
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now prometheus >/dev/null 2>&1 || true
  elif [ -x /etc/init.d/prometheus ]; then
    /etc/init.d/prometheus stop >/dev/null 2>&1 || true
    command -v update-rc.d >/dev/null 2>&1 && { update-rc.d prometheus disable >/dev/null 2>&1 || true; }
  fi
}

# 1. The rules: syntax, then unit tests.
if ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; then
  install_prometheus
fi
command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 \
  || fail "promtool or prometheus is still missing after installing"
promtool check rules deploy/prometheus/*.rules.yml || fail "promtool check rules"
promtool test rules deploy/prometheus/tests/*.yml || fail "promtool test rules"

# 2. The broker and its management API.
scripts/ensure-broker.sh || fail "no broker"
curl -sf -o /dev/null -u "$MANAGEMENT_AUTH" "$MANAGEMENT/api/overview" \
  || fail "RabbitMQ's management API does not answer on $MANAGEMENT"

# 3. The orders service, on a queue of its own.
log "building examples/orders..."
build_json="$(cargo build --example orders --message-format=json-render-diagnostics)" \
  || fail "cargo build --example orders"
orders_bin="$(printf '%s\n' "$build_json" | grep -o '"executable":"[^"]*/examples/orders"' \
  | tail -n 1 | sed 's/^"executable":"//; s/"$//')"
[ -x "$orders_bin" ] || fail "the orders example was built, but its executable was not found"
started=$SECONDS

tmp="$(mktemp -d /tmp/rabbit-backoff-alerts.XXXXXX)"
metrics_port="$(free_port)" || fail "no free port"
prometheus_port="$(free_port)" || fail "no free port"
while [ "$prometheus_port" = "$metrics_port" ]; do prometheus_port="$(free_port)"; done

AMQP_URL="$AMQP_URL" ORDERS_QUEUE="$queue" ORDERS_DELAYS=1s,2s ORDERS_QUEUE_TYPE=classic \
  METRICS_ADDR="127.0.0.1:$metrics_port" "$orders_bin" >"$tmp/orders.log" 2>&1 &
orders_pid=$!
wait_http "http://127.0.0.1:$metrics_port/health/ready" 30 \
  || fail "examples/orders was not ready within 30 s"
log "orders consumes $queue; metrics on 127.0.0.1:$metrics_port"

# 4. Prometheus with the shipped rules (the alert's `for:` shortened, see above).
sed -E "/^ *- alert: $ALERT\$/,/^ *for:/ s/^( *for:).*/\\1 5s/" "$RULES" >"$tmp/rules.yml"
[ "$(diff "$RULES" "$tmp/rules.yml" | grep -c '^>')" = 1 ] \
  && grep -A3 -- "- alert: $ALERT\$" "$tmp/rules.yml" | grep -q 'for: 5s$' \
  || fail "could not shorten the for: of $ALERT in a copy of $RULES"
promtool check rules "$tmp/rules.yml" >/dev/null || fail "promtool check rules (the test copy)"
cat >"$tmp/prometheus.yml" <<EOF
# The test Prometheus of scripts/alerts.sh.
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - $tmp/rules.yml
scrape_configs:
  - job_name: $JOB
    static_configs:
      - targets: ['127.0.0.1:$metrics_port']
EOF
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data" \
  --web.listen-address="127.0.0.1:$prometheus_port" >"$tmp/prometheus.log" 2>&1 &
prometheus_pid=$!
wait_http "http://127.0.0.1:$prometheus_port/-/ready" 30 \
  || fail "Prometheus was not ready within 30 s"
curl -sf "http://127.0.0.1:$prometheus_port/api/v1/rules" | grep -q "\"name\":\"$ALERT\"" \
  || fail "Prometheus did not load $ALERT"
scraped=""
for _ in $(seq 1 100); do
  if query "rabbit_backoff_messages_dead_lettered_total{job=\"$JOB\",consumer=\"$queue\",reason=\"permanent\"}" \
    | grep -q '"value":\[[^]]*,"0"\]'; then
    scraped=yes
    break
  fi
  sleep 0.2
done
[ -n "$scraped" ] || fail "Prometheus did not scrape the orders service within 20 s"

# Our alert, as /api/v1/alerts lists it: one line per alert, those of this
# run's consumer only.
own_alerts() {
  curl -sf "http://127.0.0.1:$prometheus_port/api/v1/alerts" \
    | sed 's/},{"labels"/}\n{"labels"/g' \
    | grep "\"alertname\":\"$ALERT\"" | grep "\"consumer\":\"$queue\"" || true
}
[ -z "$(own_alerts)" ] || fail "$ALERT was active before any failure was injected"

# 5. Permanent failures (`"fail": "permanent"`: dead-lettered at once, no
# retry), published through the default exchange until the alert fires.
published=0
publish() {
  local n="$1" i body
  for _ in $(seq 1 "$n"); do
    i=$((published + 1))
    body="{\"properties\":{\"content_type\":\"application/json\",\"delivery_mode\":2},\"routing_key\":\"$queue\",\"payload\":\"{\\\"id\\\":$i,\\\"fail\\\":\\\"permanent\\\"}\",\"payload_encoding\":\"string\"}"
    curl -sf -u "$MANAGEMENT_AUTH" -H 'content-type: application/json' \
      -X POST "$MANAGEMENT/api/exchanges/%2f/amq.default/publish" -d "$body" \
      | grep -q '"routed":true' || fail "publishing to $queue was not routed"
    published=$i
  done
}
publish 40
log "published $published permanent failures; waiting for $ALERT (at most $FIRE_TIMEOUT s)"

# 6. Wait for it to fire.
injected=$SECONDS
fired=""
while [ $((SECONDS - injected)) -lt "$FIRE_TIMEOUT" ]; do
  kill -0 "$orders_pid" 2>/dev/null || fail "examples/orders exited"
  kill -0 "$prometheus_pid" 2>/dev/null || fail "Prometheus exited"
  if own_alerts | grep -q '"state":"firing"'; then
    fired=yes
    break
  fi
  # Keep failures coming while the alert waits out its `for:`.
  [ $(((SECONDS - injected) % 5)) -eq 0 ] && publish 5
  sleep 1
done
if [ -z "$fired" ]; then
  log "dead letters seen by Prometheus: $(query "sum(rabbit_backoff_messages_dead_lettered_total{consumer=\"$queue\"})" || true)"
  log "alerts: $(own_alerts)"
  fail "$ALERT did not fire within $FIRE_TIMEOUT s of the first failure ($published published)"
fi
result=PASS
reason="$ALERT fired for $queue $((SECONDS - injected)) s after the first of $published permanent failures"
