#!/bin/sh
# Sweeps all_reduce float32 from 1 KiB to 64 MiB on the sim backend (4
# virtual GPUs) and writes the per-size table and dispatch table, with the
# command, machine and date, to the file given as $1 (default: stdout).
# The sim backend times real CPU algorithms on threads: its figures describe
# this machine's CPU and memory, not any GPU.
set -eu
cd "$(dirname "$0")/.."
out=${1:-/dev/stdout}
bazel build //daemon:autotuned //client/cli:autotunectl >/dev/null 2>&1
dir=$(mktemp -d /tmp/atsweep-XXXXXX)
bazel-bin/daemon/autotuned --socket="$dir/s.sock" --no_cache --sim_gpus=4 \
  --backend=sim >"$dir/daemon.log" 2>&1 &
daemon=$!
trap 'kill $daemon 2>/dev/null; rm -rf "$dir"' EXIT
i=0
until bazel-bin/client/cli/autotunectl --socket="$dir/s.sock" info >/dev/null 2>&1; do
  i=$((i + 1)); [ $i -lt 100 ] || { echo "daemon did not start" >&2; exit 1; }
  sleep 0.1
done
cmd="autotunectl sweep --collective=all_reduce --dtype=float32 --from=1KiB --to=64MiB --factor=2 --iters=20 --warmup=5"
{
  echo "# sim sweep: $cmd"
  echo "# daemon: autotuned --backend=sim --sim_gpus=4 --no_cache"
  echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -sr)"
  echo "# date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo
  # shellcheck disable=SC2086
  bazel-bin/client/cli/$cmd --socket="$dir/s.sock" 2>/dev/null
} >"$out"
