"""Does the copy engine add to the SMs on one NVLink? A probe for the 2-GPU
256 MiB all-reduce: a fraction f of the message goes through the copy-engine
all-reduce and the rest through an SM kernel (the ring or the push one-shot)
at the same time, on two streams and two P2P groups (each its own signals),
and the pair is timed together, beside each alone.

    CUDA_VISIBLE_DEVICES=0,1 torchrun --nproc_per_node=2 bench/hybrid_probe.py \
        [--bytes 268435456] [--iters 20] [--fractions 0,0.25,0.4,0.5,0.6,1]

Prints, per SM kernel and fraction, the mean time per all-reduce (max over
ranks, events around a loop on the main stream) and the busbw (bytes / time
on 2 ranks), and checks every output element on every rank.
"""

from __future__ import annotations

import argparse
import os


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bytes", type=int, default=256 << 20)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--fractions", default="0,0.25,0.4,0.5,0.6,1")
    parser.add_argument("--ce_blocks", type=int, default=32)
    parser.add_argument("--sm_blocks", type=int, default=100)
    args = parser.parse_args()

    import torch
    import torch.distributed as dist

    from autotuned import kernels as K

    rank = int(os.environ["RANK"])
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    n = args.bytes // 2
    ce_group = K.P2PGroup(None, max_bytes=args.bytes, ce_max_bytes=args.bytes, name="ce")
    sm_group = K.P2PGroup(None, max_bytes=args.bytes, push_max_bytes=args.bytes, name="sm")
    ce = K.implementation("all_reduce/copy_engine")
    x = torch.full((n,), float(rank + 1), dtype=torch.bfloat16, device="cuda")
    out = torch.empty_like(x)
    want = float(sum(r + 1 for r in range(world)))
    main_stream = torch.cuda.current_stream()
    s_ce, s_sm = torch.cuda.Stream(), torch.cuda.Stream()

    def once(sm: object, k: int) -> None:
        s_ce.wait_stream(main_stream)
        s_sm.wait_stream(main_stream)
        if k > 0:
            with torch.cuda.stream(s_ce):
                ce_group.launch(ce, x[:k], out[:k], blocks=args.ce_blocks, threads=1024,
                                chunk_kib=32768)
        if k < n:
            with torch.cuda.stream(s_sm):
                sm_group.launch(sm, x[k:], out[k:], blocks=args.sm_blocks, threads=1024)
        main_stream.wait_stream(s_ce)
        main_stream.wait_stream(s_sm)

    for name in ("all_reduce/p2p_ring", "all_reduce/one_shot_push"):
        sm = K.implementation(name)
        for f in (float(v) for v in args.fractions.split(",")):
            k = int(n * f) // 4096 * 4096
            out.zero_()
            for _ in range(3):
                once(sm, k)
            torch.cuda.synchronize()
            ok = bool(torch.all(out == want).item())
            dist.barrier()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(args.iters):
                once(sm, k)
            end.record()
            torch.cuda.synchronize()
            us = torch.tensor([start.elapsed_time(end) * 1e3 / args.iters])
            dist.all_reduce(us, op=dist.ReduceOp.MAX)
            flags = torch.tensor([0 if ok else 1])
            dist.all_reduce(flags)
            if rank == 0:
                print(f"{name:28s} copy-engine share {f:4.2f}: {us.item():8.1f} us "
                      f"{args.bytes / us.item() / 1e3:6.1f} GB/s "
                      f"{'ok' if flags.item() == 0 else 'WRONG on some rank'}", flush=True)
    ce_group.close()
    sm_group.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
