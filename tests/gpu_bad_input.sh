#!/bin/bash
# GPU path, bad input: each request gets a clear error or the candidate is
# ruled out with a reason, and the daemon keeps serving. Runs against a
# daemon already listening on $1 (a Unix socket) with the cuda backend, using
# the CLI $2. Prints each answer; exits 1 on the first unexpected one.
set -u
sock=$1
cli=$2
fail=0
expect() {  # expect NAME PATTERN -- CLI ARGS...
  local name=$1 pattern=$2; shift 3
  out=$("$cli" --socket="$sock" "$@" 2>&1)
  echo "== $name: autotunectl $*"
  echo "$out"
  grep -q -- "$pattern" <<<"$out" || { echo "FAIL: expected '$pattern'"; fail=1; }
}
expect "more ranks than GPUs" "INVALID_ARGUMENT: group.world_size: 4 ranks" -- \
  tune --collective=all_reduce --dtype=bf16 --bytes=1MiB --world=4 --candidates=all_reduce/nccl
expect "over the memory cap" "INVALID_ARGUMENT: problems\[0\].count:.*memory cap" -- \
  tune --collective=all_reduce --dtype=bf16 --bytes=2GiB --candidates=all_reduce/nccl
expect "parameter out of range" "INVALID_ARGUMENT: .*threads.*outside \[32, 1024\]" -- \
  tune --collective=all_reduce --dtype=bf16 --bytes=1MiB --candidates=all_reduce/one_shot:threads=2048
expect "launch shape the kernel refuses" "ruled out: .*threads 33" -- \
  tune --collective=all_reduce --dtype=bf16 --bytes=1MiB \
  --candidates=all_reduce/one_shot:threads=33,all_reduce/nccl
expect "chunk not a multiple of the vector" "ruled out\|TUNED" -- \
  tune --collective=all_reduce --dtype=fp16 --bytes=3000000 \
  --candidates=all_reduce/two_shot_chunked:chunk_kib=17,all_reduce/nccl
expect "odd count, scalar tail" "TUNED" -- \
  tune --collective=all_reduce --dtype=fp32 --bytes=4004 \
  --candidates=all_reduce/one_shot,all_reduce/two_shot,all_reduce/nccl
expect "uneven all_to_all" "TUNED" -- \
  tune --collective=all_to_all --dtype=bf16 --world=2 --splits=1000,3,0,77777 \
  --candidates=all_to_all/nccl
expect "still serving" "TUNED" -- \
  tune --collective=all_reduce --dtype=bf16 --bytes=64KiB --candidates=all_reduce/nccl,all_reduce/one_shot
[ $fail -eq 0 ] && echo "PASS"
exit $fail
