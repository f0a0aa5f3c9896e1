# Sourced by the GPU scripts (bench/gpu_all.sh, bench/gpu_scale.sh,
# bench/regret_gpu.sh, bench/nccl_tuner_gpu.sh, bench/nccl_agreement_gpu.sh,
# bench/tp_layers_gpu.sh, bench/tp_dynamic_gpu.sh; bench/a2av_gpu.sh for the
# daemon's start and stop): their common setup, a daemon started and
# stopped, and one helper that runs a step under `timeout`, sends its output
# to a file and logs its outcome, so that a failing step is recorded and the
# next one runs.
#
#   gpu_setup BIN_DIR PY_DIR OUT_DIR
#                             BIN, PY_DIR, OUT (made) as absolute paths;
#                             PYTHON (default the GPU host's torch venv);
#                             NVLink multicast off for NCCL and PyTorch;
#                             PyTorch's NCCL on LD_LIBRARY_PATH;
#                             STEPS_LOG=OUT/steps.log. Non-zero: a bad folder.
#   STEPS_LOG=FILE            every step's line is appended there (and printed)
#   step NAME LIMIT_S OUTFILE CMD...
#   gpu_begin SCRIPT BIN_DIR PY_DIR OUT_DIR [WORLD...]
#                             the start of a script that takes those arguments
#                             (else its usage and exit 2): gpu_setup,
#                             PYTHONUNBUFFERED, PYTHONPATH=PY_DIR and
#                             AUTOTUNED_KERNELS_LIB exported, gpu_worlds
#   gpu_worlds [WORLD...]     WORLDS: the world sizes given, else 2 and 4 as the
#                             GPUs allow (nvidia-smi -L)
#   daemon_start LOG ARGS...  $BIN/autotuned --socket=$SOCK ARGS... in the
#                             background (its pid in DPID), waiting until the
#                             socket answers (30 s at most)
#   daemon_stop               SIGTERM, 20 s, then SIGKILL; nothing when none
#   tp_setup NAME LIMIT_S     the TP layer scripts' start, after gpu_begin:
#                             LIMIT (TP_BENCH_STEP_S, else LIMIT_S), REPS
#                             (TP_BENCH_REPS, 2), EXTRA (TP_BENCH_ARGS), env.txt,
#                             SOCK=/tmp/at-NAME.sock, CACHE (a new folder; the
#                             daemon stopped and CACHE removed at exit)
#   tp_world W SCRIPT         GPUs 0..W-1, D=OUT/wW, a daemon on CACHE, and
#                             run=(torchrun of SCRIPT on W ranks with --socket
#                             and EXTRA)
#
# A step's line: name, exit status, seconds, ok / FAILED / TIMED OUT.
# STEPS_FAILED counts the steps that did not end ok.
STEPS_FAILED=0

step() {
  local name=$1 limit=$2 out=$3 s=$SECONDS rc what=ok
  shift 3
  timeout -k 5 "$limit" "$@" > "$out" 2>&1
  rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    what="TIMED OUT (limit ${limit}s)"
  elif [ "$rc" -ne 0 ]; then
    what=FAILED
  fi
  [ "$what" = ok ] || STEPS_FAILED=$((STEPS_FAILED + 1))
  printf '%-24s rc=%-4s %4ss  %s\n' "$name" "$rc" "$((SECONDS - s))" "$what" |
    tee -a "${STEPS_LOG:-/dev/null}"
  return "$rc"
}

gpu_begin() {
  local script=$1
  shift
  if [ $# -lt 3 ]; then
    echo "usage: bash $script BIN_DIR PY_DIR OUT_DIR [WORLD...]" >&2
    exit 2
  fi
  gpu_setup "$1" "$2" "$3" || exit 2
  shift 3
  export PYTHONUNBUFFERED=1 PYTHONPATH="$PY_DIR"
  export AUTOTUNED_KERNELS_LIB="$BIN/libautotuned_kernels_abi.so"
  gpu_worlds "$@"
}

gpu_worlds() {
  WORLDS=("$@")
  if [ ${#WORLDS[@]} -eq 0 ]; then
    local gpus
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
    [ "$gpus" -ge 2 ] && WORLDS+=(2)
    [ "$gpus" -ge 4 ] && WORLDS+=(4)
  fi
  return 0
}

DPID=""
daemon_start() {
  local log=$1
  shift
  rm -f "$SOCK"
  "$BIN/autotuned" --socket="$SOCK" "$@" > "$log" 2>&1 &
  DPID=$!
  for _ in $(seq 300); do [ -S "$SOCK" ] && break; sleep 0.1; done
  "$BIN/autotunectl" --socket="$SOCK" info > /dev/null 2>&1 || sleep 2
}

daemon_stop() {
  [ -n "$DPID" ] || return 0
  kill -TERM "$DPID" 2>/dev/null
  for _ in $(seq 200); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$DPID" 2>/dev/null
  DPID=""
}

gpu_setup() {
  BIN=$(cd "$1" && pwd) || return 2
  PY_DIR=$(cd "$2" && pwd) || return 2
  mkdir -p "$3" || return 2
  OUT=$(cd "$3" && pwd)
  PYTHON=${PYTHON:-/opt/torch/.venv/bin/python3}
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
  local nccl_lib
  nccl_lib=$("$PYTHON" -c 'import nvidia.nccl, os; print(os.path.join(nvidia.nccl.__path__[0], "lib"))' 2>/dev/null)
  [ -n "$nccl_lib" ] && export LD_LIBRARY_PATH="$nccl_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  STEPS_LOG=$OUT/steps.log
  return 0
}

tp_setup() {
  LIMIT=${TP_BENCH_STEP_S:-$2}
  REPS=${TP_BENCH_REPS:-2}
  read -r -a EXTRA <<< "${TP_BENCH_ARGS:-}"
  { date -u; nvidia-smi -L
    "$PYTHON" -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
    sha256sum "$BIN/autotuned" "$AUTOTUNED_KERNELS_LIB"
    [ -e "$BIN/libautotuned_torch_ops.so" ] && sha256sum "$BIN/libautotuned_torch_ops.so"
    "$PYTHON" -c 'import torch; from autotuned import ops; print("torch.ops.autotuned backend:", ops.backend(), ops.torch_ops_library() or "")'
    echo "worlds: ${WORLDS[*]}  reps: $REPS  args: ${EXTRA[*]}"; } >> "$OUT/env.txt" 2>&1
  SOCK=/tmp/at-$1.sock
  CACHE=$(mktemp -d "/tmp/at-$1-cache.XXXXXX") || exit 2
  trap 'daemon_stop; rm -rf "$CACHE"' EXIT
}

tp_world() {
  D=$OUT/w$1
  mkdir -p "$D"
  export CUDA_VISIBLE_DEVICES
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $(($1 - 1)))
  daemon_start "$D/daemon.log" --cache_dir="$CACHE" --log_level=info
  run=("$PYTHON" -m torch.distributed.run --standalone --nproc_per_node="$1"
       "$2" --socket "$SOCK" "${EXTRA[@]}")
}
