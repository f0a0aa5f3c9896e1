#!/bin/bash
# Rounds of one group over HOSTS namespaced hosts (tests/fleet/netns.sh: a
# daemon per network namespace, joined by a bridge; sim backend, RANKS ranks
# per host), without and with DELAY_MS (50) held on every packet a host
# sends (so 2 x DELAY_MS per round trip between hosts). Per network, two
# kinds of rounds, one after the other, every rank asking its own daemon at
# once (tests/fleet/fleet_ask):
#   cached    the same problem every round: after the first, CACHED, so a
#             round is the followers' asks to the leader and its answer
#   measured  a new problem every round: all_reduce fp32, about 20 KiB, one
#             candidate (all_reduce/one_shot, warmup 1, 3 iterations)
#             measured across all hosts, every barrier's data through the
#             leader
# Prints per kind rounds/s and the round latency (the slowest rank's call)
# p50/p99/max, and checks that every round's ranks got one answer.
#
#   bench/fleet_netns.sh [OUT_DIR]    (root; HOSTS=16 RANKS=1 DELAY_MS=50
#                                      CACHED_ROUNDS=200 MEASURED_ROUNDS=20,
#                                      a quarter of each with the delay)
# AUTOTUNED_BIN=DIR takes the binaries (autotuned, autotunectl, delayer,
# fleet_ask) from DIR instead of building them.
set -u
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench/fleet_netns.sh: needs root (network namespaces)" >&2; exit 2; }
hosts=${HOSTS:-16}
per=${RANKS:-1}
delay_ms=${DELAY_MS:-50}
cached_rounds=${CACHED_ROUNDS:-200}
measured_rounds=${MEASURED_ROUNDS:-20}
out=${1:-}
if [ -n "${AUTOTUNED_BIN:-}" ]; then
  bin=$AUTOTUNED_BIN
  DAEMON=$bin/autotuned CLI=$bin/autotunectl DELAYER=$bin/delayer ask=$bin/fleet_ask
else
  bazel build --jobs=2 //daemon:autotuned //client/cli:autotunectl //tests/fleet:delayer \
    //tests/fleet:fleet_ask >/dev/null 2>&1 || { echo "build failed" >&2; exit 1; }
  DAEMON=$PWD/bazel-bin/daemon/autotuned CLI=$PWD/bazel-bin/client/cli/autotunectl
  DELAYER=$PWD/bazel-bin/tests/fleet/delayer ask=$PWD/bazel-bin/tests/fleet/fleet_ask
fi
FLEET=atfb
FLEET_DIR=$(mktemp -d /tmp/atfb-XXXXXX)
# shellcheck source=tests/fleet/netns.sh
. tests/fleet/netns.sh
trap 'fleet_down; rm -rf "$FLEET_DIR"' EXIT

report() { if [ -n "$out" ]; then tee -a "$out/results.txt"; else cat; fi; }
[ -n "$out" ] && mkdir -p "$out" && : >"$out/results.txt"

fleet_up "$hosts" || exit 1
fleet_daemons "$per" || exit 1
{
  echo "command: bench/fleet_netns.sh $out (HOSTS=$hosts RANKS=$per DELAY_MS=$delay_ms" \
    "CACHED_ROUNDS=$cached_rounds MEASURED_ROUNDS=$measured_rounds)"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')," \
    "$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), kernel $(uname -r)"
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); commit $(git rev-parse --short HEAD 2>/dev/null)"
  echo "$hosts hosts x $per ranks, one group of $((hosts * per)) ranks, leader on host 0"
} | report

fail=0
count=4096
# run NAME ROUNDS [fleet_ask flags]: one line of figures.
run() {
  local name=$1 rounds=$2 line
  shift 2
  count=$((count + 1000))
  "$ask" --sockets="$(fleet_sockets)" --peers="$(fleet_peers)" --ranks_per_daemon="$per" \
    --group="$name" --count="$count" --candidates=all_reduce/one_shot --window_ms=10000 \
    --timeout_ms=30000 --rounds="$rounds" "$@" >"$FLEET_DIR/$name.out" 2>&1 || fail=1
  line=$(grep "^rounds=" "$FLEET_DIR/$name.out")
  local outcomes
  outcomes=$(awk '/^round [0-9]+ rank/ {print $5}' "$FLEET_DIR/$name.out" | sort | uniq -c |
    awk '{printf "%s%s=%s", sep, $2, $1; sep=","}')
  printf '%-20s %s outcomes(rank answers): %s\n' "$name" "$line" "$outcomes" | report
  # Per round: its ranks' distinct answers and the slowest rank's time.
  [ -n "$out" ] && grep -v "^round [0-9]* rank" "$FLEET_DIR/$name.out" >"$out/$name.rounds"
}

# The first round of a cached run is measured; warm with one round first.
"$ask" --sockets="$(fleet_sockets)" --peers="$(fleet_peers)" --ranks_per_daemon="$per" \
  --group=warm --count=4096 --candidates=all_reduce/one_shot >/dev/null 2>&1
run cached "$cached_rounds" --count=4096
run measured "$measured_rounds" --new_problem_each_round
fleet_delay "$delay_ms" || exit 1
run "cached_delay${delay_ms}ms" $((cached_rounds / 4)) --count=4096
run "measured_delay${delay_ms}ms" $((measured_rounds / 4)) --new_problem_each_round
fleet_delay_off
[ $fail -eq 0 ] || echo "FAIL: some round's ranks got different answers" | report
exit $fail
