"""NCCL as a caller candidate, for bench/nccl_agreement_gpu.sh: the vLLM
helper's table (autotuned.vllm.tune_dispatch) of two candidates that the
rank processes run and time themselves (autotuned.rankrun), 8 KiB to 64 MiB
bf16:

  nccl_in_place     torch.distributed.all_reduce on the caller's tensor: the
                    one ncclAllReduce that the daemon's all_reduce/nccl makes
  all_reduce/nccl   the table's own NCCL entry, as runner() runs it: a copy
                    of the tensor, then the same call (functional semantics)

each in a table of its own (--only), or both in one (their passes then
interleave). Rank 0 writes the table as PREFIX.jsonl (DispatchTable.write_jsonl).

    torchrun --nproc_per_node=2 bench/nccl_caller.py --socket SOCK --save PREFIX \
        [--only nccl_in_place | all_reduce/nccl] [--cpu]
"""
import argparse
import datetime
import os
import sys

import torch
import torch.distributed as dist

from autotuned.group import describe_group
from autotuned.vllm import tune_dispatch

SIZES = [8192 << i for i in range(14)]  # 8 KiB .. 64 MiB


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--socket", required=True)
    p.add_argument("--save", required=True, metavar="PREFIX")
    p.add_argument("--only", choices=["nccl_in_place", "all_reduce/nccl"],
                   help="that candidate alone")
    p.add_argument("--cpu", action="store_true", help="gloo and fp32 (a dry run)")
    a = p.parse_args()
    if a.cpu:
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    else:
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))

    def nccl_in_place(x: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(x)
        return x

    candidates = [("nccl_in_place", nccl_in_place), "all_reduce/nccl"]
    if a.only:
        candidates = [c for c in candidates if (c if isinstance(c, str) else c[0]) == a.only]
    table = tune_dispatch(None, desc=describe_group(None, target=a.socket),
                          collective="all_reduce", dtype="float32" if a.cpu else "bfloat16",
                          sizes_bytes=SIZES, candidates=candidates, on_unavailable="raise")
    if dist.get_rank() == 0:
        print(table.format(), flush=True)
        table.write_jsonl(a.save + ".jsonl")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
