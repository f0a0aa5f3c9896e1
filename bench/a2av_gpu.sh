#!/usr/bin/env bash
# The all_to_all with uneven splits on GPUs: the daemon's P2P kernel
# (all_to_all/p2p, at_p2p_all_to_all_v) beside NCCL's grouped send/recv
# (all_to_all/nccl), for a few split patterns and sizes, eagerly (event loop)
# and under CUDA graphs, in one daemon on every visible GPU. P2P shapes:
# 8 x 256 (fewer blocks to pass the barriers: small pieces), the default
# 32 x 512, and 132 x 1024.
#
#   bash bench/a2av_gpu.sh BIN OUT [PYTHON]
#
# BIN: autotuned and autotunectl; OUT: gets one `autotunectl --json tune`
# answer per run (PATTERN_BASE_TIMING.json), daemon.log, and report.md
# (bench/a2av_gpu_report.py: each pattern's medians and p2p / nccl).
# Patterns (elements from rank s to rank d, `base` elements a unit):
#   skew    base * (1 + (s + d) % world)
#   hot     rank 0 sends 4 * base to everyone, the others base / 4
#   sparse  base where (s + 2 * d) % 3 != 0, else 0 (zeros in every row)
set -u
# shellcheck source=bench/steps.sh
. "$(dirname "${BASH_SOURCE[0]}")/steps.sh"
BIN=$(cd "$1" && pwd) OUT=$2 PY=${3:-python3}
mkdir -p "$OUT"
N=$(nvidia-smi -L 2>/dev/null | wc -l)
[ "$N" -ge 2 ] || { echo "a2av_gpu: needs 2 or more GPUs, found $N" | tee "$OUT/report.md"; exit 0; }
SOCK=/tmp/at-a2av.sock
CTL=("$BIN/autotunectl" "--socket=$SOCK" --connect_timeout=3s)
trap daemon_stop EXIT
daemon_start "$OUT/daemon.log" --backend=cuda --no_cache --log_level=info
splits() {  # PATTERN BASE: world * world counts, row-major
  "$PY" - "$1" "$2" "$N" <<'PYEOF'
import sys
pattern, base, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def count(s, d):
    if pattern == "skew":
        return base * (1 + (s + d) % n)
    if pattern == "hot":
        return 4 * base if s == 0 else base // 4
    return base if (s + 2 * d) % 3 != 0 else 0
print(",".join(str(count(s, d)) for s in range(n) for d in range(n)))
PYEOF
}
for base in 512 65536 4194304; do
  for pattern in skew hot sparse; do
    for timing in event_loop cuda_graph; do
      timeout 120 "${CTL[@]}" --json tune --collective=all_to_all --dtype=bfloat16 \
        --world="$N" --splits="$(splits "$pattern" "$base")" --timing="$timing" \
        --candidates=all_to_all/nccl,all_to_all/p2p:blocks=8,threads=256,all_to_all/p2p,all_to_all/p2p:blocks=132,threads=1024 \
        > "$OUT/${pattern}_${base}_${timing}.json" 2> "$OUT/${pattern}_${base}_${timing}.err"
      echo "$pattern $base $timing rc=$?"
    done
  done
done
"$PY" "$(dirname "$0")/a2av_gpu_report.py" "$OUT" "$N" > "$OUT/report.md"
cat "$OUT/report.md"
