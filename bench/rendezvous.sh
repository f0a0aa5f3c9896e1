#!/bin/bash
# Rendezvous benchmark on the sim backend with the real daemon binary over
# real sockets. Writes bench/results/rendezvous_bench.txt: a header (command,
# machine, date, commit), then:
#   1. cache-hit latency, one client over the Unix socket (rendezvous_bench
#      --mode=hit), then 32 concurrent clients for 10 s (load_bench
#      --miss_every=0: cache hits only);
#   2. per-rank round coordination overhead: 4 ranks on one daemon, then
#      3 daemons on loopback x 2 ranks (rendezvous_bench --mode=round);
#   3. a batch of 5 problems on 2 ranks (one daemon);
#   4. N daemons on loopback, 1 rank each, the leader with --sim_gpus=N
#      (N from NS, default "8 16 64").
# Since rounds of a group spread over daemons are measured across the
# daemons (each its own ranks, buffers exchanged through the leader), the
# per-rank rounds of 2b and 4 include that exchange, while the whole_group
# call they are paired with is measured by the leader alone; the former 4b
# (a 1-GPU leader falling back without measuring) no longer exists: such a
# leader measures across the daemons too.
#
#   bench/rendezvous.sh [ROUNDS] [NS]      (30 "8 16 64")
#
# AUTOTUNED_BIN=DIR takes prebuilt binaries from DIR (autotuned, load_bench,
# rendezvous_bench; for a machine without Bazel) instead of building them, and
# AUTOTUNED_OUT=FILE writes the results there instead.
set -eu
cd "$(dirname "$0")/.."
rounds=${1:-30}
ns=${2:-"8 16 64"}
token="peer-token-for-the-rendezvous-bench"

if [ -n "${AUTOTUNED_BIN:-}" ]; then
  daemon=$AUTOTUNED_BIN/autotuned load=$AUTOTUNED_BIN/load_bench bench=$AUTOTUNED_BIN/rendezvous_bench
else
  bazel build //daemon:autotuned //bench:load_bench //bench:rendezvous_bench
  daemon=bazel-bin/daemon/autotuned load=bazel-bin/bench/load_bench bench=bazel-bin/bench/rendezvous_bench
fi
root=$(mktemp -d /tmp/autotuned-rdv-XXXXXX)
pids=()
stop_all() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap 'stop_all; rm -rf "$root"' EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# plan_peers N -> planned=(N free loopback addresses), every daemon's peers
plan_peers() {
  planned=(); peer_lines=""
  for ((i = 0; i < $1; i++)); do
    planned+=("127.0.0.1:$(free_port)")
    peer_lines+="peers: \"${planned[$i]}\""$'\n'
  done
}

# start NAME GPUS [PEER]  -> sets $sock (and $peer = PEER, one of $planned)
start() {
  local name=$1 gpus=$2 peered=${3:-} dir="$root/$1"
  mkdir -p "$dir"
  sock="$dir/s.sock"
  local args=(--backend=sim --sim_gpus="$gpus" --socket="$sock" --log_level="${LOG_LEVEL:-warn}")
  if [ "$name" = hit ]; then args+=(--cache_dir="$dir/cache"); else args+=(--no_cache); fi
  if [ -n "$peered" ]; then
    peer=$peered
    printf 'peer_token: "%s"\npeer_advertise: "%s"\n%s' "$token" "$peer" "$peer_lines" > "$dir/conf"
    args+=(--config="$dir/conf" --peer_listen="$peer")
  fi
  "$daemon" "${args[@]}" > "$dir/log" 2>&1 &
  local p=$!
  pids+=("$p")
  local i=0
  until [ -S "$sock" ]; do
    i=$((i + 1))
    if [ $i -gt 600 ] || ! kill -0 $p 2>/dev/null; then
      echo "rendezvous: daemon $name did not come up" >&2; cat "$dir/log" >&2; return 1
    fi
    sleep 0.05
  done
}

out=${AUTOTUNED_OUT:-bench/results/rendezvous_bench.txt}
mkdir -p "$(dirname "$out")"
{
  echo "# command: bench/rendezvous.sh $rounds \"$ns\""
  echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/ {print $2}') GiB; clients and daemons share it"
  echo "# date:    $(date -u +%Y-%m-%dT%H:%M:%SZ); load average before the run: $(cut -d' ' -f1-3 /proc/loadavg) "
  echo "# commit:  ${AUTOTUNED_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)} (plus uncommitted changes, if any)"
  echo "# daemons: $daemon --backend=sim, Unix sockets for clients, peer ports on 127.0.0.1;"
  echo "#          all client latencies are taken client side (steady_clock around the gRPC Tune call)."
} > "$out.tmp"
status=0
section() { echo; echo "== $*"; } >> "$out.tmp"

# 1. Cache hits.
section "1. cache hits over the Unix socket (daemon --sim_gpus=4, cache on; request: whole group of 4, all_reduce float32 1 MiB, 2 candidates)"
start hit 4
$bench --mode=hit --sockets="$sock" --calls=5000 >> "$out.tmp" 2>&1 || status=1
echo "-- 32 concurrent clients, 10 s, cache hits only (load_bench --clients=32 --duration=10s --miss_every=0 --hot=16; whole group of 4, all_reduce float32 4-64 KiB, 3 candidates):" >> "$out.tmp"
"$load" --socket="$sock" --clients=32 --duration=10s --miss_every=0 \
  --daemon_pid="${pids[0]}" >> "$out.tmp" 2>&1 || status=1
stop_all

# 2a. 4 ranks on one daemon.
section "2a. per-rank round, 4 ranks on one daemon (--sim_gpus=4 --no_cache: every round measured)"
LOG_LEVEL=info start one 4
$bench --mode=round --sockets="$sock" --ranks_per_daemon=4 --problems=1 --rounds="$rounds" \
  --latencies_out="$root/one.lat" \
  --title="per-rank round vs whole_group, one daemon" >> "$out.tmp" 2>&1 || status=1
stop_all
python3 bench/rendezvous_pair.py "$root/one.lat" "$root/one/log" >> "$out.tmp" 2>&1 || status=1
# 3. batch of 5 problems on 2 ranks, its own daemon (--sim_gpus=2).
section "3. batch of 5 problems on 2 ranks (one daemon --sim_gpus=2 --no_cache; each round 5 fresh problems)"
LOG_LEVEL=info start batch 2
$bench --mode=round --sockets="$sock" --ranks_per_daemon=2 --problems=5 --rounds=10 \
  --latencies_out="$root/batch.lat" \
  --base_count=65536 --title="batch of 5 problems, 2 ranks on one daemon" >> "$out.tmp" 2>&1 || status=1
stop_all
python3 bench/rendezvous_pair.py "$root/batch.lat" "$root/batch/log" >> "$out.tmp" 2>&1 || status=1

# 2b. 3 daemons x 2 ranks.
section "2b. per-rank round, 3 daemons on loopback x 2 ranks (leader --sim_gpus=6, followers 2, --no_cache)"
socks=(); peers=()
plan_peers 3
LOG_LEVEL=info start d0 6 "${planned[0]}"; socks+=("$sock"); peers+=("$peer")
start d1 2 "${planned[1]}"; socks+=("$sock"); peers+=("$peer")
start d2 2 "${planned[2]}"; socks+=("$sock"); peers+=("$peer")
$bench --mode=round --sockets="$(IFS=,; echo "${socks[*]}")" --peers="$(IFS=,; echo "${peers[*]}")" \
  --ranks_per_daemon=2 --problems=1 --rounds="$rounds" --latencies_out="$root/d.lat" \
  --title="per-rank round vs whole_group at the leader, 3 daemons" >> "$out.tmp" 2>&1 || status=1
stop_all
python3 bench/rendezvous_pair.py "$root/d.lat" "$root/d0/log" >> "$out.tmp" 2>&1 || status=1

# 4. N daemons, 1 rank each.
for n in $ns; do
  section "4. N = $n daemons on loopback, 1 rank each (leader --sim_gpus=$n, followers 1, --no_cache)"
  socks=(); peers=(); ok=1
  plan_peers "$n"
  for ((h = 0; h < n; h++)); do
    if ! LOG_LEVEL=$([ $h -eq 0 ] && echo info || echo warn) start "n$n-$h" $([ $h -eq 0 ] && echo "$n" || echo 1) "${planned[$h]}" 2>> "$out.tmp"; then ok=0; break; fi
    socks+=("$sock"); peers+=("$peer")
  done
  if [ $ok = 1 ]; then
    r=$([ "$n" -ge 64 ] && echo 5 || echo 10)
    timeout 300 $bench --mode=round --sockets="$(IFS=,; echo "${socks[*]}")" \
      --peers="$(IFS=,; echo "${peers[*]}")" --ranks_per_daemon=1 --problems=1 --rounds="$r" \
      --latencies_out="$root/n$n.lat" \
      --title="$n daemons x 1 rank" >> "$out.tmp" 2>&1 || { echo "(rendezvous_bench exited $?)" >> "$out.tmp"; status=1; }
  else
    echo "NOT MEASURED: not every one of the $n daemons came up" >> "$out.tmp"; status=1
  fi
  stop_all
  [ -f "$root/n$n.lat" ] && { python3 bench/rendezvous_pair.py "$root/n$n.lat" "$root/n$n-0/log" >> "$out.tmp" 2>&1 || status=1; }
done

{
  echo
  echo "# load average after the run: $(cut -d' ' -f1-3 /proc/loadavg)"
  cat <<'NOTES'
# How each figure is measured (rendezvous_bench.cc, rendezvous_pair.py):
# - All latencies: client side, steady_clock around one blocking gRPC Tune call;
#   each rank is a thread with its own channel (own connection) to its daemon's
#   Unix socket, opened and warmed (NodeInfo) before the first round.
# - 1: the same whole-group request (already CACHED after one priming call and
#   100 uncounted calls) 5,000 times in a row from one client; throughput is
#   load_bench with 32 clients, cache hits only.
# - 2/3/4 per-rank rounds: the ranks' threads are released together at a set
#   instant (sleep, then spin); presync window 3 s, so no round falls back for
#   lateness; daemons run --no_cache and every round asks fresh problem sizes,
#   so every round is measured (TUNED). "last rank to ask" = the thread whose
#   ask was sent last: its send -> its answer. That is the rendezvous plus the
#   measurement plus one gRPC call (plus the Peer hop for a follower's rank).
# - Overhead, two estimates, both per round and paired:
#   (a) minus a whole_group request of the same problems at the leader (refresh,
#       so measured too), timed just before or just after the per-rank round,
#       alternating. It also carries one gRPC call, so (a) is the per-rank
#       path's extra cost over a whole_group call; noisy, since two separate
#       measurements of the sim backend differ by a few ms from run to run.
#   (b) minus the leader's own measuring time for that round, from its log
#       line "(ran it) ... ms=" (--log_level=info, 0.1 ms resolution; read after
#       the daemon exits, when its log is flushed). (b) still includes the last
#       rank's own gRPC call (a cache hit's round trip,
#       see 1), so it is an upper bound on the rendezvous itself.
# - The daemon's own figure (2a, 3: overhead_us= on the runner's log line; the
#   metric autotuned_round_overhead_seconds): the last rank's request reaching
#   the daemon -> every rank's answer published, minus measuring. It leaves out
#   the rank's own call transport, which (b) includes: with temporary
#   timestamps at the handler on 16 cores, a per-rank call sent after 18 ms of
#   quiet took 320-380 us from the client's send to the handler and 160-240 us
#   back, where the whole_group call, sent right after other traffic, took
#   140-150 us and 110-150 us.
# - 3: "round wall time" = first ask sent -> last answer received, 5 problems
#   per ask (all_reduce float32 256 KiB-ish, 2 candidates each), measured.
# - 4: "last ask sent -> last answer" is the figure asked for (time from the
#   last ask to the last answer). With a leader of N sim GPUs it includes the
#   leader measuring a world of N across the N daemons (its ms= line gives
#   that part; the pairing subtracts it).
# - Caveat: everything shares this machine's cores (clients, N daemons, the sim
#   backend's threads); with N = 16 or 64 daemons the 2 cores are heavily
#   oversubscribed, so these are upper bounds for a host with real cores.
NOTES
} >> "$out.tmp"
mv "$out.tmp" "$out"
cat "$out"
exit $status
