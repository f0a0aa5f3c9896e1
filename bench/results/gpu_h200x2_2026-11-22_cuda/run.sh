#!/bin/bash
# GPU run for the cuda branch: P2P correctness (now up to 132 blocks), the
# overrun watchdog (NCCL abort + rebuild, stuck P2P kernel), the node test,
# the daemon's containment script, and p2p_bench at 64/128/132 blocks.
set -u
B=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib
export NCCL_NVLS_ENABLE=0
R=$OUT
cd "$B"; tar xzf bin.tgz
step() { local name=$1 t=$2; shift 2; local s=$(date +%s)
  timeout "$t" "$@" > "$R/$name.txt" 2>&1; local rc=$?
  printf '%-22s rc=%-4s %4ss\n' "$name" "$rc" "$(( $(date +%s) - s ))" | tee -a "$R/steps.log"; }
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; cat REV; } > "$R/info.txt" 2>&1
step p2p_bench_eager 80 ./p2p_bench --min_bytes=1048576 --max_bytes=268435456 --step=4 --iters=30 --warmup=5 --shapes=64x1024,128x1024,132x1024,128x512,132x768
step p2p_bench_graph 60 ./p2p_bench --graph --min_bytes=67108864 --max_bytes=268435456 --step=4 --iters=30 --warmup=5 --shapes=64x1024,128x1024,132x1024
step p2p_gpu_test 180 ./p2p_gpu_test
step gpu_node_gpu_test 120 ./gpu_node_gpu_test
step containment 80 bash ./gpu_containment_test.sh ./autotuned ./autotunectl
step watchdog_gpu_test 60 ./gpu_watchdog_gpu_test --durations yes
