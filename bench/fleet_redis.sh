#!/bin/sh
# The fleet cache's latency against a local redis-server: Lookup hit and
# miss, and Publish, over a Unix socket and TCP on loopback (p50, p99, mean
# in microseconds). Writes OUT/figures.txt: a header with the command, the
# machine and the date, then fleet_redis_bench's lines.
#
#   bench/fleet_redis.sh OUT [ROUNDS]        (ROUNDS 20000)
set -eu
cd "$(dirname "$0")/.."
out=${1:?usage: bench/fleet_redis.sh OUT [ROUNDS]}
rounds=${2:-20000}
command -v redis-server >/dev/null || { echo "fleet_redis: no redis-server (deploy/setup.sh)" >&2; exit 1; }
bazel build --jobs=2 //bench:fleet_redis_bench
mkdir -p "$out"
{
  echo "# command: bench/fleet_redis.sh $out $rounds"
  echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -r)"
  echo "# date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "# load average before (1, 5, 15 min): $(cut -d" " -f1-3 /proc/loadavg)"
  bazel-bin/bench/fleet_redis_bench "$rounds"
} > "$out/figures.txt"
cat "$out/figures.txt"
