#!/bin/bash
B=.carry/gpu/bin
PY=/opt/torch/.venv/bin/python3
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export LD_LIBRARY_PATH=$($PY -c 'import nvidia.nccl,os;print(os.path.join(nvidia.nccl.__path__[0],"lib"))')
export PYTHONPATH=.carry/gpu/python
$PY -c 'import torch; print([n for n in ("one_shot_all_reduce","one_shot_all_reduce_out","one_shot_all_reduce_copy_out","two_shot_all_reduce_","two_shot_all_reduce_out") if hasattr(torch.ops.symm_mem, n)])'
$B/autotuned --socket=/tmp/a.sock --no_cache --log_level=info > $OUT/daemon.log 2>&1 &
D=$!
for i in $(seq 100); do [ -S /tmp/a.sock ] && break; sleep 0.2; done
s=$SECONDS
timeout 300 $PY -m torch.distributed.run --standalone --nproc_per_node=1 \
  .carry/gpu/python/examples/gpu_compile_acceptance.py --socket /tmp/a.sock --modes daemon-immediate daemon-deferred pytorch > $OUT/compile_w1.log 2>&1
echo "compile rc=$? $((SECONDS - s))s"; grep -E "^\[|^==|Error" $OUT/compile_w1.log | cut -c1-500 | head -40
kill -TERM $D; sleep 2; kill -9 $D 2>/dev/null
# and the vLLM helper's table on one rank
$B/autotuned --socket=/tmp/b.sock --no_cache --log_level=info > $OUT/daemon_vllm.log 2>&1 &
D=$!
for i in $(seq 100); do [ -S /tmp/b.sock ] && break; sleep 0.2; done
s=$SECONDS
AUTOTUNED_KERNELS_LIB=$B/libautotuned_kernels_abi.so timeout 200 $PY -m torch.distributed.run --standalone --nproc_per_node=1 \
  .carry/gpu/python/examples/vllm_worker.py --socket /tmp/b.sock --save $OUT/vllm_w1 > $OUT/vllm_w1.log 2>&1
echo "vllm rc=$? $((SECONDS - s))s"; grep -v "^\[rank0\]:W" $OUT/vllm_w1.log | tail -12 | cut -c1-250
kill -TERM $D; sleep 2; kill -9 $D 2>/dev/null
