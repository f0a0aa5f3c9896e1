#!/bin/bash
# One GPU, after a change that moved code but should not change behaviour:
# the GPU tests (the P2P ones with two ranks sharing the GPU), then the cuda
# daemon answering world-1 rounds in both timing modes, every collective,
# through autotunectl and through the Python client, and the Python kernels
# package loading its library under PyTorch with CUDA.
#
#   bash bench/one_gpu_check.sh BIN_DIR PY_DIR OUT_DIR
#
# BIN_DIR: `bazel build --config=static` of //daemon:autotuned
# //client/cli:autotunectl //kernels:p2p_gpu_test //kernels:pattern_kernels_gpu_test
# //daemon/measure/backend/cuda/worker:gpu_node_gpu_test
# //daemon/measure/backend/cuda/worker:gpu_watchdog_gpu_test
# //kernels:libautotuned_kernels_abi.so; PY_DIR: client/python with its stubs
# (client/python/gen_stubs.sh PY_DIR). Exits non-zero when a step failed.
. "$(dirname "$0")/gpu_steps.sh"
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$OUT/env.txt" 2>&1

for t in pattern_kernels_gpu_test p2p_gpu_test gpu_node_gpu_test gpu_watchdog_gpu_test; do
  step "$t" timeout 300 "$BIN/$t"
done

SOCK=$(mktemp -d)/autotuned.sock
"$BIN/autotuned" --backend=cuda --socket="$SOCK" --no_cache --log_level=info > "$OUT/daemon.log" 2>&1 &
daemon=$!
CTL=("$BIN/autotunectl" "--socket=$SOCK" --connect_timeout=3s)
for _ in $(seq 100); do "${CTL[@]}" info > /dev/null 2>&1 && break; sleep 0.2; done
step info "${CTL[@]}" info
tune_all() {
  local timing=$1
  "${CTL[@]}" tune --world=1 --timing="$timing" --collective=all_reduce --dtype=bfloat16 --bytes=1MiB || return 1
  for c in all_gather reduce_scatter all_to_all broadcast; do
    "${CTL[@]}" tune --world=1 --timing="$timing" --collective=$c --dtype=float32 --bytes=256KiB || return 1
  done
}
step tune_event_loop tune_all event_loop
step tune_cuda_graph tune_all cuda_graph
step sweep "${CTL[@]}" sweep --world=1 --collective=all_reduce --dtype=bfloat16 --from=8KiB --to=8MiB
step python_client env PYTHONPATH="$PYDIR" AUTOTUNED_SOCKET="$SOCK" "$PY" -c '
import autotuned
with autotuned.Client() as c:
    info = c.node_info()
    print("backend", info.backend, "gpus", len(info.gpus))
'
step python_kernels env PYTHONPATH="$PYDIR" AUTOTUNED_KERNELS_LIB="$BIN/libautotuned_kernels_abi.so" "$PY" -c '
import torch, autotuned.kernels as k
from autotuned.dispatch import Dispatcher
lib = k.load_library()
print("library", lib.path, "version", hex(lib.version), "cuda", torch.cuda.is_available())
assert torch.cuda.is_available()
print("ops", sorted(n for n in dir(torch.ops.autotuned) if not n.startswith("_")))
'
kill -TERM "$daemon"; wait "$daemon"; echo "daemon exit: $?" >> "$OUT/summary.txt"
echo "failed steps: $failed" | tee -a "$OUT/summary.txt"
[ "$failed" -eq 0 ]
