#!/bin/bash
# A group over two hosts in network namespaces (netns.sh) whose daemons know
# each other only by mutual TLS (no peer token): certificates made here with
# the openssl commands of docs/security.md, each naming its host's address.
#   1. hosts 0 and 1, one rank each: TUNED on both, then the same ask CACHED
#   2. host 2, whose certificate another CA signed (it trusts both CAs, so
#      that it takes host 0's certificate and host 0 is the one to refuse),
#      in a group led by host 0: its rank gets UNAVAILABLE, host 0's rank no
#      measurement (FALLBACK), and host 0's log says the handshake was
#      refused
#   3. a plaintext connection to host 0's peer port: refused, logged
# Needs root (namespaces): SKIPPED otherwise.
# Usage: fleet_tls_test.sh [DAEMON CLI ASK]  (defaults: Bazel runfiles)
set -u
if [ "$(id -u)" != 0 ]; then
  echo "SKIPPED: needs root, to make network namespaces" >&2
  exit 0
fi
for tool in ip openssl; do
  command -v "$tool" >/dev/null ||
    { echo "FAIL: $tool not found (deploy/setup.sh installs it)" >&2; exit 1; }
done
here=${TEST_SRCDIR:-.}/autotuned
DAEMON=${1:-$here/daemon/autotuned}
CLI=${2:-$here/client/cli/autotunectl}
ASK=${3:-$here/tests/fleet/fleet_ask}
FLEET=${FLEET:-atfs}
FLEET_DIR=$(mktemp -d "/tmp/$FLEET-XXXXXX")
FLEET_TLS=1
# shellcheck source=tests/fleet/netns.sh
. "$(dirname "$0")/netns.sh"
trap 'fleet_down; rm -rf "$FLEET_DIR"' EXIT

failures=0
failed() { echo "FAIL: $*"; failures=$((failures + 1)); }

fleet_up 3 || { echo "FAIL: could not make the namespaces"; exit 1; }
fleet_ca fleet && fleet_ca other && fleet_cert other 2 &&
  cat "$FLEET_DIR/tls/fleet-ca.pem" "$FLEET_DIR/tls/other-ca.pem" >"$FLEET_DIR/tls/h2-ca.pem" ||
  { echo "FAIL: openssl could not make the certificates"; exit 1; }
fleet_daemons 1 || { echo "FAIL: the daemons did not start"; exit 1; }
for h in 0 1 2; do
  grep -q "peer=$(fleet_peer "$h") (mutual TLS)" "$FLEET_DIR/daemon$h.log" ||
    failed "host $h's daemon does not say its peer port is mutual TLS"
done

# ask NAME SOCKETS PEERS COUNT: one round of one rank per daemon, COUNT
# elements (a new count: a problem no cache holds); prints the output.
ask() {
  "$ASK" --sockets="$2" --peers="$3" --ranks_per_daemon=1 --group="$1" --count="$4" \
    --window_ms=1000 --timeout_ms=2000 --candidates=all_reduce/one_shot,all_reduce/two_shot \
    >"$FLEET_DIR/$1.out" 2>&1
  sed "s/^/  [$1] /" "$FLEET_DIR/$1.out"
}
# outcome NAME RANK: that rank's outcome.
outcome() { awk -v r="$2" '$1 == "round" && $3 == "rank" && $4 == r ":" {print $5}' "$FLEET_DIR/$1.out"; }

pair="$(fleet_socket 0),$(fleet_socket 1)"
pair_peers="$(fleet_peer 0),$(fleet_peer 1)"
echo "== hosts 0 and 1 over mutual TLS"
ask good "$pair" "$pair_peers" 4096
[ "$(outcome good 0) $(outcome good 1)" = "TUNED TUNED" ] ||
  failed "the two hosts' ranks should be TUNED"
ask good-again "$pair" "$pair_peers" 4096
[ "$(outcome good-again 0) $(outcome good-again 1)" = "CACHED CACHED" ] ||
  failed "the same ask again should be CACHED on both"

echo "== host 2, its certificate from another CA, joins a group led by host 0"
ask intruder "$(fleet_socket 0),$(fleet_socket 2)" "$(fleet_peer 0),$(fleet_peer 2)" 8192
[ "$(outcome intruder 1)" = UNAVAILABLE ] || failed "host 2's rank should be UNAVAILABLE"
[ "$(outcome intruder 0)" = FALLBACK ] ||
  failed "host 0's rank should get FALLBACK (host 2 never reached it)"
grep -q "peer TLS: handshake refused.*certificate verify failed" "$FLEET_DIR/daemon0.log" ||
  failed "host 0's log should say it refused host 2's handshake"

echo "== plaintext to host 0's peer port"
before=$(grep -c "handshake refused.*wrong version number" "$FLEET_DIR/daemon0.log")
printf 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n' |
  ip netns exec "$(fleet_ns 1)" timeout 3 bash -c "cat >/dev/tcp/$(fleet_addr 0)/7451"
for _ in $(seq 30); do
  [ "$(grep -c "handshake refused.*wrong version number" "$FLEET_DIR/daemon0.log")" -gt "$before" ] &&
    break
  sleep 0.1
done
[ "$(grep -c "handshake refused.*wrong version number" "$FLEET_DIR/daemon0.log")" -gt "$before" ] ||
  failed "host 0's log should say it refused a plaintext connection"

for h in 0 1 2; do
  fleet_wait_daemon "$h" >/dev/null 2>&1 || failed "the daemon of host $h no longer answers"
done
if [ "$failures" != 0 ]; then
  for h in 0 1 2; do
    echo "--- daemon $h log (last lines) ---"
    tail -n 15 "$FLEET_DIR/daemon$h.log"
  done
  exit 1
fi
echo PASS
