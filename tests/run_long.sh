#!/bin/sh
# Runs the long tier: every test tagged "manual" whose name ends in
# _long_test, anywhere in the workspace (found by bazel query, so a new long
# twin is picked up without editing this script). Extra arguments go to
# `bazel test`, e.g.
#
#   tests/run_long.sh                                   # all long twins
#   tests/run_long.sh --test_output=streamed            # watch them
#   tests/run_long.sh --test_env=AUTOTUNED_RANDOM_SEED=1122
#   LONG_FILTER=multi_daemon tests/run_long.sh          # only labels matching
#
# docs/testing.md says what each long twin covers and how long it takes.
# --help prints this and runs nothing.
set -eu
case "${1:-}" in
  -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
esac
cd "$(dirname "$0")/.."

query='filter("_long_test$", attr(tags, "\bmanual\b", tests(//...)))'
all=$(bazel query --noshow_progress --output=label "$query")
targets=$(echo "$all" | grep -E -e "${LONG_FILTER:-.}" || true)
if [ -z "$targets" ]; then
  echo "run_long: no manual *_long_test target matches" >&2
  exit 1
fi
echo "run_long: $(echo "$targets" | wc -l) targets:"
echo "$targets" | sed 's/^/  /'
# shellcheck disable=SC2086
exec bazel test "$@" $targets
