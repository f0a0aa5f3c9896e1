#!/bin/bash
# Regret benchmark: how good and how stable the daemon's decisions are,
# before and after intervals, margin and interleaved adaptive passes. Each
# mode runs in a fresh daemon (cache off):
#   reference  one block per candidate, many rounds (the long interleaved
#              reference: rounds x candidates, A B C, B C A, ...);
#   before     defaults { ranking: "median" min_passes: 1 max_passes: 1 }:
#              the fastest median of one block per candidate, as before;
#   after      the daemon's defaults (paired passes, min_speedup 0.01, 8
#              interleaved passes, up to 16 for close candidates).
# regret_bench prints, per problem and over all: flip rate, regret p50/p95/max
# against the reference, verdicts, and tuning cost.
#
# On the sim (default): 2 virtual GPUs; candidates are all_reduce/ring with
# rank 1 sleeping 1000 us per call (base, same), 2 %, 5 % and 20 % longer
# (the sim's SLOW_RANK fault), so the truth is known.
# With --cuda: the GPU backend, world 1 (what one GPU can time: one NCCL
# candidate per collective, so it shows the path and the cost; set WORLD and
# PROBLEMS for more GPUs, e.g. WORLD=2
# PROBLEMS='all_reduce:4096:all_reduce/nccl,all_reduce/one_shot,all_reduce/two_shot').
#
#   bench/regret.sh [--cuda] [TUNES] [ROUNDS] [OUT_DIR]     (30 20 bench/results/regret_<backend>_<host>_<date>)
#
# AUTOTUNED_BIN=DIR takes prebuilt binaries from DIR (autotuned,
# regret_bench; for a machine without Bazel) instead of building them.
set -eu
cd "$(dirname "$0")/.."
backend=sim
if [ "${1:-}" = "--cuda" ]; then backend=cuda; shift; fi
tunes=${1:-30}
rounds=${2:-20}
machine=${MACHINE:-$(hostname -s)}
out=${3:-bench/results/regret_${backend}_${machine}_$(date -u +%Y-%m-%d)}

if [ -n "${AUTOTUNED_BIN:-}" ]; then
  daemon=$AUTOTUNED_BIN/autotuned bench=$AUTOTUNED_BIN/regret_bench
else
  bazel build --jobs=2 //daemon:autotuned //bench:regret_bench
  daemon=bazel-bin/daemon/autotuned bench=bazel-bin/bench/regret_bench
fi

if [ "$backend" = sim ]; then
  world=${WORLD:-2}
  faults=""
  for f in base:0 same:0 slower2:2 slower5:5 slower20:20; do
    name=${f%%:*} pct=${f##*:}
    faults="$faults faults { name: \"all_reduce/$name\" base: \"all_reduce/ring\" kind: SLOW_RANK rank: 1 delay_us: $((1000 + 10 * pct)) }"
  done
  backend_config="backend: \"sim\" sim { gpus: 2 $faults }"
  # p NAME...: an all_reduce of 256 floats over those candidates, in order.
  p() { echo "all_reduce:256:$(printf 'all_reduce/%s,' "$@" | sed 's/,$//')"; }
  problems=${PROBLEMS:-"$(p base same);$(p slower2 base);$(p base slower2);$(p slower5 base);$(p slower20 base);$(p slower5 slower2 same base)"}
else
  world=${WORLD:-1}
  backend_config='backend: "cuda"'
  problems=${PROBLEMS:-"all_reduce:4096:all_reduce/nccl;all_reduce:1048576:all_reduce/nccl;all_gather:262144:all_gather/nccl;broadcast:262144:broadcast/nccl"}
fi

root=$(mktemp -d /tmp/autotuned-regret-XXXXXX)
pid=""
trap '[ -n "$pid" ] && kill -TERM $pid 2>/dev/null; rm -rf "$root"' EXIT
mkdir -p "$out"

# run MODE DEFAULTS ARGS...: a fresh daemon with the defaults, regret_bench ARGS.
run() {
  local mode=$1 defaults=$2
  shift 2
  local dir=$root/$mode
  mkdir -p "$dir"
  cat > "$dir/config.textproto" <<CONF
unix_socket: "$dir/s.sock"
log_level: "warn"
cache { enabled: false }
$backend_config
defaults { $defaults }
CONF
  "$daemon" --config="$dir/config.textproto" 2> "$dir/daemon.log" &
  pid=$!
  local i=0
  until [ -S "$dir/s.sock" ]; do
    i=$((i + 1))
    if [ $i -gt 600 ] || ! kill -0 $pid 2>/dev/null; then
      echo "regret: the $mode daemon did not come up" >&2; cat "$dir/daemon.log" >&2; exit 1
    fi
    sleep 0.05
  done
  cp "$dir/config.textproto" "$out/config_$mode.textproto"
  sed -i "s#$dir/s.sock#/tmp/regret/s.sock#" "$out/config_$mode.textproto"
  local start=$SECONDS
  "$bench" --socket="$dir/s.sock" --world="$world" --problems="$problems" "$@" \
    | tee "$out/$mode.txt"
  echo "# $mode: $((SECONDS - start)) s of wall time" | tee -a "$out/$mode.txt"
  kill -TERM $pid; wait $pid || true; pid=""
}

run reference 'ranking: "median" min_passes: 1 max_passes: 1 min_speedup: 0' \
  --reference_out="$out/reference_times.txt" --rounds="$rounds" --ref_iterations=50
run before 'ranking: "median" min_passes: 1 max_passes: 1 min_speedup: 0' \
  --reference_in="$out/reference_times.txt" --tunes="$tunes"
run after '' --reference_in="$out/reference_times.txt" --tunes="$tunes"

{
  echo "command: bench/regret.sh $([ $backend = cuda ] && echo '--cuda ')$tunes $rounds $out"
  echo "machine: $machine, $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')$(command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | sed 's/^/, /')"
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "world: $world; problems: $problems"
} > "$out/run.txt"
cat "$out/run.txt"
