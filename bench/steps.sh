# Sourced by the GPU scripts (bench/gpu_all.sh, bench/gpu_scale.sh,
# bench/regret_gpu.sh, bench/nccl_tuner_gpu.sh, bench/tp_layers_gpu.sh,
# bench/tp_dynamic_gpu.sh): their common setup, a daemon started and
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
