#!/bin/sh
# Load benchmark: one daemon on the sim backend (4 virtual GPUs), 64
# concurrent clients for 60 s, mostly cache hits plus one miss in 50
# requests. Writes bench/results/load_sim.txt: a header with the command, the
# machine and the date, then load_bench's figures (throughput, p50/p99
# latency, errors, daemon RSS before and after).
#
#   bench/load.sh [CLIENTS] [SECONDS] [MISS_EVERY]     (64 60 50)
set -eu
cd "$(dirname "$0")/.."
clients=${1:-64}
seconds=${2:-60}
miss_every=${3:-50}

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
