#!/bin/bash
B=.carry/gpu/bin
PY=/opt/torch/.venv/bin/python3
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export LD_LIBRARY_PATH=$($PY -c 'import nvidia.nccl,os;print(os.path.join(nvidia.nccl.__path__[0],"lib"))')
export PYTHONPATH=.carry/gpu/python AUTOTUNED_KERNELS_LIB=$B/libautotuned_kernels_abi.so
$B/autotuned --socket=/tmp/b.sock --no_cache --log_level=info > $OUT/daemon_vllm.log 2>&1 &
D=$!
for i in $(seq 100); do [ -S /tmp/b.sock ] && break; sleep 0.2; done
s=$SECONDS
timeout 200 $PY -m torch.distributed.run --standalone --nproc_per_node=1 \
  .carry/gpu/python/examples/vllm_worker.py --socket /tmp/b.sock --save $OUT/vllm_w1 > $OUT/vllm_w1.log 2>&1
echo "vllm rc=$? $((SECONDS - s))s"; grep -v "^\[rank0\]:W" $OUT/vllm_w1.log | tail -30 | cut -c1-250
$B/autotunectl plot --input=$OUT/vllm_w1.jsonl --plot=$OUT/vllm_w1.png > $OUT/plot.log 2>&1; echo "plot rc=$?"
kill -TERM $D; sleep 2; kill -9 $D 2>/dev/null
