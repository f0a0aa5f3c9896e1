#!/bin/bash
# GPU test: a candidate whose kernel hangs is contained. The daemon (cuda
# backend, test faults on) is asked to tune all_reduce with
#   - all_reduce/nccl_hang_test (an NCCL all-reduce on rank 0 alone) and NCCL:
#     the worker must abort its communicators at the timeout and keep
#     serving (no new worker), the round must rule the hang out and NCCL win;
#   - the hanging P2P kernel all_reduce/hang_test and NCCL: the GPU worker
#     must be replaced, the round must answer with hang_test ruled out and
#     NCCL the winner, and the next round must succeed on a fresh worker.
# Usage: gpu_containment_test.sh [DAEMON CLI]  (defaults: Bazel runfiles)
# Prints SKIPPED and passes where the cuda backend finds no GPU.
set -u
daemon=${1:-${TEST_SRCDIR:-.}/autotuned/daemon/autotuned}
cli=${2:-${TEST_SRCDIR:-.}/autotuned/client/cli/autotunectl}
dir=$(mktemp -d /tmp/atgpu-XXXXXX)
trap 'kill -9 $pid 2>/dev/null; rm -rf "$dir"' EXIT
printf 'backend: "cuda"\ncuda { test_faults: true }\n' >"$dir/conf"
"$daemon" --config="$dir/conf" --socket="$dir/s.sock" --no_cache >"$dir/log" 2>&1 &
pid=$!
for _ in $(seq 600); do
  "$cli" --socket="$dir/s.sock" info >/dev/null 2>&1 && break
  if ! kill -0 $pid 2>/dev/null; then
    if grep -q "NOT_FOUND" "$dir/log"; then
      echo "SKIPPED: the cuda backend found no GPU: $(tail -1 "$dir/log")" >&2
      exit 0
    fi
    echo "FAIL: the daemon did not start:" >&2; cat "$dir/log" >&2; exit 1
  fi
  sleep 0.1
done
fail=0
check() { if ! grep -q -- "$2" <<<"$1"; then echo "FAIL: expected '$2' in:"; echo "$1"; fail=1; fi; }

start=$(date +%s%N)
out=$("$cli" --socket="$dir/s.sock" tune --collective=all_reduce --dtype=bf16 \
  --bytes=1MiB --candidates=all_reduce/nccl_hang_test,all_reduce/nccl --timeout_ms=3000 2>&1)
took_ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "$out"
echo "round with the hanging NCCL all-reduce answered in ${took_ms} ms"
check "$out" "TUNED"
check "$out" "winner all_reduce/nccl"
check "$out" "NCCL communicators aborted"
check "$(cat "$dir/log")" "aborted its NCCL communicators"
starts=$(grep -c "GPU worker .* started" "$dir/log")
[ "$starts" -eq 1 ] || { echo "FAIL: the worker was replaced after an NCCL abort"; fail=1; }

start=$(date +%s%N)
out=$("$cli" --socket="$dir/s.sock" tune --collective=all_reduce --dtype=bf16 \
  --bytes=1MiB --candidates=all_reduce/hang_test,all_reduce/nccl --timeout_ms=3000 2>&1)
took_ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "$out"
echo "round with the hanging kernel answered in ${took_ms} ms"
check "$out" "TUNED"
check "$out" "winner all_reduce/nccl"
check "$out" "worker was killed"
check "$(cat "$dir/log")" "GPU worker .* killed"

out=$("$cli" --socket="$dir/s.sock" tune --collective=all_reduce --dtype=bf16 \
  --bytes=1MiB --candidates=all_reduce/one_shot,all_reduce/nccl 2>&1)
echo "$out"
check "$out" "TUNED"
check "$out" "one_shot.* ok"
starts=$(grep -c "GPU worker .* started" "$dir/log")
echo "GPU workers started: $starts"
[ "$starts" -ge 2 ] || { echo "FAIL: no fresh worker"; fail=1; }
kill -TERM $pid; wait $pid; code=$?
[ $code -eq 0 ] || { echo "FAIL: daemon exit $code"; fail=1; }
[ $fail -eq 0 ] && echo "PASS"
exit $fail
