#!/usr/bin/env bash
# The daemon's NCCL against NCCL run as a caller candidate, under CUDA graphs
# on 2 GPUs, at the same sizes in one session:
#   one      one daemon owning both GPUs (its worker drives both from one
#            process): autotunectl sweep of all_reduce/nccl
#   cross    two daemons, one GPU each (NCCL across two processes):
#            tests/cross_daemon_test.sh with TIMING=cuda_graph and
#            EXTRA_COUNTS
#   caller   NCCL as a caller candidate: bench/nccl_caller.py's tables (the
#            vLLM helper against the one daemon) of torch.distributed's
#            all_reduce in place, and of the table's all_reduce/nccl (a
#            copy, then the same call), which the two rank processes run and
#            time (autotuned.rankrun)
#   torch    torch.distributed's all_reduce in two rank processes, one graph
#            of back-to-back calls (bench/torch_collectives.py --graph)
# and bench/nccl_agreement_report.py's table of the ratios. Every process
# uses PyTorch's NCCL (gpu_setup).
#
#   bash bench/nccl_agreement_gpu.sh BIN_DIR PY_DIR OUT_DIR
#
# BIN_DIR: autotuned, autotunectl, cross_daemon_ask, libautotuned_kernels_abi.so
# (static builds); PY_DIR: client/python with its generated stubs. Run from
# the repository root on a host with 2 or more GPUs (GPUs 0 and 1 are used).
set -u
# shellcheck source=bench/steps.sh
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
gpu_begin "$0" "$@"
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0,1}
# bf16 element counts, 8 KiB to 64 MiB, that cross_daemon_test.sh's own
# rounds do not already ask for (a repeat would be answered CACHED).
COUNTS="4096 32768 262144 2097152 16777216 33554432"
SOCK=/tmp/at-agree.sock
trap daemon_stop EXIT
daemon_start "$OUT/one_daemon.log" --backend=cuda --no_cache --log_level=info
step one 200 "$OUT/one.jsonl" "$BIN/autotunectl" "--socket=$SOCK" --json sweep \
  --collective=all_reduce --dtype=bf16 --candidates=all_reduce/nccl --from=8KiB --to=64MiB \
  --factor=2 --timing=cuda_graph
# Each in a table of its own: interleaved passes of the two change what
# NCCL's graph mixing costs each (the in-place call read 7-9 % less below
# 256 KiB beside the copy's graph on 2 x H200).
step caller 120 "$OUT/caller.log" "$PYTHON" -m torch.distributed.run --standalone \
  --nproc_per_node=2 "$(dirname "$0")/nccl_caller.py" --socket "$SOCK" --save "$OUT/caller" \
  --only nccl_in_place
step caller_copy 120 "$OUT/caller_copy.log" "$PYTHON" -m torch.distributed.run --standalone \
  --nproc_per_node=2 "$(dirname "$0")/nccl_caller.py" --socket "$SOCK" --save "$OUT/caller_copy" \
  --only all_reduce/nccl
daemon_stop
step cross 300 "$OUT/cross.txt" env TIMING=cuda_graph EXTRA_COUNTS="$COUNTS" bash tests/cross_daemon_test.sh \
  "$BIN/autotuned" "$BIN/autotunectl" "$BIN/cross_daemon_ask"
step torch 120 "$OUT/torch_graph.log" "$PYTHON" -m torch.distributed.run --standalone \
  --nproc_per_node=2 "$(dirname "$0")/torch_collectives.py" --out "$OUT/torch_graph.json" \
  --factor 2 --graph --skip_symm --coll_sizes "" --min_bytes 8192 --max_bytes 67108864
"$PYTHON" "$(dirname "$0")/nccl_agreement_report.py" "$OUT" > "$OUT/report.md"
cat "$OUT/report.md"
