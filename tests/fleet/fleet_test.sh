#!/bin/bash
# The group protocol across real interfaces under network faults: HOSTS
# daemons (default 3) in network namespaces (netns.sh), RANKS ranks on each
# (default 2), the leader on host 0. Cases, each a new problem (a new round
# key), each followed by a round with the network whole again, which must be
# measured (TUNED) by every rank:
#   clean           TUNED for every rank, then the same asks CACHED
#   delay           every packet held DELAY_MS (50) on its way out: TUNED
#   loss            every host drops LOSS (0.05) of what it receives: every
#                   rank answered, one answer
#   follower cut    the last host and the leader cut off from each other
#                   while the ranks measure: the other hosts' ranks get one
#                   FAILED answer naming it, its ranks one UNAVAILABLE
#   leader cut      the leader cut off from every host while the ranks
#                   measure: its ranks FAILED, every other rank UNAVAILABLE
#                   (in both, the leader's side gets FALLBACK instead on a
#                   machine so slow that the cut comes before every rank's
#                   ask reached the leader)
#   cut that heals  the last host cut off from the leader for HEAL_S (3 s)
#                   while the ranks measure: every rank gets one answer
#   follower kill   the last host's daemon SIGKILLed while the ranks
#                   measure, then started again: the other hosts' ranks get
#                   one FAILED answer (its own ranks lose their daemon)
#   leader kill     the leader's daemon SIGKILLed while the ranks measure,
#                   then started again: every other rank gets one
#                   UNAVAILABLE
# Every case: the ranks that got an answer got the same one, those that got
# an error the same error, and every rank's call ended within the bound
# (docs/protocol.md, "Groups over several daemons": window + 2 x the round's
# bound + 5 s). At the end every daemon still runs and answers. Prints each
# rank's outcome and the counts per outcome.
#
# REPEAT (default 1): how many times the cases run, one after the other.
# FLEET_TLS=1: the daemons talk over mutual TLS, without a token (netns.sh).
# Needs root (namespaces, iptables): SKIPPED otherwise.
# Usage: fleet_test.sh [DAEMON CLI DELAYER ASK]  (defaults: Bazel runfiles)
set -u
if [ "$(id -u)" != 0 ]; then
  echo "SKIPPED: needs root, to make network namespaces and firewall rules" >&2
  exit 0
fi
for tool in ip iptables; do
  command -v "$tool" >/dev/null ||
    { echo "FAIL: $tool not found (deploy/setup.sh installs it)" >&2; exit 1; }
done
here=${TEST_SRCDIR:-.}/autotuned
DAEMON=${1:-$here/daemon/autotuned}
CLI=${2:-$here/client/cli/autotunectl}
DELAYER=${3:-$here/tests/fleet/delayer}
ASK=${4:-$here/tests/fleet/fleet_ask}
hosts=${HOSTS:-3}
per=${RANKS:-2}
world=$((hosts * per))
last=$((hosts - 1))
FLEET=${FLEET:-atft}
FLEET_DIR=$(mktemp -d "/tmp/$FLEET-XXXXXX")
# shellcheck source=tests/fleet/netns.sh
. "$(dirname "$0")/netns.sh"
trap 'fleet_down; [ -n "${KEEP_LOGS:-}" ] && cp "$FLEET_DIR"/*.log "$KEEP_LOGS"/; rm -rf "$FLEET_DIR"' EXIT

# The rounds: a window of 3 s, 2 candidates of 2 s each (10 s under delay
# and loss, where every barrier takes round trips) in 3 fixed passes (one
# per timed iteration), so the engine's bound is 3 x 2 x 2 s, plus one pass
# and the 2 s pass budget, = 18 s, the round's 10 s + 2 x 18 s = 46 s, and a rank's call
# ends within 3 + 2 x 46 + 5 = 100 s (356 s with 10 s candidates).
window_ms=3000
timeout_ms=2000
bound_ms() { echo $((window_ms + 2 * (10000 + 2 * (4 * 2 * timeout_ms + 2000)) + 5000)); }
# all_reduce/slow: one rank sleeps 200 ms per call, so that a cut falls
# while the ranks measure.
slow='sim { faults { name: "all_reduce/slow" base: "all_reduce/one_shot" kind: SLOW_RANK rank: 1 delay_us: 200000 } }'
fast=all_reduce/one_shot,all_reduce/two_shot

fleet_up "$hosts" || { echo "FAIL: could not make the namespaces"; exit 1; }
fleet_daemons "$per" "$slow" || { echo "FAIL: the daemons did not start"; exit 1; }
auth="a peer token"
if [ "${FLEET_TLS:-0}" = 1 ]; then
  auth="mutual TLS"
  for h in $(seq 0 "$last"); do
    grep -q "peer=$(fleet_peer "$h") (mutual TLS)" "$FLEET_DIR/daemon$h.log" ||
      { echo "FAIL: host $h's daemon does not serve its peer port over mutual TLS"; exit 1; }
  done
fi
echo "$hosts hosts in namespaces $(fleet_ns 0)..$(fleet_ns "$last"), $per ranks each," \
  "peers $(fleet_peers), $auth; the bound: $(bound_ms) ms"

count=1000  # each round asks for a new count: a new round key
outcomes=$FLEET_DIR/outcomes
failures=$FLEET_DIR/failures  # a file: rounds also run in background subshells
: >"$outcomes"
: >"$failures"
failed() { echo "FAIL: $*" | tee -a "$failures"; }

# ask CASE [fleet_ask flags]: one round of every rank; its output in
# $FLEET_DIR/CASE.out, each rank's outcome counted under CASE.
ask() {
  local name=$1
  shift
  count=$((count + 1))
  "$ASK" --sockets="$(fleet_sockets)" --peers="$(fleet_peers)" --ranks_per_daemon="$per" \
    --group="$name" --count="$count" --window_ms="$window_ms" --timeout_ms="$timeout_ms" \
    --candidates="$fast" "$@" >"$FLEET_DIR/$name.out" 2>&1
  local rc=$?
  sed "s/^/  [$name] /" "$FLEET_DIR/$name.out"
  [ $rc -eq 0 ] || failed "$name: ranks got different answers (exit $rc)"
  awk -v c="$name" '/^round [0-9]+ rank/ {print c, $5}' "$FLEET_DIR/$name.out" >>"$outcomes"
  awk -v b="$(bound_ms)" -v c="$name" '/^round [0-9]+ rank/ {
      split($7, t, "="); if (t[2] + 0 > b) print "FAIL: " c ": rank " $4 " took " t[2] " ms" }' \
    "$FLEET_DIR/$name.out" | tee -a "$failures"
}

# expect CASE FIRST LAST OUTCOMES: ranks FIRST..LAST got one answer (or one
# error), its outcome one of OUTCOMES (A|B).
expect() {
  local out=$FLEET_DIR/$1.out
  local got
  got=$(awk -v a="$2" -v b="$3" '/^round [0-9]+ rank/ { r = $4 + 0;
          if (r >= a && r <= b) print $5, $6 }' "$out" | sort -u)
  if [ "$got" = "" ] || [ "$(wc -l <<<"$got")" != 1 ] || ! [[ "${got%% *}" =~ ^($4)$ ]]; then
    failed "$1: ranks $2..$3 should share one $4 answer, got: $got"
  fi
}

# measured_again CASE: the network is whole again; the next round is TUNED.
measured_again() {
  ask "$1-after"
  expect "$1-after" 0 $((world - 1)) TUNED
}

# cut_during CASE CUT_SECONDS HEAL_AFTER_SECONDS PAIRS...: a round of
# all_reduce/slow, host pairs cut off from each other CUT_SECONDS after the
# ranks asked, healed HEAL_AFTER_SECONDS later (0: once the round is over).
cut_during() {
  local name=$1 at=$2 heal=$3 p
  shift 3
  ask "$name" --candidates=all_reduce/slow,all_reduce/one_shot &
  local asking=$!
  count=$((count + 1))  # as ask did in its subshell
  sleep "$at"
  for p in "$@"; do fleet_cut "${p%-*}" "${p#*-}"; done
  if [ "$heal" != 0 ]; then
    sleep "$heal"
    for p in "$@"; do fleet_heal "${p%-*}" "${p#*-}"; done
  fi
  wait "$asking"
  if [ "$heal" = 0 ]; then
    for p in "$@"; do fleet_heal "${p%-*}" "${p#*-}"; done
  fi
}

# kill_during CASE HOST: a round of all_reduce/slow, HOST's daemon
# SIGKILLed 0.5 s after the ranks asked; started again once the round is
# over.
kill_during() {
  local name=$1
  ask "$name" --candidates=all_reduce/slow,all_reduce/one_shot &
  local asking=$!
  count=$((count + 1))
  sleep 0.5
  [ -n "$(fleet_daemon_pid "$2")" ] || failed "$name: host $2's daemon is not running to be killed"
  fleet_kill_recorded "$FLEET_DIR/daemon$2.pid" 9
  wait "$asking"
  fleet_start_daemon "$2"
  fleet_wait_daemon "$2" || failed "$name: host $2's daemon did not start again"
}

# cases: every case once; $rep names this pass.
cases() {
  echo "== [$rep] clean"
  ask "clean$rep"
  expect "clean$rep" 0 $((world - 1)) TUNED
  count=$((count - 1))
  ask "clean-cached$rep"
  expect "clean-cached$rep" 0 $((world - 1)) CACHED

  echo "== [$rep] delay ${DELAY_MS:-50} ms each way"
  fleet_delay "${DELAY_MS:-50}" || { echo "FAIL: the delayer did not start"; exit 1; }
  timeout_ms=10000 ask "delay$rep"
  expect "delay$rep" 0 $((world - 1)) TUNED
  fleet_delay_off
  measured_again "delay$rep"

  echo "== [$rep] loss ${LOSS:-0.05}"
  fleet_loss "${LOSS:-0.05}" || { echo "FAIL: the loss rule"; exit 1; }
  timeout_ms=10000 ask "loss$rep"
  got=$(awk '/^round [0-9]+: /{print $4, $5}' "$FLEET_DIR/loss$rep.out")
  [ "$got" = "answered=$world distinct_answers=1" ] ||
    failed "loss: every rank should be answered alike, got $got"
  fleet_loss_off
  measured_again "loss$rep"

  echo "== [$rep] host $last cut off from the leader while measuring"
  cut_during "follower-cut$rep" 0.5 0 "0-$last"
  # The cut host's ranks: the leader's answer, from another follower, when
  # the cut host's call to the leader failed before its deadline; else one
  # UNAVAILABLE (its call ran to the deadline: it asks no one).
  expect "follower-cut$rep" 0 $((world - per - 1)) "FAILED|FALLBACK"
  expect "follower-cut$rep" $((world - per)) $((world - 1)) "FAILED|FALLBACK|UNAVAILABLE"
  if ! grep -q "^round [0-9]* rank $((world - 1)): UNAVAILABLE" "$FLEET_DIR/follower-cut$rep.out"; then
    expect "follower-cut$rep" 0 $((world - 1)) "FAILED|FALLBACK"
  fi
  measured_again "follower-cut$rep"

  echo "== [$rep] the leader cut off from every host while measuring"
  pairs=()
  for h in $(seq 1 "$last"); do pairs+=("0-$h"); done
  cut_during "leader-cut$rep" 0.5 0 "${pairs[@]}"
  expect "leader-cut$rep" 0 $((per - 1)) "FAILED|FALLBACK"
  expect "leader-cut$rep" "$per" $((world - 1)) UNAVAILABLE
  measured_again "leader-cut$rep"

  echo "== [$rep] host $last cut off from the leader for ${HEAL_S:-3} s while measuring"
  cut_during "heal$rep" 0.5 "${HEAL_S:-3}" "0-$last"
  got=$(awk '/^round [0-9]+: /{print $4, $5}' "$FLEET_DIR/heal$rep.out")
  [ "$got" = "answered=$world distinct_answers=1" ] ||
    failed "heal: every rank should be answered alike, got $got"
  measured_again "heal$rep"

  echo "== [$rep] host $last's daemon SIGKILLed while measuring, then started again"
  kill_during "follower-kill$rep" "$last"
  expect "follower-kill$rep" 0 $((world - per - 1)) "FAILED|FALLBACK"
  measured_again "follower-kill$rep"

  echo "== [$rep] the leader's daemon SIGKILLed while measuring, then started again"
  kill_during "leader-kill$rep" 0
  expect "leader-kill$rep" "$per" $((world - 1)) UNAVAILABLE
  measured_again "leader-kill$rep"
}

for rep in $(seq 1 "${REPEAT:-1}"); do cases; done

for h in $(seq 0 "$last"); do
  if [ -z "$(fleet_daemon_pid "$h")" ] || ! fleet_wait_daemon "$h"; then
    failed "the daemon of host $h is gone or does not answer"
  fi
done
echo "outcomes per case (rank outcomes, over $((${REPEAT:-1})) passes):"
awk '{gsub(/[0-9]+/, "", $1); print $1, $2}' "$outcomes" | sort | uniq -c | awk '{printf "  %-20s %-12s %d\n", $2, $3, $1}'
echo "outcomes in all:"
awk '{print $2}' "$outcomes" | sort | uniq -c | awk '{printf "  %-12s %d\n", $2, $1}'
if [ -s "$failures" ]; then
  echo "failures:"
  cat "$failures"
  for h in $(seq 0 "$last"); do
    echo "--- daemon $h log (last lines) ---"
    tail -n 20 "$FLEET_DIR/daemon$h.log"
  done
  exit 1
fi
echo PASS
