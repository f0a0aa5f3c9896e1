"""The compiled tensor-parallel stack of bench/tp_layers_gpu.py with a
dynamic token dimension: one graph for a decode-like and a prefill-like
size, its all_reduces through one collective custom op whose choices
autotuned's Inductor integration times, with a winner per size range or one
winner for every size, in one process per mode.

The op (tp_bench::all_reduce of x, T x H bf16): its default, NCCL through
dist.all_reduce; NCCL as a functional collective; reduce_scatter +
all_gather of the flattened message; and the daemon's kernels through a
P2PGroup (every all_reduce of autotuned.kernels_lib.IMPLEMENTATIONS but
NCCL's; not with --no_p2p). The model is compiled once with
dynamic=True and called first at the first token count (the size hint).

  --mode ranges   the op registered with dispatch_on x's dimension 0 and
                  --split_points: each range tuned at its upper bound (the
                  last at the largest token count), all in one Tune, the
                  graph dispatching on the size (docs/python.md, "Dynamic
                  shapes"); --split_points given with no value: the op
                  registered without split_points or dispatch_on, ranged
                  by the integration itself (its probe ladder of message
                  sizes)
  --mode single   one winner for every size, tuned at the size hint, in
                  the same dynamic graph: split point 1 and the hint as
                  range_upper_bound, so every size the graph runs (2 and
                  more) is in the one range [2, inf), tuned at the hint
                  (the integration before ranges tuned every range at the
                  hint). Not the op without split_points: the
                  integration ranges that by its ladder (and 2.11 alone
                  specializes the dimension: a graph per size).

Token counts of 2 and more: Dynamo specializes a size of 1 (a second,
static graph). Timing as bench/tp_layers_gpu.py (graph_us: CUDA-graph
replay; eager_us: back-to-back steps; max over ranks; the output against
the uncompiled model). Rank 0 writes --out (JSON): {"mode", "timing",
"world", "device", "torch", "date", "hidden", "layers", "calls", "reps",
"split_points", "range_upper_bound", "sizes": {T: {"eager_us", "graph_us", "max_rel_diff",
"compile_s", "ran": the winners the graph's all_reduce sites run at T}},
"graphs": the graphs Dynamo compiled (1: every size ran the one dynamic
graph), "decisions": autotuned.inductor.decisions(), "dispatches":
autotuned.inductor.dispatches(), "same_decisions", "seconds"}.

  torchrun --standalone --nproc_per_node=2 bench/tp_dynamic_gpu.py --mode ranges \\
      --socket /tmp/at.sock --out ranges_1.json

bench/tp_dynamic_gpu.sh runs both modes in turn and writes the report
(bench/tp_dynamic_gpu_report.py).
"""
import argparse
import os
import re
import sys
import time

import torch
import torch.distributed as dist
from tp_layers_gpu import Layers, finish, gathered_decisions, header, init_ranks, measure_sizes

OP = "tp_all_reduce"


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", required=True, choices=("ranges", "single"))
    p.add_argument("--out", required=True)
    p.add_argument("--socket", default=os.environ.get("AUTOTUNED_SOCKET", ""))
    p.add_argument("--tokens", type=int, nargs="+", default=[8, 128, 1024],
                   help="the first one is the size hint")
    p.add_argument("--split_points", type=int, nargs="*", default=[32, 256],
                   help="--mode ranges: the ranges' upper bounds, in tokens (none: the "
                        "integration's probe ladder)")
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--calls", type=int, default=10, help="steps per graph / eager block")
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--no_p2p", action="store_true", help="no P2PGroup: no daemon kernels")
    p.add_argument("--timing", default="cuda_graph", choices=("cuda_graph", "event_loop"),
                   help="how the ranks time the choices")
    args = p.parse_args(argv)
    if min(args.tokens) < 2:
        p.error("token counts of 2 and more (Dynamo specializes a size of 1)")
    if args.split_points != sorted(set(args.split_points)) or \
            min(args.split_points, default=1) < 1:
        p.error("--split_points: positive and ascending")
    return args


def all_reduce_op(group_name: str, world: int, split_points: list, upper: int):
    """tp_bench::all_reduce with its choices (module docstring), over the
    ranges of `split_points` (the last one tuned at `upper`)."""
    from torch._inductor.kernel.custom_op import CustomOpConfig, register_custom_op_autotuning

    c10d = torch.ops._c10d_functional

    @torch.library.custom_op("tp_bench::all_reduce", mutates_args=())
    def all_reduce(x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        dist.all_reduce(y)
        return y

    all_reduce.register_fake(lambda x: torch.empty_like(x))

    def nccl(x):
        return c10d.wait_tensor(c10d.all_reduce(x, "sum", group_name))

    def rs_ag(x):
        part = c10d.wait_tensor(c10d.reduce_scatter_tensor(x.reshape(-1), "sum", world,
                                                           group_name))
        return c10d.wait_tensor(c10d.all_gather_into_tensor(part, world, group_name)).view_as(x)

    ranges = {"dispatch_on": {"tensor_name": "x", "dim": 0, "range_upper_bound": upper},
              "split_points": list(split_points)} if split_points else {}
    register_custom_op_autotuning(
        all_reduce, name=OP, configs=[CustomOpConfig(nccl), CustomOpConfig(rs_ag)], **ranges)
    return all_reduce


class DynamicLayers(Layers):
    """Layers whose all_reduces are `op`."""

    def __init__(self, op, *args) -> None:
        super().__init__(*args)
        self.op = op

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for qkv, o, up, down in zip(self.qkv, self.o, self.up, self.down):
            q, k, v = (x @ qkv).chunk(3, dim=-1)
            a = q * torch.sigmoid(k) + v
            x = x + self.op(a @ o)
            m = torch.nn.functional.gelu(x @ up) @ down
            x = x + self.op(m)
        return x


def choice_name(name: str) -> str:
    """A candidate's name without its selection's
    ("tp_all_reduce_range_1_32_nccl" -> "nccl")."""
    return re.sub(rf"^{OP}(_range_\d+_(\d+|inf))?_", "", name)


def ran_at(tokens: int, dispatches: list) -> list:
    """The winners the graph's all_reduce sites run at `tokens`, from their
    dispatch tables."""
    return sorted({choice_name(w) for _, table in dispatches for first, last, w in table
                   if first <= tokens and (last is None or tokens <= last)})


def main(argv=None) -> int:
    args = parse(argv)
    t0 = time.monotonic()
    world, rank, group_name = init_ranks()
    split_points, upper = (args.split_points, max(args.tokens)) if args.mode == "ranges" \
        else ([1], args.tokens[0])
    op = all_reduce_op(group_name, world, split_points, upper)

    import autotuned.inductor as ai
    from autotuned import kernels_lib, pb

    p2p, impls = None, {}
    if not args.no_p2p:
        import autotuned.kernels as K
        # The largest message a range is tuned at (the last one's start at
        # least) or a step runs.
        largest = max(args.tokens + [p + 1 for p in split_points] + [upper]) * args.hidden * 2
        if not split_points:  # the ladder's top step
            from autotuned.inductor._ranges import PROBE_BYTES
            largest = max(largest, max(PROBE_BYTES))
        p2p = K.P2PGroup(dist.group.WORLD, max_bytes=largest)
        impls = {op: [n for n, i in kernels_lib.IMPLEMENTATIONS.items()
                      if i.collective == "all_reduce" and n != "all_reduce/nccl"]}
    timing = pb.CUDA_GRAPH if args.timing == "cuda_graph" else pb.EVENT_LOOP
    ai.enable(target=args.socket or None, impls=impls, options=pb.Options(timing_mode=timing))
    model = DynamicLayers(op, args.hidden, args.layers, world, group_name)
    compiled = torch.compile(model, dynamic=True, fullgraph=True)
    result = header(args, world, args.timing)
    result.update({"split_points": split_points, "range_upper_bound": upper})
    result["sizes"] = measure_sizes(compiled, model, args, rank, "first call")
    result["graphs"] = int(torch._dynamo.utils.counters["stats"]["unique_graphs"])
    result["decisions"], result["same_decisions"] = gathered_decisions(world)
    result["dispatches"] = [[name, [list(r) for r in table]] for name, table in ai.dispatches()]
    for tokens in args.tokens:
        result["sizes"][str(tokens)]["ran"] = ran_at(tokens, result["dispatches"])
    return finish(result, args.out, rank, t0, p2p)


if __name__ == "__main__":
    sys.exit(main())
