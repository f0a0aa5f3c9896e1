"""The client round on a GPU: NCCL run by this process as a client candidate,
beside the daemon's own NCCL candidate in the same problem, timed the same
way (both timing modes), and the same callable timed outside any autotuner.

    AUTOTUNED_SOCKET=/path/to.sock python bench/client_round_gpu.py OUT.json

World 1 (one GPU, one rank, a NCCL process group of one): what it shows is
the GPU timing path of the client round (CUDA events, CUDA graph replays)
and that the rank's figure for a piece of code agrees with the daemon's
figure for the same code. The daemon's all_reduce/nccl is an out-of-place
ncclAllReduce, which on one rank is a device copy; PyTorch's all_reduce is
in place (nothing to do on one rank), so the client candidate is the copy
into the output followed by PyTorch's NCCL all_reduce of it: the same work.
In EVENT_LOOP mode back-to-back launches from Python cost about 25 us each,
so small sizes measure the launch rate of each caller (C++ in the daemon,
Python here); CUDA_GRAPH mode removes it. Prints one line per size and mode; writes every
figure to OUT.json.
"""
from __future__ import annotations

import json
import os
import sys
import time

import torch
import torch.distributed as dist

from autotuned._proto import autotuned_pb2 as pb
from autotuned.client import problem
from autotuned.group import describe_group
from autotuned.rankrun import RankCandidate, RankProblem, client_candidate, content_key, tune_rank

SIZES = [8 << 10, 1 << 20, 64 << 20, 256 << 20]  # bytes of bfloat16
WARMUP, ITERATIONS = 10, 50


def independent_us(fn, iterations: int = ITERATIONS) -> float:
    """Mean time of `fn` over back-to-back launches between two CUDA events."""
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iterations):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / iterations


def main() -> int:
    out_path = sys.argv[1] if len(sys.argv) > 1 else "client_round_gpu.json"
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29561")
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
    desc = describe_group(None, group_id="client-round-gpu")
    rows = []
    for mode in (pb.EVENT_LOOP, pb.CUDA_GRAPH):
        for nbytes in SIZES:
            n = nbytes // 2
            x = torch.ones(n, dtype=torch.bfloat16, device="cuda")
            y = torch.empty_like(x)

            def nccl_pg(x=x, y=y):
                y.copy_(x)
                dist.all_reduce(y)
                return y

            p = problem("all_reduce", "bfloat16", n,
                        [client_candidate("nccl_pg", content_key("nccl_pg", torch.__version__)),
                         "all_reduce/nccl"], label=f"ar{nbytes}")
            options = pb.Options(warmup=WARMUP, iterations=ITERATIONS, timing_mode=mode,
                                 refresh=True, presync_window_us=2_000_000)
            t0 = time.monotonic()
            decision = tune_rank(desc, [RankProblem(p, {0: RankCandidate(nccl_pg)}, device="cuda")],
                                 options=options, timeout=300)
            wall = time.monotonic() - t0
            result = decision.results[0]
            by_name = {}
            for c in result.ranked:
                name = c.candidate.client.name or c.candidate.impl
                by_name[name] = (c.median_us if c.ok else float("nan"), c.reason)
            alone = independent_us(nccl_pg)
            row = {"mode": pb.TimingMode.Name(mode), "bytes": nbytes,
                   "status": pb.DecisionStatus.Name(result.status), "fallback": decision.fallback,
                   "reason": decision.reason or result.reason,
                   "client_nccl_pg_median_us": by_name.get("nccl_pg", (float("nan"), ""))[0],
                   "daemon_nccl_median_us": by_name.get("all_reduce/nccl", (float("nan"), ""))[0],
                   "independent_nccl_pg_us": alone, "winner": result.winner,
                   "tuning_wall_s": wall,
                   "reasons": {k: v[1] for k, v in by_name.items() if v[1]}}
            rows.append(row)
            c_us, d_us = row["client_nccl_pg_median_us"], row["daemon_nccl_median_us"]
            print(f"{row['mode']:10s} {nbytes:>10d} B  client nccl_pg {c_us:9.2f} us  "
                  f"daemon all_reduce/nccl {d_us:9.2f} us  ratio {c_us / d_us:5.2f}  "
                  f"independent {alone:9.2f} us  {row['status']} winner={result.winner}  "
                  f"wall {wall:.2f} s {row['reason'] if row['fallback'] else ''}", flush=True)
    with open(out_path, "w") as f:
        json.dump({"date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                   "rows": rows}, f, indent=1)
    dist.destroy_process_group()
    return 0 if all(not r["fallback"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
