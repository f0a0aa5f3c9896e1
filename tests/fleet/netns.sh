# Hosts in network namespaces, with network faults: sourced by the fleet
# test and benchmark (tests/fleet/README.md). Needs root, iproute2 and
# iptables (deploy/setup.sh).
#
# fleet_up N makes namespaces $FLEET-h0 .. $FLEET-h<N-1>, each with one
# interface eth0 (10.77.<h/200>.<h%200+1>/16), joined by veth pairs to a
# bridge in a namespace of its own ($FLEET-sw), so that nothing is added to
# the namespace this runs in. fleet_daemons starts one daemon per host (the
# sim backend, its peer port on its own address, every other host a peer,
# a shared token or, with FLEET_TLS=1, mutual TLS; fleet_start_daemon H
# starts one again after a kill).
# Faults are firewall rules inside the hosts (and one delayer per host):
#   fleet_delay MS / fleet_delay_off   every packet a host sends is held MS
#                                      (tests/fleet/delayer.cc; the kernel
#                                      may lack sch_netem, so no tc netem)
#   fleet_loss P / fleet_loss_off      each host drops received packets from
#                                      the others with probability P
#   fleet_cut A B / fleet_heal A B     hosts A and B drop each other's packets
#                                      (both sides: a silent black hole)
# fleet_down removes all of it (daemons, delayers, namespaces); fleet_up
# calls it first, for what a killed earlier run left behind.
#
# Set before sourcing: FLEET (a name prefix, short: interface names are at
# most 15 bytes), FLEET_DIR (a directory for sockets, configs, caches, logs),
# DAEMON, CLI, DELAYER (binaries); FLEET_TLS=1 for mutual TLS (openssl).

fleet_hosts=0

fleet_ns() { echo "$FLEET-h$1"; }
fleet_addr() { echo "10.77.$(($1 / 200)).$(($1 % 200 + 1))"; }
fleet_peer() { echo "$(fleet_addr "$1"):7451"; }
fleet_socket() { echo "$FLEET_DIR/h$1.sock"; }

# Kills what runs in each of our namespaces (found by `ip netns pids`, and by
# the pids recorded at each start: in a chroot the first can come back
# empty), then deletes them.
fleet_down() {
  local ns f
  for f in "$FLEET_DIR"/*.pid; do
    [ -e "$f" ] || continue
    fleet_kill_recorded "$f" 9
    rm -f "$f"
  done
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$FLEET-"); do
    local pids
    pids=$(ip netns pids "$ns" 2>/dev/null)
    if [ -n "$pids" ]; then
      # shellcheck disable=SC2086
      kill -9 $pids 2>/dev/null
      for _ in $(seq 50); do
        [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break
        sleep 0.1
      done
    fi
    ip netns delete "$ns" 2>/dev/null
  done
}

fleet_up() {
  fleet_down
  fleet_hosts=$1
  local sw="$FLEET-sw" h ns
  ip netns add "$sw" || return 1
  ip -n "$sw" link add br0 type bridge || return 1
  ip -n "$sw" link set br0 up
  ip -n "$sw" link set lo up
  for h in $(seq 0 $(($1 - 1))); do
    ns=$(fleet_ns "$h")
    ip netns add "$ns" || return 1
    ip link add "$FLEET-v$h" netns "$sw" type veth peer name eth0 netns "$ns" || return 1
    ip -n "$sw" link set "$FLEET-v$h" master br0 up
    ip -n "$ns" addr add "$(fleet_addr "$h")/16" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
  done
}

# fleet_ca NAME: a certificate authority, $FLEET_DIR/tls/NAME-ca.pem and its
# key (docs/security.md's commands).
fleet_ca() {
  mkdir -p "$FLEET_DIR/tls"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj "/CN=$1 peer CA" -keyout "$FLEET_DIR/tls/$1-ca.key" -out "$FLEET_DIR/tls/$1-ca.pem" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
}

# fleet_cert CA H: host H's certificate and key signed by CA (fleet_ca),
# naming its address, as $FLEET_DIR/tls/hH.pem and hH.key; the CA it
# trusts, hH-ca.pem, is that CA.
fleet_cert() {
  local t=$FLEET_DIR/tls
  printf '%s\n' "subjectAltName=IP:$(fleet_addr "$2")" "basicConstraints=CA:FALSE" \
    "keyUsage=critical,digitalSignature,keyEncipherment" \
    "extendedKeyUsage=serverAuth,clientAuth" >"$t/h$2.ext"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=host $2" \
    -keyout "$t/h$2.key" -out "$t/h$2.csr" 2>/dev/null &&
    openssl x509 -req -in "$t/h$2.csr" -CA "$t/$1-ca.pem" -CAkey "$t/$1-ca.key" \
      -CAcreateserial -days 2 -extfile "$t/h$2.ext" -out "$t/h$2.pem" 2>/dev/null &&
    chmod 600 "$t/h$2.key" && cp "$t/$1-ca.pem" "$t/h$2-ca.pem"
}

# fleet_daemons RANKS_PER_HOST [CONFIG_TEXT]: one daemon per host with that
# many sim GPUs, CONFIG_TEXT appended to each configuration; returns once
# every daemon answers on its socket (or fails, showing the log). With
# FLEET_TLS=1, mutual TLS between the daemons and no peer token: a CA
# ("fleet") and each host's certificate are made first, unless the host's
# certificate is already there (a test may give a host another CA's).
fleet_daemons() {
  local peers="" h auth
  fleet_per=$1
  for h in $(seq 0 $((fleet_hosts - 1))); do peers+="peers: \"$(fleet_peer "$h")\""$'\n'; done
  if [ "${FLEET_TLS:-0}" = 1 ] && ! [ -e "$FLEET_DIR/tls/fleet-ca.pem" ]; then
    fleet_ca fleet || return 1
  fi
  for h in $(seq 0 $((fleet_hosts - 1))); do
    auth='peer_token: "fleet-test-token"'
    if [ "${FLEET_TLS:-0}" = 1 ]; then
      [ -e "$FLEET_DIR/tls/h$h.pem" ] || fleet_cert fleet "$h" || return 1
      auth="peer_tls { ca_file: \"$FLEET_DIR/tls/h$h-ca.pem\""
      auth+=" cert_file: \"$FLEET_DIR/tls/h$h.pem\" key_file: \"$FLEET_DIR/tls/h$h.key\" }"
    fi
    printf 'backend: "sim"\n%s\npeer_advertise: "%s"\n%s%s\n' \
      "$auth" "$(fleet_peer "$h")" "$peers" "${2:-}" >"$FLEET_DIR/conf$h"
    fleet_start_daemon "$h"
  done
  for h in $(seq 0 $((fleet_hosts - 1))); do
    fleet_wait_daemon "$h" || return 1
  done
}

# Starts host H's daemon on its configuration (again, after a kill: the
# same cache; its log appended).
fleet_start_daemon() {
  ip netns exec "$(fleet_ns "$1")" "$DAEMON" --config="$FLEET_DIR/conf$1" --sim_gpus="$fleet_per" \
    --socket="$(fleet_socket "$1")" --cache_dir="$FLEET_DIR/cache$1" \
    --peer_listen="$(fleet_peer "$1")" --log_level=info >>"$FLEET_DIR/daemon$1.log" 2>&1 &
  # `ip netns exec` execs the command in place: $! is the daemon.
  echo "$! $DAEMON" >"$FLEET_DIR/daemon$1.pid"
  disown  # fleet_down kills it; no job notice then
}

# The pid recorded in FILE ("PID BINARY") when that process still runs
# BINARY (not a reused pid); nothing otherwise. Compared by device and
# inode: the daemon runs in a mount namespace of its own (ip netns exec),
# and seen from a chroot the path /proc/PID/exe names is not BINARY's.
fleet_recorded_pid() {
  local pid bin
  read -r pid bin <"$1" 2>/dev/null || return 0
  [ -n "$pid" ] &&
    [ "$(stat -L -c %d:%i "/proc/$pid/exe" 2>/dev/null)" = "$(stat -L -c %d:%i "$bin")" ] &&
    echo "$pid"
}

# Sends signal SIG to the process recorded in FILE and waits (at most 5 s)
# until it is gone.
fleet_kill_recorded() {
  local pid
  pid=$(fleet_recorded_pid "$1")
  [ -n "$pid" ] || return 0
  kill "-$2" "$pid" 2>/dev/null
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
}

# The pid of host H's daemon (empty when it is not running).
fleet_daemon_pid() { fleet_recorded_pid "$FLEET_DIR/daemon$1.pid"; }

# Waits (at most 20 s) until host H's daemon answers `autotunectl info`.
fleet_wait_daemon() {
  for _ in $(seq 200); do
    timeout 5 "$CLI" --socket="$(fleet_socket "$1")" info >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "daemon of host $1 does not answer; its log:" >&2
  tail -n 20 "$FLEET_DIR/daemon$1.log" >&2
  return 1
}

fleet_sockets() {
  local h out=""
  for h in $(seq 0 $((fleet_hosts - 1))); do out+="$(fleet_socket "$h"),"; done
  echo "${out%,}"
}

fleet_peers() {
  local h out=""
  for h in $(seq 0 $((fleet_hosts - 1))); do out+="$(fleet_peer "$h"),"; done
  echo "${out%,}"
}

fleet_delay() {
  local h ns log
  for h in $(seq 0 $((fleet_hosts - 1))); do
    ns=$(fleet_ns "$h")
    log="$FLEET_DIR/delayer$h.log"
    rm -f "$log"
    ip netns exec "$ns" "$DELAYER" --queue=0 --delay_ms="$1" 2>"$log" &
    echo "$! $DELAYER" >"$FLEET_DIR/delayer$h.pid"
    disown
    for _ in $(seq 100); do
      grep -q "delayer: ready" "$log" 2>/dev/null && break
      sleep 0.05
    done
    grep -q "delayer: ready" "$log" || { cat "$log" >&2; return 1; }
    ip netns exec "$ns" iptables -A OUTPUT -o eth0 -j NFQUEUE --queue-num 0 --queue-bypass ||
      return 1
  done
}

fleet_delay_off() {
  local h
  for h in $(seq 0 $((fleet_hosts - 1))); do
    ip netns exec "$(fleet_ns "$h")" iptables -D OUTPUT -o eth0 -j NFQUEUE --queue-num 0 \
      --queue-bypass
    fleet_kill_recorded "$FLEET_DIR/delayer$h.pid" TERM
  done
}

fleet_loss() {
  local h
  for h in $(seq 0 $((fleet_hosts - 1))); do
    ip netns exec "$(fleet_ns "$h")" iptables -A INPUT -i eth0 -m statistic --mode random \
      --probability "$1" -j DROP || return 1
  done
  fleet_loss_p=$1
}

fleet_loss_off() {
  local h
  for h in $(seq 0 $((fleet_hosts - 1))); do
    ip netns exec "$(fleet_ns "$h")" iptables -D INPUT -i eth0 -m statistic --mode random \
      --probability "$fleet_loss_p" -j DROP
  done
}

fleet_cut() {
  ip netns exec "$(fleet_ns "$1")" iptables -A INPUT -s "$(fleet_addr "$2")" -j DROP &&
    ip netns exec "$(fleet_ns "$2")" iptables -A INPUT -s "$(fleet_addr "$1")" -j DROP
}

fleet_heal() {
  ip netns exec "$(fleet_ns "$1")" iptables -D INPUT -s "$(fleet_addr "$2")" -j DROP
  ip netns exec "$(fleet_ns "$2")" iptables -D INPUT -s "$(fleet_addr "$1")" -j DROP
}
