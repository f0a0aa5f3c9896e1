# Sourced by the GPU scripts (bench/gpu_all.sh, bench/gpu_scale.sh): one
# helper that runs a step under `timeout`, sends its output to a file and
# logs its outcome, so that a failing step is recorded and the next one runs.
#
#   STEPS_LOG=FILE            every step's line is appended there (and printed)
#   step NAME LIMIT_S OUTFILE CMD...
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
