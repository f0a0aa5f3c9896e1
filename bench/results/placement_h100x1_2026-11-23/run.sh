#!/bin/bash
# One-GPU check of the placement change (run on nvidia-h100-x1).
B=.carry/gpu/bin
PY=/opt/torch/.venv/bin/python3
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=$($PY -c 'import nvidia.nccl,os;print(os.path.join(nvidia.nccl.__path__[0],"lib"))')
mkdir -p $OUT/t
date -u > $OUT/t/env.txt; nvidia-smi -L >> $OUT/t/env.txt
for t in gpu_node_gpu_test gpu_watchdog_gpu_test p2p_gpu_test; do
  timeout 240 $B/$t > $OUT/t/$t.txt 2>&1; echo "$t rc=$?"; grep -E "SKIPPED|passed|failed|FAILED" $OUT/t/$t.txt | tail -6
done
$B/autotuned --socket=/tmp/a.sock --no_cache --log_level=info > $OUT/t/daemon.log 2>&1 &
D=$!
for i in $(seq 100); do [ -S /tmp/a.sock ] && break; sleep 0.2; done
sleep 2
timeout 60 $B/autotunectl --socket=/tmp/a.sock tune --collective=all_reduce --bytes=8KiB --dtype=bf16 --world=1 --candidates=all_reduce/nccl > $OUT/t/tune.txt 2>&1; echo "tune rc=$?"; cat $OUT/t/tune.txt
PYTHONPATH=.carry/gpu/python timeout 120 $PY - > $OUT/t/pci.txt 2>&1 <<'PYEOF'
import torch
torch.cuda.init(); torch.cuda.set_device(0)
p = torch.cuda.get_device_properties(0)
print("torch", torch.__version__, {k: getattr(p, k, None) for k in ("pci_bus_id", "pci_device_id", "pci_domain_id", "uuid")})
from autotuned import Client
from autotuned.group import _default_local_gpu, _current_device_pci
with Client("/tmp/a.sock") as c:
    info = c.node_info()
print("daemon gpus", [(g.index, g.pci_bus_id) for g in info.gpus])
print("current device pci", _current_device_pci(), "-> local_gpu", _default_local_gpu(0, info.gpus))
PYEOF
echo "pci rc=$?"; cat $OUT/t/pci.txt
kill -TERM $D; sleep 3; kill -9 $D 2>/dev/null
tail -5 $OUT/t/daemon.log
