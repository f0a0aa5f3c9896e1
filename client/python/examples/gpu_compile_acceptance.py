"""GPU acceptance: a torch.compile on 2 (or more) ranks of a model with an autotuned
collective custom op whose choices are NCCL (a functional all_reduce), PyTorch's
symmetric-memory one-shot and two-shot (each behind a staging copy), and the op's
own default (torch.distributed.all_reduce).

Three runs of the same model, each a fresh compile (caches off):
  daemon-immediate   autotuned.inductor.enable(): every choice is timed as
                     itself by the ranks (CUDA events; the daemon max-reduces
                     over ranks and ranks them) when the op is lowered, and
                     the compiled graph runs the winner, the code timed
  daemon-deferred    enable(deferred=True): one round for the graph's
                     collectives at scheduling time (the op's default is not
                     a deferred choice)
  pytorch            PyTorch 2.11's own in-process collective autotuning
                     (is_collective: CUDA events per rank, averaged)
For each: the compile + first call wall time, every choice's reported time,
the winner, whether both ranks chose the same, and the output's largest
difference from eager NCCL.

Run on a host with 2 GPUs and a running daemon (cuda backend):

  client/python/gen_stubs.sh client/python
  PYTHONPATH=client/python TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NCCL_NVLS_ENABLE=0 \
    /opt/torch/.venv/bin/python -m torch.distributed.run --standalone --nproc_per_node=2 \
    client/python/examples/gpu_compile_acceptance.py --socket /tmp/at.sock

The PyTorch venv needs grpcio and protobuf (see docs/python.md).
"""
import argparse
import datetime
import logging
import os
import sys
import time

import torch
import torch.distributed as dist
from torch._inductor.kernel.custom_op import CustomOpConfig, register_custom_op_autotuning

import autotuned.inductor as ai
from autotuned import pb
from autotuned.group import agree, describe_group


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--socket",
                   default=os.environ.get("AUTOTUNED_SOCKET", "/run/autotuned/autotuned.sock"))
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--tokens", type=int, nargs="+", default=[16, 1024],
                   help="tokens of each collective in the graph (one all_reduce each)")
    p.add_argument("--iterations", type=int, default=50, help="timed iterations per candidate")
    p.add_argument("--cached", action="store_true",
                   help="let the daemon answer from its cache (default: measure anew)")
    p.add_argument("--modes", nargs="+", default=["daemon-immediate", "daemon-deferred", "pytorch"])
    return p.parse_args()


def main() -> int:
    args = parse()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local),
                            timeout=datetime.timedelta(seconds=600))
    rank, world = dist.get_rank(), dist.get_world_size()
    group_name = dist.group.WORLD.group_name
    logging.basicConfig(level=logging.WARNING, format=f"[rank{rank}] %(name)s: %(message)s")
    torch._inductor.config.force_disable_caches = True

    @torch.library.custom_op("acceptance::all_reduce", mutates_args=())
    def all_reduce(x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        dist.all_reduce(y)
        return y

    @all_reduce.register_fake
    def _(x):
        return torch.empty_like(x)

    def nccl(x):
        c10d = torch.ops._c10d_functional
        return c10d.wait_tensor(c10d.all_reduce(x, "sum", group_name))

    # The symmetric-memory candidates run as opaque ops over one symmetric
    # buffer made here, once, on every rank (a rendezvous is collective):
    # Inductor in PyTorch 2.11 has no lowering for symm_mem.two_shot_all_reduce_
    # ("UnsupportedOperatorException"), and cannot place a graph input in
    # symmetric memory (the deferred path's subgraphs), so each candidate
    # copies its input into the buffer and reduces from there into a fresh
    # output, as vLLM's and PyTorch's own symm-mem all-reduce paths do.
    import torch.distributed._symmetric_memory as symm_mem
    symm_mem.enable_symm_mem_for_group(group_name)
    symm = symm_mem.empty(max(args.tokens) * args.hidden, dtype=torch.bfloat16, device="cuda")
    symm_mem.rendezvous(symm, group_name)

    def staged(name, reduce_out):
        @torch.library.custom_op(f"acceptance::{name}", mutates_args=())
        def op(x: torch.Tensor) -> torch.Tensor:
            view = symm[: x.numel()].view_as(x)
            view.copy_(x)
            out = torch.empty_like(x)
            reduce_out(view, "sum", group_name, out)
            return out

        op.register_fake(lambda x: torch.empty_like(x))
        return op

    symm_one_shot = staged("symm_one_shot", torch.ops.symm_mem.one_shot_all_reduce_out)
    symm_two_shot = staged("symm_two_shot", torch.ops.symm_mem.two_shot_all_reduce_out)

    def one_shot(x):
        return symm_one_shot(x)

    def two_shot(x):
        return symm_two_shot(x)

    register_custom_op_autotuning(
        all_reduce, name="acceptance_all_reduce",
        configs=[CustomOpConfig(nccl), CustomOpConfig(one_shot), CustomOpConfig(two_shot)])

    torch.manual_seed(1234 + rank)
    weights = [torch.randn(args.hidden, args.hidden, device="cuda", dtype=torch.bfloat16) / 64
               for _ in args.tokens]
    inputs = [torch.randn(t, args.hidden, device="cuda", dtype=torch.bfloat16) for t in args.tokens]

    def model(*xs):
        # Row-parallel linear layers: a local matmul, then the sum over ranks.
        return [all_reduce(x @ w) + x for x, w in zip(xs, weights)]

    def eager_reference():
        out = []
        for x, w in zip(inputs, weights):
            y = x @ w
            dist.all_reduce(y)
            out.append(y + x)
        return out

    expected = eager_reference()
    desc = describe_group(target=args.socket)
    if rank == 0:
        print(f"== autotuned GPU acceptance: world {world}, bf16, hidden {args.hidden}, "
              f"tokens {args.tokens}, daemon {desc.target} reachable={desc.reachable} ==",
              flush=True)
    options = pb.Options(iterations=args.iterations, refresh=not args.cached)
    ok = True
    for mode in args.modes:
        torch._dynamo.reset()
        pytorch_timings: list = []
        if mode == "pytorch":
            ai.disable()
            import torch._inductor.select_algorithm as sa

            # The savers and the wrapper below live for this iteration only
            # (cleared or restored before the next): B023 does not apply.
            def saver(timings, name, input_nodes, choices, profiled, precompile):
                pytorch_timings.append((name, {getattr(c, "name", str(c)): t  # noqa: B023
                                               for c, t in timings.items()}))
            sa.add_feedback_saver(saver)
            # The feedback savers are not called when PyTorch falls back (a
            # choice failed); every collective benchmark is recorded here too.
            benchmarked: list = []
            original = sa.AlgorithmSelectorCache.__dict__.get("benchmark_collective_choice")
            if isinstance(original, classmethod):
                def recording(cls, choice, *a, **k):
                    t = original.__func__(cls, choice, *a, **k)  # noqa: B023
                    benchmarked.append((getattr(choice, "name", str(choice)), t))  # noqa: B023
                    return t
                sa.AlgorithmSelectorCache.benchmark_collective_choice = classmethod(recording)
        else:
            ai.enable(deferred=(mode == "daemon-deferred"), group=desc, target=args.socket,
                      options=options)
        dist.barrier()
        start = time.monotonic()
        try:
            out = torch.compile(model)(*inputs)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - reported, and the next mode still runs
            ok = False
            if mode == "pytorch":
                sa.clear_feedback_savers()
                if isinstance(original, classmethod):
                    sa.AlgorithmSelectorCache.benchmark_collective_choice = original
            print(f"[{mode}] rank {rank} FAILED after {time.monotonic() - start:.2f} s: "
                  f"{type(e).__name__}: {str(e)[:2000]}", flush=True)
            continue
        wall = time.monotonic() - start
        if mode == "pytorch":
            sa.clear_feedback_savers()
            if isinstance(original, classmethod):
                sa.AlgorithmSelectorCache.benchmark_collective_choice = original
            if not pytorch_timings and benchmarked:
                pytorch_timings.append(("collective benchmarks (no selection recorded)",
                                        dict(benchmarked)))
            rows = []
            for name, t in pytorch_timings:
                finite = {k: v for k, v in t.items() if v == v and v != float("inf")}
                winner = min(finite, key=finite.get) if len(finite) == len(t) and t else \
                    "(default: a choice failed or timed out)"
                rows.append((name, t, winner))
        else:
            rows = [(name, t, f"{w} ({status}{': ' + why if why else ''})")
                    for name, t, w, status, why in ai.decisions()]
        diff = max(float((o.float() - e.float()).abs().max()) for o, e in zip(out, expected))
        scale = max(float(e.float().abs().max()) for e in expected)
        winners = agree(None, [r[2] for r in rows])
        same = all(w == winners[0] for w in winners)
        good = diff <= 0.02 * scale and same
        ok = ok and good
        if rank == 0:
            print(f"[{mode}] compile + first call: {wall:.2f} s wall; "
                  f"every rank chose the same: {'yes' if same else 'NO'}; "
                  f"output max |compiled - eager| = {diff:.4g} (eager max {scale:.4g}): "
                  f"{'OK' if good else 'FAIL'}", flush=True)
            for name, t, winner in rows:
                shown = ", ".join(f"{k} {v * 1000:.1f} us" for k, v in t.items())
                print(f"[{mode}]   {name}: {shown} -> {winner}", flush=True)
            if not rows:
                print(f"[{mode}]   no timings recorded (no autotuned selection ran)", flush=True)
    ai.disable()
    dist.barrier()
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
