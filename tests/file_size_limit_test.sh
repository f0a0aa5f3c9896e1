#!/bin/bash
# The daemon keeps serving under a file size limit (RLIMIT_FSIZE: `ulimit -f`,
# systemd's LimitFSIZE=) that a cache entry exceeds: the store fails with
# EFBIG, is logged, and the round is answered; SIGXFSZ does not kill it.
set -u
daemon=${TEST_SRCDIR:-.}/autotuned/daemon/autotuned
cli=${TEST_SRCDIR:-.}/autotuned/client/cli/autotunectl
# /tmp: a Unix socket path has at most 107 bytes, fewer than TEST_TMPDIR may take.
dir=$(mktemp -d /tmp/autotuned-fsize.XXXXXX)
fail() { echo "FAIL: $*" >&2; cat "$dir/log.txt" >&2; exit 1; }
# shellcheck source=tests/served.sh
. "$(dirname "$0")/served.sh"
# The cache exists with its epoch: under the limit, no file can grow at all.
mkdir -m 0750 "$dir/cache"
echo 0123456789abcdef0123456789abcdef > "$dir/cache/epoch"
# The log goes through a pipe, which the limit does not cover.
mkfifo "$dir/log"
cat "$dir/log" > "$dir/log.txt" &
reader=$!
(ulimit -f 0 && exec "$daemon" --backend=sim --socket="$dir/s.sock" --cache_dir="$dir/cache" \
   --log_level=info > "$dir/log" 2>&1) &
pid=$!
trap 'kill -9 $pid 2>/dev/null; kill $reader 2>/dev/null; rm -rf "$dir"' EXIT
ctl=("$cli" "--socket=$dir/s.sock" --connect_timeout=2s)
served "$pid" "the daemon died before it served" "${ctl[@]}"
for i in 1 2; do
  out=$("${ctl[@]}" tune --collective=all_reduce --bytes=4KiB) ||
    fail "tune $i under the file size limit: the daemon did not answer"
  echo "$out" | grep -q ": TUNED" || fail "tune $i is not TUNED (nothing could be cached): $out"
done
kill -0 "$pid" 2>/dev/null || fail "the daemon died (SIGXFSZ?)"
grep -q "cache: not stored .*File too large" "$dir/log.txt" || fail "the failed store is not logged"
ls "$dir/cache" | grep -q '\.tmp-' && fail "a temporary file was left behind"
stopped "$pid"
echo "PASS: rounds answered and logged, nothing cached, under a file size limit of 0"
