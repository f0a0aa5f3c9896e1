# Sourced by the one-GPU check scripts (bench/one_gpu_check.sh,
# bench/client_round_check.sh) with their three arguments BIN_DIR PY_DIR
# OUT_DIR: sets BIN, PYDIR, OUT, PY (the PyTorch venv's python), the NCCL
# library path and settings (NVLink multicast off), `failed`, and step().
set -u
if [ $# -ne 3 ]; then echo "usage: bash $0 BIN_DIR PY_DIR OUT_DIR" >&2; exit 2; fi
BIN=$(cd "$1" && pwd) || exit 2
PYDIR=$(cd "$2" && pwd) || exit 2
mkdir -p "$3" && OUT=$(cd "$3" && pwd) || exit 2
PY=${PYTHON:-/opt/torch/.venv/bin/python3}
[ -x "$PY" ] || PY=$(command -v python3)
NCCL_LIB_DIR=${NCCL_LIB_DIR:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib}
export LD_LIBRARY_PATH="$NCCL_LIB_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
failed=0
step() {  # step NAME COMMAND...: runs it, output to OUT/NAME.txt, one line of verdict
  local name=$1; shift
  local t0=$SECONDS
  "$@" > "$OUT/$name.txt" 2>&1
  local rc=$?
  echo "$name: rc=$rc ($((SECONDS - t0)) s)" | tee -a "$OUT/summary.txt"
  [ $rc -eq 0 ] || failed=$((failed + 1))
}
