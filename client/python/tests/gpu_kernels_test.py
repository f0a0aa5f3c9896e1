"""The P2P kernels in the user's process (autotuned.kernels) on real GPUs,
against torch.distributed's NCCL collectives. One process per GPU:

  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
  PYTHONPATH=client/python AUTOTUNED_KERNELS_LIB=bazel-bin/kernels/libautotuned_kernels_abi.so \\
      python -m torch.distributed.run --standalone --nproc_per_node=2 \\
      client/python/tests/gpu_kernels_test.py

Checks: all_reduce one_shot, two_shot, two_shot_push, two_shot_chunked, copy_engine,
push_pipelined at fp32
(bitwise equal to NCCL with 2 ranks) and bf16 (within tolerance), one_shot_push at bf16 and
fp16 (16-bit types only), at sizes including
ones that are not a multiple of 16 bytes; all_gather/p2p and
reduce_scatter/p2p; 50 launches back to back without a sync; replays of a
CUDA graph that captured the ops; torch.compile(fullgraph=True) through the
fake implementations; a Dispatcher over a dispatch table. Prints one
PASS/FAIL line per check (rank 0; other ranks print their FAILs), a few
timings, and exits non-zero on any failure. Never hangs: the kernels get a
spin limit, and a watchdog thread ends the process (exit 3) when a step
makes no progress for --step_timeout seconds.
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys
import threading
import time

import torch
import torch.distributed as dist

try:
    import autotuned.kernels as K
except ImportError:
    # The package's gRPC/protobuf deps absent: its kernels modules need
    # neither, so they load under a bare package that skips autotuned/__init__.
    import types
    _pkg = types.ModuleType("autotuned")
    _pkg.__path__ = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                  "autotuned")]
    sys.modules["autotuned"] = _pkg
    import autotuned.kernels as K

FAILS: list[str] = []
RANK = 0


class Watchdog:
    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.label = "start"
        self.last = time.monotonic()
        threading.Thread(target=self._run, daemon=True).start()

    def beat(self, label: str) -> None:
        self.label, self.last = label, time.monotonic()

    def _run(self) -> None:
        while True:
            time.sleep(1.0)
            if time.monotonic() - self.last > self.timeout:
                print(f"FAIL rank {RANK}: no progress for {self.timeout:g} s in {self.label}; "
                      "exiting", flush=True)
                os._exit(3)


def check(name: str, ok: bool, detail: str = "") -> None:
    if ok:
        if RANK == 0:
            print(f"PASS {name}", flush=True)
    else:
        FAILS.append(name)
        print(f"FAIL rank {RANK} {name} {detail}", flush=True)


# The push one-shot takes 16-bit types only: its exact checks run in bf16
# (small integers, exact sums), the others' in fp32.
PUSH1 = "all_reduce/one_shot_push"
CE = "all_reduce/copy_engine"  # chunk_kib 16 below: several chunks at these sizes
PIPE = "all_reduce/push_pipelined"  # chunk_kib 16 below: several chunks, slot reuse


def exact_dtype(impl: str) -> torch.dtype:
    return torch.bfloat16 if impl == PUSH1 else torch.float32


def pattern(n: int, dtype: torch.dtype, salt: int, exact: bool) -> torch.Tensor:
    """This rank's input: small integers (exact sums) or normal values."""
    dev = torch.device("cuda", torch.cuda.current_device())
    if exact:
        v = (torch.arange(n, device=dev, dtype=torch.int64) * 7 + RANK * 13 + salt) % 29 - 14
        return v.to(dtype)
    g = torch.Generator(device=dev)
    g.manual_seed(1000 * RANK + 17 * n + salt)
    return torch.randn(n, device=dev, generator=g).to(dtype)


def compare(name: str, got: torch.Tensor, want: torch.Tensor) -> None:
    if got.shape != want.shape:
        check(name, False, f"shape {tuple(got.shape)} != {tuple(want.shape)}")
    elif got.dtype == torch.float32:
        bad = (got != want).sum().item()
        check(name, bad == 0, f"{bad} of {want.numel()} elements differ from NCCL, max diff "
              f"{(got - want).abs().max().item() if bad else 0}")
    else:
        diff = (got.float() - want.float()).abs()
        tol = 1e-2 + 1e-2 * want.float().abs()
        bad = (diff > tol).sum().item()
        check(name, bad == 0, f"{bad} of {want.numel()} elements off, max diff "
              f"{diff.max().item() if want.numel() else 0}")


class _Table:
    """The part of autotuned.vllm.DispatchTable a Dispatcher uses."""

    collective = "all_reduce"

    def __init__(self, candidates: list[str]) -> None:
        self.candidates = candidates

    def pick_index(self, x) -> int:
        n = x.numel()
        return 1 if n < 8192 else 2 if n < (1 << 19) else 0

    def pick(self, x) -> str:
        return self.candidates[self.pick_index(x)]


def main() -> int:
    global RANK
    p = argparse.ArgumentParser()
    p.add_argument("--step_timeout", type=float, default=60.0)
    p.add_argument("--spin_limit", type=int, default=50_000_000)
    p.add_argument("--max_bytes", type=int, default=16 << 20)
    args = p.parse_args()

    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dog = Watchdog(args.step_timeout)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local),
                            timeout=datetime.timedelta(seconds=120))
    RANK, world = dist.get_rank(), dist.get_world_size()
    dog.beat("P2PGroup")
    lib = K.load_library()
    if RANK == 0:
        print(f"library {lib.path} version {lib.version}; world {world}; "
              f"{torch.cuda.get_device_name()}", flush=True)
    p2p = K.P2PGroup(None, max_bytes=args.max_bytes, spin_limit=args.spin_limit,
                     ce_max_bytes=args.max_bytes)
    g = p2p.name
    ar = torch.ops.autotuned.all_reduce

    # 1. all_reduce vs dist.all_reduce.
    sizes = [1, 7, 1000, 1001, 4099, 65541, 1 << 20]
    for impl, chunk in (("all_reduce/one_shot", 0), ("all_reduce/two_shot", 0),
                        ("all_reduce/two_shot_push", 0), ("all_reduce/two_shot_chunked", 16),
                        (PUSH1, 0), (CE, 16), (PIPE, 16)):
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            if (dtype == torch.float32 and impl == PUSH1) or \
                    (dtype == torch.float16 and impl != PUSH1):
                continue  # PUSH1 takes 16-bit types only; fp16 is checked on it alone
            for n in sizes:
                elem = 4 if dtype == torch.float32 else 2
                name = f"{impl} {str(dtype)[6:]} n={n} ({n * elem} B)"
                dog.beat(name)
                x = pattern(n, dtype, 0, exact=False)
                want = x.clone()
                dist.all_reduce(want)
                got = ar(x, impl, g, 0, 0, chunk, "sum")
                torch.cuda.synchronize()
                compare(name, got, want)
    for op in ("max", "min"):
        name = f"all_reduce/one_shot float32 op={op}"
        dog.beat(name)
        x = pattern(4099, torch.float32, 3, exact=False)
        want = x.clone()
        dist.all_reduce(want, op=getattr(dist.ReduceOp, op.upper()))
        compare(name, ar(x, "all_reduce/one_shot", g, 0, 0, 0, op), want)

    # 2. all_gather and reduce_scatter vs NCCL.
    for dtype in (torch.float32, torch.bfloat16):
        for n in (1, 7, 1001, 65541):
            name = f"all_gather/p2p {str(dtype)[6:]} n={n}"
            dog.beat(name)
            x = pattern(n, dtype, 5, exact=False)
            want = torch.empty(world * n, dtype=dtype, device=x.device)
            dist.all_gather_into_tensor(want, x)
            got = torch.ops.autotuned.all_gather(x, "all_gather/p2p", g, 0, 0)
            torch.cuda.synchronize()
            compare(name, got, want)
            name = f"reduce_scatter/p2p {str(dtype)[6:]} n={n} per rank"
            dog.beat(name)
            x = pattern(world * n, dtype, 6, exact=False)
            want = torch.empty(n, dtype=dtype, device=x.device)
            dist.reduce_scatter_tensor(want, x)
            got = torch.ops.autotuned.reduce_scatter(x, "reduce_scatter/p2p", g, 0, 0, "sum")
            torch.cuda.synchronize()
            compare(name, got, want)

    # 3. Back to back, no sync in between; exact inputs, so exact sums.
    for impl in ("all_reduce/one_shot", "all_reduce/two_shot", "all_reduce/two_shot_push",
                 PUSH1, CE, PIPE):
        for n in (1001, 65541):
            name = f"{impl} 50 back to back n={n}"
            dog.beat(name)
            xs = [pattern(n, exact_dtype(impl), i, exact=True) for i in range(50)]
            outs = [ar(x, impl, g, 0, 0, 0, "sum") for x in xs]
            torch.cuda.synchronize()
            bad = 0
            for x, y in zip(xs, outs):
                want = x.clone()
                dist.all_reduce(want)
                bad += int(not torch.equal(y, want))
            check(name, bad == 0, f"{bad} of 50 results differ")

    # 4. CUDA graph: capture, replay with new inputs.
    for impl in ("all_reduce/one_shot", "all_reduce/two_shot", "all_reduce/two_shot_push",
                 "all_reduce/two_shot_chunked", PUSH1, CE, PIPE):
        name = f"{impl} CUDA graph, 5 replays"
        dog.beat(name)
        n = 65541
        static_x = pattern(n, exact_dtype(impl), 0, exact=True)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up, as torch recommends before capture
            ar(static_x, impl, g, 0, 0, 16, "sum")
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_y = ar(static_x, impl, g, 0, 0, 16, "sum")
        bad = 0
        for i in range(5):
            static_x.copy_(pattern(n, exact_dtype(impl), 100 + i, exact=True))
            graph.replay()
            torch.cuda.synchronize()
            want = static_x.clone()
            dist.all_reduce(want)
            bad += int(not torch.equal(static_y, want))
        check(name, bad == 0, f"{bad} of 5 replays differ")

    # 5. torch.compile through the fake implementation.
    name = "torch.compile(fullgraph) of all_reduce/two_shot + all_gather/p2p"
    dog.beat(name)

    def f(x):
        y = ar(x * 2, "all_reduce/two_shot", g, 0, 0, 0, "sum")
        return torch.ops.autotuned.all_gather(y + 1, "all_gather/p2p", g, 0, 0)

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    x = pattern(1001, torch.float32, 7, exact=True)
    got = compiled(x)
    torch.cuda.synchronize()
    y = x * 2
    dist.all_reduce(y)
    want = torch.empty(world * 1001, device=x.device)
    dist.all_gather_into_tensor(want, y + 1)
    compare(name, got, want)

    # 6. A dispatch table picks, the Dispatcher runs the pick.
    cands = ["all_reduce/nccl", "all_reduce/one_shot:blocks=16,threads=256",
             "all_reduce/two_shot"]
    try:
        from autotuned.vllm import DispatchTable, SizeTiming
        table = DispatchTable("all_reduce", "float32", world, cands, [
            SizeTiming(256, 1024, cands[1], 1, {}, "TUNED"),
            SizeTiming(1 << 16, 1 << 18, cands[2], 2, {}, "TUNED"),
            SizeTiming(1 << 22, 1 << 24, cands[0], 0, {}, "TUNED")], [])
    except ImportError:
        table = _Table(cands)
    run = K.Dispatcher(table, p2p)
    for n in (300, 70000, (args.max_bytes // 4) + 1000):
        name = f"Dispatcher n={n} -> {run.pick(torch.empty(n))}"
        dog.beat(name)
        x = pattern(n, torch.float32, 9, exact=True)
        want = x.clone()
        dist.all_reduce(want)
        got = run(x)
        torch.cuda.synchronize()
        compare(name, got, want)

    # 7. Error word and a few timings (us per call, 20 back to back).
    dog.beat("error word")
    err = p2p.error()
    check("signal error word is 0", err == 0, f"error word {err:#x}")
    dog.beat("timings")
    for nbytes in (4096, 256 << 10, 4 << 20):
        x = torch.ones(nbytes // 2, dtype=torch.bfloat16, device="cuda")
        line = []
        for impl in ("all_reduce/nccl", "all_reduce/one_shot", "all_reduce/two_shot",
                     "all_reduce/two_shot_push", PUSH1, CE):
            for _ in range(3):
                ar(x, impl, g)
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(20):
                ar(x, impl, g)
            b.record()
            torch.cuda.synchronize()
            line.append(f"{impl.split('/')[1]}={a.elapsed_time(b) * 1000 / 20:.1f}")
        if RANK == 0:
            print(f"TIME bf16 {nbytes} B per rank (us, op incl. staging copy): {' '.join(line)}",
                  flush=True)

    dog.beat("teardown")
    fails = torch.tensor([len(FAILS)], device="cuda")
    dist.all_reduce(fails)
    p2p.close()
    dist.destroy_process_group()
    if RANK == 0:
        print(f"{'PASS' if fails.item() == 0 else 'FAIL'}: {int(fails.item())} failed checks "
              "over all ranks", flush=True)
    return 0 if fails.item() == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
