#!/usr/bin/env bash
# The decisions' regret on GPUs against an independent timing, on 2 and 4
# GPUs of one host (GPUs 0..W-1), run from the repository root there with
# binaries built elsewhere (--config=static) and carried:
#
#   bash bench/regret_gpu.sh BIN_DIR PY_DIR OUT_DIR [WORLD...]     (default: 2 4, as the GPUs allow)
#
# Per world W, each in a fresh process (torch.distributed.run, W ranks):
#   wW/truth.json      bench/regret_gpu.py --mode truth: every caller choice
#                      timed alone, no daemon running
#   wW/{immediate,deferred,pytorch,vllm,check}.json
#                      the tuners' decisions on the same choices (a fresh
#                      daemon per mode, cuda backend, no cache, for the
#                      autotuned ones)
# Environment: REGRET_MODES (all five), REGRET_STEP_S (150: each step's limit),
# REGRET_SWEEP (1; 0 leaves the daemon's sweep out).
#   wW/sweep.jsonl     the daemon's own all_reduce bf16 sweep (CUDA graphs)
#   wW/alone.jsonl     each candidate of that sweep tuned alone, per size, in
#                      a fresh daemon: the truth of the sweep's decisions
#   wW/*.log           each step's output
# then OUT_DIR/report.md: bench/regret_gpu_report.py and the sweep's regret.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/steps.sh
. "$HERE/steps.sh"
gpu_begin bench/regret_gpu.sh "$@"
MODES=${REGRET_MODES:-"immediate deferred pytorch vllm check"}
LIMIT=${REGRET_STEP_S:-150}  # seconds per step
{ date -u; nvidia-smi -L; "$PYTHON" -c 'import torch; print("torch", torch.__version__)'
  echo "worlds: ${WORLDS[*]}  modes: truth $MODES sweep"; } >> "$OUT/env.txt" 2>&1

SOCK=/tmp/at-regret.sock
trap daemon_stop EXIT

SWEEP_ARGS=(--collective=all_reduce --dtype=bf16 --timing=cuda_graph --refresh)
for W in "${WORLDS[@]}"; do
  D=$OUT/w$W
  mkdir -p "$D"
  export CUDA_VISIBLE_DEVICES
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((W - 1)))
  run=("$PYTHON" -m torch.distributed.run --standalone --nproc_per_node="$W"
       "$HERE/regret_gpu.py" --socket "$SOCK")
  step "w$W truth" "$LIMIT" "$D/truth.log" "${run[@]}" --mode truth --out "$D/truth.json"
  # A fresh daemon per mode: no mode's round (nor a run left by a mode that
  # failed) holds the devices for the next.
  for mode in $MODES; do
    if [ "$mode" != pytorch ]; then daemon_start "$D/daemon_$mode.log" --no_cache --log_level=info; fi
    step "w$W $mode" "$LIMIT" "$D/$mode.log" "${run[@]}" --mode "$mode" --out "$D/$mode.json"
    daemon_stop
  done
  [ "${REGRET_SWEEP:-1}" = 1 ] || continue
  daemon_start "$D/daemon_sweep.log" --no_cache --log_level=info
  step "w$W sweep" "$LIMIT" "$D/sweep.err" sh -c "'$BIN/autotunectl' --socket='$SOCK' --json sweep \
    ${SWEEP_ARGS[*]} --from=8KiB --to=32MiB --factor=4 > '$D/sweep.jsonl'"
  daemon_stop
  # The truth of the sweep: each of its candidates alone, per size, in a
  # fresh daemon.
  daemon_start "$D/daemon_alone.log" --no_cache --log_level=info
  step "w$W alone" "$LIMIT" "$D/alone.err" "$PYTHON" "$HERE/regret_sweep.py" alone \
    "$BIN/autotunectl" "$SOCK" "$D/sweep.jsonl" "$D/alone.jsonl" "${SWEEP_ARGS[@]}"
  daemon_stop
done
{
  "$PYTHON" "$HERE/regret_gpu_report.py" "$OUT"
  for W in "${WORLDS[@]}"; do
    [ -f "$OUT/w$W/alone.jsonl" ] &&
      "$PYTHON" "$HERE/regret_sweep.py" report "$OUT/w$W/sweep.jsonl" "$OUT/w$W/alone.jsonl" "$W"
  done
} > "$OUT/report.md" 2>&1
cat "$OUT/steps.log"
cat "$OUT/report.md"
