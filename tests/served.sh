# Sourced by the shell tests that start a daemon; the test defines fail().
#   served PID WHY CTL...  waits (at most 10 s) until the daemon PID answers
#                          `CTL... info`; fails with WHY if PID ended first
#   stopped PID            SIGTERM, then fails unless PID exits 0
served() {
  local pid=$1 why=$2
  shift 2
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || fail "$why"
    "$@" info > /dev/null 2>&1 && return 0
    sleep 0.1
  done
  fail "the daemon did not answer within 10 s"
}

stopped() {
  kill -TERM "$1"
  wait "$1"
  local rc=$?
  [ "$rc" = 0 ] || fail "the daemon exited $rc on SIGTERM"
}
