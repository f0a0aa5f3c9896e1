#!/bin/bash
# The daemon keeps serving when whatever reads its log goes away (a pipe to
# `head`, a dead log collector): it ignores SIGPIPE, and a log line written
# to the broken pipe is lost, not the daemon.
set -u
daemon=${TEST_SRCDIR:-.}/autotuned/daemon/autotuned
cli=${TEST_SRCDIR:-.}/autotuned/client/cli/autotunectl
# /tmp: a Unix socket path has at most 107 bytes, fewer than TEST_TMPDIR may take.
dir=$(mktemp -d /tmp/autotuned-pipe.XXXXXX)
fail() { echo "FAIL: $*" >&2; exit 1; }
# shellcheck source=tests/served.sh
. "$(dirname "$0")/served.sh"
mkfifo "$dir/log"
# The reader takes the first 64 bytes of the log and exits.
head -c 64 "$dir/log" > /dev/null &
reader=$!
# --backend=sim: the cuda backend, tried first by "auto", ignores SIGPIPE for
# its worker pipe itself, which would hide a daemon that does not.
"$daemon" --backend=sim --socket="$dir/s.sock" --cache_dir="$dir/cache" --log_level=info > "$dir/log" 2>&1 &
pid=$!
trap 'kill -9 $pid 2>/dev/null; kill $reader 2>/dev/null; rm -rf "$dir"' EXIT
ctl=("$cli" "--socket=$dir/s.sock" --connect_timeout=2s)
served "$pid" "the daemon died before it served (SIGPIPE?)" "${ctl[@]}"
wait "$reader"
echo "the log's reader is gone"
# Every round logs a line, now into a pipe nobody reads.
for i in 1 2 3; do
  "${ctl[@]}" tune --collective=all_reduce --bytes=4KiB --refresh > /dev/null ||
    fail "tune $i after the reader left: the daemon did not answer"
done
kill -0 "$pid" 2>/dev/null || fail "the daemon died (SIGPIPE?)"
"${ctl[@]}" info > /dev/null || fail "the daemon no longer answers"
stopped "$pid"
echo "PASS: three rounds served and a clean stop after the log's reader went away"
