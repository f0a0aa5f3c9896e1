"""A tensor-parallel worker's own all-reduce implementations, timed by the
daemon at every size, and the decision exported as vLLM's maintainers read
it: per world size, the largest message each implementation should take.
2 ranks on CPU (gloo) against a sim daemon.

Each candidate is a callable of the worker's own: it gets the tensor of the
size being tuned and returns its output (None: the result is in the tensor).
The daemon never runs them; every rank runs them here, on the schedule the
daemon hands out, and the daemon times, ranks and caches. On GPUs the same
call takes, e.g., {"nccl": ..., "symm_one_shot": <PyTorch's
symm_mem.one_shot_all_reduce_out behind a staging copy>, "autotuned/one_shot":
<torch.ops.autotuned.all_reduce(x, "all_reduce/one_shot", p2p.name)>}.

Start a sim daemon on a socket of your own (docs/python.md has the
commands), then, from the repository root:

  client/python/gen_stubs.sh client/python
  AUTOTUNED_SOCKET=$dir/autotuned.sock PYTHONPATH=client/python \\
      /opt/autotuned/venv/bin/python -m torch.distributed.run --standalone \\
      --nproc_per_node=2 client/python/examples/vllm_quickstart.py

Rank 0 prints the table, the max-size form as a dict and as JSON, and a
forward pass through the table's runner. A second run is answered from the
daemon's cache (CACHED); editing a candidate's body measures it again.
"""
import datetime
import json
import sys
import time

import torch
import torch.distributed as dist

from autotuned.group import describe_from_env
from autotuned.vllm import max_sizes_json, tune_dispatch


def main() -> int:
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=300))
    rank = dist.get_rank()

    def nccl(x):
        # The process group's all-reduce (gloo here), in place: returns None.
        dist.all_reduce(x)

    def chunked(x):
        # Two all-reduces over the halves: slower for small messages.
        for part in x.view(-1).chunk(2):
            dist.all_reduce(part)

    def staged(x):
        # A copy into a buffer of its own, as a symmetric-memory one-shot
        # does, with a fixed cost of 100 us standing for a kernel launch.
        y = x.clone()
        end = time.perf_counter() + 100e-6
        while time.perf_counter() < end:
            pass
        dist.all_reduce(y)
        return y

    # The group as torchrun started it: no collective, one daemon per host.
    desc = describe_from_env()
    table = tune_dispatch(desc=desc, dtype=torch.float32,
                          candidates={"nccl": nccl, "chunked": chunked, "staged": staged},
                          sizes_bytes=[1 << s for s in range(10, 21, 2)])  # 1 KiB .. 1 MiB
    run = table.runner()
    y = run(torch.ones(4096))
    if rank == 0:
        print(table.format())
        # {implementation: {world_size: largest bytes}}: the shape of vLLM's
        # CUSTOM_ALL_REDUCE_MAX_SIZES[capability] / SYMM_MEM_ALL_REDUCE_MAX_SIZES.
        print("max_sizes:", table.max_sizes())
        print(json.dumps(json.loads(max_sizes_json([table], capability="cpu"))))
        print(f"forward: {table.pick(y)} for 16 KiB, result {float(y[0])} "
              f"(expected {dist.get_world_size()})")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
