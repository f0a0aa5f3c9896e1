#!/bin/bash
# One GPU, the client round: the ranks' own candidates timed on the GPU
# beside the daemon's (bench/client_round_gpu.py: NCCL as a client candidate
# and the daemon's all_reduce/nccl in one problem, both timing modes), the
# rank side's CUDA timing test, the Inductor integration's costs beside
# PyTorch 2.11's own collective autotuning (world 1), and the compile
# acceptance example on one rank.
#
#   bash bench/client_round_check.sh BIN_DIR PY_DIR OUT_DIR
#
# BIN_DIR, PY_DIR as for bench/one_gpu_check.sh. Exits non-zero when a step
# failed.
. "$(dirname "$0")/gpu_steps.sh"
export PYTHONPATH="$PYDIR"
HERE=$(cd "$(dirname "$0")/.." && pwd)
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; "$PY" -c 'import torch; print(torch.__version__)'; } > "$OUT/env.txt" 2>&1

DIR=$(mktemp -d)
export AUTOTUNED_SOCKET=$DIR/autotuned.sock
"$BIN/autotuned" --backend=cuda --socket="$AUTOTUNED_SOCKET" --cache_dir="$DIR/cache" --log_level=info > "$OUT/daemon.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do "$BIN/autotunectl" "--socket=$AUTOTUNED_SOCKET" info > /dev/null 2>&1 && break; sleep 0.2; done

step client_round timeout 240 "$PY" "$HERE/bench/client_round_gpu.py" "$OUT/client_round.json"
if "$PY" -c 'import pytest' 2> /dev/null; then
  step rankrun_cuda_test timeout 120 "$PY" -m pytest -q -k cuda "$HERE/client/python/tests/rankrun_unit_test.py"
else
  echo "rankrun_cuda_test: skipped (no pytest in $PY)" | tee -a "$OUT/summary.txt"
fi
step inductor_bench timeout 300 "$PY" "$HERE/bench/inductor_integration.py" --world 1 --device cuda \
  --socket "$AUTOTUNED_SOCKET" --compiles 3
step compile_acceptance timeout 300 "$PY" -m torch.distributed.run --standalone --nproc_per_node=1 \
  "$HERE/client/python/examples/gpu_compile_acceptance.py" --socket "$AUTOTUNED_SOCKET"
kill -TERM $daemon; wait $daemon; echo "daemon exit: $?" >> "$OUT/summary.txt"
exit $failed
