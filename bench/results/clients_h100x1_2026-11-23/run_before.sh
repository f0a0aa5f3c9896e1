#!/bin/bash
# One-GPU smoke run of the Python clients against the cuda daemon (1 rank).
B=.carry/gpu/bin
PY=/opt/torch/.venv/bin/python3
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export LD_LIBRARY_PATH=$($PY -c 'import nvidia.nccl,os;print(os.path.join(nvidia.nccl.__path__[0],"lib"))')
export PYTHONPATH=.carry/gpu/python AUTOTUNED_KERNELS_LIB=$B/libautotuned_kernels_abi.so
date -u > $OUT/env.txt; nvidia-smi -L >> $OUT/env.txt
$B/autotuned --socket=/tmp/a.sock --no_cache --log_level=info > $OUT/daemon.log 2>&1 &
D=$!
for i in $(seq 100); do [ -S /tmp/a.sock ] && break; sleep 0.2; done
s=$SECONDS
timeout 300 $PY -m torch.distributed.run --standalone --nproc_per_node=1 \
  .carry/gpu/python/examples/gpu_compile_acceptance.py --socket /tmp/a.sock > $OUT/compile_w1.log 2>&1
echo "compile rc=$? $((SECONDS - s))s"; grep -E "^\[|^==" $OUT/compile_w1.log | cut -c1-400 | head -40
s=$SECONDS
timeout 200 $PY -m torch.distributed.run --standalone --nproc_per_node=1 \
  .carry/gpu/python/examples/vllm_worker.py --socket /tmp/a.sock --save $OUT/vllm_w1 > $OUT/vllm_w1.log 2>&1
echo "vllm rc=$? $((SECONDS - s))s"; tail -25 $OUT/vllm_w1.log | cut -c1-300
kill -TERM $D; sleep 3; kill -9 $D 2>/dev/null
grep -c "round=" $OUT/daemon.log
