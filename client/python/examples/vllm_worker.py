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

On GPUs the candidates are the cuda backend's all_reduce/nccl and P2P
kernels (one_shot, two_shot and their push variants), named without
parameters. all_reduce/nccl is timed by the ranks as the table's runner
runs it (torch.distributed's all_reduce in this process, behind a copy,
not the daemon's call alone); each P2P kernel is measured at each of its launch
shapes (blocks, threads) and the table names the shape that wins
("all_reduce/one_shot:blocks=128,threads=1024"); the winner runs in this
process with that shape: the daemon's own P2P kernels (autotuned.kernels:
the kernels library through its C ABI, peer buffers shared by CUDA IPC,
torch ops), so the code measured is the code that runs. With --symm_mem the
worker's own functions join them as candidates that the ranks run and time
themselves: torch.distributed's all_reduce and PyTorch's symmetric-memory
one-shot and two-shot (behind a copy into the symmetric buffer), the
first of them the fallback. With --cpu it runs on gloo and the sim daemon's
implementations (all_reduce/one_shot, two_shot, ring at its chunk sizes),
all executed here as dist.all_reduce. Where the daemon is absent, every
rank gets the same fallback table (the first candidate at every size) and
the worker still runs.
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

# The daemon's kernels (run here through P2PGroup), each at its shapes.
GPU_CANDIDATES = ["all_reduce/nccl", "all_reduce/one_shot", "all_reduce/two_shot",
                  "all_reduce/two_shot_push", "all_reduce/one_shot_push"]
MAX_BYTES = 64 << 20  # the largest all-reduce the worker stages (bf16)
Op = Callable[[torch.Tensor], torch.Tensor]


def cpu_implementations() -> dict[str, Op]:
    """--cpu: the worker's own all_reduce for each sim implementation name,
    given to the runner as `others` (every shape of one runs it)."""
    def gloo(x: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(x)
        return x

    return {"all_reduce/one_shot": gloo, "all_reduce/two_shot": gloo, "all_reduce/ring": gloo}


def symm_mem_candidates(group_name: str) -> list[tuple[str, Op]]:
    """--symm_mem: the worker's own all_reduces, as candidates the ranks run."""
    def nccl(x: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(x)
        return x

    # The symm-mem ops read their input from symmetric memory: one buffer,
    # allocated and rendezvoused once on every rank (collective), that each
    # call copies its tensor into before reducing back into the tensor.
    import torch.distributed._symmetric_memory as symm_mem
    symm_mem.enable_symm_mem_for_group(group_name)
    buf = symm_mem.empty(MAX_BYTES // 2, dtype=torch.bfloat16, device="cuda")
    symm_mem.rendezvous(buf, group_name)

    def staged(op: Callable[..., torch.Tensor]) -> Op:
        def run(x: torch.Tensor) -> torch.Tensor:
            view = buf[: x.numel()].view_as(x)
            view.copy_(x)
            op(view, "sum", group_name, x)
            return x
        return run

    return [("torch/nccl", nccl),
            ("symm_mem/one_shot", staged(torch.ops.symm_mem.one_shot_all_reduce_out)),
            ("symm_mem/two_shot", staged(torch.ops.symm_mem.two_shot_all_reduce_out))]


class Worker:
    """One rank of a tensor-parallel group."""

    def __init__(self, tp_group, socket: str, cpu: bool, symm_mem: bool) -> None:
        self.group = tp_group
        self.dtype = torch.float32 if cpu else torch.bfloat16
        self.device = torch.device("cpu") if cpu else \
            torch.device("cuda", torch.cuda.current_device())
        group_name = (tp_group or dist.group.WORLD).group_name
        own = cpu_implementations() if cpu else {}
        candidates: list = list(own) if cpu else GPU_CANDIDATES
        if symm_mem and not cpu:
            candidates = symm_mem_candidates(group_name) + GPU_CANDIDATES[1:]
        desc = describe_group(tp_group, target=socket)
        # At startup, once per TP group: the table, then the peer buffers the
        # P2P kernels read (CUDA IPC; 64 MiB staging, the table's largest size).
        self.table = tune_dispatch(tp_group, desc=desc, collective="all_reduce",
                                   dtype=self.dtype, candidates=candidates)
        # One rank has no peers: the table holds NCCL only (the P2P kernels
        # are ruled out below 2 ranks), and there is nothing to share.
        alone = dist.get_world_size(tp_group) < 2
        self.p2p = None if cpu or alone else P2PGroup(tp_group, max_bytes=MAX_BYTES)
        # The worker's own callables (--symm_mem) run as the table holds them.
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
                   help="add the worker's own NCCL call and PyTorch's symmetric-memory "
                        "one_shot/two_shot as candidates")
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
