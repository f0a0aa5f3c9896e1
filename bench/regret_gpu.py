"""The decisions' regret on GPUs against an independent timing: one mode per
process (each mode of the comparison in a fresh process), run under
torch.distributed.run on every GPU of the group; bench/regret_gpu.sh runs
every mode and bench/regret_gpu_report.py computes the regret.

Problem: one custom all_reduce op (bf16) with the caller's choices
  default   the op's own implementation (torch.distributed.all_reduce on a copy)
  nccl      a functional all_reduce (_c10d_functional.all_reduce + wait_tensor)
  rs_ag     NCCL reduce_scatter_tensor then all_gather_into_tensor (functional)
  one_shot  PyTorch's symm-mem one-shot, behind a copy into symmetric memory
  two_shot  PyTorch's symm-mem two-shot, the same way
at SIZES (per rank), one selection each, in one compiled graph.

Modes (--mode):
  truth      every choice timed alone, as the compiled graph would run it,
             with no tuner: CUDA graph of CALLS calls, REPLAYS replays each
             timed by events, the median; the choices and sizes interleaved
             (a round of every choice at every size, REPEATS rounds, the
             median of the rounds); max over ranks. Eager too: CALLS
             back-to-back launches between events, the same medians.
  immediate  autotuned.inductor.enable(): the compile's decision per size
  deferred   autotuned.inductor.enable(deferred=True)
  pytorch    PyTorch 2.11's own collective autotuning (no autotuned)
  check      the output check on 1 MiB of randn data in bf16, fp16, fp32:
             correct choices pass, deliberately wrong ones are ruled out
  vllm       autotuned.vllm.tune_dispatch over the same callables at SIZES;
             then the daemon's own all_reduce/nccl beside the same
             ncclAllReduce called by the ranks (nccl_direct.py) and an
             in-place torch.distributed all_reduce: one collective timed
             by both
Each writes one JSON object (rank 0) to --out: the mode, the winners per
size, the times each tuner reported, the tuning wall time (per selection:
the longest rank's), the compile wall time.
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

SIZES = [8 << 10, 64 << 10, 512 << 10, 1 << 20, 4 << 20, 32 << 20, 64 << 20]
CHOICES = ["default", "nccl", "rs_ag", "one_shot", "two_shot"]
CALLS, REPLAYS, REPEATS = 20, 7, 5


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", required=True,
                   choices=["truth", "immediate", "deferred", "pytorch", "vllm", "check"])
    p.add_argument("--socket", default=os.environ.get("AUTOTUNED_SOCKET", ""))
    p.add_argument("--out", required=True)
    p.add_argument("--sizes", type=int, nargs="+", default=SIZES, help="bytes per rank")
    return p.parse_args()


class Choices:
    """The caller's choices as eager callables x -> y (what each choice's
    decomposition runs), and the custom op with those decompositions."""

    def __init__(self, max_bytes: int) -> None:
        import torch.distributed._symmetric_memory as symm_mem

        self.group = dist.group.WORLD.group_name
        self.world = dist.get_world_size()
        symm_mem.enable_symm_mem_for_group(self.group)
        self.symm = symm_mem.empty(max_bytes // 2, dtype=torch.bfloat16, device="cuda")
        symm_mem.rendezvous(self.symm, self.group)
        group, symm, world = self.group, self.symm, self.world

        @torch.library.custom_op("regret::all_reduce", mutates_args=())
        def all_reduce(x: torch.Tensor) -> torch.Tensor:
            y = x.clone()
            dist.all_reduce(y)
            return y

        all_reduce.register_fake(lambda x: torch.empty_like(x))

        def staged(name, reduce_out):
            @torch.library.custom_op(f"regret::{name}", mutates_args=())
            def op(x: torch.Tensor) -> torch.Tensor:
                view = symm[: x.numel()].view_as(x)
                view.copy_(x)
                out = torch.empty_like(x)
                reduce_out(view, "sum", group, out)
                return out

            op.register_fake(lambda x: torch.empty_like(x))
            return op

        one = staged("one_shot", torch.ops.symm_mem.one_shot_all_reduce_out)
        two = staged("two_shot", torch.ops.symm_mem.two_shot_all_reduce_out)
        c10d = torch.ops._c10d_functional

        def nccl(x):
            return c10d.wait_tensor(c10d.all_reduce(x, "sum", group))

        def rs_ag(x):
            flat = x.reshape(-1)
            part = c10d.wait_tensor(c10d.reduce_scatter_tensor(flat, "sum", world, group))
            return c10d.wait_tensor(c10d.all_gather_into_tensor(part, world, group)).view_as(x)

        def one_shot(x):
            return one(x)

        def two_shot(x):
            return two(x)

        self.op = all_reduce
        self.decompositions = {"nccl": nccl, "rs_ag": rs_ag, "one_shot": one_shot,
                               "two_shot": two_shot}
        self.eager = {"default": all_reduce, **self.decompositions}


def max_over_ranks(values: list) -> list:
    t = torch.tensor(values, dtype=torch.float64, device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def truth(ch: Choices, sizes: list) -> dict:
    """Each choice alone, per size: graph and eager medians (us), max over ranks."""
    xs = {n: torch.randn(n // 2, device="cuda", dtype=torch.bfloat16) for n in sizes}
    graphs = {}
    for n in sizes:
        for c in CHOICES:
            fn, x = ch.eager[c], xs[n]
            for _ in range(3):
                fn(x)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            try:
                with torch.cuda.graph(g, stream=side):
                    for _ in range(CALLS):
                        fn(x)
                torch.cuda.current_stream().wait_stream(side)
                g.replay()
                torch.cuda.synchronize()
                graphs[(n, c)] = g
            except Exception as e:  # noqa: BLE001 - said in the output, timed eagerly
                print(f"rank {dist.get_rank()}: {c} at {n} B not captured: {e}", flush=True)
                torch.cuda.synchronize()
                graphs[(n, c)] = None
    rounds: dict = {(n, c): {"graph": [], "eager": []} for n in sizes for c in CHOICES}
    for r in range(REPEATS):
        for n in sizes:
            order = CHOICES[r % len(CHOICES):] + CHOICES[:r % len(CHOICES)]
            for c in order:
                fn, x = ch.eager[c], xs[n]
                ev = [torch.cuda.Event(enable_timing=True) for _ in range(REPLAYS + 1)]
                dist.barrier()
                torch.cuda.synchronize()
                torch.cuda._sleep(200_000)
                ev[0].record()
                for i in range(REPLAYS):
                    if graphs[(n, c)] is not None:
                        graphs[(n, c)].replay()
                    else:
                        for _ in range(CALLS):
                            fn(x)
                    ev[i + 1].record()
                torch.cuda.synchronize()
                per = [ev[i].elapsed_time(ev[i + 1]) * 1000 / CALLS for i in range(REPLAYS)]
                rounds[(n, c)]["graph"].append(statistics.median(per))
                dist.barrier()
                torch.cuda.synchronize()
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                for _ in range(CALLS):
                    fn(x)
                e1.record()
                torch.cuda.synchronize()
                rounds[(n, c)]["eager"].append(e0.elapsed_time(e1) * 1000 / CALLS)
    keys = list(rounds)
    graph = max_over_ranks([statistics.median(rounds[k]["graph"]) for k in keys])
    eager = max_over_ranks([statistics.median(rounds[k]["eager"]) for k in keys])
    out: dict = {}
    for k, g, e in zip(keys, graph, eager):
        out.setdefault(str(k[0]), {})[k[1]] = {"graph_us": g, "eager_us": e,
                                               "captured": graphs[k] is not None}
    return {"times": out}


class Stopwatch:
    """Wall time spent in a function, per call, on this rank."""

    def __init__(self) -> None:
        self.calls: list = []

    def wrap(self, fn):
        def timed(*a, **k):
            t0 = time.monotonic()
            try:
                return fn(*a, **k)
            finally:
                self.calls.append(time.monotonic() - t0)
        return timed


def compile_mode(ch: Choices, sizes: list, mode: str, socket: str) -> dict:
    import torch._inductor.select_algorithm as sa
    from torch._inductor.kernel.custom_op import CustomOpConfig, register_custom_op_autotuning

    torch._inductor.config.force_disable_caches = True
    register_custom_op_autotuning(
        ch.op, name="regret_all_reduce",
        configs=[CustomOpConfig(f) for f in ch.decompositions.values()])
    xs = [torch.randn(n // 2, device="cuda", dtype=torch.bfloat16) for n in sizes]

    def model(*inputs):
        return [ch.op(x) for x in inputs]

    selections, asks = Stopwatch(), Stopwatch()
    reported: list = []
    if mode == "pytorch":
        def saver(timings, name, input_nodes, choices, profiled, precompile):
            reported.append({getattr(c, "name", str(c)): t * 1000 for c, t in timings.items()})
        sa.add_feedback_saver(saver)
        sa.AlgorithmSelectorCache.__call__ = selections.wrap(sa.AlgorithmSelectorCache.__call__)
    else:
        import autotuned.inductor as ai
        import autotuned.rankrun as rr
        from autotuned import pb
        from autotuned.group import describe_group

        desc = describe_group(target=socket)
        ai.enable(deferred=(mode == "deferred"), group=desc, target=socket,
                  options=pb.Options(refresh=True))
        sa.AlgorithmSelectorCache.__call__ = selections.wrap(sa.AlgorithmSelectorCache.__call__)
        rr.tune_rank = asks.wrap(rr.tune_rank)
        import autotuned.inductor._select as sel
        sel_tune = getattr(sel, "tune_rank", None)
        if sel_tune is not None:
            sel.tune_rank = asks.wrap(sel_tune)
    dist.barrier()
    t0 = time.monotonic()
    out = torch.compile(model)(*xs)
    torch.cuda.synchronize()
    wall = time.monotonic() - t0
    expected = []
    for x in xs:
        y = x.clone()
        dist.all_reduce(y)
        expected.append(y)
    worst = max(float((o.float() - e.float()).abs().max() / e.float().abs().max().clamp(min=1e-6))
                for o, e in zip(out, expected))
    result: dict = {"compile_wall_s": max_over_ranks([wall])[0], "output_rel_diff": worst}
    per_selection = selections.calls if mode != "deferred" else asks.calls
    result["tuning_wall_s"] = max_over_ranks([sum(per_selection)])[0]
    result["selections"] = len(sizes)
    if mode == "pytorch":
        winners, times = [], []
        for t in reported:
            names = {k: v for k, v in t.items()}
            finite = {k: v for k, v in names.items() if v == v and v != float("inf")}
            w = min(finite, key=finite.get) if len(finite) == len(names) and names else "default"
            winners.append(_choice_of(w))
            times.append({_choice_of(k): v for k, v in names.items()})
        result["winners"], result["reported_us"] = winners, times
    else:
        import autotuned.inductor as ai
        decisions = ai.decisions()
        result["winners"] = [_choice_of(d[2]) for d in decisions]
        result["reported_us"] = [{_choice_of(k): v * 1000 for k, v in d[1].items()}
                                 for d in decisions]
        result["status"] = [d[3] + (": " + d[4] if d[4] else "") for d in decisions]
    # The selections' order follows the graph's inputs (one per size).
    result["sizes"] = sizes
    return result


def _choice_of(name: str) -> str:
    for c in ["rs_ag", "one_shot", "two_shot", "nccl"]:
        if c in name:
            return c
    return "default"


def vllm_mode(ch: Choices, sizes: list, socket: str) -> dict:
    from autotuned import pb
    from autotuned.group import describe_group
    from autotuned.vllm import tune_dispatch

    desc = describe_group(target=socket)
    options = pb.Options(refresh=True, timing_mode=pb.CUDA_GRAPH)
    dist.barrier()
    t0 = time.monotonic()
    table = tune_dispatch(candidates={c: ch.eager[c] for c in CHOICES}, dtype=torch.bfloat16,
                          sizes_bytes=sizes, desc=desc, options=options)
    wall = max_over_ranks([time.monotonic() - t0])[0]
    winners = [table.pick(n // 2) for n in sizes]
    reported = [{_choice_of(k): v for k, v in t.median_us.items()} for t in table.sizes]

    # The same collective timed by the daemon's worker and by the ranks: the
    # daemon's own NCCL (out of place, no copy) beside the same call made by
    # the ranks through ctypes (nccl_direct.py, as vLLM's PyNccl), and beside
    # an in-place torch.distributed all_reduce on a buffer of the ranks' own
    # (its values grow from call to call; it is its own reference, and
    # NCCL's time does not depend on the values).
    from nccl_direct import NcclDirect
    direct = NcclDirect()

    def nccl_in_place(x):
        dist.all_reduce(x)

    # The daemon's NCCL at NCCL's own algorithm, protocol and channels (its
    # parameters given, so that the helper does not try their shapes).
    own = pb.Candidate(impl="all_reduce/nccl", params={"algo": 0, "proto": 0, "channels": 0})
    agree = tune_dispatch(candidates=[("nccl_direct", direct.all_reduce),
                                      ("nccl_in_place", nccl_in_place), own],
                          dtype=torch.bfloat16, sizes_bytes=sizes, desc=desc, options=options)
    nccl_agreement = [{"bytes": t.bytes, "direct_us": t.median_us.get("nccl_direct"),
                       "ranks_us": t.median_us.get("nccl_in_place"),
                       "daemon_us": next((v for k, v in t.median_us.items()
                                          if k.startswith("all_reduce/nccl")), None)}
                      for t in agree.sizes]
    torch.cuda.synchronize()
    dist.barrier()
    direct.close()
    return {"tuning_wall_s": wall, "selections": len(sizes), "sizes": sizes,
            "winners": [_choice_of(w) for w in winners], "reported_us": reported,
            "status": [t.status + (f" (daemon's winner {t.measured_winner})"
                                   if t.measured_winner else "") for t in table.sizes],
            "fallback": table.fallback, "reason": table.reason, "table": table.format(),
            "nccl_agreement": nccl_agreement}


def check_mode(socket: str) -> dict:
    """Which choices the output check rules out, per dtype: the correct ones
    (NCCL, reduce_scatter + all_gather, symm-mem one-shot and two-shot) must
    all pass; the deliberately wrong ones (a rank's contribution missing,
    twice the sum, the mean, garbage in one block) must all be ruled out.
    One round per dtype, 1 MiB per rank of randn data (mixed signs)."""
    import torch.distributed._symmetric_memory as symm_mem

    from autotuned import problem
    from autotuned.group import describe_group
    from autotuned.rankrun import RankCandidate, RankProblem, client_candidate, tune_rank

    desc = describe_group(target=socket)
    rank, world, group = dist.get_rank(), dist.get_world_size(), dist.group.WORLD.group_name
    c10d = torch.ops._c10d_functional
    n = (1 << 20) // 4
    def one(dtype: torch.dtype) -> dict:
        x = torch.randn(n, device="cuda", dtype=dtype)
        symm = symm_mem.empty(n, dtype=dtype, device="cuda")
        symm_mem.rendezvous(symm, group)

        def nccl():
            return c10d.wait_tensor(c10d.all_reduce(x, "sum", group))

        def rs_ag():
            part = c10d.wait_tensor(c10d.reduce_scatter_tensor(x, "sum", world, group))
            return c10d.wait_tensor(c10d.all_gather_into_tensor(part, world, group))

        def staged(fn):
            def run():
                symm.copy_(x)
                y = torch.empty_like(x)
                fn(symm, "sum", group, y)
                return y
            return run

        def missing():
            y = x.clone() if rank != world - 1 else torch.zeros_like(x)
            dist.all_reduce(y)
            return y

        def doubled():
            y = x * 2
            dist.all_reduce(y)
            return y

        def mean():
            return nccl() / world

        def garbage():
            y = nccl().clone()
            y[4096:4160] = torch.randn(64, device="cuda", dtype=dtype) * 3
            return y

        choices = {"nccl": nccl, "rs_ag": rs_ag,
                   "one_shot": staged(torch.ops.symm_mem.one_shot_all_reduce_out),
                   "two_shot": staged(torch.ops.symm_mem.two_shot_all_reduce_out),
                   "wrong_missing_rank": missing, "wrong_doubled": doubled,
                   "wrong_mean": mean, "wrong_garbage_block": garbage}
        cands = [client_candidate(name, f"check-{name}-{dtype}".replace("torch.", ""))
                 for name in choices]
        p = problem("all_reduce", str(dtype).replace("torch.", ""), n, cands)
        runners = {i: RankCandidate(fn) for i, fn in enumerate(choices.values())}
        decision = tune_rank(desc, [RankProblem(p, runners, torch.device("cuda"))])
        res = decision.results[0]
        return {"status": pb_name(res.status), "fallback": decision.fallback,
                "reason": decision.reason,
                "ruled_out": {c.candidate.client.name: c.reason[:300]
                              for c in res.ranked if not c.ok},
                "passed": [c.candidate.client.name for c in res.ranked if c.ok]}
    return {"check": {str(d): one(d) for d in (torch.bfloat16, torch.float16, torch.float32)}}


def pb_name(status: int) -> str:
    from autotuned import pb
    return pb.DecisionStatus.Name(status)


def main() -> int:
    args = parse()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local),
                            timeout=datetime.timedelta(seconds=300))
    torch.manual_seed(1234 + dist.get_rank())
    ch = Choices(max(args.sizes))
    if args.mode == "truth":
        result = truth(ch, args.sizes)
    elif args.mode == "check":
        result = check_mode(args.socket)
    elif args.mode == "vllm":
        result = vllm_mode(ch, args.sizes, args.socket)
    else:
        result = compile_mode(ch, args.sizes, args.mode, args.socket)
    result.update(mode=args.mode, world=dist.get_world_size(),
                  device=torch.cuda.get_device_name(), torch=torch.__version__,
                  date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    if dist.get_rank() == 0:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        print(json.dumps({k: v for k, v in result.items() if k != "times"})[:3000], flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
