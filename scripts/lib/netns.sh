# Hosts made of Linux network namespaces on one bridge, and the faults of a
# network between them, for scripts/cluster.sh's namespaced cluster. Sourced,
# not run; needs root, `ip` and `tc` (iproute2).
#
# Layout for a prefix P (the first three octets of a /24, 10.213.0 by default):
#
#   the bridge rbp-br0 in this machine's namespace, address P.1: the address
#   every client on this machine (tests, rabbitmqctl of the cluster's
#   callers) reaches the hosts from; host N (1, 2, 3) is the namespace
#   rbp-N with address P.(10+N) on its eth0, a veth whose other end, rbp-N-h,
#   is on the bridge.
#
# Faults, each undone by nb_heal_host or nb_heal_all:
#
#   cut       blackhole routes between a host and the other hosts, both ways
#             (packets dropped silently, as a lost link does: established
#             connections notice only by their own timeouts)
#   cut-client  blackhole routes between a host and the bridge address (this
#             machine's clients), both ways; the other hosts still reach it
#   slow      netem (delay, loss) on both ends of a host's veth: each
#             direction of everything it sends and receives
#
# Everything made is named rbp-*: nb_down removes all of it, and kills what
# still runs in the namespaces (their epmd).

NB_PREFIX="${CLUSTER_NETNS_PREFIX:-10.213.0}"
NB_BRIDGE=rbp-br0
NB_HOSTS=(1 2 3)

nb_ns() { echo "rbp-$1"; }
nb_veth() { echo "rbp-$1-h"; }
nb_ip() { echo "$NB_PREFIX.$((10 + $1))"; }
nb_client_ip() { echo "$NB_PREFIX.1"; }

# Runs a command in host $1's namespace.
nb_exec() { local host=$1; shift; ip netns exec "$(nb_ns "$host")" "$@"; }

# Fails when the /24 is used by anything but this script's bridge: an
# address or a route of this machine's namespace in it.
nb_check_free() {
  local used
  used=$(ip -4 -o addr show | grep -v " $NB_BRIDGE " | grep -F " $NB_PREFIX." || true)
  used+=$(ip -4 route show | grep -v "dev $NB_BRIDGE" | grep -v '^blackhole' | grep -F "$NB_PREFIX." || true)
  if [ -n "$used" ]; then
    echo "$NB_PREFIX.0/24 is in use on this machine:" >&2
    echo "$used" >&2
    echo "choose another with CLUSTER_NETNS_PREFIX (say 10.214.0)" >&2
    return 1
  fi
}

# Makes the bridge and the hosts (idempotent: what exists stays).
nb_up() {
  local host ns veth
  nb_check_free || return 1
  if ! ip link show "$NB_BRIDGE" >/dev/null 2>&1; then
    ip link add "$NB_BRIDGE" type bridge
    ip addr add "$(nb_client_ip)/24" dev "$NB_BRIDGE"
    ip link set "$NB_BRIDGE" up
  fi
  for host in "${NB_HOSTS[@]}"; do
    ns=$(nb_ns "$host"); veth=$(nb_veth "$host")
    ip netns list | grep -qw "^$ns" || ip netns add "$ns"
    if ! ip link show "$veth" >/dev/null 2>&1; then
      ip link add "$veth" type veth peer name "rbp-$host-n"
      ip link set "rbp-$host-n" netns "$ns"
      nb_exec "$host" ip link set "rbp-$host-n" name eth0
      nb_exec "$host" ip addr add "$(nb_ip "$host")/24" dev eth0
      nb_exec "$host" ip link set eth0 up
      nb_exec "$host" ip link set lo up
      ip link set "$veth" master "$NB_BRIDGE"
      ip link set "$veth" up
    fi
  done
}

# True when the hosts exist.
nb_exists() { ip netns list 2>/dev/null | grep -qw "^$(nb_ns 1)"; }

# Kills whatever runs in the namespaces, then removes them, their veths, the
# bridge and the blackhole routes of this machine's namespace. Idempotent.
nb_down() {
  local host ns pids
  for host in "${NB_HOSTS[@]}"; do
    ns=$(nb_ns "$host")
    ip netns list 2>/dev/null | grep -qw "^$ns" || continue
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    if [ -n "$pids" ]; then
      # shellcheck disable=SC2086
      kill -9 $pids 2>/dev/null || true
      local deadline=$((SECONDS + 10)) pid
      for pid in $pids; do
        while [ -e "/proc/$pid" ] && [ $SECONDS -lt $deadline ]; do sleep 0.05; done
      done
    fi
    ip netns del "$ns" 2>/dev/null || true
  done
  for host in "${NB_HOSTS[@]}"; do
    ip link del "$(nb_veth "$host")" 2>/dev/null || true
    ip route del blackhole "$(nb_ip "$host")/32" 2>/dev/null || true
  done
  ip link del "$NB_BRIDGE" 2>/dev/null || true
}

# Adds (or, with `del`, removes) a blackhole route to $3 in the namespace of
# host $2, or in this machine's namespace when $2 is 0.
nb_blackhole() {
  local action=$1 host=$2 to=$3
  if [ "$host" = 0 ]; then
    ip route "$action" blackhole "$to/32" 2>/dev/null || [ "$action" = del ] || ip route show "$to/32" | grep -q blackhole
  else
    nb_exec "$host" ip route "$action" blackhole "$to/32" 2>/dev/null || [ "$action" = del ] \
      || nb_exec "$host" ip route show "$to/32" | grep -q blackhole
  fi
}

# Adds (or, with `del`, removes) the blackhole routes between host $2 and
# every other host, both ways.
nb_blackhole_hosts() {
  local action=$1 host=$2 other
  for other in "${NB_HOSTS[@]}"; do
    [ "$other" = "$host" ] && continue
    nb_blackhole "$action" "$host" "$(nb_ip "$other")"
    nb_blackhole "$action" "$other" "$(nb_ip "$host")"
  done
}

# Adds (or, with `del`, removes) the blackhole routes between host $2 and
# this machine's clients, both ways.
nb_blackhole_client() {
  local action=$1 host=$2
  nb_blackhole "$action" "$host" "$(nb_client_ip)"
  nb_blackhole "$action" 0 "$(nb_ip "$host")"
}

# Host $1 loses the other hosts, and they lose it.
nb_cut() { nb_blackhole_hosts add "$1"; }

# Host $1 and this machine's clients lose each other; the hosts do not.
nb_cut_client() { nb_blackhole_client add "$1"; }

# netem on both ends of host $1's link: delay $2 (tc's syntax: 2s, 300ms)
# and loss $3 (10%) on each direction. On a kernel without netem
# (CONFIG_NET_SCH_NETEM), the loss alone: nftables in the host's namespace
# drops that share of the packets on its link at random, each way, and the
# delay is left out (said on stderr).
nb_slow() {
  local host=$1 delay=$2 loss=$3
  if nb_exec "$host" tc qdisc replace dev eth0 root netem delay "$delay" loss "$loss" 2>/dev/null; then
    tc qdisc replace dev "$(nb_veth "$host")" root netem delay "$delay" loss "$loss"
    echo "slow: $(nb_ns "$host")'s link: delay $delay, loss $loss, each way" >&2
    return
  fi
  nb_exec "$host" tc qdisc del dev eth0 root 2>/dev/null || true
  local percent=${loss%\%}
  if ! [[ $percent =~ ^[0-9]+$ ]] || ((percent > 100)); then
    echo "slow: '$loss' is not a whole percentage (10%)" >&2
    return 1
  fi
  if ! command -v nft >/dev/null; then
    echo "Installing nftables from the OS packages..." >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q nftables >/dev/null
  fi
  nb_exec "$host" nft -f - <<NFT
table inet rb_slow {
  chain in { type filter hook input priority 0; iifname "eth0" numgen random mod 100 < $percent counter drop; }
  chain out { type filter hook output priority 0; oifname "eth0" numgen random mod 100 < $percent counter drop; }
}
NFT
  echo "slow: this kernel has no netem qdisc: $(nb_ns "$host") drops $loss of the packets on its link each way, without the $delay delay" >&2
}

# Every fault of host $1 undone: its cuts, its client cut, its netem.
nb_heal_host() {
  local host=$1
  nb_blackhole_hosts del "$host"
  nb_blackhole_client del "$host"
  nb_exec "$host" tc qdisc del dev eth0 root 2>/dev/null || true
  tc qdisc del dev "$(nb_veth "$host")" root 2>/dev/null || true
  nb_exec "$host" nft delete table inet rb_slow 2>/dev/null || true
}

nb_heal_all() {
  local host
  for host in "${NB_HOSTS[@]}"; do nb_heal_host "$host"; done
}

# The faults in place, one line each (for status).
nb_faults() {
  local host other
  for host in "${NB_HOSTS[@]}"; do
    for other in "${NB_HOSTS[@]}"; do
      [ "$other" = "$host" ] && continue
      if nb_exec "$host" ip route show "$(nb_ip "$other")/32" 2>/dev/null | grep -q blackhole; then
        echo "cut: $(nb_ip "$host") -/- $(nb_ip "$other")"
      fi
    done
    if ip route show "$(nb_ip "$host")/32" 2>/dev/null | grep -q blackhole; then
      echo "cut-client: $(nb_client_ip) -/- $(nb_ip "$host")"
    fi
    local q
    q=$(tc qdisc show dev "$(nb_veth "$host")" 2>/dev/null | grep netem || true)
    [ -z "$q" ] || echo "slow: $(nb_ip "$host"): ${q#*netem }"
    if nb_exec "$host" nft list table inet rb_slow >/dev/null 2>&1; then
      echo "lossy: $(nb_ip "$host") (nftables, no netem)"
    fi
  done
}
