"""What autotuned.inductor costs inside a torch.compile: the wall time spent
in the integration per collective selection (AlgorithmSelectorCache.__call__
of a collective custom op, from the choices to the chosen node), for asks
the daemon answers from its cache and for asks that measure (the ranks run
the op's 3 client candidates: its default and two Python decompositions);
with CUDA, PyTorch 2.11's own collective autotuning of the same op
(is_collective: CUDA events per rank, averaged over ranks) for comparison.
Each mode runs in fresh rank processes; every compile uses a fresh Inductor
cache, so every selection is made anew.

  bench/inductor_integration.py --world 2 --device cpu --socket /tmp/at.sock
  bench/inductor_integration.py --world 1 --device cuda --socket /tmp/at.sock

Needs a running daemon at --socket (sim backend on CPU, cuda on GPUs) and
the client package on PYTHONPATH (client/python, stubs generated). Not a
test: it prints figures.
"""
import argparse
import datetime
import multiprocessing as mp
import os
import platform
import statistics
import sys
import tempfile
import time

MODES = ("cached", "measured", "pytorch")


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--socket", default=os.environ.get("AUTOTUNED_SOCKET", ""))
    p.add_argument("--sites", type=int, default=3,
                   help="collective call sites in the model (each its own selection)")
    p.add_argument("--count", type=int, default=1 << 16, help="elements of the first site")
    p.add_argument("--compiles", type=int, default=5, help="timed compiles per mode")
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    return p.parse_args()


def _ops(world, device):
    import torch
    import torch.distributed as dist
    from torch._inductor.kernel.custom_op import CustomOpConfig, register_custom_op_autotuning

    c10d = torch.ops._c10d_functional
    group = dist.group.WORLD.group_name

    @torch.library.custom_op("bench::all_reduce", mutates_args=())
    def all_reduce(x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        dist.all_reduce(y)
        return y

    all_reduce.register_fake(lambda x: torch.empty_like(x))

    def direct(x):
        return c10d.wait_tensor(c10d.all_reduce(x, "sum", group))

    def staged(x):
        return c10d.wait_tensor(c10d.all_reduce(x.clone(), "sum", group))

    register_custom_op_autotuning(all_reduce, name="bench_all_reduce",
                                  configs=[CustomOpConfig(direct), CustomOpConfig(staged)])
    return all_reduce


def rank_main(rank, world, store, args, mode, q):
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-inductor")
    import torch
    import torch._inductor.select_algorithm as sa
    import torch.distributed as dist
    from torch._inductor.utils import fresh_cache

    if args.device == "cuda":
        torch.cuda.set_device(rank)
    dist.init_process_group("nccl" if args.device == "cuda" else "gloo",
                            init_method=f"file://{store}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=300))
    op = _ops(world, args.device)
    dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
    xs = [torch.ones(args.count >> i, device=args.device, dtype=dtype) for i in range(args.sites)]
    if mode != "pytorch":
        import autotuned.inductor as ai
        from autotuned import pb

        ai.enable(target=args.socket, options=pb.Options(
            warmup=args.warmup, iterations=args.iterations, refresh=(mode == "measured"),
            presync_window_us=10_000_000))
    seam = sa.AlgorithmSelectorCache.__call__
    spent, asks = [], []
    if mode != "pytorch":
        import autotuned.rankrun as rankrun

        tune_rank = rankrun.tune_rank

        def timed_ask(*a, **k):
            start = time.perf_counter()
            try:
                return tune_rank(*a, **k)
            finally:
                asks.append(time.perf_counter() - start)
        rankrun.tune_rank = timed_ask

    def timed(self, *a, **k):
        start = time.perf_counter()
        try:
            return seam(self, *a, **k)
        finally:
            spent.append(time.perf_counter() - start)
    sa.AlgorithmSelectorCache.__call__ = timed

    def model(*inputs):
        return [op(x) for x in inputs]

    rows = []
    for i in range(args.compiles + (1 if mode == "cached" else 0)):
        torch._dynamo.reset()
        spent.clear()
        asks.clear()
        dist.barrier()
        start = time.perf_counter()
        with fresh_cache():
            torch.compile(model)(*xs)
        if args.device == "cuda":
            torch.cuda.synchronize()
        wall = time.perf_counter() - start
        if mode == "cached" and i == 0:
            continue  # fills the daemon's cache
        statuses = []
        if mode != "pytorch":
            statuses = [d[3] for d in ai.decisions()[-args.sites:]]
        rows.append((wall, list(spent), statuses, list(asks)))
    q.put((rank, rows))
    dist.destroy_process_group()


def run_mode(args, mode):
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    store = tempfile.mktemp(prefix="bench-store")
    procs = [ctx.Process(target=rank_main, args=(r, args.world, store, args, mode, q))
             for r in range(args.world)]
    for p in procs:
        p.start()
    out = {}
    deadline = time.monotonic() + 1800
    while len(out) < args.world and time.monotonic() < deadline:
        try:
            rank, rows = q.get(timeout=5)
            out[rank] = rows
        except Exception:  # noqa: BLE001 - a dead rank is reported below
            if any(p.exitcode not in (None, 0) for p in procs):
                break
    for p in procs:
        p.join(timeout=30)
        if p.is_alive():
            p.kill()
    if os.path.exists(store):
        os.unlink(store)
    return out


def report(args, mode, out):
    if len(out) < args.world:
        print(f"{mode:9s} FAILED: ranks {sorted(set(range(args.world)) - set(out))} gave no result")
        return
    per_op = [t * 1000 for rows in out.values() for _, spent, _, _ in rows for t in spent]
    asks = [t * 1000 for rows in out.values() for _, _, _, a in rows for t in a]
    walls = [w for rows in out.values() for w, _, _, _ in rows]
    statuses = sorted({s for rows in out.values() for _, _, st, _ in rows for s in st})
    print(f"{mode:9s} per selection: median {statistics.median(per_op):8.2f} ms, "
          f"min {min(per_op):8.2f}, max {max(per_op):8.2f} ({len(per_op)} selections on "
          f"{args.world} ranks); compile + first call median {statistics.median(walls):.2f} s; "
          f"decisions {statuses or ['(PyTorch own)']}")
    if asks:
        print(f"{'':9s} of which the ask (tune_rank, the round included): median "
              f"{statistics.median(asks):8.2f} ms, min {min(asks):8.2f}, max {max(asks):8.2f}")


def main():
    args = parse()
    if args.device == "cpu" and "pytorch" in args.modes:
        args.modes.remove("pytorch")
        print("pytorch: skipped (2.11's collective benchmarking needs CUDA: it times with "
              "CUDA events and all-reduces the times on cuda:<rank>)")
    print(f"# {' '.join(sys.argv)}")
    print(f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
          f"{platform.node()}, {os.cpu_count()} cores, {platform.processor() or platform.machine()}")
    print(f"# world {args.world}, {args.device}, {args.sites} all_reduce sites "
          f"({args.count} elements and halves), 3 candidates each, {args.compiles} compiles, "
          f"daemon warmup {args.warmup} iterations {args.iterations}")
    for mode in args.modes:
        report(args, mode, run_mode(args, mode))


if __name__ == "__main__":
    main()
