"""The C++ torch ops (libautotuned_torch_ops.so) on real GPUs: their output
against the Python path's (autotuned.ops with P2PGroup.launch, the same
kernels) and NCCL's, on 2 ranks, one process per GPU:

  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
  PYTHONPATH=client/python \\
  AUTOTUNED_KERNELS_LIB=bazel-bin/kernels/libautotuned_kernels_abi.so \\
  AUTOTUNED_TORCH_OPS_LIB=bazel-bin/client/torch_ops/libautotuned_torch_ops.so \\
      python -m torch.distributed.run --standalone --nproc_per_node=2 \\
      client/torch_ops/torch_ops_gpu_test.py

Checks, per implementation of autotuned.kernels_lib.IMPLEMENTATIONS (NCCL
ones included: the C++ ops run them through the functional collectives), in
float32, bfloat16 and float16 (the push one-shot: 16-bit types only), at
sizes that are and are not multiples of 16 bytes, sum/max/min: the C++ op's
output equals the Python path's and NCCL's bit for bit (integer-valued data,
exact in every dtype); a misaligned input (the push one-shot and the copy
engine then stage it); 50 calls back to back, C++ and Python interleaved on
one stream; a CUDA graph that captured the C++ ops, replayed; a tensor on
another GPU refused; launch arguments the library rejects (too many blocks)
raising its reason; the group gone from the C++ side after close(). Prints PASS/FAIL lines (rank 0; other ranks their
FAILs) and exits non-zero on any failure. Without 2 GPUs it prints SKIPPED
and exits 0. A watchdog ends a rank that makes no progress (exit 3).
"""
from __future__ import annotations

import datetime
import os
import sys
import threading
import time

import torch

RANK = int(os.environ.get("RANK", "0"))
WORLD = int(os.environ.get("WORLD_SIZE", "1"))
FAILS: list[str] = []
STEP = ["start", time.monotonic()]
AT_BLOCKS_TOO_MANY = 1000  # more than AT_P2P_MAX_BLOCKS


def watchdog(timeout: float) -> None:
    def run() -> None:
        while True:
            time.sleep(1.0)
            if time.monotonic() - STEP[1] > timeout:
                print(f"FAIL rank {RANK}: no progress for {timeout:g} s in {STEP[0]}", flush=True)
                os._exit(3)
    threading.Thread(target=run, daemon=True).start()


def beat(label: str) -> None:
    STEP[0], STEP[1] = label, time.monotonic()


def check(name: str, ok: bool, detail: str = "") -> None:
    if not ok:
        FAILS.append(name)
        print(f"FAIL rank {RANK} {name} {detail}", flush=True)
    elif RANK == 0:
        print(f"PASS {name}", flush=True)


def data(n: int, dtype: torch.dtype, rank: int) -> torch.Tensor:
    """Small integers: every sum, max and min is exact in every dtype."""
    i = torch.arange(n, device="cuda", dtype=torch.float32)
    return ((i * 7 + rank * 3) % 13 - 6).to(dtype)


def main() -> int:
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2 or WORLD < 2:
        print(f"SKIPPED: needs 2 GPUs and 2 ranks (GPUs: {torch.cuda.device_count()}, "
              f"ranks: {WORLD}); run it with torchrun --nproc_per_node=2", flush=True)
        return 0
    import torch.distributed as dist

    import autotuned.kernels as K
    from autotuned import ops

    watchdog(120.0)
    local = int(os.environ.get("LOCAL_RANK", RANK))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=120),
                            device_id=torch.device("cuda", local))
    check("backend is cpp", ops.backend() == "cpp",
          f"backend {ops.backend()}, library {ops.torch_ops_library()}")
    p2p = K.P2PGroup(None, max_bytes=4 << 20, ce_max_bytes=1 << 20, spin_limit=1 << 30)
    name = p2p.name
    # The op's own path (C++ on CUDA) and the Python path's function.
    cpp = {"all_reduce": torch.ops.autotuned.all_reduce,
           "all_gather": torch.ops.autotuned.all_gather,
           "reduce_scatter": torch.ops.autotuned.reduce_scatter}
    py = {"all_reduce": ops._all_reduce, "all_gather": ops._all_gather,
          "reduce_scatter": ops._reduce_scatter}

    def nccl(coll: str, x: torch.Tensor, op: str) -> torch.Tensor:
        rop = getattr(dist.ReduceOp, op.upper())
        if coll == "all_reduce":
            out = x.clone()
            dist.all_reduce(out, op=rop)
            return out
        if coll == "all_gather":
            out = x.new_empty((x.shape[0] * WORLD,) + tuple(x.shape[1:]))
            dist.all_gather_into_tensor(out, x)
            return out
        out = x.new_empty((x.shape[0] // WORLD,) + tuple(x.shape[1:]))
        dist.reduce_scatter_tensor(out, x, op=rop)
        return out

    def call(fn, coll: str, x: torch.Tensor, impl: str, op: str) -> torch.Tensor:
        if coll == "all_gather":
            return fn(x, impl, name)
        if coll == "reduce_scatter":
            return fn(x, impl, name, 0, 0, op)
        return fn(x, impl, name, 0, 0, 16 if impl.endswith("copy_engine") else 0, op)

    sizes = (8, 1000, 4099, 65536, 262147)
    for impl in K.IMPLEMENTATIONS.values():
        dtypes = (torch.bfloat16, torch.float16) if impl.name.endswith("one_shot_push") else (
            torch.float32, torch.bfloat16, torch.float16)
        reduce_ops = ("sum",) if impl.collective == "all_gather" else ("sum", "max", "min")
        for dtype in dtypes:
            for n in sizes:
                n = n * WORLD if impl.collective == "reduce_scatter" else n
                if n * torch.finfo(dtype).bits // 8 > p2p.limit(impl) and impl.algo:
                    continue
                for op in reduce_ops:
                    label = f"{impl.name} {dtype} n={n} {op}"
                    beat(label)
                    x = data(n, dtype, RANK)
                    try:
                        a = call(cpp[impl.collective], impl.collective, x, impl.name, op)
                        b = call(py[impl.collective], impl.collective, x, impl.name, op)
                        c = nccl(impl.collective, x, op)
                        torch.cuda.synchronize()
                    except Exception as e:  # noqa: BLE001 - recorded, the next case runs
                        check(label, False, f"raised {e}")
                        continue
                    if not (torch.equal(a, b) and torch.equal(a, c)):
                        check(label, False,
                              f"max |cpp - python| {(a.float() - b.float()).abs().max()}, "
                              f"max |cpp - nccl| {(a.float() - c.float()).abs().max()}")
        check(f"{impl.name}: C++ == Python path == NCCL", not any(
            f.startswith(impl.name + " ") for f in FAILS))

    beat("misaligned")
    for impl in ("all_reduce/one_shot_push", "all_reduce/copy_engine"):
        x = data(4097, torch.bfloat16, RANK)[1:]  # 2 bytes off 16-byte alignment: staged
        a = torch.ops.autotuned.all_reduce(x, impl, name, 0, 0, 16)
        c = nccl("all_reduce", x, "sum")
        torch.cuda.synchronize()
        check(f"{impl} misaligned input", torch.equal(a, c))

    beat("back to back")
    xs = [data(1024 + 16 * i, torch.float32, RANK + i) for i in range(50)]
    outs = [(torch.ops.autotuned.all_reduce if i % 2 else ops._all_reduce)(
        x, "all_reduce/two_shot", name) for i, x in enumerate(xs)]
    refs = [nccl("all_reduce", x, "sum") for x in xs]
    torch.cuda.synchronize()
    check("50 calls back to back, C++ and Python interleaved",
          all(torch.equal(o, r) for o, r in zip(outs, refs)))

    beat("cuda graph")
    x = data(8192, torch.bfloat16, RANK)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch.ops.autotuned.all_reduce(x, "all_reduce/one_shot", name)  # warm-up
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y1 = torch.ops.autotuned.all_reduce(x, "all_reduce/one_shot", name)
        y2 = torch.ops.autotuned.all_gather(y1, "all_gather/p2p", name)
    ok = True
    for k in range(3):
        x.copy_(data(8192, torch.bfloat16, RANK + k))
        graph.replay()
        ref1 = nccl("all_reduce", x, "sum")
        ref2 = nccl("all_gather", ref1, "sum")
        torch.cuda.synchronize()
        ok = ok and torch.equal(y1, ref1) and torch.equal(y2, ref2)
    check("CUDA graph of the C++ ops, 3 replays", ok)

    beat("other device")
    other = torch.ones(16, device=torch.device("cuda", (local + 1) % torch.cuda.device_count()))
    try:
        torch.ops.autotuned.all_reduce(other, "all_reduce/one_shot", name)
        check("a tensor on another GPU refused", False, "no error")
    except RuntimeError as e:
        check("a tensor on another GPU refused", "the group is on cuda:" in str(e), str(e))

    beat("rejected arguments")
    try:  # every rank: at_p2p_check_args refuses before anything is launched
        torch.ops.autotuned.all_reduce(data(64, torch.float32, RANK), "all_reduce/one_shot", name,
                                       AT_BLOCKS_TOO_MANY)
        check("launch arguments the library rejects raise its reason", False, "no error")
    except RuntimeError as e:
        check("launch arguments the library rejects raise its reason",
              "at_p2p_launch(all_reduce/one_shot): " in str(e) and "block" in str(e), str(e))

    beat("close")
    check("signal error word 0", p2p.error() == 0)
    p2p.close()
    check("closed group unregistered", name not in torch.ops.autotuned._group_names())
    dist.destroy_process_group()
    if RANK == 0:
        print(f"{'FAILED' if FAILS else 'PASSED'}: {len(FAILS)} failures", flush=True)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
