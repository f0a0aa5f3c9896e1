#!/bin/bash
# Under systemd ($JOURNAL_STREAM names the daemon's stderr) every log line
# starts with its syslog priority, so that journald files errors as errors;
# with $JOURNAL_STREAM unset, or naming another stream, lines are unchanged.
# The daemon is made to log a warning (a malformed WATCHDOG_USEC) and an
# error (a cache directory it cannot create), and exits 1.
set -u
daemon=${TEST_SRCDIR:-.}/autotuned/daemon/autotuned
dir=$(mktemp -d "${TEST_TMPDIR:-/tmp}/journald.XXXXXX")
# /tmp: a Unix socket path has at most 107 bytes, fewer than TEST_TMPDIR may take.
sock=$(mktemp -d /tmp/autotuned-journald.XXXXXX)
trap 'rm -rf "$dir" "$sock"' EXIT
fail() { echo "FAIL: $*" >&2; cat "$dir"/*.log >&2; exit 1; }

# run LOG JOURNAL_STREAM: the daemon with stderr to LOG, its status checked.
run() {
  : > "$1"
  local stream=$2
  [ "$stream" = self ] && stream=$(stat -c '%d:%i' "$1")
  JOURNAL_STREAM=$stream WATCHDOG_USEC=soon timeout 20 "$daemon" --backend=sim \
    --socket="$sock/s.sock" --cache_dir=/dev/null/cache --log_level=info 2>> "$1" > /dev/null
  [ $? -eq 1 ] || fail "the daemon did not exit 1 at the bad cache directory"
}

run "$dir/journal.log" self
grep -q '^<4>\[.*\] \[warning\] watchdog off: .*WATCHDOG_USEC' "$dir/journal.log" ||
  fail "no <4> warning line under JOURNAL_STREAM"
grep -q '^<3>\[.*\] \[error\] cache: ' "$dir/journal.log" ||
  fail "no <3> error line under JOURNAL_STREAM"
grep -qv '^<[0-7]>\[' "$dir/journal.log" && fail "a line without its priority"

run "$dir/plain.log" ""
grep -q '^\[.*\] \[error\] cache: ' "$dir/plain.log" || fail "no plain error line"
grep -q '^<' "$dir/plain.log" && fail "a priority prefix without JOURNAL_STREAM"

run "$dir/other.log" "$(stat -c '%d:%i' "$dir")"
grep -q '^\[.*\] \[warning\] watchdog off' "$dir/other.log" || fail "no plain warning line"
grep -q '^<' "$dir/other.log" && fail "a priority prefix for another stream"
echo PASS
