#!/bin/bash
# A build without CUDA (docs/operations.md#building-without-cuda): the daemon
# logs that it has no cuda backend and serves on sim; backend "cuda" is
# refused at start with FAILED_PRECONDITION; --gpu_worker says so, exit 1.
set -u
daemon=${TEST_SRCDIR:-.}/autotuned/daemon/autotuned
cli=${TEST_SRCDIR:-.}/autotuned/client/cli/autotunectl
# /tmp: a Unix socket path has at most 107 bytes, fewer than TEST_TMPDIR may take.
dir=$(mktemp -d /tmp/autotuned-nocuda.XXXXXX)
pid=
trap 'kill -9 $pid 2>/dev/null; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; cat "$dir/log" >&2 2>/dev/null; exit 1; }

timeout 30 "$daemon" --backend=cuda --socket="$dir/c.sock" --no_cache > "$dir/log" 2>&1
rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "--backend=cuda: exit status $rc, expected an error"
grep -q "FAILED_PRECONDITION: this autotuned was built without the cuda backend" "$dir/log" ||
  fail "--backend=cuda: no FAILED_PRECONDITION naming the missing cuda backend"

timeout 30 "$daemon" --gpu_worker > "$dir/log" 2>&1
rc=$?
[ "$rc" = 1 ] || fail "--gpu_worker: exit status $rc, expected 1"
grep -q "built without the cuda backend" "$dir/log" || fail "--gpu_worker: no message"

"$daemon" --socket="$dir/s.sock" --no_cache --log_level=info > "$dir/log" 2>&1 &
pid=$!
for _ in $(seq 300); do
  "$cli" --socket="$dir/s.sock" --connect_timeout=2s info > "$dir/info" 2>&1 && break
  kill -0 "$pid" 2>/dev/null || fail "the daemon (backend auto) did not start"
  sleep 0.1
done
grep -q "backend auto: sim; this autotuned was built without the cuda backend" "$dir/log" ||
  fail "backend auto: no log line saying there is no cuda backend"
grep -q "sim" "$dir/info" || fail "autotunectl info does not show the sim backend: $(cat "$dir/info")"
"$cli" --socket="$dir/s.sock" tune --collective=all_reduce --bytes=4KiB > "$dir/tune" 2>&1 ||
  fail "tune on sim: $(cat "$dir/tune")"
grep -q "TUNED" "$dir/tune" || fail "tune on sim: not TUNED: $(cat "$dir/tune")"
echo "PASS: no cuda backend, said at start and on --backend=cuda; sim serves"
