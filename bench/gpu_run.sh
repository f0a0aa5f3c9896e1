#!/usr/bin/env bash
# The GPU check in one command, run from the repository root on the GPU
# machine (2 x H200, NVLink; or more GPUs):
#
#   bash bench/gpu_run.sh BIN_DIR OUT_DIR
#
# It uses every GPU it can see: CUDA_VISIBLE_DEVICES=0,1,2,3 makes it a run on
# 4 GPUs (the daemon, p2p_bench and torchrun all see those). The built-in
# anchors (2 x H200) are printed only for a run on 2 GPUs.
#
# BIN_DIR holds the prebuilt binaries autotuned, autotunectl and p2p_bench;
# OUT_DIR (created) receives:
#   daemon.log                     the daemon's log
#   info.txt, list.txt             autotunectl info / list
#   daemon_allreduce.jsonl         all_reduce bf16 sweep, event-loop timing
#   daemon_allreduce_graph.jsonl   the same with --timing=cuda_graph
#   daemon_allgather.jsonl, daemon_reducescatter.jsonl, daemon_alltoall.jsonl,
#   daemon_broadcast.jsonl, and daemon_*_graph.jsonl of each with
#   --timing=cuda_graph
#                                  (charts, where matplotlib is: python -m
#                                  autotuned.plot daemon_X.jsonl -o daemon_X.png)
#   *.err                          autotunectl's stderr (progress, errors)
#   nccl_tests.txt                 p2p_bench eager table, then graph table
#   torch.json, torch.log          bench/torch_collectives.py under torchrun
#   torch_graph.json, torch_graph.log  the same ops with --graph
#   nccl_repeats/                  daemon_nccl_N.jsonl and indep_nccl_N.txt:
#                                  NCCL alone, daemon and p2p_bench in turn,
#                                  N = 1..NCCL_REPEATS (see "NCCL, repeated")
#   steps.log                      every step's exit status and duration
#   gpu_report.md                  bench/combine_gpu.py's report (printed at the end)
#
# Every step runs under `timeout`, and the NCCL repeats stop starting new
# rounds after NCCL_REPEATS_S seconds; a normal run on 2 x H200 takes 2-3
# minutes. A failing step is logged in steps.log and the script goes on with
# the next.
# The daemon is stopped (SIGTERM) right after its sweeps, before p2p_bench and
# torch run, so that its GPU worker cannot disturb the independent baselines.
#
# Environment (defaults in brackets; meant for testing elsewhere):
#   PYTHON [/opt/torch/.venv/bin/python3]   AT_SOCK [/tmp/at.sock]
#   AT_BACKEND [cuda]   TORCH_EXTRA_ARGS []  NCCL_LIB_DIR [torch's NCCL]
#   NCCL_REPEATS [7]    NCCL_REPEATS_S [150]
set -u

if [ $# -ne 2 ]; then
  echo "usage: bash bench/gpu_run.sh BIN_DIR OUT_DIR" >&2
  exit 2
fi
T0=$SECONDS
FAILED_STEPS=0
BIN=$(cd "$1" && pwd) || { echo "gpu_run: no folder $1" >&2; exit 2; }
mkdir -p "$2" || exit 2
OUT=$(cd "$2" && pwd)
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO" || exit 2

PY=${PYTHON:-/opt/torch/.venv/bin/python3}
[ -x "$PY" ] || PY=$(command -v python3 || echo /usr/bin/python3)
NCCL_LIB_DIR=${NCCL_LIB_DIR:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib}
export LD_LIBRARY_PATH="$NCCL_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Multicast stays off on this machine; keep what the environment says.
export TORCH_SYMM_MEM_DISABLE_MULTICAST=${TORCH_SYMM_MEM_DISABLE_MULTICAST:-1}
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}

# The GPUs of this run.
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
  NGPU=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .)
else
  NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
fi
[ "${NGPU:-0}" -ge 1 ] || NGPU=2

SOCK=${AT_SOCK:-/tmp/at.sock}
BACKEND=${AT_BACKEND:-cuda}
CTL=("$BIN/autotunectl" "--socket=$SOCK" --connect_timeout=3s)
STEPS=$OUT/steps.log
: > "$STEPS"
exec 3>&1  # the console, whatever a step's output is sent to

log() { echo "[gpu_run $(( SECONDS - T0 ))s] $*" >&3; }

# step NAME LIMIT_S CMD...: runs CMD under timeout, logs its status.
step() {
  local name=$1 limit=$2 rc s what
  shift 2
  log "$name (limit ${limit}s): $*"
  s=$SECONDS
  timeout -k 5 "$limit" "$@"
  rc=$?
  what=ok
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    what="TIMED OUT (limit ${limit}s)"
  elif [ "$rc" -ne 0 ]; then
    what=FAILED
  fi
  printf '%-24s rc=%-3s %4ss  %s\n' "$name" "$rc" "$(( SECONDS - s ))" "$what" >> "$STEPS"
  [ "$what" = ok ] || { log "$name: $what (rc=$rc)"; FAILED_STEPS=$((FAILED_STEPS + 1)); }
  return "$rc"
}

note() { printf '%-24s %s\n' "$1" "$2" >> "$STEPS"; log "$1: $2"; }

# why FILE [N]: the last N (3) non-empty lines of a failed step's output,
# into steps.log.
why() {
  [ -s "$1" ] || return 0
  grep -v '^[[:space:]]*$' "$1" | tail -n "${2:-3}" | cut -c1-300 | sed 's/^/    | /' >> "$STEPS"
}

for b in autotuned autotunectl p2p_bench; do
  [ -x "$BIN/$b" ] || note "missing" "$BIN/$b is not an executable file"
done

# ---------------------------------------------------------------- daemon
DPID=""
DCHILDREN=""

stop_daemon() {
  [ -n "$DPID" ] || return 0
  if kill -0 "$DPID" 2>/dev/null; then
    # Its GPU worker, in case the daemon must be killed and leaves it behind.
    DCHILDREN=$(pgrep -P "$DPID" 2>/dev/null | tr '\n' ' ')
    kill -TERM "$DPID" 2>/dev/null
    local s=$SECONDS
    while kill -0 "$DPID" 2>/dev/null && [ $(( SECONDS - s )) -lt 20 ]; do sleep 0.5; done
    if kill -0 "$DPID" 2>/dev/null; then
      note "stop daemon" "no exit 20 s after SIGTERM: SIGKILL to $DPID $DCHILDREN"
      kill -KILL "$DPID" 2>/dev/null
    else
      note "stop daemon" "exited $(( SECONDS - s ))s after SIGTERM"
    fi
    wait "$DPID" 2>/dev/null
  fi
  local c
  for c in $DCHILDREN; do
    if kill -0 "$c" 2>/dev/null; then
      sleep 2
      kill -0 "$c" 2>/dev/null && { note "stop daemon" "GPU worker $c left over: SIGKILL"; kill -KILL "$c" 2>/dev/null; }
    fi
  done
  DPID=""
}
trap stop_daemon EXIT
trap 'log "interrupted"; exit 130' INT TERM

# start_daemon LOG: starts the daemon (log to LOG), waits up to 60 s for it
# to answer; DPID is empty when it did not come up.
start_daemon() {
  rm -f "$SOCK"
  log "starting $BIN/autotuned --backend=$BACKEND --socket=$SOCK --no_cache --log_level=info"
  "$BIN/autotuned" "--backend=$BACKEND" "--socket=$SOCK" --no_cache --log_level=info \
    > "$1" 2>&1 &
  DPID=$!
  local s=$SECONDS ready=0
  while [ $(( SECONDS - s )) -lt 60 ]; do
    if ! kill -0 "$DPID" 2>/dev/null; then
      wait "$DPID" 2>/dev/null
      note "daemon start" "the daemon exited (rc=$?) before answering; see $(basename "$1")"
      why "$1"
      DPID=""
      break
    fi
    if timeout 5 "${CTL[@]}" info > /dev/null 2>&1; then
      ready=1
      break
    fi
    sleep 1
  done
  if [ "$ready" -eq 1 ]; then
    note "daemon start" "answering after $(( SECONDS - s ))s (pid $DPID)"
  else
    [ -z "$DPID" ] || note "daemon start" "not answering after $(( SECONDS - s ))s; the steps that need it go on and fail"
  fi
}

start_daemon "$OUT/daemon.log"

AR_CANDIDATES=all_reduce/nccl,all_reduce/one_shot:blocks=16,threads=512,all_reduce/one_shot,all_reduce/one_shot:blocks=64,threads=1024,all_reduce/one_shot:blocks=128,threads=1024,all_reduce/one_shot_push:blocks=16,threads=512,all_reduce/one_shot_push,all_reduce/one_shot_push:blocks=64,threads=1024,all_reduce/one_shot_push:blocks=128,threads=1024,all_reduce/one_shot_push:blocks=132,threads=1024,all_reduce/two_shot,all_reduce/two_shot:blocks=16,threads=512,all_reduce/two_shot_push,all_reduce/two_shot_push:blocks=16,threads=512,all_reduce/two_shot_push:blocks=64,threads=1024,all_reduce/two_shot_push:blocks=96,threads=1024,all_reduce/two_shot_in_place,all_reduce/two_shot_in_place:blocks=16,threads=512,all_reduce/two_shot_in_place:blocks=64,threads=1024,all_reduce/two_shot_in_place:blocks=96,threads=1024,all_reduce/two_shot_chunked,all_reduce/copy_engine:chunk_kib=2048,all_reduce/copy_engine,all_reduce/copy_engine:chunk_kib=32768,all_reduce/two_shot:blocks=132,threads=512,all_reduce/push_pipelined,all_reduce/push_pipelined:blocks=132,threads=512,chunk_kib=8192,all_reduce/p2p_ring,all_reduce/p2p_ring:blocks=132,threads=512
# The copy engine beside the ring is a 2-GPU kernel (3-5 x slower on 4 GPUs:
# bench/results/ring_parts_ce_ring_h200x4_2026-11-27); it is swept on 2 only.
[ "$NGPU" -eq 2 ] && AR_CANDIDATES+=,all_reduce/ce_ring,all_reduce/ce_ring:chunk_kib=8192
# (IMPL:NAME=INT,NAME=INT: a piece with '=' and no ':' continues the candidate
# before it, so "one_shot:blocks=64,threads=1024" is one candidate.)
# Up to 1 MiB a candidate takes a few microseconds: 500 timed iterations
# (as p2p_bench below); above, 50.
# The other collectives' sizes (a rank's bytes): the daemon's sweeps and
# torch_collectives.py's.
COLL_SIZES=1024,16384,262144,4194304,67108864
AR_SWEEP=(--json sweep --collective=all_reduce --dtype=bf16 --factor=2 "--candidates=$AR_CANDIDATES")
AR_SMALL=(--from=1KiB --to=1MiB --iters=500 --warmup=50)
AR_LARGE=(--from=2MiB --to=256MiB --iters=50 --warmup=10)

daemon_steps() {
  step info 10 "${CTL[@]}" info > "$OUT/info.txt" 2>&1 || why "$OUT/info.txt"
  step list 5 "${CTL[@]}" list > "$OUT/list.txt" 2>&1 || why "$OUT/list.txt"

  : > "$OUT/daemon_allreduce.jsonl"
  : > "$OUT/daemon_allreduce_graph.jsonl"
  for part in SMALL LARGE; do
    range="AR_$part[@]"
    step "sweep_allreduce_${part,,}" 150 "${CTL[@]}" "${AR_SWEEP[@]}" "${!range}" \
      >> "$OUT/daemon_allreduce.jsonl" 2>> "$OUT/daemon_allreduce.err" || why "$OUT/daemon_allreduce.err"
    step "sweep_allreduce_graph_${part,,}" 150 "${CTL[@]}" "${AR_SWEEP[@]}" "${!range}" --timing=cuda_graph \
      >> "$OUT/daemon_allreduce_graph.jsonl" 2>> "$OUT/daemon_allreduce_graph.err" ||
      why "$OUT/daemon_allreduce_graph.err"
  done
  # The other collectives at the sizes torch_collectives.py measures them
  # (COLL_SIZES, a rank's bytes), 1 KiB to 64 MiB, in both timing modes:
  # daemon_X.jsonl (event loop) and daemon_X_graph.jsonl (CUDA graphs).
  local coll=(--json sweep --dtype=bf16 --from=1KiB --to=64MiB --factor=16 --iters=50 --warmup=10)
  local c name cands timing
  for c in "allgather all_gather all_gather/nccl,all_gather/p2p,all_gather/p2p:blocks=132,threads=1024" \
      "reducescatter reduce_scatter reduce_scatter/nccl,reduce_scatter/p2p,reduce_scatter/p2p:blocks=132,threads=1024" \
      "alltoall all_to_all all_to_all/nccl,all_to_all/p2p,all_to_all/p2p:blocks=132,threads=1024" \
      "broadcast broadcast broadcast/nccl,broadcast/p2p,broadcast/p2p:blocks=132,threads=1024,broadcast/push_pipelined,broadcast/push_pipelined:blocks=132,threads=512,chunk_kib=8192"; do
    read -r name coll_name cands <<<"$c"
    for timing in event_loop cuda_graph; do
      local suffix=""
      [ "$timing" = cuda_graph ] && suffix=_graph
      step "sweep_$name$suffix" 40 "${CTL[@]}" "${coll[@]}" --collective="$coll_name" \
        --timing="$timing" --candidates="$cands" \
        > "$OUT/daemon_$name$suffix.jsonl" 2> "$OUT/daemon_$name$suffix.err" ||
        why "$OUT/daemon_$name$suffix.err"
    done
  done
}

if [ -n "$DPID" ]; then
  daemon_steps
else
  note "daemon steps" "skipped: no daemon running"
fi
stop_daemon

# ---------------------------------------------------------------- baselines
: > "$OUT/nccl_tests.txt"
: > "$OUT/p2p_bench.err"
# The same sizes and iteration counts as the daemon's sweeps. Large sizes:
# chunks of 2 and 8 MiB (bf16) for the chunked two-shot and the copy engine
# (whose graph mode captures 2 copies per chunk and peer per iteration).
P2P_SMALL=("$BIN/p2p_bench" --min_bytes=1024 --max_bytes=1048576 --step=2 --iters=500 --warmup=50)
P2P_LARGE=("$BIN/p2p_bench" --min_bytes=2097152 --max_bytes=268435456 --step=2 --iters=50 --warmup=10 --chunk_elems=1048576,4194304)
# On 3 or more GPUs the large graph table leaves out the pull one-shot and
# the copy engine, which move the whole message to every peer (far behind
# there), so that it ends within its limit (it did not on 4 x H200).
P2P_LARGE_GRAPH=()
[ "$NGPU" -ge 3 ] && P2P_LARGE_GRAPH=(--columns=one_shot_push,two_shot,two_shot_push,two_shot_in_place,two_shot_chunked,push_pipelined,ring)
# Exit status 3: some candidate's output was wrong (listed as "# BAD output").
for part in SMALL LARGE; do
  cmd="P2P_$part[@]"
  graph_extra=()
  [ "$part" = LARGE ] && graph_extra=("${P2P_LARGE_GRAPH[@]}")
  step "p2p_bench_eager_${part,,}" 60 "${!cmd}" --nccl_threads >> "$OUT/nccl_tests.txt" 2>> "$OUT/p2p_bench.err" ||
    why "$OUT/p2p_bench.err"
  step "p2p_bench_graph_${part,,}" 150 "${!cmd}" --graph "${graph_extra[@]}" >> "$OUT/nccl_tests.txt" 2>> "$OUT/p2p_bench.err" ||
    why "$OUT/p2p_bench.err"
done

# shellcheck disable=SC2086  # TORCH_EXTRA_ARGS is a word list on purpose
step torch 80 "$PY" -m torch.distributed.run --standalone "--nproc_per_node=$NGPU" \
  bench/torch_collectives.py --out "$OUT/torch.json" --factor 2 --coll_sizes="$COLL_SIZES" ${TORCH_EXTRA_ARGS:-} \
  > "$OUT/torch.log" 2>&1 || why "$OUT/torch.log" 5
# The same all_reduce ops captured in CUDA graphs, beside the daemon's graph
# timing.
# shellcheck disable=SC2086
step torch_graph 120 "$PY" -m torch.distributed.run --standalone "--nproc_per_node=$NGPU" \
  bench/torch_collectives.py --out "$OUT/torch_graph.json" --factor 2 --graph --coll_sizes="$COLL_SIZES" \
  ${TORCH_EXTRA_ARGS:-} > "$OUT/torch_graph.log" 2>&1 || why "$OUT/torch_graph.log" 5

# ---------------------------------------------------------------- NCCL, repeated
# The daemon's NCCL against the independent NCCL, NCCL_REPEATS (7) times in
# turn: a fresh daemon sweeping all_reduce/nccl alone, then p2p_bench
# --nccl_only with the same sizes and iterations, alternating which goes
# first. Eager NCCL calls of 1-256 KiB are bound by host launches and move by
# 10-30 % from one run to the next on either side (on 2 x H200 they sit near
# 6.5 or near 9 us), so one run of each cannot settle a 5 % comparison;
# combine_gpu.py compares the medians of the repeats. No new repeat starts
# once NCCL_REPEATS_S (150) seconds have gone into them (about 10 s each on
# 2 x H200).
REPEATS=${NCCL_REPEATS:-7}
REPEATS_S=${NCCL_REPEATS_S:-150}
RDIR=$OUT/nccl_repeats
mkdir -p "$RDIR"
repeat_daemon() {
  start_daemon "$RDIR/daemon_$1.log"
  [ -n "$DPID" ] || return 0
  local part range
  for part in SMALL LARGE; do
    range="AR_$part[@]"
    step "repeat_${1}_daemon_${part,,}" 20 "${CTL[@]}" --json sweep --collective=all_reduce \
      --dtype=bf16 --factor=2 --candidates=all_reduce/nccl "${!range}" \
      >> "$RDIR/daemon_nccl_$1.jsonl" 2>> "$RDIR/daemon_nccl_$1.err" || why "$RDIR/daemon_nccl_$1.err"
  done
  stop_daemon
}
repeat_indep() {
  local part cmd
  for part in SMALL LARGE; do
    cmd="P2P_$part[@]"
    step "repeat_${1}_indep_${part,,}" 20 "${!cmd}" --nccl_threads --nccl_only \
      >> "$RDIR/indep_nccl_$1.txt" 2>> "$RDIR/indep_nccl_$1.err" || why "$RDIR/indep_nccl_$1.err"
  done
}
s_rep=$SECONDS
for r in $(seq 1 "$REPEATS"); do
  if [ $(( SECONDS - s_rep )) -ge "$REPEATS_S" ]; then
    note "nccl repeats" "stopped after $(( r - 1 )) of $REPEATS: ${REPEATS_S}s used"
    break
  fi
  if (( r % 2 )); then
    repeat_daemon "$r"; repeat_indep "$r"
  else
    repeat_indep "$r"; repeat_daemon "$r"
  fi
done

# ---------------------------------------------------------------- report
GPUS=$(timeout 5 nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | paste -sd ';' -)
# The binaries' commit when the builder left one (a copied tree may carry a
# stale .git), else the tree's.
REV=$(cat "$BIN/REV" 2>/dev/null || git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
HEADER="- command: \`bash bench/gpu_run.sh $1 $2\` (binaries built at $REV, $(( SECONDS - T0 )) s until the report)
- GPUs (nvidia-smi name, driver): ${GPUS:-unknown}; this run: $NGPU (CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-all})
- date: $(date -u)"
COMBINE=(bench/combine_gpu.py
  --daemon "$OUT/daemon_allreduce.jsonl" --daemon "$OUT/daemon_allgather.jsonl"
  --daemon "$OUT/daemon_reducescatter.jsonl" --daemon "$OUT/daemon_alltoall.jsonl"
  --daemon "$OUT/daemon_broadcast.jsonl" --daemon_graph "$OUT/daemon_allreduce_graph.jsonl"
  --daemon_graph "$OUT/daemon_allgather_graph.jsonl" --daemon_graph "$OUT/daemon_reducescatter_graph.jsonl"
  --daemon_graph "$OUT/daemon_alltoall_graph.jsonl" --daemon_graph "$OUT/daemon_broadcast_graph.jsonl"
  --torch "$OUT/torch.json" --torch_graph "$OUT/torch_graph.json" --nccl_tests "$OUT/nccl_tests.txt" --nccl_repeats "$RDIR"
  --world "$NGPU"
  --notes "$STEPS" --header "$HEADER" --out "$OUT/gpu_report.md")
if ! step combine 10 "$PY" "${COMBINE[@]}"; then
  [ -x /usr/bin/python3 ] && step combine_again 10 /usr/bin/python3 "${COMBINE[@]}"
fi

log "done in $(( SECONDS - T0 ))s; outputs in $OUT; $FAILED_STEPS step(s) failed"
echo
if [ -f "$OUT/gpu_report.md" ]; then
  cat "$OUT/gpu_report.md"
else
  echo "no report was written; steps:"
  cat "$STEPS"
fi
# Exit status: the number of failed steps (0: every step ran clean).
exit $(( FAILED_STEPS > 100 ? 100 : FAILED_STEPS ))
