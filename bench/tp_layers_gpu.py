"""A compiled stack of tensor-parallel transformer layers written with plain
functional collectives (torch.distributed._functional_collectives), with
autotuned's Inductor integration on and off: the step time of each token
count, under a CUDA graph and eagerly, in one process per mode.

Each layer (hidden H, world W): a column-parallel QKV projection (H -> 3H/W),
an elementwise stand-in for attention, a row-parallel output projection
(H/W -> H) and its all_reduce, a column-parallel MLP up projection
(H -> 4H/W), GELU, a row-parallel down projection (4H/W -> H) and its
all_reduce, with the residual adds: two all_reduces of T x H bf16 per layer
(8 KiB at one token, 8 MiB at 1,024 with H = 4096).

  --model functional   the layers' collectives written as
                       funcol.all_reduce calls (the default)
  --model dtensor      the same layers as nn.Linear modules parallelized with
                       parallelize_module (ColwiseParallel for QKV and up,
                       RowwiseParallel for the output and down projections)
                       on a DeviceMesh of the world group: DTensor's
                       redistribute emits the all_reduces

  --mode off   torch.compile as it is: Inductor lowers every functional
               collective to its NCCL call
  --mode on    autotuned.inductor.enable() first, deciding by --timing
               (cuda_graph: GPU time, for a graph replayed under CUDA
               graphs; event_loop: eager time, host cost included, for a
               graph run eagerly) (its functional
               collectives are selections: NCCL as Inductor emits it, a
               reduce_scatter + all_gather, and the daemon's kernels
               through a P2PGroup it registers)

Per token count T: the compiled step is called 3 times (the first compiles),
its output compared with the uncompiled model's (bf16: the largest
difference relative to the output's largest magnitude); then eager_us =
median of --reps blocks of --calls back-to-back steps (CUDA events; the
ranks start each block together after a barrier), and
graph_us = the median replay of a CUDA graph of --calls steps (a spin kernel
ahead lets the host queue it), each / calls and max over ranks. Rank 0
writes --out (JSON): {"mode", "timing", "world", "device", "torch", "date", "hidden",
"layers", "sizes": {T: {"eager_us", "graph_us", "max_rel_diff",
"compile_s"}}, "ops_backend": the backend of torch.ops.autotuned that ran
(autotuned.ops.backend(): "cpp" or "python"; mode on only, else ""),
"torch_ops_lib": the C++ ops' library loaded (or ""),
"decisions": autotuned.inductor.decisions() (mode on),
"same_decisions": whether every rank's decisions are the same, "seconds"}.

  torchrun --standalone --nproc_per_node=2 bench/tp_layers_gpu.py --mode on \\
      --socket /tmp/at.sock --out on_1.json

bench/tp_layers_gpu.sh runs the modes in turn and writes the report.
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", required=True, choices=("off", "on"))
    p.add_argument("--model", default="functional", choices=("functional", "dtensor"))
    p.add_argument("--out", required=True)
    p.add_argument("--socket", default=os.environ.get("AUTOTUNED_SOCKET", ""))
    p.add_argument("--tokens", type=int, nargs="+", default=[1, 16, 64, 1024, 4096])
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--calls", type=int, default=10, help="steps per graph / eager block")
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--no_p2p", action="store_true", help="mode on: no P2PGroup")
    p.add_argument("--timing", default="cuda_graph", choices=("cuda_graph", "event_loop"),
                   help="mode on: how the ranks time the choices")
    return p.parse_args(argv)


class Layers(torch.nn.Module):
    def __init__(self, hidden: int, layers: int, world: int, group_name: str) -> None:
        super().__init__()
        self.group_name = group_name
        g = torch.Generator(device="cpu").manual_seed(1234 + dist.get_rank())

        def w(rows: int, cols: int) -> torch.nn.Parameter:
            t = torch.randn(rows, cols, generator=g) / rows ** 0.5
            return torch.nn.Parameter(t.to(torch.bfloat16).cuda(), requires_grad=False)

        self.qkv = torch.nn.ParameterList([w(hidden, 3 * hidden // world) for _ in range(layers)])
        self.o = torch.nn.ParameterList([w(hidden // world, hidden) for _ in range(layers)])
        self.up = torch.nn.ParameterList([w(hidden, 4 * hidden // world) for _ in range(layers)])
        self.down = torch.nn.ParameterList([w(4 * hidden // world, hidden)
                                            for _ in range(layers)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import torch.distributed._functional_collectives as funcol

        for qkv, o, up, down in zip(self.qkv, self.o, self.up, self.down):
            q, k, v = (x @ qkv).chunk(3, dim=-1)
            a = q * torch.sigmoid(k) + v
            x = x + funcol.all_reduce(a @ o, "sum", self.group_name)
            m = torch.nn.functional.gelu(x @ up) @ down
            x = x + funcol.all_reduce(m, "sum", self.group_name)
        return x


def dtensor_layers(hidden: int, layers: int) -> torch.nn.Module:
    """Layers' computation as nn.Linear modules, parallelized with DTensor
    over the world group; the same weights on every rank (one seed)."""
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = torch.nn.Linear(hidden, 3 * hidden, bias=False)
            self.o = torch.nn.Linear(hidden, hidden, bias=False)
            self.up = torch.nn.Linear(hidden, 4 * hidden, bias=False)
            self.down = torch.nn.Linear(4 * hidden, hidden, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            x = x + self.o(q * torch.sigmoid(k) + v)
            return x + self.down(torch.nn.functional.gelu(self.up(x)))

    torch.manual_seed(1234)
    with torch.device("cuda"):
        stack = torch.nn.Sequential(*[Block() for _ in range(layers)])
    stack = stack.to(torch.bfloat16).requires_grad_(False)
    mesh = DeviceMesh.from_group(dist.group.WORLD, "cuda")
    plan = {"qkv": ColwiseParallel(), "o": RowwiseParallel(),
            "up": ColwiseParallel(), "down": RowwiseParallel()}
    for block in stack:
        parallelize_module(block, mesh, plan)
    return stack


def spin_kernel():
    """A kernel that keeps the GPU busy ~1 ms, so that the host can queue
    what follows it (torch.cuda._sleep)."""
    return lambda: torch.cuda._sleep(2_000_000)


def time_eager(fn, x, calls: int, reps: int) -> float:
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        dist.barrier()
        start.record()
        for _ in range(calls):
            fn(x)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000 / calls)
    return statistics.median(times)


def time_graph(fn, x, calls: int, reps: int) -> float:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn(x)
    graph.replay()
    torch.cuda.synchronize()
    spin = spin_kernel()
    times = []
    for _ in range(reps):
        dist.barrier()
        spin()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000 / calls)
    del graph
    return statistics.median(times)


def max_over_ranks(values: list) -> list:
    t = torch.tensor(values, dtype=torch.float64, device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def measure_sizes(compiled, model, args, rank: int, first: str) -> dict:
    """Per token count in args.tokens: the first call's time (`first` names
    it in the progress line), the output against the uncompiled model's,
    eager_us and graph_us (time_eager, time_graph), each the max over ranks."""
    sizes = {}
    for tokens in args.tokens:
        g = torch.Generator(device="cpu").manual_seed(tokens)
        x = torch.randn(tokens, args.hidden, generator=g).to(torch.bfloat16).cuda()
        c0 = time.monotonic()
        with torch.no_grad():
            compiled(x)
            torch.cuda.synchronize()
            compile_s = time.monotonic() - c0
            compiled(x)
            y = compiled(x)
            ref = model(x)
            torch.cuda.synchronize()
            scale = ref.abs().max().clamp_min(1e-6)
            rel = float(((y.float() - ref.float()).abs().max() / scale).item())
            eager_us = time_eager(compiled, x, args.calls, args.reps)
            graph_us = time_graph(compiled, x, args.calls, args.reps)
        eager_us, graph_us, rel, compile_s = max_over_ranks([eager_us, graph_us, rel, compile_s])
        sizes[str(tokens)] = {"eager_us": eager_us, "graph_us": graph_us,
                              "max_rel_diff": rel, "compile_s": compile_s}
        if rank == 0:
            print(f"tokens {tokens}: eager {eager_us:.1f} us, graph {graph_us:.1f} us, "
                  f"rel diff {rel:.2e}, {first} {compile_s:.1f} s", flush=True)
    return sizes


def gathered_decisions(world: int) -> tuple:
    """This rank's autotuned.inductor.decisions() and whether every rank's
    are the same."""
    import autotuned.inductor as ai

    mine = [list(d) for d in ai.decisions()]
    everyone = [None] * world
    dist.all_gather_object(everyone, json.dumps(mine, sort_keys=True))
    return mine, len(set(everyone)) == 1


def init_ranks() -> tuple:
    """This process's GPU (LOCAL_RANK) and the NCCL process group: world
    size, rank and the world group's name."""
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    return dist.get_world_size(), dist.get_rank(), dist.group.WORLD.group_name


def header(args, world: int, timing: str) -> dict:
    """The result's description of the run (sizes still empty)."""
    return {"mode": args.mode, "model": getattr(args, "model", "functional"),
            "timing": timing, "world": world,
            "device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "hidden": args.hidden, "layers": args.layers, "calls": args.calls,
            "reps": args.reps, "sizes": {}}


def finish(result: dict, out: str, rank: int, t0: float, p2p) -> int:
    """Rank 0 writes `result` (with its seconds) to `out`; the P2P group and
    the process group are closed."""
    result["seconds"] = time.monotonic() - t0
    if rank == 0:
        with open(out, "w") as f:
            json.dump(result, f, indent=1)
    if p2p is not None:
        p2p.close()
    dist.destroy_process_group()
    return 0


def main(argv=None) -> int:
    args = parse(argv)
    t0 = time.monotonic()
    world, rank, group_name = init_ranks()
    p2p = None
    if args.mode == "on":
        import autotuned.inductor as ai
        if not args.no_p2p:
            import autotuned.kernels as K
            p2p = K.P2PGroup(dist.group.WORLD,
                             max_bytes=max(args.tokens) * args.hidden * 2)
        from autotuned import pb
        timing = pb.CUDA_GRAPH if args.timing == "cuda_graph" else pb.EVENT_LOOP
        ai.enable(target=args.socket or None, options=pb.Options(timing_mode=timing))
    model = dtensor_layers(args.hidden, args.layers) if args.model == "dtensor" \
        else Layers(args.hidden, args.layers, world, group_name)
    compiled = torch.compile(model, dynamic=False, fullgraph=args.model == "functional")
    result = header(args, world, args.timing if args.mode == "on" else "")
    result["sizes"] = measure_sizes(compiled, model, args, rank, "compile")
    result["ops_backend"] = result["torch_ops_lib"] = ""
    if args.mode == "on":
        from autotuned import ops
        result["ops_backend"] = ops.backend()
        result["torch_ops_lib"] = (ops.torch_ops_library() or "") \
            if result["ops_backend"] == "cpp" else ""
        if rank == 0:
            print(f"torch.ops.autotuned backend: {result['ops_backend']}", flush=True)
        result["decisions"], result["same_decisions"] = gathered_decisions(world)
    return finish(result, args.out, rank, t0, p2p)


if __name__ == "__main__":
    sys.exit(main())
