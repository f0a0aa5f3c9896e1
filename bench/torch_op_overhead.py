"""Host cost of one eager collective call: torch.ops.autotuned.all_reduce on
the C++ backend (libautotuned_torch_ops.so), the same op on the Python
backend (P2PGroup.launch through ctypes), and torch.distributed's own
all_reduce, each mode in a fresh set of processes, on 2 GPUs (or --nproc):

  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
  PYTHONPATH=client/python AUTOTUNED_KERNELS_LIB=BIN/libautotuned_kernels_abi.so \\
      python bench/torch_op_overhead.py [--out overhead.json]   # BIN also holds
                                                                 # libautotuned_torch_ops.so

Modes (--mode runs one under torchrun; without it every mode runs in turn):
  cpp         torch.ops.autotuned.all_reduce(x, IMPL, group), C++ backend
  python      the same call with AUTOTUNED_TORCH_OPS_LIB=none (Python backend)
  cpp_nccl    the C++ op with "all_reduce/nccl" (the functional collective)
  dist        dist.all_reduce(x) in place
  functional  torch.ops._c10d_functional.all_reduce + wait_tensor (what
              Inductor's generated code calls)
Per message size (--bytes, bf16): --warmup calls, then --reps blocks of
--calls back-to-back calls: host_us = the time to issue a block / calls
(perf_counter, no synchronization inside the block), wall_us = the block
until the GPU finished / calls; the median over blocks, the max over ranks.
A mode whose backend is not the one asked for fails (exit 1). Prints one
line per mode and size and, with every mode, a table of host_us side by side.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

MODES = ("cpp", "python", "cpp_nccl", "dist", "functional")


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", choices=MODES)
    p.add_argument("--impl", default="all_reduce/one_shot")
    p.add_argument("--bytes", type=int, nargs="+", default=[8192, 262144])
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--out", default="")
    return p.parse_args(argv)


def run_mode(args: argparse.Namespace) -> int:
    import torch
    import torch.distributed as dist

    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank, world = dist.get_rank(), dist.get_world_size()
    import autotuned.kernels as K
    from autotuned import ops

    backend = ops.backend()
    want = {"cpp": "cpp", "cpp_nccl": "cpp", "python": "python"}.get(args.mode)
    if want and backend != want:
        print(f"FAIL: mode {args.mode} needs the {want} backend, got {backend} "
              f"(library: {ops.torch_ops_library()})", flush=True)
        return 1
    p2p = K.P2PGroup(None, max_bytes=max(args.bytes))
    c10d = torch.ops._c10d_functional
    wg = dist.group.WORLD.group_name
    call = {
        "cpp": lambda x: torch.ops.autotuned.all_reduce(x, args.impl, p2p.name),
        "python": lambda x: torch.ops.autotuned.all_reduce(x, args.impl, p2p.name),
        "cpp_nccl": lambda x: torch.ops.autotuned.all_reduce(x, "all_reduce/nccl", p2p.name),
        "dist": lambda x: dist.all_reduce(x),
        "functional": lambda x: c10d.wait_tensor(c10d.all_reduce(x, "sum", wg)),
    }[args.mode]
    result = {"mode": args.mode, "backend": backend, "impl": args.impl, "world": world,
              "device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "calls": args.calls, "reps": args.reps, "sizes": {}}
    for nbytes in args.bytes:
        x = torch.ones(nbytes // 2, dtype=torch.bfloat16, device="cuda")
        for _ in range(args.warmup):
            call(x)
        torch.cuda.synchronize()
        host, wall = [], []
        for _ in range(args.reps):
            dist.barrier()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(args.calls):
                call(x)
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            t2 = time.perf_counter()
            host.append((t1 - t0) * 1e6 / args.calls)
            wall.append((t2 - t0) * 1e6 / args.calls)
        mine = [statistics.median(host), statistics.median(wall)]
        everyone = [None] * world
        dist.all_gather_object(everyone, mine)
        h, w = max(e[0] for e in everyone), max(e[1] for e in everyone)
        result["sizes"][str(nbytes)] = {"host_us": h, "wall_us": w}
        if rank == 0:
            print(f"{args.mode:<10} backend {backend:<6} {nbytes:>9} B: host {h:7.1f} us/call, "
                  f"wall {w:7.1f} us/call", flush=True)
    if rank == 0 and args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    p2p.close()
    dist.destroy_process_group()
    return 0


def run_all(args: argparse.Namespace, argv: list) -> int:
    import tempfile

    results, failed = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        for mode in MODES:
            env = dict(os.environ)
            if mode == "python":
                env["AUTOTUNED_TORCH_OPS_LIB"] = "none"
            out = os.path.join(tmp, mode + ".json")
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   f"--nproc_per_node={args.nproc}", os.path.abspath(__file__), "--mode", mode,
                   "--out", out] + argv
            rc = subprocess.run(cmd, env=env).returncode
            if rc != 0 or not os.path.exists(out):
                failed.append(mode)
                continue
            with open(out) as f:
                results[mode] = json.load(f)
    if results:
        modes = [m for m in MODES if m in results]
        print("\nhost us per call (max over ranks, median over blocks):")
        print("| bytes | " + " | ".join(modes) + " |")
        print("| ---: |" + " ---: |" * len(modes))
        for nbytes in args.bytes:
            cells = [f"{results[m]['sizes'][str(nbytes)]['host_us']:.1f}" for m in modes]
            print(f"| {nbytes} | " + " | ".join(cells) + " |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"modes": results, "failed": failed}, f, indent=1)
    if failed:
        print(f"FAILED modes: {', '.join(failed)}", flush=True)
    return 1 if failed else 0


def main() -> int:
    argv = sys.argv[1:]
    args = parse(argv)
    if args.mode:
        return run_mode(args)
    passed = [a for a in argv if not a.startswith("--out") and a != args.out]
    return run_all(args, passed)


if __name__ == "__main__":
    sys.exit(main())
