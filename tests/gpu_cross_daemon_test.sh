#!/bin/bash
# GPU test: one group spread over several daemons, measured with NCCL across
# them. DAEMONS daemons (default 2) on one host, each owning RANKS_PER_DAEMON
# GPUs (default 1) through CUDA_VISIBLE_DEVICES (daemon d: GPUs d*K..d*K+K-1;
# --backend=cuda), peers on 127.0.0.1 with the same peer token, are asked by
# every rank at once (rank r through daemon r / K, on its local GPU r % K) for
# all_reduce bf16 1 MiB with all_reduce/nccl and all_reduce/one_shot.
# PASS when both answers are identical and TUNED, NCCL ranked with a time,
# one_shot ruled out as needing all ranks on one daemon; then a second round
# of the same asks answers CACHED, and a round of another size (a new NCCL
# unique id: new communicators) is TUNED again.
# Usage: gpu_cross_daemon_test.sh [DAEMON CLI ASK]  (defaults: Bazel runfiles)
# Prints SKIPPED and passes where there are fewer than DAEMONS x K GPUs.
# On 8 GPUs: DAEMONS=2 RANKS_PER_DAEMON=4, or DAEMONS=4 RANKS_PER_DAEMON=2.
set -u
here=${TEST_SRCDIR:-.}/autotuned
daemon=${1:-$here/daemon/autotuned}
cli=${2:-$here/client/cli/autotunectl}
ask=${3:-$here/tests/cross_daemon_ask}
daemons=${DAEMONS:-2}
per=${RANKS_PER_DAEMON:-1}
gpus=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU" || true)
if [ "${gpus:-0}" -lt $((daemons * per)) ]; then
  echo "SKIPPED: this test needs $((daemons * per)) GPUs (nvidia-smi lists ${gpus:-0})" >&2
  exit 0
fi
last=$((daemons - 1))
# NVLink SHARP (multicast objects) stays off; the bootstrap uses loopback.
export NCCL_NVLS_ENABLE=0
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
dir=$(mktemp -d /tmp/atxd-XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; [ -n "${KEEP_LOGS:-}" ] && cp "$dir"/*.log "$KEEP_LOGS"/ 2>/dev/null; rm -rf "$dir"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + RANDOM % 20000)); }
peers=()
sockets=()
for d in $(seq 0 $last); do
  peer=127.0.0.1:$(port)
  peers+=("$peer")
  sockets+=("$dir/s$d.sock")
  visible=$(seq -s, $((d * per)) $((d * per + per - 1)))
  printf 'backend: "cuda"\npeer_token: "cross-daemon-gpu-test-token"\npeer_advertise: "%s"\n' \
    "$peer" >"$dir/conf$d"
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
      --candidates=all_reduce/nccl,all_reduce/one_shot --count=524288)

start=$(date +%s%N)
out=$("$ask" "${args[@]}" --expect=TUNED 2>&1); rc=$?
took_ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "$out"
echo "first round (measured across $daemons daemons x $per GPUs) answered in ${took_ms} ms"
[ $rc -eq 0 ] || { echo "FAIL: the first round (exit $rc)"; fail=1; }
check "$out" "winner all_reduce/nccl"
check "$out" "all_reduce/nccl .*median .* us"
check "$out" "all_reduce/one_shot  ruled out: .*needs all ranks on one daemon"

start=$(date +%s%N)
out=$("$ask" "${args[@]}" --expect=CACHED 2>&1); rc=$?
took_ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "$out"
echo "second round answered in ${took_ms} ms"
[ $rc -eq 0 ] || { echo "FAIL: the second round (exit $rc)"; fail=1; }
check "$out" "winner all_reduce/nccl"

# A new round (another size): a new NCCL unique id, so each worker replaces
# the communicators of the first round with new ones.
out=$("$ask" "${args[@]/--count=524288/--count=4194304}" --expect=TUNED 2>&1); rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: the round of 8 MiB (exit $rc)"; fail=1; }
check "$out" "winner all_reduce/nccl"

for d in $(seq 0 $last); do
  echo "--- daemon $d log (last lines) ---"
  tail -n 15 "$dir/daemon$d.log"
done
[ $fail -eq 0 ] && echo PASS
exit $fail
