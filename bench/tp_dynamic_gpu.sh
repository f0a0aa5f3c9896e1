#!/usr/bin/env bash
# The compiled tensor-parallel stack with a dynamic token dimension
# (bench/tp_dynamic_gpu.py): a winner per size range against one winner for
# every size, each run in a fresh process, on 2 GPUs of one host (or the
# world sizes given), run from the repository root there with binaries
# built elsewhere (--config=static) and carried:
#
#   bash bench/tp_dynamic_gpu.sh BIN_DIR PY_DIR OUT_DIR [WORLD...]  (default: 2)
#
# BIN_DIR: autotuned, autotunectl, libautotuned_kernels_abi.so
# PY_DIR:  the client package with its generated stubs (on PYTHONPATH)
# Per world W, in OUT_DIR/wW/: single_R.json, ranges_R.json (R = 1..REPS,
# alternating; the daemon's cache is kept from one run to the next, so the
# first run of each mode measures and the later ones are answered from the
# cache; each mode has its own Inductor cache, kept from one run of it to
# the next, so that neither mode starts with the other's graphs),
# *.log, daemon.log; then OUT_DIR/report.md
# (bench/tp_dynamic_gpu_report.py), env.txt, steps.log. About 4 minutes
# with the defaults.
# Environment: TP_BENCH_STEP_S (300: each run's limit), TP_BENCH_REPS (2),
# TP_BENCH_ARGS (more arguments for bench/tp_dynamic_gpu.py, e.g.
# "--tokens 8 128 1024 --split_points 32 256", or "--split_points" alone:
# the op registered without split points, ranged by the integration).
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/steps.sh
. "$HERE/steps.sh"
if [ $# -eq 3 ]; then
  set -- "$@" 2
fi
gpu_begin bench/tp_dynamic_gpu.sh "$@"
tp_setup tp-dynamic 300

for W in "${WORLDS[@]}"; do
  tp_world "$W" "$HERE/tp_dynamic_gpu.py"
  for rep in $(seq "$REPS"); do
    for mode in single ranges; do
      TORCHINDUCTOR_CACHE_DIR=$CACHE/inductor_$mode step "w$W $mode $rep" "$LIMIT" "$D/${mode}_$rep.log" "${run[@]}" --mode "$mode" \
        --out "$D/${mode}_$rep.json"
    done
  done
  daemon_stop
done
"$PYTHON" "$HERE/tp_dynamic_gpu_report.py" "$OUT" > "$OUT/report.md" 2>&1
cat "$OUT/steps.log"
cat "$OUT/report.md"
