#!/usr/bin/env bash
# autotuned's NCCL tuner plugin against NCCL's own choices and against each
# algorithm and protocol forced, on 2 and 4 GPUs of one host (GPUs 0..W-1),
# run from the repository root there with binaries built elsewhere
# (--config=static) and carried:
#
#   bash bench/nccl_tuner_gpu.sh BIN_DIR PY_DIR OUT_DIR [WORLD...]  (default: 2 4, as GPUs allow)
#
# BIN_DIR: autotuned, autotunectl, libautotuned_nccl_tuner.so
# PY_DIR:  as bench/regret_gpu.sh's (on PYTHONPATH; the benchmark needs only torch)
# Per world W, in OUT_DIR/wW/:
#   nccl_tuner.T.table autotunectl tune-nccl --world=W --timing=T, per timing
#                      mode T (event_loop, cuda_graph: a table per mode, as an
#                      operator makes one for eager jobs and one for jobs that
#                      replay CUDA graphs; all_reduce, all_gather,
#                      reduce_scatter; 1 KiB to 256 MiB by 4) against a fresh
#                      daemon with its cache on (a cache folder of this run's);
#   tune_nccl*.log     the same ask a second time must be answered from the
#   table_again.diff   cache with the same rows (nccl_tuner.T.table.again);
#   cache_list.txt     the daemon's cache listed
#   daemon.log         the daemon, stopped before anything is timed
#   nccl_R.json, plugin_T_R.json  bench/nccl_tuner_gpu.py, each in a fresh
#                      process (torch.distributed.run, W ranks), R = 1..REPS
#                      in the order nccl, plugin_event_loop, plugin_cuda_graph,
#                      nccl, ...: the run-to-run spread of each; the eager
#                      figures of plugin_event_loop and the graph figures of
#                      plugin_cuda_graph are the plugin's
#   ring_ll.json ... tree_simple.json  NCCL_ALGO / NCCL_PROTO forced, once each
#   probe_nccl.json, probe_plugin_T.json  one untimed call per cell with
#                      NCCL's per-call TUNING log: what NCCL chose with and
#                      without the plugin
#   *.log              each step's output
# then OUT_DIR/report.md (bench/nccl_tuner_gpu_report.py over every wW/ there,
# so that worlds run by separate calls share one report), env.txt, steps.log.
# Environment: TUNER_BENCH_STEP_S (240: each timed step's limit),
# TUNER_BENCH_TUNE_S (480: tune-nccl's limit), TUNER_BENCH_REPS (4: runs per
# mode), TUNER_BENCH_TIMINGS ("event_loop cuda_graph"), TUNER_BENCH_FORCED
# (the six forced modes; empty: none), TUNER_BENCH_TUNE (1; 0 keeps existing
# tables), TUNER_BENCH_CACHE (the daemon's cache folder; default a new one
# under /tmp, removed at the end).
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/steps.sh
. "$HERE/steps.sh"
gpu_begin bench/nccl_tuner_gpu.sh "$@"
FORCED=${TUNER_BENCH_FORCED-"ring_ll ring_ll128 ring_simple tree_ll tree_ll128 tree_simple"}
LIMIT=${TUNER_BENCH_STEP_S:-240}     # seconds per timed step
REPS=${TUNER_BENCH_REPS:-4}
read -r -a TIMINGS <<< "${TUNER_BENCH_TIMINGS-event_loop cuda_graph}"
TUNE_LIMIT=${TUNER_BENCH_TUNE_S:-480}
PLUGIN=$BIN/libautotuned_nccl_tuner.so
COLLECTIVES=all_reduce,all_gather,reduce_scatter
{ date -u; nvidia-smi -L
  "$PYTHON" -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
  sha256sum "$BIN/autotuned" "$BIN/autotunectl" "$PLUGIN"
  echo "worlds: ${WORLDS[*]}  forced: $FORCED"; } >> "$OUT/env.txt" 2>&1

SOCK=/tmp/at-nccl-tuner.sock
CACHE=${TUNER_BENCH_CACHE:-}
OWN_CACHE=""
if [ -z "$CACHE" ]; then
  CACHE=$(mktemp -d /tmp/at-nccl-tuner-cache.XXXXXX) || exit 2
  OWN_CACHE=$CACHE
fi
finish() {
  daemon_stop
  [ -z "$OWN_CACHE" ] || rm -rf "$OWN_CACHE"
}
trap finish EXIT
failed() {  # NAME WHY: a check that failed or a step that could not run
  STEPS_FAILED=$((STEPS_FAILED + 1))
  printf '%-24s %s\n' "$1" "$2" | tee -a "$STEPS_LOG"
}

for W in "${WORLDS[@]}"; do
  D=$OUT/w$W
  mkdir -p "$D"
  export CUDA_VISIBLE_DEVICES
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((W - 1)))
  need_daemon=0
  for T in "${TIMINGS[@]}"; do
    { [ "${TUNER_BENCH_TUNE:-1}" = 1 ] || [ ! -s "$D/nccl_tuner.$T.table" ]; } && need_daemon=1
  done
  if [ "$need_daemon" = 1 ]; then
    daemon_start "$D/daemon.log" --cache_dir="$CACHE" --log_level=info
    for T in "${TIMINGS[@]}"; do
      TABLE=$D/nccl_tuner.$T.table
      ctl=("$BIN/autotunectl" --socket="$SOCK" tune-nccl --world="$W" --from=1KiB --to=256MiB
           --factor=4 --collectives="$COLLECTIVES" --timing="$T")
      step "w$W tune-nccl $T" "$TUNE_LIMIT" "$D/tune_nccl.$T.log" "${ctl[@]}" --out="$TABLE"
      # Asked again, the daemon answers from its cache (seconds, not
      # minutes): the same rows.
      step "w$W tune-nccl $T again" 120 "$D/tune_nccl_again.$T.log" "${ctl[@]}" \
        --out="$TABLE.again"
      diff <(grep -v '^#' "$TABLE") <(grep -v '^#' "$TABLE.again") >> "$D/table_again.diff" 2>&1 ||
        failed "w$W table again $T" "NOT the same rows (table_again.diff)"
    done
    "$BIN/autotunectl" --socket="$SOCK" cache list > "$D/cache_list.txt" 2>&1
    daemon_stop
  fi
  run=("$PYTHON" -m torch.distributed.run --standalone --nproc_per_node="$W"
       "$HERE/nccl_tuner_gpu.py")
  why() {  # TABLE: why the plugin cannot run with it, or nothing
    [ -f "$PLUGIN" ] || { echo "no $PLUGIN"; return; }
    [ -s "$1" ] || echo "no table at $1"
  }
  # nccl and each plugin table alternate, REPS times: the run-to-run spread
  # is measured.
  for rep in $(seq "$REPS"); do
    step "w$W nccl $rep" "$LIMIT" "$D/nccl_$rep.log" "${run[@]}" --mode nccl \
      --out "$D/nccl_$rep.json"
    for T in "${TIMINGS[@]}"; do
      TABLE=$D/nccl_tuner.$T.table
      w=$(why "$TABLE")
      if [ -z "$w" ]; then
        step "w$W plugin $T $rep" "$LIMIT" "$D/plugin_${T}_$rep.log" "${run[@]}" --mode plugin \
          --plugin "$PLUGIN" --table "$TABLE" --out "$D/plugin_${T}_$rep.json"
      else
        failed "w$W plugin $T $rep" "SKIPPED: $w"
      fi
    done
  done
  for mode in $FORCED; do
    step "w$W $mode" "$LIMIT" "$D/$mode.log" "${run[@]}" --mode "$mode" --out "$D/$mode.json"
  done
  step "w$W probe nccl" "$LIMIT" "$D/probe_nccl.log" "${run[@]}" --mode nccl --probe \
    --out "$D/probe_nccl.json"
  for T in "${TIMINGS[@]}"; do
    TABLE=$D/nccl_tuner.$T.table
    w=$(why "$TABLE")
    if [ -z "$w" ]; then
      step "w$W probe plugin $T" "$LIMIT" "$D/probe_plugin_$T.log" "${run[@]}" --mode plugin \
        --plugin "$PLUGIN" --table "$TABLE" --probe --out "$D/probe_plugin_$T.json"
    else
      failed "w$W probe plugin $T" "SKIPPED: $w"
    fi
  done
done
"$PYTHON" "$HERE/nccl_tuner_gpu_report.py" "$OUT" > "$OUT/report.md" 2>&1
cat "$OUT/steps.log"
cat "$OUT/report.md"
