"""An example tensor-parallel worker that picks its all_reduce by size from a
dispatch table the daemon measured, the way a vLLM worker would at startup.

At startup, once per tensor-parallel group (every rank of the group calls
it): autotuned.vllm.tune_dispatch measures the candidates at sizes from 1 KiB
to 64 MiB through the daemon and returns the same table on every rank. In the
forward pass, table.runner(...) runs the implementation the table picks for
the tensor's size.

  PYTHONPATH=client/python AUTOTUNED_KERNELS_LIB=bazel-bin/kernels/libautotuned_kernels_abi.so \
      python -m torch.distributed.run --standalone --nproc_per_node=2 \
      client/python/examples/vllm_worker.py [--socket PATH] [--cpu | --symm_mem] [--save PREFIX]

--save PREFIX writes the table (rank 0) as PREFIX.txt and as sweep lines,
PREFIX.jsonl, which `python -m autotuned.plot PREFIX.jsonl -o PREFIX.png`
draws.

On GPUs the candidates are the cuda backend's all_reduce/nccl, one_shot and
two_shot, and the winner runs in this process: the daemon's own P2P kernels
(autotuned.kernels: the kernels library through its C ABI, peer buffers
shared by CUDA IPC, torch ops), so the code measured is the code that runs.
With --symm_mem the one-shot and two-shot candidates run as PyTorch's
symmetric-memory ops instead (the worker's own functions, given to the
runner as `others`). With --cpu it runs on gloo and the sim daemon's
implementations (all_reduce/one_shot, two_shot, ring), all executed here as
dist.all_reduce. Where the daemon is absent, every rank gets the same
fallback table (the first candidate at every size) and the worker still
runs.
"""
import argparse
import datetime
import os
import sys
from typing import Callable

import torch
import torch.distributed as dist

from autotuned.group import describe_group
from autotuned.kernels import P2PGroup
from autotuned.vllm import tune_dispatch

# The daemon's kernels (run here through P2PGroup); --symm_mem has PyTorch's
# one-shot and two-shot only.
GPU_CANDIDATES = ["all_reduce/nccl", "all_reduce/one_shot", "all_reduce/two_shot",
                  "all_reduce/two_shot_push", "all_reduce/one_shot_push"]
SYMM_MEM_CANDIDATES = ["all_reduce/nccl", "all_reduce/one_shot", "all_reduce/two_shot"]
MAX_BYTES = 64 << 20  # the largest all-reduce the worker stages (bf16)


def own_implementations(cpu: bool,
                        group_name: str) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    """The worker's own all_reduce for each daemon implementation name (--cpu,
    --symm_mem); without them the runner runs the daemon's kernels."""
    def nccl(x: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(x)
        return x

    if cpu:
        return {"all_reduce/one_shot": nccl, "all_reduce/two_shot": nccl, "all_reduce/ring": nccl}

    # The symm-mem ops read their input from symmetric memory: one buffer,
    # allocated and rendezvoused once on every rank (collective), that each
    # call copies its tensor into before reducing back into the tensor.
    import torch.distributed._symmetric_memory as symm_mem
    symm_mem.enable_symm_mem_for_group(group_name)
    buf = symm_mem.empty(MAX_BYTES // 2, dtype=torch.bfloat16, device="cuda")
    symm_mem.rendezvous(buf, group_name)

    def staged(op: Callable[..., torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
        def run(x: torch.Tensor) -> torch.Tensor:
            view = buf[: x.numel()].view_as(x)
            view.copy_(x)
            op(view, "sum", group_name, x)
            return x
        return run

    return {"all_reduce/nccl": nccl,
            "all_reduce/one_shot": staged(torch.ops.symm_mem.one_shot_all_reduce_out),
            "all_reduce/two_shot": staged(torch.ops.symm_mem.two_shot_all_reduce_out)}


class Worker:
    """One rank of a tensor-parallel group."""

    def __init__(self, tp_group, socket: str, cpu: bool, symm_mem: bool) -> None:
        self.group = tp_group
        self.dtype = torch.float32 if cpu else torch.bfloat16
        self.device = torch.device("cpu") if cpu else \
            torch.device("cuda", torch.cuda.current_device())
        group_name = (tp_group or dist.group.WORLD).group_name
        own = own_implementations(cpu, group_name) if cpu or symm_mem else {}
        candidates = list(own) if cpu else (SYMM_MEM_CANDIDATES if symm_mem else GPU_CANDIDATES)
        desc = describe_group(tp_group, target=socket)
        # At startup, once per TP group: the table, then the peer buffers the
        # P2P kernels read (CUDA IPC; 64 MiB staging, the table's largest size).
        self.table = tune_dispatch(tp_group, desc=desc, collective="all_reduce",
                                   dtype=self.dtype, candidates=candidates)
        # One rank has no peers: the table holds NCCL only (the P2P kernels
        # are ruled out below 2 ranks), and there is nothing to share.
        alone = dist.get_world_size(tp_group) < 2
        self.p2p = None if cpu or symm_mem or alone else P2PGroup(tp_group, max_bytes=MAX_BYTES)
        self.run = self.table.runner(self.p2p, others=own, process_group=tp_group)

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        return self.run(x)

    def forward(self, tokens: int, hidden: int) -> torch.Tensor:
        x = torch.ones(tokens, hidden, dtype=self.dtype, device=self.device)
        return self.all_reduce(x)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--socket",
                   default=os.environ.get("AUTOTUNED_SOCKET", "/run/autotuned/autotuned.sock"))
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--symm_mem", action="store_true",
                   help="run one_shot/two_shot as PyTorch's symmetric-memory ops")
    p.add_argument("--save", metavar="PREFIX",
                   help="write the table as PREFIX.txt and PREFIX.jsonl (rank 0)")
    args = p.parse_args()
    if args.cpu:
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    else:
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
        if args.symm_mem:
            from torch.distributed._symmetric_memory import enable_symm_mem_for_group
            enable_symm_mem_for_group(dist.group.WORLD.group_name)
    worker = Worker(None, args.socket, args.cpu, args.symm_mem)
    if dist.get_rank() == 0:
        print(worker.table.format(), flush=True)
        if args.save:
            with open(args.save + ".txt", "w") as f:
                f.write(worker.table.format() + "\n")
            worker.table.write_jsonl(args.save + ".jsonl")
    for tokens in (1, 64, 4096):
        y = worker.forward(tokens, 1024)
        if dist.get_rank() == 0:
            impl = worker.run.pick(y)
            print(f"tokens={tokens}: {impl}, result {float(y[0, 0])} (expected "
                  f"{dist.get_world_size()})", flush=True)
    if worker.p2p is not None:
        worker.p2p.close()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
