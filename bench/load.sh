#!/bin/sh
# Load benchmark: one daemon on the sim backend (4 virtual GPUs), 64
# concurrent clients for 60 s, mostly cache hits plus one miss in 50
# requests. Writes bench/results/load_sim.txt: a header with the command, the
# machine and the date, then load_bench's figures (throughput, p50/p99
# latency, errors, daemon RSS before and after).
#
#   bench/load.sh [CLIENTS] [SECONDS] [MISS_EVERY]     (64 60 50; 0: no misses)
set -eu
case "${1:-}" in
  -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
esac
clients=${1:-64}
seconds=${2:-60}
miss_every=${3:-50}
# Checked before anything runs: a bad value would fail load_bench after the
# build and the daemon's start, and leave a broken bench/results/load_sim.txt.
number() {  # NAME VALUE LOWEST
  case "$2" in
    ''|*[!0-9]*) ;;
    *) [ "$2" -ge "$3" ] && return 0 ;;
  esac
  echo "load: $1 must be a whole number from $3, got \"$2\" (see --help)" >&2
  exit 2
}
number CLIENTS "$clients" 1
number SECONDS "$seconds" 1
number MISS_EVERY "$miss_every" 0
if [ $# -gt 3 ]; then
  echo "load: three arguments at most, CLIENTS SECONDS MISS_EVERY (see --help)" >&2
  exit 2
fi
cd "$(dirname "$0")/.."

bazel build //daemon:autotuned //bench:load_bench
dir=$(mktemp -d /tmp/autotuned-load-XXXXXX)
bazel-bin/daemon/autotuned --backend=sim --sim_gpus=4 --socket="$dir/autotuned.sock" \
  --cache_dir="$dir/cache" --log_level=warn 2> "$dir/daemon.log" &
daemon=$!
trap 'kill $daemon 2>/dev/null || true; rm -rf "$dir"' EXIT
i=0
until [ -S "$dir/autotuned.sock" ]; do
  i=$((i + 1))
  if [ $i -gt 200 ] || ! kill -0 $daemon 2>/dev/null; then
    echo "load: the daemon did not come up" >&2; cat "$dir/daemon.log" >&2; exit 1
  fi
  sleep 0.05
done

out=bench/results/load_sim.txt
mkdir -p bench/results
cmd="bench/load.sh $clients $seconds $miss_every  (load_bench --clients=$clients --duration=${seconds}s --miss_every=$miss_every against autotuned --backend=sim --sim_gpus=4)"
{
  echo "# command: $cmd"
  echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/ {print $2}') GiB; clients and daemon share it"
  echo "# date:    $(date -u +%Y-%m-%dT%H:%M:%SZ); load average before the run: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine, if any)"
  echo "# commit:  $(git rev-parse --short HEAD 2>/dev/null || echo unknown) (plus uncommitted changes, if any)"
} > "$out.tmp"
status=0
bazel-bin/bench/load_bench --socket="$dir/autotuned.sock" --clients="$clients" \
  --duration="${seconds}s" --miss_every="$miss_every" --daemon_pid=$daemon >> "$out.tmp" || status=$?
kill -TERM $daemon
wait $daemon || { echo "load: the daemon exited with $?" >&2; status=1; }
trap 'rm -rf "$dir"' EXIT
mv "$out.tmp" "$out"
cat "$out"
exit $status
