#!/bin/bash
# One group spread over several daemons on this host, every rank asking its
# own daemon at once; every rank's answer must be identical.
#
# DAEMONS daemons (default 2), each with RANKS_PER_DAEMON ranks (K, default
# 1): rank r asks daemon r / K, on its local GPU r % K. Peers on 127.0.0.1
# with one peer token. BACKEND (default cuda):
#   cuda  each daemon owns K GPUs through CUDA_VISIBLE_DEVICES (daemon d:
#         GPUs d*K..d*K+K-1); all_reduce bf16 1 MiB with all_reduce/nccl
#         (NCCL communicators across the daemons) and all_reduce/one_shot,
#         which must be ruled out as needing all ranks on one daemon.
#         SKIPPED (passes) with fewer than DAEMONS x K GPUs.
#   sim   each daemon has K virtual GPUs; all_reduce fp32 64 KiB with
#         all_reduce/ring and all_reduce/one_shot, both measured across the
#         daemons.
# PASS when the first round is TUNED and identical on every rank, a second
# round of the same asks answers CACHED, and a round of another size (on
# GPUs: a new NCCL unique id, new communicators) is TUNED again.
# TIMING (event_loop or cuda_graph; default: the daemons') is every round's
# timing mode; EXTRA_COUNTS (element counts, space separated) adds one
# round per count after those checks, each expected TUNED, its answers
# printed (bench/nccl_agreement_gpu.sh reads them).
# Usage: cross_daemon_test.sh [DAEMON CLI ASK]  (defaults: Bazel runfiles)
# On 8 GPUs: DAEMONS=2 RANKS_PER_DAEMON=4, or DAEMONS=4 RANKS_PER_DAEMON=2.
set -u
here=${TEST_SRCDIR:-.}/autotuned
daemon=${1:-$here/daemon/autotuned}
cli=${2:-$here/client/cli/autotunectl}
ask=${3:-$here/tests/cross_daemon_ask}
daemons=${DAEMONS:-2}
per=${RANKS_PER_DAEMON:-1}
backend=${BACKEND:-cuda}
if [ "$backend" = cuda ]; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU" || true)
  if [ "${gpus:-0}" -lt $((daemons * per)) ]; then
    echo "SKIPPED: this test needs $((daemons * per)) GPUs (nvidia-smi lists ${gpus:-0})" >&2
    exit 0
  fi
  candidates=all_reduce/nccl,all_reduce/one_shot dtype=bf16 count=524288 count2=4194304
else
  candidates=all_reduce/ring,all_reduce/one_shot dtype=fp32 count=16384 count2=65536
fi
last=$((daemons - 1))
# NVLink SHARP (multicast objects) stays off; the bootstrap uses loopback.
export NCCL_NVLS_ENABLE=0
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
dir=$(mktemp -d /tmp/atxd-XXXXXX)
pids=()
# (wait: reaps each daemon quietly, without the shell's "Killed" job notice)
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; [ -n "${KEEP_LOGS:-}" ] && cp "$dir"/*.log "$KEEP_LOGS"/ 2>/dev/null; rm -rf "$dir"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + RANDOM % 20000)); }
peers=()
sockets=()
peer_lines=""  # every daemon lists the others as its peers (config peers)
for d in $(seq 0 $last); do
  peers+=("127.0.0.1:$(port)")
  peer_lines+="peers: \"${peers[$d]}\""$'\n'
done
for d in $(seq 0 $last); do
  peer=${peers[$d]}
  sockets+=("$dir/s$d.sock")
  visible=$(seq -s, $((d * per)) $((d * per + per - 1)))
  printf 'backend: "%s"\nsim { gpus: %d }\npeer_token: "cross-daemon-test-token"\npeer_advertise: "%s"\n%s' \
    "$backend" "$per" "$peer" "$peer_lines" >"$dir/conf$d"
  CUDA_VISIBLE_DEVICES=$visible "$daemon" --config="$dir/conf$d" --socket="$dir/s$d.sock" \
    --cache_dir="$dir/cache$d" --peer_listen="$peer" --log_level=info >"$dir/daemon$d.log" 2>&1 &
  pids+=($!)
done
for d in $(seq 0 $last); do
  for _ in $(seq 600); do
    "$cli" --socket="$dir/s$d.sock" info >/dev/null 2>&1 && break
    if ! kill -0 "${pids[$d]}" 2>/dev/null; then
      if grep -q "NOT_FOUND" "$dir/daemon$d.log"; then
        echo "SKIPPED: the cuda backend found no GPU: $(tail -1 "$dir/daemon$d.log")" >&2
        exit 0
      fi
      echo "FAIL: daemon $d did not start:" >&2; cat "$dir/daemon$d.log" >&2; exit 1
    fi
    sleep 0.1
  done
done
fail=0
check() { if ! grep -q -- "$2" <<<"$1"; then echo "FAIL: expected '$2' in:"; echo "$1"; fail=1; fi; }
join() { local IFS=,; echo "$*"; }
args=(--sockets="$(join "${sockets[@]}")" --peers="$(join "${peers[@]}")"
      --ranks_per_daemon="$per" --group="xd-$$"
      --candidates="$candidates" --dtype="$dtype" ${TIMING:+--timing="$TIMING"})

start=$(date +%s%N)
out=$("$ask" "${args[@]}" --count="$count" --expect=TUNED 2>&1); rc=$?
took_ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "$out"
echo "first round (measured across $daemons $backend daemons x $per GPUs) answered in ${took_ms} ms"
[ $rc -eq 0 ] || { echo "FAIL: the first round (exit $rc)"; fail=1; }
if [ "$backend" = cuda ]; then
  winner="winner all_reduce/nccl"
  check "$out" "all_reduce/nccl .*median .* us"
  check "$out" "all_reduce/one_shot  ruled out: .*needs all ranks on one daemon"
else
  winner="winner all_reduce/"
  check "$out" "all_reduce/ring .*median .* us"
  check "$out" "all_reduce/one_shot .*median .* us"
fi
check "$out" "$winner"
check "$out" "rank $((daemons * per - 1)) "
# Every measured candidate says how it was timed: the round's mode (with no
# TIMING, the daemons' default, one of the two).
if [ -n "${TIMING:-}" ]; then
  check "$out" "timed by ${TIMING^^}"
else
  check "$out" "timed by \(EVENT_LOOP\|CUDA_GRAPH\)"
fi

start=$(date +%s%N)
out=$("$ask" "${args[@]}" --count="$count" --expect=CACHED 2>&1); rc=$?
took_ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "$out"
echo "second round answered in ${took_ms} ms"
[ $rc -eq 0 ] || { echo "FAIL: the second round (exit $rc)"; fail=1; }
check "$out" "$winner"

# A new round (another size): a new NCCL unique id, so each worker replaces
# the communicators of the first round with new ones.
out=$("$ask" "${args[@]}" --count="$count2" --expect=TUNED 2>&1); rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: the round of $count2 elements (exit $rc)"; fail=1; }
check "$out" "$winner"

for extra in ${EXTRA_COUNTS:-}; do
  out=$("$ask" "${args[@]}" --count="$extra" --expect=TUNED 2>&1); rc=$?
  echo "$out"
  [ $rc -eq 0 ] || { echo "FAIL: the round of $extra elements (exit $rc)"; fail=1; }
done

for d in $(seq 0 $last); do
  echo "--- daemon $d log (last lines) ---"
  tail -n 15 "$dir/daemon$d.log"
done
[ $fail -eq 0 ] && echo PASS
exit $fail
