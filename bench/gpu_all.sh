#!/usr/bin/env bash
# Everything this project checks on a 2-GPU host, in one command run from the
# repository root there (the machine has no Bazel: binaries are built
# elsewhere with --config=static and carried):
#
#   bash bench/gpu_all.sh BIN_DIR PY_DIR OUT_DIR
#
# BIN_DIR: autotuned, autotunectl, p2p_bench, p2p_gpu_test, gpu_node_gpu_test,
#          gpu_watchdog_gpu_test, libautotuned_kernels_abi.so, nvlink_ceiling,
#          launch_floor, cross_daemon_ask
# PY_DIR:  client/python with its stubs (client/python/gen_stubs.sh PY_DIR)
# OUT_DIR: created; receives
#   steps.log                  every step's exit status and duration
#   tests/*.txt                the Catch2 GPU tests' output,
#                              tests/cross_daemon_test.sh (two daemons, one GPU each)
#                              and client/python/tests/gpu_kernels_test.py (the
#                              kernels as torch ops, 2 processes, against NCCL)
#                              and rankrun_unit_test.py -k cuda (a rank's timing
#                              of a kernel of known length)
#   nvlink_ceiling.txt         what the two GPUs move over NVLink (bench/nvlink_ceiling.cu)
#   launch_floor.txt           the event loop's launch floor, eager against graph
#                              (bench/launch_floor.cu)
#   sweep/                     bench/gpu_run.sh: daemon sweeps, p2p_bench (NCCL
#                              measured independently), PyTorch NCCL and symm-mem,
#                              gpu_report.md
#   compile_acceptance.log     client/python/examples/gpu_compile_acceptance.py
#                              (daemon immediate, daemon deferred, PyTorch's own)
#   vllm_table.{txt,jsonl}     the vLLM helper's all_reduce bf16 table on this
#   vllm_worker.log            host (examples/vllm_worker.py --save)
#   vllm_worker_symm_mem.log   the same worker with PyTorch's symm-mem ops as
#   vllm_table_symm_mem.{txt,jsonl}  its one-shot / two-shot (--symm_mem)
#   vllm_ranges.txt            both tables' ranges checked: no range's candidate
#                              measurably slower than another at a size inside
#                              it (bench/vllm_table_report.py)
#   daemon.log                 the daemon serving the last two steps
#   regret/                    bench/regret_gpu.sh on the 2 GPUs: each tuner's
#                              decisions against every choice timed alone
# Every step runs under `timeout`; a failing step is logged and the next runs.
set -u
if [ $# -ne 3 ]; then
  echo "usage: bash bench/gpu_all.sh BIN_DIR PY_DIR OUT_DIR" >&2
  exit 2
fi
T0=$SECONDS
# shellcheck source=bench/steps.sh
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
gpu_setup "$1" "$2" "$3" || exit 2
mkdir -p "$OUT/tests" || exit 2
SOCK=${AT_SOCK:-/tmp/at-all.sock}

{ date -u; nvidia-smi -L; "$PYTHON" -c 'import torch; print("torch", torch.__version__)'; } \
  > "$OUT/env.txt" 2>&1

step p2p_gpu_test 120 "$OUT/tests/p2p_gpu_test.txt" "$BIN/p2p_gpu_test"
step gpu_node_gpu_test 240 "$OUT/tests/gpu_node_gpu_test.txt" "$BIN/gpu_node_gpu_test"
step gpu_watchdog_gpu_test 240 "$OUT/tests/gpu_watchdog_gpu_test.txt" "$BIN/gpu_watchdog_gpu_test"
step cross_daemon 180 "$OUT/tests/cross_daemon_test.txt" \
  bash tests/cross_daemon_test.sh "$BIN/autotuned" "$BIN/autotunectl" "$BIN/cross_daemon_ask"
step nvlink_ceiling 120 "$OUT/nvlink_ceiling.txt" "$BIN/nvlink_ceiling" 256 20
step launch_floor 120 "$OUT/launch_floor.txt" "$BIN/launch_floor"
step gpu_run 420 "$OUT/gpu_run.log" env PYTHON="$PYTHON" bash bench/gpu_run.sh "$BIN" "$OUT/sweep"

# The Python clients against one daemon (cuda backend, cache off).
rm -f "$SOCK"
"$BIN/autotuned" --socket="$SOCK" --no_cache --log_level=info > "$OUT/daemon.log" 2>&1 &
DPID=$!
for _ in $(seq 300); do [ -S "$SOCK" ] && break; sleep 0.1; done
export PYTHONPATH="$PY_DIR" AUTOTUNED_KERNELS_LIB="$BIN/libautotuned_kernels_abi.so"
run2=("$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=2)
# The kernels as torch ops in the user's processes (CUDA IPC), against NCCL.
step gpu_kernels_test 240 "$OUT/tests/gpu_kernels_test.txt" \
  "${run2[@]}" "$PY_DIR/tests/gpu_kernels_test.py"
# A rank's timing of a kernel of known length, both modes, three sizes (1 GPU).
step rankrun_cuda_test 200 "$OUT/tests/rankrun_cuda_test.txt" env CUDA_VISIBLE_DEVICES=0 \
  "$PYTHON" -m pytest -q -s -k cuda "$PY_DIR/tests/rankrun_unit_test.py"
step compile_acceptance 300 "$OUT/compile_acceptance.log" \
  "${run2[@]}" "$PY_DIR/examples/gpu_compile_acceptance.py" --socket "$SOCK"
step vllm_worker 240 "$OUT/vllm_worker.log" \
  "${run2[@]}" "$PY_DIR/examples/vllm_worker.py" --socket "$SOCK" --save "$OUT/vllm_table"
step vllm_worker_symm_mem 240 "$OUT/vllm_worker_symm_mem.log" \
  "${run2[@]}" "$PY_DIR/examples/vllm_worker.py" --socket "$SOCK" --symm_mem \
  --save "$OUT/vllm_table_symm_mem"
for t in vllm_table vllm_table_symm_mem; do
  echo "## $t"
  "$PYTHON" "$(dirname "$0")/vllm_table_report.py" "$OUT/$t.jsonl"
done > "$OUT/vllm_ranges.txt" 2>&1
kill -TERM "$DPID" 2>/dev/null
for _ in $(seq 200); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
kill -KILL "$DPID" 2>/dev/null
# The decisions' regret against each choice timed alone, on these 2 GPUs
# (its own daemons).
step regret 560 "$OUT/regret.log" env PYTHON="$PYTHON" \
  bash bench/regret_gpu.sh "$BIN" "$PY_DIR" "$OUT/regret" 2
echo "total ${SECONDS}s (from ${T0}s)" >> "$OUT/steps.log"
cat "$OUT/steps.log"
