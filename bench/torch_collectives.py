#!/usr/bin/env python3
"""Times bf16 collectives with PyTorch, as a reference for autotuned.

Run with torchrun, one process per GPU:

  python3 -m torch.distributed.run --standalone --nproc_per_node=2 \
      bench/torch_collectives.py --out torch.json \
      [--min_bytes 1024 --max_bytes 268435456 --factor 4 --iters N --warmup N]

What it measures (bf16, sum), at every size from --min_bytes to --max_bytes
(multiplying by --factor):
  all_reduce/nccl            torch.distributed.all_reduce (NCCL), in place
  all_reduce/symm_one_shot   torch.ops.symm_mem.one_shot_all_reduce (out of place)
  all_reduce/symm_two_shot   torch.ops.symm_mem.two_shot_all_reduce_ (in place)
and, at --coll_sizes (default 64 KiB, 2 MiB, 4 MiB, 64 MiB):
  all_gather/nccl            dist.all_gather_into_tensor; bytes = each rank's input
  reduce_scatter/nccl        dist.reduce_scatter_tensor; bytes = each rank's output
  all_to_all/nccl            dist.all_to_all_single, even splits; bytes = what each
                             rank sends each rank (its input is world times that)
  broadcast/nccl             dist.broadcast from rank 0; bytes = the buffer
(the same per-rank convention as autotuned's Problem.count).

Timing, per op and size: barrier, warmup, synchronize, barrier, then CUDA
events around a loop of `iters` back-to-back ops; the per-rank figure is
elapsed / iters, and the reported figure is its maximum over the ranks (an
all_reduce MAX of the per-rank figures). Every op is first checked once per
size against the exact expected result (small integers, exact in bf16); a
mismatch or an exception is recorded as ok=false with an error text instead
of stopping the run. In-place ops are timed on zero-filled buffers so that
repeated sums stay finite.

With --graph the loop of `iters` ops is captured into one CUDA graph
(torch.cuda.graph), replayed once untimed, then timed over a second replay:
the figure without launch gaps, as autotuned's --timing=cuda_graph.

Only rank 0 writes the JSON, and it rewrites it after every result, so a run
cut off by a timeout still leaves what it measured:
  {"torch": ..., "nccl": ..., "device": ..., "world": ..., "mode": "eager" | "graph",
   "complete": bool,
   "results": [{"op", "bytes", "us", "ok", "error", "iters", "warmup"}]}

The environment keeps TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and
NCCL_NVLS_ENABLE=0 (set here too when missing); no multimem op is used.
"""

import argparse
import datetime
import json
import os
import sys
import time
import traceback

# Multicast stays off (the machine's setting); only fill in when missing.
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

MiB = 1 << 20
DTYPE = torch.bfloat16
ELEM = 2  # bytes per bf16 element
PATTERN_MOD = 13  # values stay small integers: sums are exact in bf16


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="JSON file written by rank 0")
    p.add_argument("--min_bytes", type=int, default=1024)
    p.add_argument("--max_bytes", type=int, default=256 * MiB)
    p.add_argument("--factor", type=int, default=4)
    p.add_argument("--iters", type=int, default=0,
                   help="timed iterations per op; 0 = by size (200 up to 1 MiB, "
                        "50 up to 16 MiB, 20 above)")
    p.add_argument("--warmup", type=int, default=-1,
                   help="warmup iterations; -1 = by size (20, 10, 5)")
    p.add_argument("--coll_sizes", default="65536,2097152,4194304,67108864",
                   help="per-rank bytes for all_gather / reduce_scatter / all_to_all / broadcast "
                        "(comma-separated; empty = skip)")
    p.add_argument("--graph", action="store_true",
                   help="capture the timed loop into one CUDA graph and time a "
                        "replay (no launch gaps), as autotuned's --timing=cuda_graph")
    p.add_argument("--skip_symm", action="store_true",
                   help="do not try torch symmetric memory")
    p.add_argument("--dry_run_cpu", action="store_true",
                   help="test the script without GPUs: gloo on CPU, wall-clock "
                        "timing (the figures mean nothing)")
    a = p.parse_args()
    if a.factor < 2 or a.min_bytes < ELEM or a.max_bytes < a.min_bytes:
        p.error("need --factor >= 2 and 2 <= --min_bytes <= --max_bytes")
    return a


def iters_for(nbytes, args):
    if args.iters > 0:
        iters = args.iters
    elif nbytes <= MiB:
        iters = 200
    elif nbytes <= 16 * MiB:
        iters = 50
    else:
        iters = 20
    if args.warmup >= 0:
        warmup = args.warmup
    elif nbytes <= MiB:
        warmup = 20
    elif nbytes <= 16 * MiB:
        warmup = 10
    else:
        warmup = 5
    return iters, warmup


def short_error(e):
    text = "%s: %s" % (type(e).__name__, e)
    text = " ".join(text.split())
    return text[:500]


class Bench:
    def __init__(self, args):
        self.args = args
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.cuda = not args.dry_run_cpu
        self.dev = (torch.device("cuda", torch.cuda.current_device()) if self.cuda
                    else torch.device("cpu"))
        self.results = []
        self.meta = {}
        self.symm = None  # the module, once imported
        self.symm_error = ""
        self.keep = []  # symmetric buffers stay alive to the end

    # ---- plumbing -------------------------------------------------------

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def barrier(self):
        self.sync()
        dist.barrier()
        self.sync()

    def all_max(self, x):
        t = torch.tensor([float(x)], dtype=torch.float64, device=self.dev)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())

    def all_ok(self, ok):
        t = torch.tensor([1 if ok else 0], dtype=torch.int32, device=self.dev)
        dist.all_reduce(t, op=dist.ReduceOp.MIN)
        return bool(t.item())

    def record(self, op, nbytes, us, ok, error, iters=0, warmup=0):
        self.results.append({"op": op, "bytes": int(nbytes),
                             "us": (round(us, 3) if us is not None else None),
                             "ok": bool(ok), "error": error,
                             "iters": iters, "warmup": warmup})
        if self.rank == 0:
            print("%-24s %12d B  %10s us  %s%s" % (
                op, nbytes, "-" if us is None else "%.2f" % us,
                "ok" if ok else "FAILED", (" " + error) if error else ""),
                flush=True)
        self.write(complete=False)

    def write(self, complete):
        if self.rank != 0:
            return
        doc = dict(self.meta)
        doc["complete"] = complete
        doc["results"] = self.results
        tmp = self.args.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        os.replace(tmp, self.args.out)

    def time_loop(self, fn, iters, warmup):
        """Mean us per op over `iters` back-to-back calls, max over ranks."""
        self.barrier()
        for _ in range(warmup):
            fn()
        self.barrier()
        if not self.cuda:  # --dry_run_cpu
            t = time.perf_counter()
            for _ in range(iters):
                fn()
            return self.all_max((time.perf_counter() - t) * 1e6 / iters)
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        if self.args.graph:
            return self.all_max(self.time_graph(fn, iters, start, stop))
        start.record()
        for _ in range(iters):
            fn()
        stop.record()
        stop.synchronize()
        us = start.elapsed_time(stop) * 1000.0 / iters
        return self.all_max(us)

    def time_graph(self, fn, iters, start, stop):
        """--graph: `iters` calls captured into one CUDA graph; one untimed
        replay, then a timed one. Every rank captures before any replays."""
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(iters):
                fn()
        torch.cuda.synchronize()
        self.barrier()
        graph.replay()
        torch.cuda.synchronize()
        self.barrier()
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        us = start.elapsed_time(stop) * 1000.0 / iters
        del graph
        return us

    def pattern(self, n, rank, offset=0):
        idx = torch.arange(offset, offset + n, device=self.dev, dtype=torch.int32)
        return ((idx % PATTERN_MOD) + (rank + 1)).to(DTYPE)

    def expected_sum(self, n, offset=0):
        idx = torch.arange(offset, offset + n, device=self.dev, dtype=torch.int32)
        w = self.world
        return ((idx % PATTERN_MOD) * w + w * (w + 1) // 2).to(DTYPE)

    def run_op(self, op, nbytes, check, timed):
        """check() -> (ok, error text); timed() -> the op for the loop."""
        iters, warmup = iters_for(nbytes, self.args)
        local_ok, err = False, ""
        try:
            local_ok, err = check()
            self.sync()
        except Exception as e:  # noqa: BLE001 - recorded, not fatal
            local_ok, err = False, short_error(e)
            if self.rank == 0:
                traceback.print_exc()
        ok = self.all_ok(local_ok)
        if not ok:
            if local_ok:
                err = "check failed on another rank"
            self.record(op, nbytes, None, False, err, iters, warmup)
            return
        try:
            fn = timed()
            us = self.time_loop(fn, iters, warmup)
            self.record(op, nbytes, us, True, "", iters, warmup)
        except Exception as e:  # noqa: BLE001
            if self.rank == 0:
                traceback.print_exc()
            self.record(op, nbytes, None, False, "timing: " + short_error(e),
                        iters, warmup)

    # ---- all_reduce -----------------------------------------------------

    def nccl_all_reduce(self, nbytes):
        n = nbytes // ELEM
        buf = torch.empty(n, dtype=DTYPE, device=self.dev)

        def check():
            buf.copy_(self.pattern(n, self.rank))
            dist.all_reduce(buf, op=dist.ReduceOp.SUM)
            ok = torch.equal(buf, self.expected_sum(n))
            return ok, "" if ok else "wrong result"

        def timed():
            buf.zero_()  # in place: zeros keep the repeated sums finite
            return lambda: dist.all_reduce(buf, op=dist.ReduceOp.SUM)

        self.run_op("all_reduce/nccl", nbytes, check, timed)

    def setup_symm(self):
        if self.args.skip_symm:
            self.symm_error = "skipped (--skip_symm)"
            return
        try:
            import torch.distributed._symmetric_memory as symm_mem
            for name in ("one_shot_all_reduce", "two_shot_all_reduce_"):
                if not hasattr(torch.ops.symm_mem, name):
                    raise RuntimeError("torch.ops.symm_mem.%s is missing" % name)
            self.group_name = dist.group.WORLD.group_name
            self.symm = symm_mem
            try:
                self.meta["symm_mem_backend"] = str(symm_mem.get_backend(self.dev))
            except Exception:  # noqa: BLE001
                pass
            # A first small rendezvous, so that a broken setup shows up once.
            # 2.11 needs no enable_symm_mem_for_group (deprecated there); an
            # older release may, so it is tried once when the first fails.
            try:
                self.symm_buffer(256)
            except Exception:  # noqa: BLE001
                enable = getattr(symm_mem, "enable_symm_mem_for_group", None)
                if enable is None:
                    raise
                import warnings
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    enable(self.group_name)
                self.symm_buffer(256)
        except Exception as e:  # noqa: BLE001
            self.symm = None
            self.symm_error = "symmetric memory unavailable: " + short_error(e)
            if self.rank == 0:
                traceback.print_exc()
        # Every rank must agree before any symmetric op runs.
        if not self.all_ok(self.symm is not None):
            if self.symm is not None:
                self.symm_error = "symmetric memory unavailable on another rank"
            self.symm = None
        self.meta["symm_mem_error"] = self.symm_error

    def symm_buffer(self, n):
        t = self.symm.empty(n, dtype=DTYPE, device=self.dev)
        try:
            self.symm.rendezvous(t, group=dist.group.WORLD)
        except TypeError:
            self.symm.rendezvous(t, self.group_name)
        self.keep.append(t)
        return t

    def symm_one_shot(self, nbytes):
        op = "all_reduce/symm_one_shot"
        if self.symm is None:
            self.record(op, nbytes, None, False, self.symm_error)
            return
        n = nbytes // ELEM
        holder = {}

        def check():
            buf = self.symm_buffer(n)
            holder["buf"] = buf
            buf.copy_(self.pattern(n, self.rank))
            self.barrier()  # every rank's input is in place before peers read it
            out = torch.ops.symm_mem.one_shot_all_reduce(buf, "sum", self.group_name)
            ok = torch.equal(out, self.expected_sum(n))
            return ok, "" if ok else "wrong result"

        def timed():
            buf = holder["buf"]
            gn = self.group_name
            return lambda: torch.ops.symm_mem.one_shot_all_reduce(buf, "sum", gn)

        self.run_op(op, nbytes, check, timed)

    def symm_two_shot(self, nbytes):
        op = "all_reduce/symm_two_shot"
        if self.symm is None:
            self.record(op, nbytes, None, False, self.symm_error)
            return
        n = nbytes // ELEM
        holder = {}

        def check():
            buf = self.symm_buffer(n)
            holder["buf"] = buf
            buf.copy_(self.pattern(n, self.rank))
            self.barrier()
            torch.ops.symm_mem.two_shot_all_reduce_(buf, "sum", self.group_name)
            ok = torch.equal(buf, self.expected_sum(n))
            return ok, "" if ok else "wrong result"

        def timed():
            buf = holder["buf"]
            self.barrier()  # peers are done with the check before the zeroing
            buf.zero_()  # in place: zeros keep the repeated sums finite
            gn = self.group_name
            return lambda: torch.ops.symm_mem.two_shot_all_reduce_(buf, "sum", gn)

        self.run_op(op, nbytes, check, timed)

    # ---- all_gather / reduce_scatter ------------------------------------

    def all_gather(self, nbytes):
        n = nbytes // ELEM
        w = self.world
        inp = self.pattern(n, self.rank)
        out = torch.empty(w * n, dtype=DTYPE, device=self.dev)

        def check():
            out.fill_(-1)
            dist.all_gather_into_tensor(out, inp)
            want = torch.cat([self.pattern(n, r) for r in range(w)])
            ok = torch.equal(out, want)
            return ok, "" if ok else "wrong result"

        def timed():
            return lambda: dist.all_gather_into_tensor(out, inp)

        self.run_op("all_gather/nccl", nbytes, check, timed)

    def reduce_scatter(self, nbytes):
        n = nbytes // ELEM
        w = self.world
        inp = self.pattern(w * n, self.rank)
        out = torch.empty(n, dtype=DTYPE, device=self.dev)

        def check():
            out.fill_(-1)
            dist.reduce_scatter_tensor(out, inp, op=dist.ReduceOp.SUM)
            ok = torch.equal(out, self.expected_sum(n, offset=self.rank * n))
            return ok, "" if ok else "wrong result"

        def timed():
            return lambda: dist.reduce_scatter_tensor(out, inp, op=dist.ReduceOp.SUM)

        self.run_op("reduce_scatter/nccl", nbytes, check, timed)

    def all_to_all(self, nbytes):
        n = nbytes // ELEM
        w = self.world
        inp = self.pattern(w * n, self.rank)
        out = torch.empty(w * n, dtype=DTYPE, device=self.dev)

        def check():
            out.fill_(-1)
            dist.all_to_all_single(out, inp)
            want = torch.cat([self.pattern(n, r, offset=self.rank * n) for r in range(w)])
            ok = torch.equal(out, want)
            return ok, "" if ok else "wrong result"

        def timed():
            return lambda: dist.all_to_all_single(out, inp)

        self.run_op("all_to_all/nccl", nbytes, check, timed)

    def broadcast(self, nbytes):
        n = nbytes // ELEM
        buf = self.pattern(n, self.rank)

        def check():
            buf.copy_(self.pattern(n, self.rank))
            dist.broadcast(buf, src=0)
            ok = torch.equal(buf, self.pattern(n, 0))
            return ok, "" if ok else "wrong result"

        def timed():
            return lambda: dist.broadcast(buf, src=0)

        self.run_op("broadcast/nccl", nbytes, check, timed)


def nccl_version_string():
    try:
        v = torch.cuda.nccl.version()
        if isinstance(v, tuple):
            return ".".join(str(x) for x in v)
        return str(v)
    except Exception as e:  # noqa: BLE001
        return "unknown (%s)" % short_error(e)


def main():
    args = parse_args()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if args.dry_run_cpu:
        dev = torch.device("cpu")
        dist.init_process_group("gloo")
    else:
        torch.cuda.set_device(local_rank)
        dev = torch.device("cuda", local_rank)
        try:
            dist.init_process_group("nccl", device_id=dev)
        except TypeError:  # older releases without device_id
            dist.init_process_group("nccl")
    t0 = time.time()
    b = Bench(args)
    b.meta = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "nccl": nccl_version_string(),
        "device": (torch.cuda.get_device_name(dev) if dev.type == "cuda"
                   else "cpu (--dry_run_cpu)"),
        "world": b.world,
        "dtype": "bfloat16",
        "started_utc": datetime.datetime.now(datetime.timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%SZ"),
        "env": {k: os.environ.get(k, "") for k in (
            "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NCCL_NVLS_ENABLE")},
        "timing": ("barrier, warmup, the loop of iters back-to-back ops captured in "
                   "one CUDA graph, CUDA events around its second replay; mean per op; "
                   "max over ranks" if args.graph else
                   "barrier, warmup, CUDA events around iters back-to-back ops; "
                   "mean per op; max over ranks"),
        "mode": "graph" if args.graph else "eager",
    }
    b.write(complete=False)
    b.setup_symm()

    sizes = []
    s = args.min_bytes - args.min_bytes % ELEM
    while s <= args.max_bytes:
        sizes.append(s)
        s *= args.factor
    for nbytes in sizes:
        b.nccl_all_reduce(nbytes)
        b.symm_one_shot(nbytes)
        b.symm_two_shot(nbytes)

    coll_sizes = [int(x) for x in args.coll_sizes.split(",") if x.strip()]
    for nbytes in coll_sizes:
        b.all_gather(nbytes - nbytes % ELEM)
    for nbytes in coll_sizes:
        b.reduce_scatter(nbytes - nbytes % ELEM)
    for nbytes in coll_sizes:
        b.all_to_all(nbytes - nbytes % ELEM)
    for nbytes in coll_sizes:
        b.broadcast(nbytes - nbytes % ELEM)

    b.barrier()
    b.meta["seconds"] = round(time.time() - t0, 1)
    b.write(complete=True)
    if b.rank == 0:
        print("wrote %s (%d results, %.1f s)" % (args.out, len(b.results),
                                                 time.time() - t0), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
