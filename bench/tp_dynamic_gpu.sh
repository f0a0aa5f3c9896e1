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
# cache), *.log, daemon.log; then OUT_DIR/report.md
# (bench/tp_dynamic_gpu_report.py), env.txt, steps.log. About 4 minutes
# with the defaults.
# Environment: TP_BENCH_STEP_S (300: each run's limit), TP_BENCH_REPS (2),
# TP_BENCH_ARGS (more arguments for bench/tp_dynamic_gpu.py, e.g.
# "--tokens 8 128 1024 --split_points 32 256").
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/steps.sh
. "$HERE/steps.sh"
if [ $# -eq 3 ]; then
  set -- "$@" 2
fi
gpu_begin bench/tp_dynamic_gpu.sh "$@"
LIMIT=${TP_BENCH_STEP_S:-300}
REPS=${TP_BENCH_REPS:-2}
read -r -a EXTRA <<< "${TP_BENCH_ARGS:-}"
{ date -u; nvidia-smi -L
  "$PYTHON" -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
  sha256sum "$BIN/autotuned" "$AUTOTUNED_KERNELS_LIB"
  echo "worlds: ${WORLDS[*]}  reps: $REPS  args: ${EXTRA[*]}"; } >> "$OUT/env.txt" 2>&1

SOCK=/tmp/at-tp-dynamic.sock
CACHE=$(mktemp -d /tmp/at-tp-dynamic-cache.XXXXXX) || exit 2
finish() {
  daemon_stop
  rm -rf "$CACHE"
}
trap finish EXIT

for W in "${WORLDS[@]}"; do
  D=$OUT/w$W
  mkdir -p "$D"
  export CUDA_VISIBLE_DEVICES
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((W - 1)))
  daemon_start "$D/daemon.log" --cache_dir="$CACHE" --log_level=info
  run=("$PYTHON" -m torch.distributed.run --standalone --nproc_per_node="$W"
       "$HERE/tp_dynamic_gpu.py" --socket "$SOCK" "${EXTRA[@]}")
  for rep in $(seq "$REPS"); do
    for mode in single ranges; do
      step "w$W $mode $rep" "$LIMIT" "$D/${mode}_$rep.log" "${run[@]}" --mode "$mode" \
        --out "$D/${mode}_$rep.json"
    done
  done
  daemon_stop
done
"$PYTHON" "$HERE/tp_dynamic_gpu_report.py" "$OUT" > "$OUT/report.md" 2>&1
cat "$OUT/steps.log"
cat "$OUT/report.md"
