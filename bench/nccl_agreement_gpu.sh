#!/usr/bin/env bash
# The daemon's NCCL against NCCL as rank processes run it, under CUDA graphs
# on 2 GPUs, at the same sizes in one session:
#   one      one daemon owning both GPUs (its worker drives both from one
#            process): autotunectl sweep of all_reduce/nccl
#   cross    two daemons, one GPU each (NCCL across two processes, as two
#            ranks run it): tests/cross_daemon_test.sh with TIMING=cuda_graph
#            and EXTRA_COUNTS
#   torch    torch.distributed's all_reduce in two rank processes
#            (bench/torch_collectives.py --graph)
# and bench/nccl_agreement_report.py's table of the ratios.
#
#   bash bench/nccl_agreement_gpu.sh BIN OUT [PYTHON]
#
# BIN: autotuned, autotunectl, cross_daemon_ask (static builds); run from the
# repository root on a host with 2 or more GPUs (GPUs 0 and 1 are used).
set -u
# shellcheck source=bench/steps.sh
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
BIN=$(cd "$1" && pwd) OUT=$2 PY=${3:-python3}
mkdir -p "$OUT"
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0,1} NCCL_NVLS_ENABLE=0
# bf16 element counts: 8 KiB to 64 MiB.
COUNTS="4096 32768 262144 524288 2097152 16777216 33554432"
SOCK=/tmp/at-agree.sock
trap daemon_stop EXIT
daemon_start "$OUT/one_daemon.log" --backend=cuda --no_cache --log_level=info
timeout 200 "$BIN/autotunectl" "--socket=$SOCK" --json sweep --collective=all_reduce --dtype=bf16 \
  --candidates=all_reduce/nccl --from=8KiB --to=64MiB --factor=2 --timing=cuda_graph \
  > "$OUT/one.jsonl" 2> "$OUT/one.err"
echo "one rc=$?"
daemon_stop
TIMING=cuda_graph EXTRA_COUNTS="$COUNTS" timeout 300 bash tests/cross_daemon_test.sh \
  "$BIN/autotuned" "$BIN/autotunectl" "$BIN/cross_daemon_ask" > "$OUT/cross.txt" 2>&1
echo "cross rc=$?"
timeout 120 "$PY" -m torch.distributed.run --standalone --nproc_per_node=2 \
  bench/torch_collectives.py --out "$OUT/torch_graph.json" --factor 2 --graph \
  --min_bytes 8192 --max_bytes 67108864 > "$OUT/torch_graph.log" 2>&1
echo "torch rc=$?"
"$PY" "$(dirname "$0")/nccl_agreement_report.py" "$OUT" > "$OUT/report.md"
cat "$OUT/report.md"
