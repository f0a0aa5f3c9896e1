#!/usr/bin/env bash
# A compiled stack of tensor-parallel layers with plain functional
# collectives, autotuned's Inductor integration off and on, each run in a
# fresh process (bench/tp_layers_gpu.py), on 2 and 4 GPUs of one host, run
# from the repository root there with binaries built elsewhere
# (--config=static) and carried:
#
#   bash bench/tp_layers_gpu.sh BIN_DIR PY_DIR OUT_DIR [WORLD...]  (default: 2 4, as GPUs allow)
#
# BIN_DIR: autotuned, autotunectl, libautotuned_kernels_abi.so, and
#          libautotuned_torch_ops.so (default-config build of
#          //client/torch_ops; found next to the kernels library through
#          AUTOTUNED_KERNELS_LIB): the C++ torch ops; without it the Python
#          ops run. Each JSON's "ops_backend" says which.
# PY_DIR:  the client package with its generated stubs (on PYTHONPATH)
# Per world W, in OUT_DIR/wW/: off_R.json, on_cuda_graph_R.json,
# on_event_loop_R.json (R = 1..REPS, in that order, then again: autotuned
# deciding by GPU time for a graph replayed under CUDA graphs, and by eager
# time for a graph run eagerly; the report takes the graph figures of the
# first, the eager figures of the second; the daemon's cache is kept from
# one run to the next, so the first run of each measures and the later ones
# are answered from the cache), *.log, daemon.log; then OUT_DIR/report.md
# (bench/tp_layers_gpu_report.py), env.txt, steps.log.
# Environment: TP_BENCH_STEP_S (420: each run's limit), TP_BENCH_REPS (2),
# TP_BENCH_ARGS (more arguments for bench/tp_layers_gpu.py, e.g.
# "--tokens 1 64 1024").
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/steps.sh
. "$HERE/steps.sh"
gpu_begin bench/tp_layers_gpu.sh "$@"
tp_setup tp-layers 420

for W in "${WORLDS[@]}"; do
  tp_world "$W" "$HERE/tp_layers_gpu.py"
  for rep in $(seq "$REPS"); do
    step "w$W off $rep" "$LIMIT" "$D/off_$rep.log" "${run[@]}" --mode off \
      --out "$D/off_$rep.json"
    for timing in cuda_graph event_loop; do
      step "w$W on $timing $rep" "$LIMIT" "$D/on_${timing}_$rep.log" "${run[@]}" --mode on \
        --timing "$timing" --out "$D/on_${timing}_$rep.json"
    done
  done
  daemon_stop
done
"$PYTHON" "$HERE/tp_layers_gpu_report.py" "$OUT" > "$OUT/report.md" 2>&1
cat "$OUT/steps.log"
cat "$OUT/report.md"
