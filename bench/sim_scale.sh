#!/usr/bin/env bash
# The cross-daemon scale check on the sim backend (no GPU): one group over
# several daemons on this host, every rank asking at once, for each shape
# DAEMONSxRANKS_PER_DAEMON given (default: 2x4 4x2 2x8 4x8), through
# tests/cross_daemon_test.sh (identical answers on every rank, TUNED, then
# CACHED, then TUNED at another size). Prints a header (command, machine,
# date, commit) and each shape's output with its wall time.
#
#   bash bench/sim_scale.sh [SHAPE...] > bench/results/sim_scale.txt
#
# Builds //daemon:autotuned, //client/cli:autotunectl and
# //tests:cross_daemon_ask with Bazel first.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
bazel build //daemon:autotuned //client/cli:autotunectl //tests:cross_daemon_ask >&2 || exit 2
bin=$(bazel info bazel-bin 2>/dev/null)
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=(2x4 4x2 2x8 4x8)
echo "# bash bench/sim_scale.sh ${shapes[*]}"
echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
fail=0
for shape in "${shapes[@]}"; do
  d=${shape%x*} k=${shape#*x}
  echo
  echo "## $d daemons x $k virtual GPUs = $((d * k)) ranks"
  s=$(date +%s%N)
  BACKEND=sim DAEMONS=$d RANKS_PER_DAEMON=$k bash tests/cross_daemon_test.sh \
    "$bin/daemon/autotuned" "$bin/client/cli/autotunectl" "$bin/tests/cross_daemon_ask" \
    | grep -v '^\[20' || fail=1
  echo "## $shape: $(( ($(date +%s%N) - s) / 1000000 )) ms in all"
done
exit $fail
