#!/bin/sh
# The main job, end to end: build the daemon and the CLI, start the daemon on
# its embedded default configuration (the sim backend when there is no GPU),
# send it a real tuning request (all_reduce, float32, 1 MiB, every candidate
# of the catalogue, on all of the node's devices) and print the ranked result,
# ask again (answered from the cache), then stop the daemon.
#
# As root the daemon uses its default paths (/run/autotuned/autotuned.sock,
# /var/lib/autotuned/cache); otherwise both go under a private directory.
#
#   deploy/demo.sh          (no arguments; --help: this text)
set -eu
case "${1:-}" in
  -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
  '') ;;
  *) echo "demo: no arguments taken, got \"$1\" (see --help)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."

bazel build //daemon:autotuned //client/cli:autotunectl
bin=bazel-bin

flags=""
ctl_flags=""
if [ "$(id -u)" != 0 ]; then
  dir=${XDG_RUNTIME_DIR:-/tmp}/autotuned-demo-$(id -u)
  mkdir -p "$dir"
  flags="--socket=$dir/autotuned.sock --cache_dir=$dir/cache"
  ctl_flags="--socket=$dir/autotuned.sock"
fi

# shellcheck disable=SC2086
$bin/daemon/autotuned $flags &
daemon=$!
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null || true' EXIT INT TERM

# Wait (at most 10 s) until the daemon answers.
i=0
# shellcheck disable=SC2086
until $bin/client/cli/autotunectl $ctl_flags info >/dev/null 2>&1; do
  i=$((i + 1))
  if [ $i -gt 100 ] || ! kill -0 $daemon 2>/dev/null; then
    echo "demo: the daemon did not come up" >&2
    exit 1
  fi
  sleep 0.1
done

# shellcheck disable=SC2086
$bin/client/cli/autotunectl $ctl_flags info
echo
# shellcheck disable=SC2086
$bin/client/cli/autotunectl $ctl_flags tune --collective=all_reduce \
  --dtype=float32 --bytes=1MiB --refresh
echo
echo "The same request again is answered from the cache:"
# shellcheck disable=SC2086
$bin/client/cli/autotunectl $ctl_flags tune --collective=all_reduce \
  --dtype=float32 --bytes=1MiB
