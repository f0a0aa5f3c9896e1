#!/usr/bin/env bash
# The scale check on one host with 4 or 8 GPUs (nvidia-h200-x4 / -x8), run
# from the repository root there; binaries are built elsewhere with
# --config=static and carried, as for bench/gpu_all.sh:
#
#   bash bench/gpu_scale.sh BIN_DIR PY_DIR OUT_DIR [PART...]
#
# BIN_DIR: as bench/gpu_all.sh's, plus cross_daemon_ask (//tests:cross_daemon_ask)
# PY_DIR:  client/python with its stubs (client/python/gen_stubs.sh PY_DIR)
# PARTs (default: every one the GPUs allow), a few minutes each, so that a
# run can be split over several calls:
#   tests    the Catch2 GPU tests on every GPU (gpu_node_gpu_test runs every
#            implementation on all of them, and ranks placed in reverse order)
#   ceiling  bench/nvlink_ceiling on every GPU: a pair's transfers, then every
#            GPU sending to all the others at once (copy engine and SM
#            stores): the ceiling of a two-shot's busbw on this host
#   w4, w8   bench/gpu_run.sh on GPUs 0-3 / 0-7 (CUDA_VISIBLE_DEVICES): the
#            daemon's sweeps, NCCL measured independently, PyTorch NCCL and
#            symm-mem side by side, gpu_report.md
#   a2av     bench/a2av_gpu.sh on every GPU: the uneven all_to_all, P2P
#            against NCCL (a2av/report.md)
#   cross    tests/cross_daemon_test.sh: one group over several daemons,
#            each owning a share of the GPUs: 2 x 4 and 4 x 2 on 8 GPUs,
#            2 x 2 on 4; every rank's answer identical
#   compile  gpu_compile_acceptance.py on 4 ranks against one daemon
#   regret   bench/regret_gpu.sh on 2 and 4 GPUs (and 8): each tuner's decisions
#            against every choice timed alone (regret/report.md)
# OUT_DIR receives env.txt, steps.log and one file or folder per part.
set -u
if [ $# -lt 3 ]; then
  echo "usage: bash bench/gpu_scale.sh BIN_DIR PY_DIR OUT_DIR [tests|ceiling|w4|w8|a2av|cross|compile|regret ...]" >&2
  exit 2
fi
# shellcheck source=bench/steps.sh
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
gpu_setup "$1" "$2" "$3" || exit 2
shift 3

GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
PARTS=("$@")
if [ ${#PARTS[@]} -eq 0 ]; then
  PARTS=(tests ceiling)
  [ "$GPUS" -ge 4 ] && PARTS+=(w4)
  [ "$GPUS" -ge 8 ] && PARTS+=(w8)
  PARTS+=(a2av cross compile regret)
fi
{ date -u; nvidia-smi -L; nvidia-smi topo -m; "$PYTHON" -c 'import torch; print("torch", torch.__version__)'
  echo "parts: ${PARTS[*]}"; } >> "$OUT/env.txt" 2>&1

upto() { seq -s, 0 $(($1 - 1)); }  # "0,1,...,N-1"

for part in "${PARTS[@]}"; do
  case $part in
    tests)
      mkdir -p "$OUT/tests"
      step p2p_gpu_test 180 "$OUT/tests/p2p_gpu_test.txt" "$BIN/p2p_gpu_test"
      step gpu_node_gpu_test 400 "$OUT/tests/gpu_node_gpu_test.txt" "$BIN/gpu_node_gpu_test"
      ;;
    ceiling)
      step nvlink_ceiling 180 "$OUT/nvlink_ceiling.txt" "$BIN/nvlink_ceiling" 256 20
      ;;
    w4 | w8)
      n=${part#w}
      if [ "$GPUS" -lt "$n" ]; then
        echo "$part: SKIPPED, $GPUS GPUs" | tee -a "$STEPS_LOG"
        continue
      fi
      step "gpu_run_$part" 540 "$OUT/gpu_run_$part.log" env CUDA_VISIBLE_DEVICES="$(upto "$n")" \
        PYTHON="$PYTHON" AT_SOCK="/tmp/at-$part.sock" bash bench/gpu_run.sh "$BIN" "$OUT/$part"
      ;;
    a2av)
      step a2av 240 "$OUT/a2av.log" bash bench/a2av_gpu.sh "$BIN" "$OUT/a2av" "$PYTHON"
      ;;
    cross)
      if [ "$GPUS" -lt 2 ]; then
        echo "cross: SKIPPED, $GPUS GPUs" | tee -a "$STEPS_LOG"
        continue
      fi
      shapes=("2 $((GPUS / 2))")
      [ "$GPUS" -ge 8 ] && shapes=("2 4" "4 2")
      for shape in "${shapes[@]}"; do
        read -r d k <<<"$shape"
        step "cross_${d}x$k" 240 "$OUT/cross_${d}x$k.txt" env DAEMONS="$d" RANKS_PER_DAEMON="$k" \
          bash tests/cross_daemon_test.sh "$BIN/autotuned" "$BIN/autotunectl" "$BIN/cross_daemon_ask"
      done
      ;;
    compile)
      if [ "$GPUS" -lt 4 ]; then
        echo "compile: SKIPPED, $GPUS GPUs" | tee -a "$STEPS_LOG"
        continue
      fi
      sock=/tmp/at-scale.sock
      rm -f "$sock"
      "$BIN/autotuned" --socket="$sock" --no_cache --log_level=info > "$OUT/compile_daemon.log" 2>&1 &
      dpid=$!
      for _ in $(seq 300); do [ -S "$sock" ] && break; sleep 0.1; done
      step compile_w4 400 "$OUT/compile_w4.log" env PYTHONPATH="$PY_DIR" \
        AUTOTUNED_KERNELS_LIB="$BIN/libautotuned_kernels_abi.so" \
        "$PYTHON" -m torch.distributed.run --standalone --nproc_per_node=4 \
        "$PY_DIR/examples/gpu_compile_acceptance.py" --socket "$sock"
      kill -TERM "$dpid" 2>/dev/null
      for _ in $(seq 200); do kill -0 "$dpid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$dpid" 2>/dev/null
      ;;
    regret)
      # The decisions' regret against each choice timed alone, on 2 and 4
      # GPUs, and 8 where there are 8 (bench/regret_gpu.sh: Inductor
      # immediate and deferred, PyTorch's own, the vLLM helper, the daemon's
      # sweep, the output check).
      worlds=()
      [ "$GPUS" -ge 8 ] && worlds=(2 4 8)
      step regret 560 "$OUT/regret.log" env PYTHON="$PYTHON" \
        bash bench/regret_gpu.sh "$BIN" "$PY_DIR" "$OUT/regret" "${worlds[@]}"
      ;;
    *) echo "unknown part $part" | tee -a "$STEPS_LOG"; STEPS_FAILED=$((STEPS_FAILED + 1)) ;;
  esac
done
echo "$STEPS_FAILED step(s) failed" | tee -a "$STEPS_LOG"
exit $((STEPS_FAILED > 100 ? 100 : STEPS_FAILED))
